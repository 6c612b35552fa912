"""`ckpt verify-shape`: scan a checkpoint database for storage-shape violations."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from deerflow_ckpt.cli import ci_options, database_options, deerflow_options, delivery, project_options
from deerflow_ckpt.cli.ci_options import ReportFormat
from deerflow_ckpt.cli.console import counting_checkpoints, info, is_quiet
from deerflow_ckpt.rules import Severity

if TYPE_CHECKING:
    from rich.console import Console

    from deerflow_ckpt.analysis.baseline import Baseline


def verify_shape(
    ctx: typer.Context,
    db: str | None = database_options.DB_OPTION,
    schema: str = database_options.SCHEMA_OPTION,
    config: Path | None = database_options.CONFIG_OPTION,
    cadence: int | None = database_options.CADENCE_OPTION,
    mode: database_options.ModeChoice | None = database_options.MODE_OPTION,
    max_supersteps: int = database_options.MAX_SUPERSTEPS_OPTION,
    thread: str | None = typer.Option(
        None, "--thread", metavar="ID", help="Scan only this thread.", show_default=False
    ),
    since: str | None = database_options.SINCE_OPTION,
    network_timeout: str = database_options.NETWORK_TIMEOUT_OPTION,
    statement_timeout: str | None = database_options.STATEMENT_TIMEOUT_OPTION,
    clock_skew: str = database_options.CLOCK_SKEW_OPTION,
    rolling_window: str = database_options.ROLLING_WINDOW_OPTION,
    output_format: ReportFormat = ci_options.FORMAT_OPTION,
    output: Path | None = ci_options.OUTPUT_OPTION,
    fail_on: Severity = ci_options.FAIL_ON_OPTION,
    exit_zero: bool = ci_options.EXIT_ZERO_OPTION,
    color: ci_options.ColorChoice = ci_options.COLOR_OPTION,
    quiet: bool = ci_options.QUIET_OPTION,
    immutable: bool = database_options.IMMUTABLE_OPTION,
    deerflow_root: Path | None = deerflow_options.DEERFLOW_ROOT_OPTION,
    verbose: bool = database_options.VERBOSE_OPTION,
    deep: bool = typer.Option(
        False,
        "--deep",
        help="Also prove every stored message list (snapshot or full-mode list) equals the replay of the "
        "writes before it (CK106); a second read-only pass.",
    ),
    jobs: int | None = database_options.JOBS_OPTION,
    select: list[str] = project_options.SELECT_OPTION,
    extend_select: list[str] = project_options.EXTEND_SELECT_OPTION,
    ignore: list[str] = project_options.IGNORE_OPTION,
    severity: list[str] = project_options.SEVERITY_OPTION,
    allow_types: list[str] = typer.Option(
        [],
        "--allow-type",
        metavar="MODULE:NAME",
        help="Trust this type of the app's own in payloads (CK105), as LangGraph's allowed_msgpack_modules entry "
        '("module", "Name") does; repeatable. Only LangGraph\'s own safe types are trusted without it.',
        show_default=False,
    ),
    write_baseline: Path | None = typer.Option(
        None,
        "--write-baseline",
        metavar="FILE",
        help="Record today's findings in FILE (json); later scans given --baseline FILE report only new ones.",
        show_default=False,
    ),
    baseline: Path | None = typer.Option(
        None,
        "--baseline",
        metavar="FILE",
        help="Report only findings not recorded in FILE (--write-baseline), and how many recorded ones are gone; "
        "the exit code counts the new ones.",
        show_default=False,
    ),
) -> None:
    """Scan a DeerFlow checkpoint database (SQLite or Postgres) for storage-shape violations.

    Reads only: SQLite through a mode=ro URI, Postgres in read-only transactions. Blobs are never
    loaded with LangGraph's serializer. Each checkpoint is judged against the cadence in force when it
    was written (a clean change of K is reported once, as information).
    """
    from deerflow_ckpt.analysis.shape import ShapeSettings
    from deerflow_ckpt.analysis.timeline import TimelineSettings
    from deerflow_ckpt.commands.verify_shape import ScanRequest

    rules = project_options.rule_selection(ctx, "verify-shape", select, extend_select, ignore, severity)
    if baseline is not None and write_baseline is not None:
        raise typer.BadParameter("give --write-baseline or --baseline, not both", param_hint="--baseline")
    # A file that is no baseline stops the run before the scan.
    recorded = None if baseline is None else _read_baseline(baseline)
    boundary = database_options.parse_since(since)
    timeline = TimelineSettings(
        database_options.parse_duration(clock_skew, "--clock-skew"),
        database_options.parse_duration(rolling_window, "--rolling-window"),
    )
    db_via = project_options.given_via(ctx, "db", "--db")
    selection = database_options.select(db, schema, config, cadence, immutable, deerflow_root, db_via)
    selection = database_options.with_timeouts(selection, network_timeout, statement_timeout)
    delivery.refuse_output_onto(output, database_options.input_files(selection))
    delivery.refuse_output_onto(
        write_baseline, database_options.input_files(selection), "--write-baseline", "the baseline"
    )
    info(f"ckpt: scanning {selection.choice.target.describe()} (chosen via {selection.choice.found_via})")
    if verbose:
        database_options.say_reading_path(selection.choice.target)
    request = ScanRequest(
        choice=selection.choice,
        settings=ShapeSettings(
            selection.expected_cadence,
            max_supersteps,
            boundary,
            timeline,
            deep=deep,
            allowed_types=_allowed_types(allow_types),
        ),
        cadence_source=selection.cadence_source,
        thread_id=thread,
        rules=rules,
        mode=database_options.stated_mode(selection, mode, db),
    )
    # The progress bar goes to stderr only when someone watches it; machine formats stay quiet.
    show_progress = output_format is ReportFormat.text and sys.stderr.isatty() and not is_quiet()
    from deerflow_ckpt.commands.verify_shape import scan

    report = counting_checkpoints(
        lambda progress: scan(request, progress, jobs=jobs), show_progress, color.flag(), "scanning"
    )
    if verbose:
        database_options.say_processes(report.processes, report.processes_why)
    if baseline is not None or write_baseline is not None:
        from deerflow_ckpt.commands.verify_shape import apply_baseline

        apply_baseline(report, recorded, write_baseline)
    exit_code = ci_options.findings_exit(report.count_at_or_above(fail_on) > 0, exit_zero)
    from deerflow_ckpt.report import shape_ci

    def json_document() -> str:
        from deerflow_ckpt.report import shape_json

        return shape_json.to_json(report, fail_on, int(exit_code))

    def render_text(console: Console) -> None:
        # rich is imported only for the text report (a third of a small scan's start-up).
        from deerflow_ckpt.report import shape_text

        shape_text.render_text(report, console)

    rendered = delivery.Report(
        command="verify-shape",
        headline=shape_ci.headline(report),
        annotations=lambda: shape_ci.annotations_of(report),
        json_document=json_document,
        render_text=render_text,
    )
    delivery.emit_report(rendered, output_format, output, exit_code, color)
    raise typer.Exit(int(exit_code))


def _read_baseline(path: Path) -> Baseline:
    from deerflow_ckpt.commands.verify_shape import read_baseline

    return path, read_baseline(path)


def _allowed_types(values: list[str]) -> frozenset[tuple[str, str]]:
    from deerflow_ckpt.store.peek import parse_allowed_type

    try:
        return frozenset(parse_allowed_type(value) for value in values)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--allow-type") from None


def register(app: typer.Typer) -> None:
    app.command("verify-shape")(verify_shape)
