"""`ckpt verify-shape`: scan a checkpoint database for storage-shape violations."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from deerflow_ckpt.analysis.cadence import DEFAULT_SUPERSTEP_BOUND
from deerflow_ckpt.analysis.rules import Severity
from deerflow_ckpt.cli import database_options
from deerflow_ckpt.cli.console import message, stderr_console, stdout_console
from deerflow_ckpt.errors import OutputError
from deerflow_ckpt.exitcodes import ExitCode

if TYPE_CHECKING:
    from deerflow_ckpt.scan import ScanReport, ScanRequest


class ShapeFormat(StrEnum):
    text = "text"
    json = "json"


def verify_shape(
    db: str | None = database_options.DB_OPTION,
    schema: str = database_options.SCHEMA_OPTION,
    config: Path | None = database_options.CONFIG_OPTION,
    cadence: int | None = database_options.CADENCE_OPTION,
    max_supersteps: int = typer.Option(
        DEFAULT_SUPERSTEP_BOUND, "--max-supersteps", min=1, help="LangGraph's superstep bound for CK203."
    ),
    thread: str | None = typer.Option(None, "--thread", help="Scan only this thread.", show_default=False),
    output_format: ShapeFormat = typer.Option(ShapeFormat.text, "--format", help="text or json."),
    output: Path | None = typer.Option(
        None, "--output", help="Write the report to this file instead of stdout.", show_default=False
    ),
    fail_on: Severity = typer.Option(Severity.ERROR, "--fail-on", help="Lowest severity that makes the exit code 1."),
    immutable: bool = database_options.IMMUTABLE_OPTION,
    jobs: int = typer.Option(
        min(os.cpu_count() or 1, 4), "--jobs", min=1, help="Processes reading thread ranges in parallel."
    ),
) -> None:
    """Scan a DeerFlow checkpoint database (SQLite or Postgres) for storage-shape violations.

    Reads only: SQLite through a mode=ro URI, Postgres in read-only transactions. Blobs are never
    loaded with LangGraph's serializer. Exit 1 when findings at or above --fail-on exist.
    """
    from deerflow_ckpt.analysis.shape import ShapeSettings
    from deerflow_ckpt.scan import ScanRequest

    selection = database_options.select(db, schema, config, cadence, immutable)
    message(f"ckpt: scanning {selection.choice.target.describe()} (chosen via {selection.choice.found_via})")
    request = ScanRequest(
        choice=selection.choice,
        settings=ShapeSettings(expected_cadence=selection.expected_cadence, superstep_bound=max_supersteps),
        cadence_source=selection.cadence_source,
        thread_id=thread,
    )
    report = _scan_with_progress(request, jobs, show=output_format is ShapeFormat.text and sys.stderr.isatty())
    exit_code = ExitCode.FINDINGS if report.count_at_or_above(fail_on) else ExitCode.CLEAN

    if output_format is ShapeFormat.json:
        from deerflow_ckpt.report.shape_json import to_json

        _deliver(to_json(report, fail_on, int(exit_code)), output)
    else:
        from deerflow_ckpt.report.shape_text import render_text

        if output is None:
            render_text(report, stdout_console())
        else:
            console = stdout_console(color=False)
            with console.capture() as capture:
                render_text(report, console)
            _deliver(capture.get(), output)
    raise typer.Exit(int(exit_code))


def _scan_with_progress(request: ScanRequest, jobs: int, show: bool) -> ScanReport:
    from deerflow_ckpt.scan import scan

    if not show:
        return scan(request, jobs=jobs)
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
    ) as progress:
        task = progress.add_task("scanning", total=None)
        result = scan(request, lambda n: progress.update(task, description=f"{n} checkpoints"), jobs=jobs)
    return result


def _deliver(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {output}: {exc.strerror or exc}") from exc


def register(app: typer.Typer) -> None:
    app.command("verify-shape")(verify_shape)
