"""Run the migration over files or standard input: read, migrate, and write where asked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from deerflow_ckpt.config.migrate import (
    Diagnostic,
    MigrationResult,
    MigrationStatus,
    Severity,
    migrate_config_bytes,
    restore_cadence_bytes,
)
from deerflow_ckpt.config.upgrade import LostCadence, backup_of, lost_cadence
from deerflow_ckpt.config.values import load_values
from deerflow_ckpt.errors import OutputError
from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.fileio import ConfigReadError, read_config_file, write_atomically


class WriteMode(StrEnum):
    IN_PLACE = "in_place"  # rewrite the file (the default)
    CHECK = "check"  # write nothing; exit 1 when a file would change or needs a hand fix
    DIFF = "diff"  # write nothing; show a unified diff
    STDOUT = "stdout"  # write nothing; print the result


@dataclass(frozen=True)
class FileMigration:
    """The outcome for one input: the migration result and whether the file was rewritten."""

    name: str
    path: Path | None  # None for standard input
    result: MigrationResult
    written: bool

    def exit_code(self, mode: WriteMode) -> ExitCode:
        status = self.result.status
        if status is MigrationStatus.FAILED:
            return ExitCode.ERROR
        if status is MigrationStatus.NEEDS_HAND_FIX:
            return ExitCode.FINDINGS if mode is WriteMode.CHECK else ExitCode.ERROR
        if status is MigrationStatus.MIGRATED and mode is WriteMode.CHECK:
            return ExitCode.FINDINGS
        return ExitCode.CLEAN


def _unreadable(name: str, path: Path | None, message: str) -> FileMigration:
    error = Diagnostic(Severity.ERROR, None, message)
    return FileMigration(name, path, MigrationResult(MigrationStatus.FAILED, b"", b"", (error,)), False)


def migrate_path(
    path: Path, mode: WriteMode, environ: Mapping[str, str] | None = None, restore: bool = False
) -> FileMigration:
    """Migrate one file (with `restore`: first carry back the cadence make config-upgrade replaced); rewrite
    it atomically only in IN_PLACE mode and only if it changes."""
    name = str(path)
    try:
        raw = read_config_file(path)
    except ConfigReadError as exc:
        return _unreadable(name, path, f"cannot read: {exc}")
    result = _restore(path, raw, environ or {}) if restore else migrate_config_bytes(raw, environ)
    if not restore:
        result = _with_backup_warning(path, raw, result, environ or {})
    if mode is not WriteMode.IN_PLACE or result.status is not MigrationStatus.MIGRATED:
        return FileMigration(name, path, result, False)
    try:
        write_atomically(path, result.migrated, expected=raw)
    except OutputError as exc:
        failed = MigrationResult(
            MigrationStatus.FAILED,
            raw,
            raw,
            (*result.diagnostics, Diagnostic(Severity.ERROR, None, str(exc))),
        )
        return FileMigration(name, path, failed, False)
    return FileMigration(name, path, result, True)


def migrate_stream(raw: bytes, name: str, environ: Mapping[str, str] | None = None) -> FileMigration:
    """Migrate bytes read from standard input; the caller prints the result."""
    return FileMigration(name, None, migrate_config_bytes(raw, environ), False)


def _lost(path: Path, raw: bytes, environ: Mapping[str, str]) -> LostCadence | str:
    """What the upgrader's backup holds that the file lost, or why there is nothing to restore."""
    if not backup_of(path).is_file():
        return f"no {backup_of(path).name} beside it (make config-upgrade's backup)"
    try:
        data = load_values(raw.decode("utf-8-sig"))
    except Exception:  # unreadable: migrate_config_bytes reports why
        return "it cannot be read as DeerFlow reads it"
    lost = lost_cadence(path, data, environ)
    if lost is None:
        return f"{backup_of(path).name} gives DeerFlow the same cadence as the file, or none of its own"
    return lost


def _restore(path: Path, raw: bytes, environ: Mapping[str, str]) -> MigrationResult:
    lost = _lost(path, raw, environ)
    if isinstance(lost, str):
        # Asked to restore from a backup that is not there: an error; one that agrees: already done.
        missing = not backup_of(path).is_file()
        severity, status = (
            (Severity.ERROR, MigrationStatus.FAILED) if missing else (Severity.NOTE, MigrationStatus.UNCHANGED)
        )
        return MigrationResult(
            status, raw, raw, (Diagnostic(severity, None, f"nothing to restore: {lost}", rule="CK512"),)
        )
    return restore_cadence_bytes(raw, lost.backup_cadence, f"{lost.backup.name} ({lost.backup_origin})", environ)


def _with_backup_warning(
    path: Path, raw: bytes, result: MigrationResult, environ: Mapping[str, str]
) -> MigrationResult:
    """A migration beside an upgrader backup that holds another cadence says what was lost."""
    lost = _lost(path, raw, environ) if backup_of(path).is_file() else None
    if lost is None or isinstance(lost, str):
        return result
    now = "no valid cadence" if lost.current_cadence is None else f"cadence {lost.current_cadence}"
    warning = Diagnostic(
        Severity.WARNING,
        None,
        f"{lost.backup.name} (make config-upgrade's backup) gives DeerFlow cadence {lost.backup_cadence} "
        f"({lost.backup_origin}), but this file gives {now}: the upgrade replaced it; "
        "ckpt migrate-config --restore-from-backup carries it back",
        rule="CK512",
    )
    return replace(result, diagnostics=(*result.diagnostics, warning))
