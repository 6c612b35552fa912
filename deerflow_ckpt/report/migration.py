"""Render migrate-config outcomes: diagnostic lines for stderr, and the versioned JSON document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deerflow_ckpt.commands.migrate_config import FileMigration, WriteMode
from deerflow_ckpt.config.migrate import Diagnostic, MigrationStatus
from deerflow_ckpt.redact import redact
from deerflow_ckpt.report.annotations import Annotation, FileSpot
from deerflow_ckpt.report.diff import unified_diff
from deerflow_ckpt.report.printable import json_dumps, printable
from deerflow_ckpt.rules import Severity

JSON_SCHEMA_VERSION = 1


# Compilers' words, which editors and CI log parsers know: an info finding is a "note".
_COMPILER_WORD = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def diagnostic_line(name: str, diagnostic: Diagnostic) -> str:
    """`path:line: severity: message`, the shape editors and CI logs link to."""
    where = f"{name}:{diagnostic.line}" if diagnostic.line is not None else name
    return f"{where}: {_COMPILER_WORD[diagnostic.severity]}: {diagnostic.message}"


def annotations_of(outcomes: Sequence[FileMigration]) -> list[Annotation]:
    return [
        Annotation(d.rule, d.severity, d.message, FileSpot(outcome.name, d.line))
        for outcome in outcomes
        for d in outcome.result.diagnostics
    ]


def headline(outcomes: Sequence[FileMigration]) -> str:
    changing = sum(1 for outcome in outcomes if outcome.result.changed)
    untouched = (MigrationStatus.NEEDS_HAND_FIX, MigrationStatus.FAILED)
    refused = sum(1 for outcome in outcomes if outcome.result.status in untouched)
    return f"Checked {len(outcomes)} config file(s): {changing} to migrate, {refused} left untouched."


def summary_line(outcome: FileMigration, mode: WriteMode) -> str:
    status = outcome.result.status
    if status is MigrationStatus.MIGRATED:
        if outcome.written:
            return f"migrated {outcome.name}"
        return f"would migrate {outcome.name}"
    if status is MigrationStatus.UNCHANGED:
        return f"{outcome.name}: nothing to migrate"
    if status is MigrationStatus.NEEDS_HAND_FIX:
        return f"{outcome.name}: left untouched; fix it by hand as the error above says"
    return f"{outcome.name}: left untouched"


def _decode(data: bytes) -> str:
    return data.decode("utf-8-sig", errors="replace")


def diff_of(outcome: FileMigration) -> str:
    """The file's diff, its credentials masked: context lines may quote a postgres_url, and CI logs keep it."""
    result = outcome.result
    if not result.changed:
        return ""
    # The name in the headers is escaped: a newline in it would start a line of the patch's own choosing.
    return redact(unified_diff(_decode(result.original), _decode(result.migrated), printable(outcome.name)))


def _diagnostics(diagnostics: Sequence[Diagnostic], severity: Severity) -> list[dict[str, Any]]:
    return [
        {"line": d.line, "message": d.message, "deerflow": d.from_deerflow}
        for d in diagnostics
        if d.severity is severity
    ]


def to_json(outcomes: Sequence[FileMigration], mode: WriteMode, exit_code: int, include_diff: bool = False) -> str:
    """The machine-readable result: one object per file, under a schema version."""
    files = []
    for outcome in outcomes:
        result = outcome.result
        entry: dict[str, Any] = {
            "path": outcome.name,
            "status": result.status.value,
            "changed": result.changed,
            "written": outcome.written,
            "warnings": _diagnostics(result.diagnostics, Severity.WARNING),
            "notes": _diagnostics(result.diagnostics, Severity.INFO),
            "errors": _diagnostics(result.diagnostics, Severity.ERROR),
        }
        if include_diff or mode is WriteMode.DIFF:
            entry["diff"] = diff_of(outcome)
        if mode is WriteMode.STDOUT or (outcome.path is None and mode is WriteMode.IN_PLACE):
            entry["output"] = _decode(result.migrated)
        files.append(entry)
    document = {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": "migrate-config",
        "mode": mode.value,
        "exit_code": exit_code,
        "files": files,
    }
    return json_dumps(document) + "\n"
