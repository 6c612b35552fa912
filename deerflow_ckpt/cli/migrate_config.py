"""`ckpt migrate-config`: move the deprecated cadence key without disturbing config.yaml."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path

import typer

from deerflow_ckpt.config.locate import locate_config
from deerflow_ckpt.config.migrate_files import FileMigration, WriteMode, migrate_path, migrate_stream
from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.report import migration as report

STDIN = "-"


class MigrateFormat(StrEnum):
    text = "text"
    json = "json"


def _write_stdout(data: str | bytes) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8")
    stream = typer.get_binary_stream("stdout")
    stream.write(data)
    stream.flush()


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")


def _mode(check: bool, diff: bool, stdout: bool) -> WriteMode:
    # --check --diff is the CI pair black and ruff accept: show the diff, exit 1 if it is not empty.
    if stdout and (check or diff):
        raise typer.BadParameter("--stdout does not combine with --check or --diff")
    if check:
        return WriteMode.CHECK
    if diff:
        return WriteMode.DIFF
    return WriteMode.STDOUT if stdout else WriteMode.IN_PLACE


def _targets(paths: list[str] | None) -> list[str]:
    if paths:
        return paths
    located = locate_config(None, os.environ, Path.cwd())
    _stderr(f"ckpt: using {located.path} (found via {located.found_via})")
    return [str(located.path)]


def migrate_config(
    paths: list[str] | None = typer.Argument(
        None,
        metavar="[PATH]...",
        help="Config files to migrate; '-' reads standard input and writes standard output. "
        "Default: config.yaml found the way DeerFlow finds it.",
        show_default=False,
    ),
    check: bool = typer.Option(
        False, "--check", help="Write nothing; exit 1 if a file would change or must be fixed by hand."
    ),
    diff: bool = typer.Option(
        False, "--diff", help="Write nothing; print a unified diff (with --check: exit 1 if it is not empty)."
    ),
    stdout: bool = typer.Option(False, "--stdout", help="Write nothing; print the migrated file."),
    stdin_filename: str = typer.Option(
        STDIN, "--stdin-filename", help="Name to report for standard input.", show_default=False
    ),
    output_format: MigrateFormat = typer.Option(
        MigrateFormat.text, "--format", help="text, or json: one result object per file on stdout."
    ),
) -> None:
    """Rewrite database.checkpoint_delta_snapshot_frequency into database.checkpoint_delta.snapshot_frequency.

    Only the lines that carry the legacy key change; comments, order, quoting, indentation, line
    endings, a BOM and a missing final newline survive byte for byte. DeerFlow's migration warnings are
    printed verbatim. Files DeerFlow would misread are refused and left untouched.
    """
    mode = _mode(check, diff, stdout)
    outcomes: list[FileMigration] = []
    for target in _targets(paths):
        if target == STDIN:
            outcomes.append(migrate_stream(typer.get_binary_stream("stdin").read(), stdin_filename))
        else:
            outcomes.append(migrate_path(Path(target), mode))
    exit_code = max((outcome.exit_code(mode) for outcome in outcomes), default=ExitCode.CLEAN)

    for outcome in outcomes:
        for diagnostic in outcome.result.diagnostics:
            _stderr(report.diagnostic_line(outcome.name, diagnostic))
        if output_format is MigrateFormat.text:
            _emit_text_payload(outcome, mode, diff)
            _stderr(report.summary_line(outcome, mode))
    if output_format is MigrateFormat.json:
        _write_stdout(report.to_json(outcomes, mode, int(exit_code), include_diff=diff))
    raise typer.Exit(int(exit_code))


def _emit_text_payload(outcome: FileMigration, mode: WriteMode, show_diff: bool) -> None:
    result = outcome.result
    if show_diff:
        _write_stdout(report.diff_of(outcome))
    elif mode is WriteMode.STDOUT or (outcome.path is None and mode is WriteMode.IN_PLACE):
        # Like black and ruff: standard input always comes back on standard output, changed or not.
        _write_stdout(result.migrated)


def register(app: typer.Typer) -> None:
    app.command("migrate-config")(migrate_config)
