"""`ckpt convert`'s core: a copy of the store with every convertible thread stored in the target mode.

Per thread: the shape rules and the deep proof run on the copy (the same readers as verify-shape --deep);
a thread whose reads are already broken, whose payloads the inert judge does not pass, or whose replay
cannot be proven is refused and left as it was; every other lineage's checkpoints are rewritten from the
proof's fold (analysis/conversion.py), so each read materialises what it did before. Nothing is printed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from deerflow_ckpt.analysis.conversion import (
    CheckpointTarget,
    ConversionSettings,
    LineagePlanner,
    TargetMode,
    Unconvertible,
)
from deerflow_ckpt.analysis.replay import prove_lineage
from deerflow_ckpt.analysis.shape import LineageResult, ShapeSettings
from deerflow_ckpt.analysis.what_if import delta_what_if, full_what_if, what_if_steps
from deerflow_ckpt.commands.shares import run_shares, share_selections, without_cycle_collector
from deerflow_ckpt.commands.verify_shape import conversation, iter_thread_results
from deerflow_ckpt.config.history_cache import HistoryCache
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.errors import OutputError, StoreError
from deerflow_ckpt.fileio import resolved
from deerflow_ckpt.rules import RuleCode
from deerflow_ckpt.store.convert_sqlite import (
    MAX_CONVERTED_PARTS,
    SqliteRowWriter,
    catch_up,
    copy_database,
    file_bytes,
    part_beside,
    read_record,
    record_path,
    sidecars,
    table_bytes,
    temporary_beside,
    write_output,
    write_record,
)
from deerflow_ckpt.store.history import SqliteLineageHistories
from deerflow_ckpt.store.lean import ext_header
from deerflow_ckpt.store.messages import HistoryCheckpoint, LineageHistory, StoredMessage
from deerflow_ckpt.store.readers import LineageReader, open_reader
from deerflow_ckpt.store.records import Backend, Lineage, Shape
from deerflow_ckpt.store.rewrite import RowChange, RowNotRewritable
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection
from deerflow_ckpt.store.source import DatabaseChoice, DatabaseTarget, PostgresTarget, SqliteTarget

if TYPE_CHECKING:
    from deerflow_ckpt.store.convert_postgres import SourceFingerprint

# Findings that refuse a thread: its reads are already broken (a dangling snapshot marker, a missing parent,
# a parent link the walk cannot follow, pruned writes, a stored list that differs from its writes), or a
# payload the inert judge does not pass, so nothing of it may be decoded to convert it.
REFUSING_RULES = frozenset(
    {
        RuleCode.CK102,
        RuleCode.CK104,
        RuleCode.CK105,
        RuleCode.CK106,
        RuleCode.CK302,
        RuleCode.CK303,
        RuleCode.CK304,
    }
)


@dataclass(frozen=True)
class ConvertRequest:
    choice: DatabaseChoice
    settings: ConversionSettings
    # SQLite: the new database file (must not exist).
    output: Path | None = None
    # Postgres: the new schema that receives the converted copies of the saver's tables.
    target_schema: str | None = None
    thread_ids: tuple[str, ...] | None = None
    # Bring an existing output up to date: only threads the source changed since are converted again.
    catch_up: bool = False
    # DeerFlow's Redis history cache for this database, where the config that chose it enables one.
    history_cache: HistoryCache | None = None
    # SQLite: processes converting thread ranges in parallel (each keeps its converted rows apart); None: as
    # many as the store's size and the machine allow (commands/shares.auto_jobs).
    jobs: int | None = 1


@dataclass
class ThreadConversion:
    thread_id: str
    # What the source stored the thread as: delta, full or migrated.
    source_mode: str
    checkpoints: int = 0
    # Rows whose bytes changed.
    rewritten: int = 0
    # Why the thread was copied unchanged instead (None: converted).
    refused: str | None = None
    # Stored bytes of its checkpoint rows (checkpoint + metadata) and, on Postgres, of its messages blobs,
    # before and after.
    checkpoint_bytes_before: int = 0
    checkpoint_bytes_after: int = 0
    blob_bytes_before: int = 0
    blob_bytes_after: int = 0
    # Message values the target stores: snapshots (delta) or lists (full), and their bytes as the what-if
    # counts them; the what-if's prediction for the same lineages.
    stored_values: int = 0
    stored_value_bytes: int = 0
    predicted_value_bytes: int = 0
    # The what-if models one unbranched conversation that only appends messages from an empty start: there its
    # prediction is exact; branches, removals, Overwrites, subgraph calls and stored starts make it differ.
    modelled_exactly: bool = True


@dataclass
class ConversionReport:
    database: str
    found_via: str
    backend: Backend
    # The new file (SQLite) or schema (Postgres).
    output: str
    mode: TargetMode
    snapshot_frequency: int | None
    threads: list[ThreadConversion] = field(default_factory=list)
    # Per saver table, stored value bytes before (the source) and after (the output); the database's size on
    # disk (SQLite: the file; Postgres: the saver's tables with TOAST and indexes).
    tables_before: dict[str, int] = field(default_factory=dict)
    tables_after: dict[str, int] = field(default_factory=dict)
    disk_before: int = 0
    disk_after: int = 0
    # Postgres: what the swap script checks and moves (None on SQLite).
    fingerprint: SourceFingerprint | None = None
    # --catch-up: threads the source had not changed since the previous run, carried over as converted then,
    # and those of them the previous run refused (thread id -> why).
    carried_over: int | None = None
    still_refused: dict[str, str] = field(default_factory=dict)
    history_cache: HistoryCache | None = None

    @property
    def converted(self) -> list[ThreadConversion]:
        return [thread for thread in self.threads if thread.refused is None]

    @property
    def refused(self) -> list[ThreadConversion]:
        return [thread for thread in self.threads if thread.refused is not None]


# Beside the scratch copy: the output until it is complete.
_WRITTEN = ".written"


class _Refused(Exception):
    """Why a thread cannot be converted; its rewrites are rolled back."""


class _LineageRewrite(Protocol):
    def store(
        self,
        checkpoint_id: str,
        messages: bytes | None,
        counters: tuple[int, int] | None,
        stores_now: bool,
        fold_identity: object = None,
    ) -> RowChange: ...

    def finish(self) -> tuple[int, int]: ...


class _Writer(Protocol):
    def thread(self) -> AbstractContextManager[None]: ...

    def lineage(self, thread_id: str, checkpoint_ns: str, delta: bool) -> _LineageRewrite: ...


def refuse_output(output: Path, source: SqliteTarget, catch_up: bool) -> None:
    """The output must be a new file (with --catch-up: a regular file, the previous run's), and neither the
    source nor one of its companion files."""
    target = resolved(output.expanduser(), OutputError)
    own = resolved(source.path.expanduser(), StoreError)
    if target == own or target in sidecars(own):
        raise OutputError(f"--output {output} is the source database: convert never writes where it reads")
    if catch_up:
        if not output.is_file() or output.is_symlink():
            raise OutputError(f"--catch-up: --output {output} is not the regular file a previous run wrote")
        wal = output.with_name(output.name + "-wal")
        if wal.exists() and wal.stat().st_size:
            raise OutputError(
                f"--catch-up: {wal} holds writes made to {output} since it was converted: it is no longer the "
                "previous run's output (convert again into a new file)"
            )
        return
    if output.exists() or output.is_symlink():
        raise OutputError(
            f"--output {output} exists: convert writes a new file (remove it, name another, or --catch-up)"
        )
    for companion in sidecars(output):
        if companion.exists():
            raise OutputError(f"--output {output}: {companion} exists, and SQLite would apply it to the new file")
    if not output.parent.is_dir():
        raise OutputError(f"--output {output}: {output.parent} is not a directory")


def convert(request: ConvertRequest, progress: Callable[[int], None] | None = None) -> ConversionReport:
    """Write the converted copy: a new SQLite file, or a new Postgres schema."""
    source = request.choice.target
    settings = request.settings
    mode_k = settings.snapshot_frequency if settings.mode is TargetMode.DELTA else None
    if isinstance(source, SqliteTarget):
        if request.output is None:
            raise OutputError("convert needs --output NEW.db for a SQLite source")
        report = ConversionReport(
            source.describe(), request.choice.found_via, Backend.SQLITE, str(request.output), settings.mode, mode_k
        )
        report.history_cache = request.history_cache
        _convert_sqlite(source, request.output, request, report, progress)
        return report
    assert isinstance(source, PostgresTarget)
    if not request.target_schema:
        raise OutputError("convert needs --target-schema NAME for a PostgreSQL source")
    report = ConversionReport(
        source.describe(), request.choice.found_via, Backend.POSTGRES, request.target_schema, settings.mode, mode_k
    )
    report.history_cache = request.history_cache
    _convert_postgres(source, request.target_schema, request, report, progress)
    return report


def _convert_sqlite(
    source: SqliteTarget,
    output: Path,
    request: ConvertRequest,
    report: ConversionReport,
    progress: Callable[[int], None] | None,
) -> None:
    refuse_output(output, source, request.catch_up)
    copy = temporary_beside(output)
    written = copy.with_name(copy.name + _WRITTEN)
    parts: list[Path] = []
    try:
        wal = copy_database(source, copy)
        report.disk_before = file_bytes(resolved(source.path.expanduser(), StoreError))
        report.tables_before = table_bytes(copy)
        selection = _selection(request)
        carried: tuple[Path, list[str]] | None = None
        if request.catch_up:
            previous = _previous_refusals(output, report, source)
            changed, unchanged = catch_up(copy, output)
            carried = (output, unchanged)
            report.carried_over = len(unchanged)
            selection = _only(selection, changed)
            report.still_refused = {t: previous[t] for t in unchanged if t in previous}
        target = SqliteTarget(copy)
        reader, _ = open_reader(target, sizes=False)
        jobs = None if request.jobs is None else min(request.jobs, MAX_CONVERTED_PARTS)
        shares = _shares(reader, jobs, selection)
        parts = [part_beside(copy, share) for share in shares]
        work = functools.partial(_convert_share, target, request.settings)
        for threads in run_shares(work, shares, progress):
            report.threads.extend(threads)
        write_output(written, copy, parts, wal, carried)
        report.tables_after = table_bytes(written)
        refused = {**report.still_refused, **{t.thread_id: t.refused or "" for t in report.refused}}
        # The record first: an output is never without the record a catch-up needs, whenever a signal lands.
        write_record(
            output,
            {
                "mode": str(report.mode),
                "snapshot_frequency": report.snapshot_frequency,
                "source": str(source.path),
                "refused": refused,
            },
        )
        os.replace(written, output)
        for companion in sidecars(output):
            companion.unlink(missing_ok=True)  # an empty -wal/-shm of the previous output (checked above)
        report.disk_after = file_bytes(output)
    finally:
        for scratch in (copy, *parts, written):
            for leftover in (scratch, *sidecars(scratch)):
                leftover.unlink(missing_ok=True)


def _shares(reader: LineageReader, jobs: int | None, selection: ThreadSelection) -> list[ThreadSelection]:
    """Thread ranges of about equal checkpoint counts (`jobs` None: as many as pay on this machine), or named
    threads (--thread, a catch-up's changed ones) dealt round-robin to the `jobs` asked for: any thread may be
    converted by any process, as the output joins every part by key."""
    named = selection.thread_ids
    if named is None or jobs is None or jobs <= 1 or len(named) < 2:
        return share_selections(reader, jobs, named).selections
    parts = min(jobs, len(named))
    return [ThreadSelection(thread_ids=named[part::parts]) for part in range(parts)]


def _convert_share(
    copy: SqliteTarget, settings: ConversionSettings, share: ThreadSelection, progress: Callable[[int], None] | None
) -> list[ThreadConversion]:
    """One range of threads, converted into a scratch database of its own (in a worker process, or here)."""
    histories = SqliteLineageHistories(copy)
    writer = SqliteRowWriter(copy.path, part_beside(copy.path, share))
    try:
        with without_cycle_collector():
            return _convert_threads(copy, histories.history, writer, share, settings, progress)
    finally:
        histories.close()
        writer.close()


def _previous_refusals(output: Path, report: ConversionReport, source: SqliteTarget) -> dict[str, str]:
    """The previous run's record, checked against this run's mode and K: its refused threads."""
    record = read_record(output)
    if record is None:
        raise OutputError(f"--catch-up: {output} has no record of a ckpt conversion ({record_path(output).name})")
    if record.get("mode") != str(report.mode) or record.get("snapshot_frequency") != report.snapshot_frequency:
        raise OutputError(
            f"--catch-up: {output} was converted to {record.get('mode')} mode"
            + (f" at K={record.get('snapshot_frequency')}" if record.get("snapshot_frequency") else "")
            + ": catch up with the same --to and --snapshot-frequency, or convert again into a new file"
        )
    refused = record.get("refused")
    return {str(k): str(v) for k, v in refused.items()} if isinstance(refused, dict) else {}


def _convert_postgres(
    source: PostgresTarget,
    schema: str,
    request: ConvertRequest,
    report: ConversionReport,
    progress: Callable[[int], None] | None,
) -> None:
    from contextlib import suppress

    from deerflow_ckpt.store.convert_postgres import (
        PostgresRowWriter,
        compact,
        copy_tables,
        discard,
        finish_record,
        relation_bytes,
    )
    from deerflow_ckpt.store.convert_postgres import table_bytes as pg_table_bytes
    from deerflow_ckpt.store.history import PostgresHistoryReader

    copied = copy_tables(source, schema, str(request.settings.mode), report.snapshot_frequency, request.catch_up)
    copy, fingerprint = copied.copy, copied.fingerprint
    try:
        report.fingerprint = fingerprint
        # The source's values in the copy's own snapshot. A first run's fresh copy is the source's rows without
        # the live tables' dead versions: its size against the compacted result measures the conversion alone.
        report.tables_before = copied.tables_before
        live = PostgresTarget(source.conninfo, fingerprint.schema, source.timeouts)
        measured = (live, live.schema) if request.catch_up else (copy, schema)
        report.disk_before = relation_bytes(*measured, fingerprint.tables)
        selection = _selection(request)
        if copied.changed is not None:
            report.carried_over = copied.carried_over
            selection = _only(selection, copied.changed)
        # The histories stream in the scan's order (thread, namespace, bytewise): each lineage takes the next.
        stream = PostgresHistoryReader(copy).histories(selection)

        def history(lineage: Lineage) -> LineageHistory:
            key = (lineage.thread_id, lineage.checkpoint_ns)
            while True:
                found = next(stream, None)
                if found is None or (found.thread_id, found.checkpoint_ns) > key:
                    raise StoreError(f"the copy's history stream has no lineage {key!r}")
                if (found.thread_id, found.checkpoint_ns) == key:
                    return found

        writer = PostgresRowWriter(copy)
        try:
            report.threads.extend(_convert_threads(copy, history, writer, selection, request.settings, progress))
        finally:
            writer.close()
            # Its read transaction holds the copies' locks: end it before they are compacted.
            stream.close()
        # A catch-up rewrote a few threads: a plain VACUUM keeps the window short; a first run compacts fully.
        compact(copy, schema, fingerprint.tables, full=not request.catch_up)
        report.tables_after = pg_table_bytes(copy, schema)
        report.disk_after = relation_bytes(copy, schema, fingerprint.tables)
        finish_record(copy, [thread.thread_id for thread in report.refused])
    except BaseException:
        # A catch-up's record stays incomplete (the next catch-up redoes its threads); a first run leaves nothing.
        if not request.catch_up:
            with suppress(StoreError):
                discard(source, schema, copied.created)
        raise


def _selection(request: ConvertRequest) -> ThreadSelection:
    return ALL_THREADS if request.thread_ids is None else ThreadSelection(thread_ids=request.thread_ids)


def _only(selection: ThreadSelection, changed: list[str]) -> ThreadSelection:
    """--catch-up: the threads the source changed, of those asked for."""
    asked = selection.thread_ids
    return ThreadSelection(thread_ids=tuple(t for t in changed if asked is None or t in asked))


def _convert_threads(
    copy: DatabaseTarget,
    history: Callable[[Lineage], LineageHistory],
    writer: _Writer,
    selection: ThreadSelection,
    settings: ConversionSettings,
    progress: Callable[[int], None] | None,
) -> list[ThreadConversion]:
    reader, backend = open_reader(copy, sizes=False)
    threads = []
    for results in iter_thread_results(reader, backend, ShapeSettings(), selection):
        thread = _convert_thread(results, history, writer, settings)
        threads.append(thread)
        if progress is not None:
            progress(thread.checkpoints)
    return threads


def _convert_thread(
    results: list[LineageResult],
    history: Callable[[Lineage], LineageHistory],
    writer: _Writer,
    settings: ConversionSettings,
) -> ThreadConversion:
    main = conversation(results)
    thread = ThreadConversion(main.lineage.thread_id, str(main.kind))
    thread.checkpoints = sum(len(result.lineage.records) for result in results)
    refusing = sorted({f.rule for result in results for f in result.findings if f.rule in REFUSING_RULES})
    if refusing:
        thread.refused = "its shape findings: " + ", ".join(str(rule) for rule in refusing) + " (see verify-shape)"
        return thread
    try:
        with writer.thread():
            for result in results:
                _convert_lineage(result, history(result.lineage), writer, settings, thread)
    except _Refused as exc:
        refused = ThreadConversion(thread.thread_id, thread.source_mode, thread.checkpoints, refused=str(exc))
        return refused
    return thread


def _convert_lineage(
    result: LineageResult,
    history: LineageHistory,
    writer: _Writer,
    settings: ConversionSettings,
    thread: ThreadConversion,
) -> None:
    lineage = result.lineage
    delta = settings.mode is TargetMode.DELTA
    planner = LineagePlanner(settings, {c.checkpoint_id: c for c in history.checkpoints})
    steps = what_if_steps(result.graph)
    backend = result.graph.backend
    predicted = delta_what_if(steps, settings.snapshot_frequency, backend) if delta else full_what_if(steps, backend)
    thread.predicted_value_bytes += predicted.retained_bytes
    graph = result.graph
    records = graph.records
    rewrote = any(record.removal_written or record.overwrite_written for record in records)
    roots = graph.roots()
    branched = any(len(children) > 1 for children in graph.children.values()) or len(roots) != 1
    # A subgraph's input is the whole conversation again, and a start from a stored list has no writes before.
    other_start = lineage.checkpoint_ns != "" or any(graph.stores_list_here(root) for root in roots)
    thread.modelled_exactly = thread.modelled_exactly and not (rewrote or branched or other_start)
    by_id = {record.checkpoint_id: record for record in records}
    try:
        rows = writer.lineage(lineage.thread_id, lineage.checkpoint_ns, delta)
    except RowNotRewritable as exc:
        raise _Refused(str(exc)) from None

    def store(checkpoint: HistoryCheckpoint, fold: list[StoredMessage] | None) -> None:
        if fold is None:
            raise _Refused(
                f"the replay cannot follow it at checkpoint {checkpoint.checkpoint_id} (verify-shape --deep)"
            )
        try:
            record = by_id[checkpoint.checkpoint_id]
            decided = planner.decide(checkpoint, fold, record.messages_version is not None)
            stores_now = record.messages is not Shape.ABSENT
            # Postgres keeps one value per version: the fold (its messages, shared objects within the lineage)
            # must be the same at every checkpoint of a version. SQLite stores each checkpoint's own.
            identity = tuple(map(id, fold)) if backend is Backend.POSTGRES else None
            change = rows.store(checkpoint.checkpoint_id, decided.messages, decided.counters, stores_now, identity)
        except RowNotRewritable as exc:
            raise _Refused(f"checkpoint {checkpoint.checkpoint_id}: {exc}") from None
        except Unconvertible as exc:
            raise _Refused(str(exc)) from None
        thread.checkpoint_bytes_before += change.before
        thread.checkpoint_bytes_after += change.after
        thread.rewritten += change.changed
        if decided.messages is not None:
            thread.stored_values += 1
            thread.stored_value_bytes += _value_bytes(decided, backend)

    proof = prove_lineage(history, store)
    if proof.unprovable:
        raise _Refused(f"its replay cannot be proven: {proof.unprovable[0]}")
    if proof.differing:
        raise _Refused("a stored list differs from the replay of its writes (CK106)")
    before, after = rows.finish()
    thread.blob_bytes_before += before
    thread.blob_bytes_after += after


def _value_bytes(decided: CheckpointTarget, backend: Backend) -> int:
    """As the what-if counts a value: a snapshot's ext payload inline in SQLite, a Postgres blob whole."""
    assert decided.messages is not None
    if not decided.snapshot or backend is Backend.POSTGRES:
        return len(decided.messages)
    header = ext_header(decided.messages)
    return len(decided.messages) - (header[1] if header is not None else 0)
