"""Choosing the database and the expected cadence, shared by verify-shape and inspect."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from deerflow_ckpt.analysis.cadence import DEFAULT_SUPERSTEP_BOUND
from deerflow_ckpt.cli.console import info, message
from deerflow_ckpt.cli.deerflow_options import deerflow_environment, say_passed_over
from deerflow_ckpt.commands.shares import CHECKPOINTS_PER_PROCESS, MAX_AUTO_JOBS
from deerflow_ckpt.config.discovery import DeerFlowEnvironment, discover, passed_over
from deerflow_ckpt.config.keys import FILE_DATABASE_DEFAULTS
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.fileio import resolved
from deerflow_ckpt.locations import SqliteLocation
from deerflow_ckpt.store.source import DatabaseChoice, DatabaseTarget, SqliteTarget, choose, target_from_argument

if TYPE_CHECKING:
    from deerflow_ckpt.config.database import DatabaseSettings

if TYPE_CHECKING:
    from deerflow_ckpt.analysis.mode import StatedMode

DB_OPTION = typer.Option(
    None,
    "--db",
    metavar="PATH|DSN",
    help="SQLite file or postgresql:// DSN (+driver suffixes accepted).",
    show_default="from config.yaml",
)
SCHEMA_OPTION = typer.Option(
    "", "--schema", metavar="SCHEMA", help="Postgres schema holding the checkpoint tables.", show_default=False
)
CONFIG_OPTION = typer.Option(
    None,
    "--config",
    metavar="FILE",
    help="DeerFlow config.yaml.",
    show_default="found the way DeerFlow finds it",
)
CADENCE_OPTION = typer.Option(
    None,
    "--cadence",
    min=1,
    metavar="K",
    help="Expected snapshot_frequency K.",
    show_default="the config's effective value",
)
# analysis/mode.ChannelMode's values, spelled out so `ckpt --help` does not import the analysis stack.
ModeChoice = Literal["full", "delta"]
MODE_OPTION = typer.Option(
    None,
    "--mode",
    metavar="full|delta",
    help="The channel mode the deployment writes in, for a store no DeerFlow config chose (a plain LangGraph app "
    "runs full). Wins over the config's checkpoint_channel_mode; a store that shows otherwise is said so.",
    show_default=False,
)
MAX_SUPERSTEPS_OPTION = typer.Option(
    DEFAULT_SUPERSTEP_BOUND,
    "--max-supersteps",
    min=1,
    metavar="N",
    help="LangGraph's superstep bound: the snapshots it forces, and CK203's limit.",
)
SINCE_OPTION = typer.Option(
    None,
    "--since",
    metavar="TIME|ID",
    help="Judge only checkpoints written at or after this ISO-8601 time (UTC unless it has an offset) or "
    "checkpoint id; only threads written since then are read.",
    show_default=False,
)
CLOCK_SKEW_OPTION = typer.Option(
    "5s",
    "--clock-skew",
    metavar="DURATION",
    help="How far apart writers' clocks may be: writes closer than this are not ordered (e.g. 5s, 1m).",
)
ROLLING_WINDOW_OPTION = typer.Option(
    "15m",
    "--rolling-window",
    metavar="DURATION",
    help="How long two cadences may both write after a change before it counts as concurrent writers.",
)
NETWORK_TIMEOUT_OPTION = typer.Option(
    "120s",
    "--network-timeout",
    metavar="DURATION",
    help="Postgres: give up when the server sends nothing for this long (a dead network or proxy).",
)
STATEMENT_TIMEOUT_OPTION = typer.Option(
    None,
    "--statement-timeout",
    metavar="DURATION",
    help="Postgres: a statement_timeout for the scan.",
    show_default="the role's or the server's, unchanged",
)
VERBOSE_OPTION = typer.Option(
    False,
    "--verbose",
    "-v",
    help="Also say on stderr which code reads the rows: the compiled judge and SQLite reader, or Python and why "
    "(not built, or CKPT_NATIVE=0).",
)
JOBS_OPTION = typer.Option(
    None,
    "--jobs",
    min=1,
    metavar="N",
    show_default=f"one per {CHECKPOINTS_PER_PROCESS:,} checkpoints, at most the idle CPUs and {MAX_AUTO_JOBS}",
    help="Processes reading thread ranges in parallel. Without it the store's size, the CPUs this process may "
    "use and the machine's load decide.",
)
IMMUTABLE_OPTION = typer.Option(
    False,
    "--immutable",
    help="Read a SQLite copy that nobody writes to with immutable=1 (ignores -wal and -shm: never on a live DB).",
)


@dataclass(frozen=True)
class DatabaseSelection:
    choice: DatabaseChoice
    settings: DatabaseSettings | None
    config_path: Path | None
    expected_cadence: int | None
    cadence_source: str
    # The variables DeerFlow would run with (.env included), as the selection read them.
    environ: Mapping[str, str] = field(default_factory=dict)
    # The environment and install they came from (where DeerFlow's launches run), when discovery ran.
    environment: DeerFlowEnvironment | None = None


def legacy_checkpointer_files(selection: DatabaseSelection) -> list[Path]:
    """Files a legacy `checkpointer:` section writes that are not the database chosen, derived as DeerFlow
    derives them (config/discovery.py): the config's connection_string and DeerFlow's default, under each
    launch's home and the home of the process that wrote the chosen file."""
    from deerflow_ckpt.config.discovery import legacy_checkpointer_files as derived

    target = selection.choice.target
    if not isinstance(target, SqliteTarget) or selection.environment is None:
        return []
    chosen = resolved(target.path.expanduser(), StoreError)
    return derived(selection.settings, selection.config_path, selection.environment, Path.cwd(), chosen)


def say_reading_path(target: DatabaseTarget) -> None:
    """--verbose: which code reads and judges the rows, on stderr beside the database chosen."""
    from deerflow_ckpt.store.readers import reading_path

    message(f"ckpt: rows read and judged by: {reading_path(target)}")


def say_processes(processes: int, why: str) -> None:
    """--verbose: how many processes read the threads, and why that many."""
    message(f"ckpt: threads read by {processes} process{'es' if processes > 1 else ''} ({why})")


def with_timeouts(selection: DatabaseSelection, network: str, statement: str | None) -> DatabaseSelection:
    """The selection with --network-timeout and --statement-timeout applied to a Postgres target."""
    from dataclasses import replace

    from deerflow_ckpt.store.source import PostgresTarget

    target = selection.choice.target
    if not isinstance(target, PostgresTarget):
        return selection
    timeouts = replace(
        target.timeouts,
        network=parse_duration(network, "--network-timeout") / 1e9,
        statement=None if statement is None else parse_duration(statement, "--statement-timeout") / 1e9,
    )
    choice = replace(selection.choice, target=replace(target, timeouts=timeouts))
    return replace(selection, choice=choice)


def input_files(selection: DatabaseSelection) -> list[tuple[Path, str]]:
    """The files a scan reads: the SQLite database with its -wal and -shm, and the config."""
    files: list[tuple[Path, str]] = []
    target = selection.choice.target
    if isinstance(target, SqliteTarget):
        database = target.path.expanduser()
        sidecars = ("-wal", "-shm", "-journal")
        files += [(database, "the database"), *((Path(f"{database}{s}"), "a file of the database") for s in sidecars)]
    if selection.config_path is not None:
        files.append((selection.config_path, "the config"))
    return files


def select(
    db: str | None,
    schema: str,
    config: Path | None,
    cadence: int | None,
    immutable: bool,
    deerflow_root: Path | None = None,
    db_via: str = "--db",
) -> DatabaseSelection:
    """--db, else the database config/discovery.py finds as DeerFlow does (.env included); the expected cadence.
    Says on stderr what discovery passed over; `db_via` says where --db's value came from."""
    environment = deerflow_environment(deerflow_root, config)
    found = discover(db is not None, config, environment, Path.cwd(), FILE_DATABASE_DEFAULTS["sqlite_dir"])
    if found.config is not None:
        if found.config.relative:
            # Which directory a relative variable was resolved against decides the config: say it.
            info(f"ckpt: config {found.config.path} (found via {found.config.found_via})")
        say_passed_over(found.config)
    if schema and db is None:
        raise typer.BadParameter("--schema goes with --db (the config's postgres_schema is used otherwise)")
    if db is not None:
        choice = DatabaseChoice(target_from_argument(db, schema, immutable), db_via)
    else:
        assert found.location is not None
        try:
            choice = choose(found.location, immutable)
        except StoreError as exc:
            if found.config is not None:
                raise
            raise StoreError("; ".join([*found.tried, str(exc)]) + "; pass --db or --config") from None
        if isinstance(found.location, SqliteLocation) and isinstance(choice.target, SqliteTarget):
            for warning in passed_over(found.location, choice.target.path):
                message(f"ckpt: warning: {warning}")
    config_path = found.config.path if found.config is not None else None
    expected, source = _expected_cadence(cadence, found.settings, config_path)
    return DatabaseSelection(choice, found.settings, config_path, expected, source, environment.variables, environment)


def stated_mode(selection: DatabaseSelection, mode: ModeChoice | None, db: str | None) -> StatedMode:
    """--mode, else the checkpoint_channel_mode of the config that chose the database (not one beside --db)."""
    from deerflow_ckpt.analysis.mode import OPTION, ChannelMode, StatedMode

    if mode is not None:
        return StatedMode(ChannelMode(mode), OPTION)
    settings, config_path = selection.settings, selection.config_path
    if db is None and settings is not None and config_path is not None and settings.channel_mode in ("full", "delta"):
        return StatedMode(ChannelMode(str(settings.channel_mode)), str(config_path))
    return StatedMode()


def _expected_cadence(
    cadence: int | None, settings: DatabaseSettings | None, config_path: Path | None
) -> tuple[int | None, str]:
    if cadence is not None:
        return cadence, "--cadence"
    if settings is None or config_path is None:
        return None, "unknown (no --cadence and no config.yaml)"
    reading = settings.cadence
    if reading.effective is None:
        why = f"${reading.env_reference} is not set" if reading.env_reference else f"the value {reading.problem}"
        return None, f"unknown ({config_path}: {why})"
    return reading.effective, f"{config_path}, {settings.cadence_origin}"


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str, option: str) -> int:
    """'90', '90s', '15m', '2h', '1d' -> nanoseconds."""
    text = value.strip().lower()
    unit = _UNITS.get(text[-1:])
    number = text[:-1] if unit is not None else text
    try:
        seconds = float(number)
    except ValueError:
        raise typer.BadParameter(
            f"expected a duration such as 30s, 15m or 2h, got {value!r}", param_hint=option
        ) from None
    if not seconds >= 0 or seconds > 10 * 365 * 86400:
        raise typer.BadParameter(f"expected a duration from 0 to 10 years, got {value!r}", param_hint=option)
    return int(seconds * (unit or 1) * 1_000_000_000)


def parse_since(value: str | None, option: str = "--since") -> str | None:
    """--since (or `option`) as the smallest checkpoint id written at or after it (UUIDv6 ids sort by write time)."""
    if value is None:
        return None
    from datetime import datetime

    from deerflow_ckpt.store.clock import SINCE_YEARS, boundary_id, from_datetime, write_time_ns

    text = value.strip()
    if write_time_ns(text.lower()) is not None:
        return text.lower()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise typer.BadParameter(
            f"expected an ISO-8601 time (2026-12-03T10:00:00Z) or a checkpoint id, got {value!r}", param_hint=option
        ) from None
    if not SINCE_YEARS[0] <= moment.year <= SINCE_YEARS[1]:
        raise typer.BadParameter(
            f"expected a time between the years {SINCE_YEARS[0]} and {SINCE_YEARS[1]}, got {value!r}",
            param_hint=option,
        )
    return boundary_id(from_datetime(moment))
