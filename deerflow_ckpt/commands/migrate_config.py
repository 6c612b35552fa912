"""Run the migration over files or standard input: read, migrate, and write where asked."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

import yaml

from deerflow_ckpt.config.migrate import (
    Diagnostic,
    MigrationResult,
    MigrationStatus,
    migrate_config_bytes,
    restore_cadence_bytes,
)
from deerflow_ckpt.config.upgrade import LostCadence, backup_of, lost_cadence, lost_message
from deerflow_ckpt.config.values import ExpansionError, load_values
from deerflow_ckpt.dataclass import dataclass, replace
from deerflow_ckpt.errors import OutputError
from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.fileio import ConfigReadError, read_config_file, write_atomically
from deerflow_ckpt.redact import redact
from deerflow_ckpt.rules import RuleCode, Severity


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
    # The file could not be read at all: the error is the command's ("ckpt: error: PATH: no such file").
    unreadable: bool = False

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
    # CK500, config DeerFlow cannot load: not the deprecated key a Diagnostic is filed under by default.
    error = Diagnostic(Severity.ERROR, None, message, rule=RuleCode.CK500)
    return FileMigration(name, path, MigrationResult(MigrationStatus.FAILED, b"", b"", (error,)), False, True)


def migrate_path(
    path: Path, mode: WriteMode, environ: Mapping[str, str] | None = None, restore: bool = False
) -> FileMigration:
    """Migrate one file (with `restore`: first carry back the cadence make config-upgrade replaced); rewrite
    it atomically only in IN_PLACE mode and only if it changes."""
    name = str(path)
    try:
        raw = read_config_file(path)
    except ConfigReadError as exc:
        return _unreadable(name, path, str(exc))
    result = _restore(path, raw, environ or {}) if restore else migrate_config_bytes(raw, environ)
    if not restore:
        result = _with_backup_warning(path, raw, result, environ or {})
    result = _masked(result)
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
    return FileMigration(name, None, _masked(migrate_config_bytes(raw, environ)), False)


def _masked(result: MigrationResult) -> MigrationResult:
    """Diagnostics with any password masked: a resolved `$VAR` (DeerFlow's warning quotes it) may be a DSN."""
    diagnostics = tuple(replace(d, message=redact(d.message)) for d in result.diagnostics)
    return replace(result, diagnostics=diagnostics)


def _lost(path: Path, raw: bytes, environ: Mapping[str, str]) -> LostCadence | None:
    """The cadence make config-upgrade replaced in this file, per its backup beside it."""
    if not backup_of(path).is_file():
        return None
    try:
        data = load_values(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, yaml.YAMLError, ExpansionError, ValueError, TypeError, RecursionError):
        return None  # unreadable: the migration itself reports why
    return lost_cadence(path, data, environ)


def _restore(path: Path, raw: bytes, environ: Mapping[str, str]) -> MigrationResult:
    if not backup_of(path).is_file():
        message = f"nothing to restore: no {backup_of(path).name} beside it (make config-upgrade's backup)"
        return MigrationResult(
            MigrationStatus.FAILED, raw, raw, (Diagnostic(Severity.ERROR, None, message, rule=RuleCode.CK512),)
        )
    lost = _lost(path, raw, environ)
    if lost is None:
        # Nothing the upgrade replaced: the file is migrated as without the option.
        result = migrate_config_bytes(raw, environ)
        note = Diagnostic(
            Severity.INFO,
            None,
            f"nothing to restore: {backup_of(path).name} does not hold a cadence the upgrade replaced",
            rule=RuleCode.CK512,
        )
        return replace(result, diagnostics=(note, *result.diagnostics))
    return restore_cadence_bytes(raw, lost.backup_cadence, f"{lost.backup.name} ({lost.backup_origin})", environ)


def _with_backup_warning(
    path: Path, raw: bytes, result: MigrationResult, environ: Mapping[str, str]
) -> MigrationResult:
    """A migration beside an upgrader backup that holds the replaced cadence says what was lost."""
    lost = _lost(path, raw, environ)
    if lost is None:
        return result
    warning = Diagnostic(Severity.WARNING, None, lost_message(lost), rule=RuleCode.CK512)
    return replace(result, diagnostics=(*result.diagnostics, warning))
