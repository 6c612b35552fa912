"""Run the migration over files or standard input: read, migrate, and write where asked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from deerflow_ckpt.config.migrate import (
    Diagnostic,
    MigrationResult,
    MigrationStatus,
    Severity,
    migrate_config_bytes,
)
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


def migrate_path(path: Path, mode: WriteMode, environ: Mapping[str, str] | None = None) -> FileMigration:
    """Migrate one file; rewrite it atomically only in IN_PLACE mode and only if it changes."""
    name = str(path)
    try:
        raw = read_config_file(path)
    except ConfigReadError as exc:
        return _unreadable(name, path, f"cannot read: {exc}")
    result = migrate_config_bytes(raw, environ)
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
