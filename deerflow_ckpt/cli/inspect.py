"""`ckpt inspect thread` and `ckpt inspect summary`: options in, the inspection (commands/inspect.py) out in
text, json or csv."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer

from deerflow_ckpt.cli import ci_options, database_options, deerflow_options, project_options
from deerflow_ckpt.cli.ci_options import ColorChoice
from deerflow_ckpt.cli.console import counting_checkpoints, info, is_quiet, stderr_console, text_console
from deerflow_ckpt.errors import StoreError

if TYPE_CHECKING:
    from deerflow_ckpt.analysis.inspection import InspectionScope, InspectSettings, ThreadInspection
    from deerflow_ckpt.commands.inspect import Inspection


class InspectFormat(StrEnum):
    text = "text"
    json = "json"
    csv = "csv"


# store_summary.RankBy's values; spelled out here so `ckpt --help` does not import the analysis stack.
RankChoice = Literal["size", "checkpoints", "replay-depth"]

inspect_app = typer.Typer(
    name="inspect",
    help="Per-thread snapshot intervals, the cadence really used, storage by kind, and what another K would cost.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

FORMAT_OPTION = typer.Option(
    InspectFormat.text, "--format", metavar="FORMAT", help="text, json or csv (the histograms)."
)


def parse_what_if(value: str | None) -> tuple[int, ...] | None:
    """'1,5,50' -> (1, 5, 50); each a positive cadence."""
    if value is None:
        return None
    try:
        cadences = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated cadences such as 1,5,50, got {value!r}") from None
    if not cadences or any(k < 1 for k in cadences):
        raise typer.BadParameter(f"cadences must be positive integers, got {value!r}")
    return cadences


def _open(
    db: str | None,
    schema: str,
    config: Path | None,
    cadence: int | None,
    immutable: bool,
    settings: Callable[[int | None], InspectSettings],
    timeouts: tuple[str, str | None] = ("120s", None),
    deerflow_root: Path | None = None,
    announce: bool = False,
    verbose: bool = False,
    mode: database_options.ModeChoice | None = None,
    db_via: str = "--db",
) -> Inspection:
    """The chosen database, opened; `announce` names it on stderr, for a format whose report does not (text
    and json say which database they describe)."""
    from deerflow_ckpt.commands.inspect import open_inspection

    selection = database_options.with_timeouts(
        database_options.select(db, schema, config, cadence, immutable, deerflow_root, db_via), *timeouts
    )
    if announce:
        target = selection.choice.target
        info(f"ckpt: inspecting {target.describe()} (chosen via {selection.choice.found_via})")
    if verbose:
        database_options.say_reading_path(selection.choice.target)
    stated = database_options.stated_mode(selection, mode, db)
    return open_inspection(selection.choice, settings(selection.expected_cadence), selection.cadence_source, stated)


class _ThreadCounter:
    """A spinner on stderr counting threads, only when stderr is a terminal and the output is text."""

    def __init__(self, output_format: InspectFormat) -> None:
        self.show = output_format is InspectFormat.text and sys.stderr.isatty() and not is_quiet()
        self.count = 0
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Callable[[], None]:
        if self.show:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=stderr_console()
            )
            progress.start()
            self._progress, self._task = progress, progress.add_task("reading", total=None)
        return self.tick

    def tick(self) -> None:
        self.count += 1
        if self._progress is not None:
            self._progress.update(self._task, description=f"{self.count} threads")

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _emit(
    threads: Iterator[ThreadInspection], scope: InspectionScope, output_format: InspectFormat, color: ColorChoice
) -> int:
    """Write the threads in `output_format` as they come; returns how many there were."""
    count = 0

    def counted() -> Iterator[ThreadInspection]:
        nonlocal count
        for thread in threads:
            count += 1
            yield thread

    if output_format is InspectFormat.json:
        from deerflow_ckpt.report.inspect_json import iter_threads_json

        for piece in iter_threads_json(scope, counted()):
            sys.stdout.write(piece)
    elif output_format is InspectFormat.csv:
        from deerflow_ckpt.report.inspect_csv import iter_threads_csv

        for piece in iter_threads_csv(counted()):
            sys.stdout.write(piece)
    else:
        from deerflow_ckpt.report.inspect_text import render_threads

        render_threads(counted(), scope, text_console(color.flag()))
    return count


@inspect_app.command("thread")
def thread(
    ctx: typer.Context,
    thread_ids: list[str] | None = typer.Argument(
        None, metavar="THREAD_ID", help="Threads to inspect.", show_default=False
    ),
    top: int | None = typer.Option(None, "--top", min=1, metavar="N", help="Inspect the N heaviest threads instead."),
    by: RankChoice = typer.Option(
        "size",
        "--by",
        metavar="METRIC",
        help="What --top ranks by: size (stored bytes), checkpoints, or replay-depth (the largest replay depth).",
    ),
    all_threads: bool = typer.Option(False, "--all", help="Inspect every thread."),
    deep: bool = typer.Option(
        False,
        "--deep",
        help="Named threads: also prove the shown namespace's stored message lists against the replay of "
        "their writes (as verify-shape --deep).",
    ),
    namespace: str = typer.Option(
        "",
        "--ns",
        metavar="NS",
        help="Namespace to show (default: the conversation ''); the others are summarised apart.",
    ),
    what_if: str | None = typer.Option(
        None,
        "--what-if",
        metavar="K,K,...",
        help="Cadences for the what-if, comma-separated (default 1,10,100,1000); the expected K is always added.",
        show_default=False,
    ),
    output_format: InspectFormat = FORMAT_OPTION,
    db: str | None = database_options.DB_OPTION,
    schema: str = database_options.SCHEMA_OPTION,
    config: Path | None = database_options.CONFIG_OPTION,
    cadence: int | None = database_options.CADENCE_OPTION,
    mode: database_options.ModeChoice | None = database_options.MODE_OPTION,
    max_supersteps: int = database_options.MAX_SUPERSTEPS_OPTION,
    immutable: bool = database_options.IMMUTABLE_OPTION,
    deerflow_root: Path | None = deerflow_options.DEERFLOW_ROOT_OPTION,
    network_timeout: str = database_options.NETWORK_TIMEOUT_OPTION,
    statement_timeout: str | None = database_options.STATEMENT_TIMEOUT_OPTION,
    color: ColorChoice = ci_options.COLOR_OPTION,
    quiet: bool = ci_options.QUIET_OPTION,
    verbose: bool = database_options.VERBOSE_OPTION,
) -> None:
    """Snapshot-interval histogram, cadence bounds and inferred K, storage by kind, and a what-if per thread.

    Name threads, or pick them with --top N (--by size|checkpoints|replay-depth) or --all. Exit 2 when a
    named thread does not exist.
    """
    from deerflow_ckpt.analysis.inspection import InspectSettings
    from deerflow_ckpt.analysis.store_summary import RankBy
    from deerflow_ckpt.commands.inspect import every_thread, heaviest_threads, named_threads

    chosen = sum((bool(thread_ids), top is not None, all_threads))
    if chosen != 1:
        raise typer.BadParameter("name THREAD_IDs, or pass --top N, or --all (exactly one of them)")
    if deep and not thread_ids:
        raise typer.BadParameter("--deep proves named threads; name them instead of --top/--all")
    cadences = parse_what_if(what_if)
    inspection = _open(
        db,
        schema,
        config,
        cadence,
        immutable,
        lambda expected: InspectSettings(expected, cadences, max_supersteps),
        (network_timeout, statement_timeout),
        deerflow_root,
        announce=output_format is InspectFormat.csv,
        verbose=verbose,
        mode=mode,
        db_via=project_options.given_via(ctx, "db", "--db"),
    )
    scope = inspection.scope
    if thread_ids:
        _emit(iter(named_threads(inspection, thread_ids, namespace, deep)), scope, output_format, color)
        return
    with _ThreadCounter(output_format) as tick:
        every = every_thread(inspection, namespace, tick)
        threads = iter(heaviest_threads(every, top, RankBy(by))) if top is not None else every
        shown = _emit(threads, scope, output_format, color)
    if shown == 0:
        where = f" with namespace {namespace!r}" if namespace else ""
        raise StoreError(f"no threads{where} in {scope.database}")


@inspect_app.command("summary")
def summary(
    ctx: typer.Context,
    heaviest: int = typer.Option(
        10, "--heaviest", min=0, metavar="N", help="How many of the heaviest threads to list."
    ),
    output_format: InspectFormat = FORMAT_OPTION,
    db: str | None = database_options.DB_OPTION,
    schema: str = database_options.SCHEMA_OPTION,
    config: Path | None = database_options.CONFIG_OPTION,
    cadence: int | None = database_options.CADENCE_OPTION,
    mode: database_options.ModeChoice | None = database_options.MODE_OPTION,
    max_supersteps: int = database_options.MAX_SUPERSTEPS_OPTION,
    immutable: bool = database_options.IMMUTABLE_OPTION,
    deerflow_root: Path | None = deerflow_options.DEERFLOW_ROOT_OPTION,
    clock_skew: str = database_options.CLOCK_SKEW_OPTION,
    rolling_window: str = database_options.ROLLING_WINDOW_OPTION,
    network_timeout: str = database_options.NETWORK_TIMEOUT_OPTION,
    statement_timeout: str | None = database_options.STATEMENT_TIMEOUT_OPTION,
    color: ColorChoice = ci_options.COLOR_OPTION,
    quiet: bool = ci_options.QUIET_OPTION,
    verbose: bool = database_options.VERBOSE_OPTION,
    jobs: int | None = database_options.JOBS_OPTION,
) -> None:
    """The whole database at a glance: threads by mode, the cadence over time, bytes by kind, heaviest threads."""
    from deerflow_ckpt.analysis.inspection import InspectSettings
    from deerflow_ckpt.analysis.timeline import TimelineSettings
    from deerflow_ckpt.commands.inspect import summarize

    timeline_settings = TimelineSettings(
        database_options.parse_duration(clock_skew, "--clock-skew"),
        database_options.parse_duration(rolling_window, "--rolling-window"),
    )
    inspection = _open(
        db,
        schema,
        config,
        cadence,
        immutable,
        lambda expected: InspectSettings(expected, (), max_supersteps, timeline_settings),
        (network_timeout, statement_timeout),
        deerflow_root,
        announce=output_format is InspectFormat.csv,
        verbose=verbose,
        mode=mode,
        db_via=project_options.given_via(ctx, "db", "--db"),
    )
    scope = inspection.scope
    show_progress = output_format is InspectFormat.text and sys.stderr.isatty() and not is_quiet()
    summarized = counting_checkpoints(
        lambda progress: summarize(inspection, heaviest, progress, jobs=jobs), show_progress, color.flag(), "reading"
    )
    if verbose:
        database_options.say_processes(len(summarized.split.selections), summarized.split.why)
    result, timeline = summarized.summary, summarized.timeline
    if output_format is InspectFormat.json:
        from deerflow_ckpt.report.inspect_json import summary_to_json

        sys.stdout.write(summary_to_json(scope, result, timeline))
    elif output_format is InspectFormat.csv:
        from deerflow_ckpt.report.inspect_csv import summary_to_csv

        sys.stdout.write(summary_to_csv(result))
    else:
        from deerflow_ckpt.report.inspect_text import render_summary

        render_summary(result, scope, text_console(color.flag()), timeline)


@inspect_app.command("storage")
def storage(
    ctx: typer.Context,
    top: int = typer.Option(
        10, "--top", min=0, metavar="N", help="How many of the heaviest threads to list, each with its growth."
    ),
    no_channels: bool = typer.Option(
        False,
        "--no-channels",
        help="Skip the passes that read stored values (bytes by channel, tool outputs, the base64 peek): sizes, "
        "growth and advice come from lengths the database keeps.",
    ),
    output_format: InspectFormat = typer.Option(
        InspectFormat.text,
        "--format",
        metavar="FORMAT",
        help="text, json, or csv (the growth series of the store and of each heaviest thread, and what is not "
        "in them).",
    ),
    db: str | None = database_options.DB_OPTION,
    schema: str = database_options.SCHEMA_OPTION,
    config: Path | None = database_options.CONFIG_OPTION,
    immutable: bool = database_options.IMMUTABLE_OPTION,
    deerflow_root: Path | None = deerflow_options.DEERFLOW_ROOT_OPTION,
    network_timeout: str = database_options.NETWORK_TIMEOUT_OPTION,
    statement_timeout: str | None = database_options.STATEMENT_TIMEOUT_OPTION,
    color: ColorChoice = ci_options.COLOR_OPTION,
    quiet: bool = ci_options.QUIET_OPTION,
) -> None:
    """Where the store's bytes go: files and tables, bytes by channel (tool outputs apart), large base64
    values, growth by the hour each checkpoint id says (per hour, day, week or month) and the week's rate up
    to now, the heaviest threads, threads the app no longer knows, and whether a VACUUM would help (advice
    only: ckpt never runs it)."""
    from deerflow_ckpt.commands.inspect_storage import inspect_storage
    from deerflow_ckpt.store.storage import StorageRequest

    selection = database_options.with_timeouts(
        database_options.select(
            db, schema, config, None, immutable, deerflow_root, project_options.given_via(ctx, "db", "--db")
        ),
        network_timeout,
        statement_timeout,
    )
    if output_format is InspectFormat.csv:
        target = selection.choice.target
        info(f"ckpt: inspecting {target.describe()} (chosen via {selection.choice.found_via})")
    request = StorageRequest(top=top, channels=not no_channels)
    result = inspect_storage(selection.choice, request, database_options.legacy_checkpointer_files(selection))
    if output_format is InspectFormat.json:
        from deerflow_ckpt.report.storage_json import storage_to_json

        sys.stdout.write(storage_to_json(result))
    elif output_format is InspectFormat.csv:
        from deerflow_ckpt.report.storage_json import storage_to_csv

        sys.stdout.write(storage_to_csv(result))
    else:
        from deerflow_ckpt.report.storage_text import render_storage

        render_storage(result, text_console(color.flag()))


def register(app: typer.Typer) -> None:
    app.add_typer(inspect_app, name="inspect")
