"""`ckpt convert`: write a copy of the checkpoint store with its threads in another mode (commands/convert.py);
the source is never written."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from deerflow_ckpt.cli import ci_options, database_options, deerflow_options, delivery, project_options
from deerflow_ckpt.cli.ci_options import ColorChoice
from deerflow_ckpt.cli.console import counting_checkpoints, file_console, info, is_quiet, text_console
from deerflow_ckpt.config.keys import DEFAULT_CADENCE
from deerflow_ckpt.fileio import terminable

if TYPE_CHECKING:
    from deerflow_ckpt.config.history_cache import HistoryCache


class ModeChoice(StrEnum):
    delta = "delta"
    full = "full"


class ConvertFormat(StrEnum):
    text = "text"
    json = "json"


def convert(
    ctx: typer.Context,
    to: ModeChoice = typer.Option(
        ..., "--to", metavar="MODE", help="delta (DeltaChannel at --snapshot-frequency) or full.", show_default=False
    ),
    snapshot_frequency: int | None = typer.Option(
        None,
        "--snapshot-frequency",
        min=1,
        metavar="K",
        help="--to delta: the cadence K to store every thread at (default: the config's, else 10).",
        show_default=False,
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        metavar="NEW.db",
        help="SQLite: the converted database, a new file (the source is never written).",
        show_default=False,
    ),
    target_schema: str | None = typer.Option(
        None,
        "--target-schema",
        metavar="SCHEMA",
        help="PostgreSQL: a new schema (a plain lowercase name) that receives converted copies of the saver's "
        "tables, with a record of the conversion that --catch-up and the switch check.",
        show_default=False,
    ),
    swap_script: Path | None = typer.Option(
        None,
        "--swap-script",
        metavar="FILE",
        help="PostgreSQL: write the reviewed switch to FILE (and the way back to FILE's .back.sql); "
        "ckpt never runs them.",
        show_default=False,
    ),
    threads: list[str] | None = typer.Option(
        None,
        "--thread",
        metavar="ID",
        help="Convert only this thread (repeat for several); the rest are copied.",
        show_default=False,
    ),
    output_format: ConvertFormat = typer.Option(
        ConvertFormat.text, "--format", metavar="FORMAT", help="text, or json (the report as data)."
    ),
    report_output: Path | None = typer.Option(
        None,
        "--report",
        metavar="FILE",
        help="Write the report to FILE instead of standard output.",
        show_default=False,
    ),
    catch_up: bool = typer.Option(
        False,
        "--catch-up",
        help="Bring the output of an earlier run (same --to and K) up to date: threads the source changed since are "
        "converted again, the rest carried over; SQLite app tables are copied afresh.",
    ),
    db: str | None = database_options.DB_OPTION,
    schema: str = database_options.SCHEMA_OPTION,
    config: Path | None = database_options.CONFIG_OPTION,
    deerflow_root: Path | None = deerflow_options.DEERFLOW_ROOT_OPTION,
    network_timeout: str = typer.Option(
        "120s",
        "--network-timeout",
        metavar="DURATION",
        help="PostgreSQL: give up on a read after this long without a byte from the server. Copying, "
        "fingerprinting and compacting the saver's tables is server-side work allowed up to 6 hours.",
    ),
    statement_timeout: str | None = database_options.STATEMENT_TIMEOUT_OPTION,
    max_supersteps: int = database_options.MAX_SUPERSTEPS_OPTION,
    jobs: int | None = database_options.JOBS_OPTION,
    color: ColorChoice = ci_options.COLOR_OPTION,
    quiet: bool = ci_options.QUIET_OPTION,
) -> None:
    """Convert a checkpoint store between full and delta mode, keeping every read the same.

    Writes a new SQLite file: a consistent copy of the source (the backup API; a live writer is fine) whose
    other tables are carried over unchanged and whose threads are stored as the target mode stores them:
    --to delta, a _DeltaSnapshot every K message-writing steps and the delta counters and mode marker;
    --to full, the whole message list at every checkpoint, no counters or marker. Every stored list comes
    from the replay verify-shape --deep proves. A thread whose reads are already broken, whose payloads
    the inert judge does not pass, or whose replay cannot be proven is refused, named, and copied unchanged.
    """
    from deerflow_ckpt.analysis.conversion import ConversionSettings, TargetMode
    from deerflow_ckpt.commands.convert import ConvertRequest
    from deerflow_ckpt.commands.convert import convert as run_convert

    if to is ModeChoice.full and snapshot_frequency is not None:
        raise typer.BadParameter("--snapshot-frequency is for --to delta")
    db_via = project_options.given_via(ctx, "db", "--db")
    selection = database_options.select(db, schema, config, None, False, deerflow_root, db_via)
    selection = database_options.with_timeouts(selection, network_timeout, statement_timeout)
    inputs = database_options.input_files(selection)
    for written in (report_output, swap_script):
        delivery.refuse_output_onto(written, inputs)
    _check_destination(selection.choice.target, output, target_schema, swap_script)
    cadence = snapshot_frequency or selection.expected_cadence or DEFAULT_CADENCE
    settings = ConversionSettings(TargetMode(to.value), cadence, max_supersteps)
    target = selection.choice.target
    info(f"ckpt: converting {target.describe()} (chosen via {selection.choice.found_via}) to {to.value} mode")
    only = tuple(threads) if threads else None
    cache = _history_cache(selection) if db is None else None
    request = ConvertRequest(selection.choice, settings, output, target_schema, only, catch_up, cache, jobs)
    show_progress = output_format is ConvertFormat.text and sys.stderr.isatty() and not is_quiet()
    # SIGTERM ends the run as an exit, so the unfinished copy is removed.
    with terminable():
        report = counting_checkpoints(
            lambda progress: run_convert(request, progress), show_progress, color.flag(), "converting"
        )
    if swap_script is not None and report.fingerprint is not None:
        from deerflow_ckpt.report.convert_sql import swap_back_script, swap_script_text

        delivery.deliver(swap_script_text(report, str(swap_script)), swap_script)
        delivery.deliver(swap_back_script(report, str(swap_back_path(swap_script))), swap_back_path(swap_script))
        info(f"ckpt: wrote the switch to {swap_script} and the way back to {swap_back_path(swap_script)}")
    if output_format is ConvertFormat.json:
        from deerflow_ckpt.report.convert_json import conversion_to_json

        delivery.deliver(conversion_to_json(report), report_output)
        return
    from deerflow_ckpt.report.convert_text import render_conversion

    if report_output is None:
        render_conversion(report, text_console(color.flag()))
        return
    console = file_console()
    with console.capture() as capture:
        render_conversion(report, console)
    delivery.deliver(capture.get(), report_output)


def _history_cache(selection: database_options.DatabaseSelection) -> HistoryCache | None:
    """DeerFlow's Redis history cache for the database its config chose (with --db the config did not choose)."""
    from deerflow_ckpt.config.history_cache import history_cache
    from deerflow_ckpt.errors import StoreError
    from deerflow_ckpt.fileio import resolved
    from deerflow_ckpt.store.source import PostgresTarget, SqliteTarget

    settings, target = selection.settings, selection.choice.target
    if settings is None:
        return None
    if isinstance(target, SqliteTarget):
        path = resolved(target.path.expanduser(), StoreError)
        return history_cache(settings.history_cache, "sqlite", "", "", path)
    assert isinstance(target, PostgresTarget)
    url = settings.postgres_url if isinstance(settings.postgres_url, str) else ""
    return history_cache(settings.history_cache, "postgres", url, target.schema, None)


def swap_back_path(swap_script: Path) -> Path:
    return swap_script.with_name(swap_script.stem + ".back.sql")


def _check_destination(
    source: object, output: Path | None, target_schema: str | None, swap_script: Path | None
) -> None:
    """SQLite sources take --output; Postgres sources take --target-schema (and --swap-script)."""
    from deerflow_ckpt.store.source import SqliteTarget

    if isinstance(source, SqliteTarget):
        if output is None:
            raise typer.BadParameter("a SQLite source needs --output NEW.db")
        if target_schema is not None or swap_script is not None:
            raise typer.BadParameter("--target-schema and --swap-script are for a PostgreSQL source")
        return
    if target_schema is None:
        raise typer.BadParameter("a PostgreSQL source needs --target-schema NAME")
    from deerflow_ckpt.dsn import is_schema_name

    # The converted tables end up where database.postgres_schema names them; DeerFlow takes plain names only.
    if not is_schema_name(target_schema):
        raise typer.BadParameter("--target-schema must be a plain lowercase PostgreSQL identifier ([a-z_][a-z0-9_]*)")
    if output is not None:
        raise typer.BadParameter("--output is for a SQLite source; a PostgreSQL one converts into --target-schema")


def register(app: typer.Typer) -> None:
    app.command("convert")(convert)
