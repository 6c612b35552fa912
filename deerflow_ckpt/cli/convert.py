"""`ckpt convert`: write a copy of the checkpoint store with its threads in another mode (commands/convert.py);
the source is never written."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

import typer

from deerflow_ckpt.cli import ci_options, database_options, deerflow_options, delivery
from deerflow_ckpt.cli.ci_options import ColorChoice
from deerflow_ckpt.cli.console import PIPED_WIDTH, counting_checkpoints, info, is_quiet, stdout_console, text_console
from deerflow_ckpt.config.keys import DEFAULT_CADENCE
from deerflow_ckpt.fileio import terminable


class ModeChoice(StrEnum):
    delta = "delta"
    full = "full"


class ConvertFormat(StrEnum):
    text = "text"
    json = "json"


def convert(
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
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        metavar="NEW.db",
        help="The converted database: a new SQLite file (the source is never written).",
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
    db: str | None = database_options.DB_OPTION,
    config: Path | None = database_options.CONFIG_OPTION,
    deerflow_root: Path | None = deerflow_options.DEERFLOW_ROOT_OPTION,
    max_supersteps: int = database_options.MAX_SUPERSTEPS_OPTION,
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
    selection = database_options.select(db, "", config, None, False, deerflow_root)
    delivery.refuse_output_onto(report_output, database_options.input_files(selection))
    cadence = snapshot_frequency or selection.expected_cadence or DEFAULT_CADENCE
    settings = ConversionSettings(TargetMode(to.value), cadence, max_supersteps)
    target = selection.choice.target
    info(f"ckpt: converting {target.describe()} (chosen via {selection.choice.found_via}) to {to.value} mode")
    request = ConvertRequest(selection.choice, settings, output, tuple(threads) if threads else None)
    show_progress = output_format is ConvertFormat.text and sys.stderr.isatty() and not is_quiet()
    # SIGTERM ends the run as an exit, so the unfinished copy is removed.
    with terminable():
        report = counting_checkpoints(
            lambda progress: run_convert(request, progress), show_progress, color.flag(), "converting"
        )
    if output_format is ConvertFormat.json:
        from deerflow_ckpt.report.convert_json import conversion_to_json

        delivery.deliver(conversion_to_json(report), report_output)
        return
    from deerflow_ckpt.report.convert_text import render_conversion

    if report_output is None:
        render_conversion(report, text_console(color.flag()))
        return
    console = stdout_console(color=False)
    console.width = max(console.width, PIPED_WIDTH)
    with console.capture() as capture:
        render_conversion(report, console)
    delivery.deliver(capture.get(), report_output)


def register(app: typer.Typer) -> None:
    app.command("convert")(convert)
