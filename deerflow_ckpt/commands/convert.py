"""`ckpt convert`'s core: a copy of the store with every convertible thread stored in the target mode.

Per thread: the shape rules and the deep proof run on the copy (the same readers as verify-shape --deep);
a thread whose reads are already broken, whose payloads the inert judge does not pass, or whose replay
cannot be proven is refused and left as it was; every other lineage's checkpoints are rewritten from the
proof's fold (analysis/conversion.py), so each read materialises what it did before. Nothing is printed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deerflow_ckpt.analysis.conversion import CheckpointTarget, ConversionSettings, LineagePlanner, TargetMode
from deerflow_ckpt.analysis.replay import prove_lineage
from deerflow_ckpt.analysis.shape import LineageResult, ShapeSettings
from deerflow_ckpt.analysis.what_if import delta_what_if, full_what_if, what_if_steps
from deerflow_ckpt.commands.verify_shape import conversation, iter_thread_results
from deerflow_ckpt.errors import OutputError, StoreError
from deerflow_ckpt.rules import RuleCode
from deerflow_ckpt.store.convert_sqlite import (
    SqliteRowWriter,
    copy_database,
    file_bytes,
    sidecars,
    table_bytes,
    temporary_beside,
)
from deerflow_ckpt.store.history import SqliteLineageHistories
from deerflow_ckpt.store.messages import HistoryCheckpoint, StoredMessage
from deerflow_ckpt.store.readers import open_reader
from deerflow_ckpt.store.rewrite import (
    RowNotRewritable,
    delta_metadata,
    full_metadata,
    has_messages_version,
    metadata_bytes,
    metadata_dict,
    split_checkpoint,
    with_messages,
)
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection
from deerflow_ckpt.store.source import DatabaseChoice, SqliteTarget

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
    output: Path
    thread_ids: tuple[str, ...] | None = None


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
    # Stored column bytes of its checkpoint rows (checkpoint + metadata), before and after.
    bytes_before: int = 0
    bytes_after: int = 0
    # Message values the target stores: snapshots (delta) or lists (full), and their bytes as the what-if
    # counts them; the what-if's prediction for the same lineages.
    stored_values: int = 0
    stored_value_bytes: int = 0
    predicted_value_bytes: int = 0


@dataclass
class ConversionReport:
    database: str
    found_via: str
    output: str
    mode: TargetMode
    snapshot_frequency: int | None
    threads: list[ThreadConversion] = field(default_factory=list)
    # Per saver table, stored column bytes before (the source) and after (the output); file sizes.
    tables_before: dict[str, int] = field(default_factory=dict)
    tables_after: dict[str, int] = field(default_factory=dict)
    file_before: int = 0
    file_after: int = 0

    @property
    def converted(self) -> list[ThreadConversion]:
        return [thread for thread in self.threads if thread.refused is None]

    @property
    def refused(self) -> list[ThreadConversion]:
        return [thread for thread in self.threads if thread.refused is not None]


class _Refused(Exception):
    """Why a thread cannot be converted; its rewrites are rolled back."""


def refuse_output(output: Path, source: SqliteTarget) -> None:
    """The output must be a new file, and neither the source nor one of its companion files."""
    resolved = output.expanduser().resolve()
    own = source.path.expanduser().resolve()
    if resolved == own or resolved in sidecars(own):
        raise OutputError(f"--output {output} is the source database: convert never writes where it reads")
    if output.exists() or output.is_symlink():
        raise OutputError(f"--output {output} exists: convert writes a new file (remove it, or name another)")
    if not output.parent.is_dir():
        raise OutputError(f"--output {output}: {output.parent} is not a directory")


def convert(request: ConvertRequest, progress: Callable[[int], None] | None = None) -> ConversionReport:
    """Write `request.output`: the source's consistent copy with every convertible thread converted."""
    source = request.choice.target
    if not isinstance(source, SqliteTarget):
        raise StoreError("convert writes SQLite outputs only so far; a PostgreSQL source is not converted yet")
    refuse_output(request.output, source)
    settings = request.settings
    report = ConversionReport(
        source.describe(),
        request.choice.found_via,
        str(request.output),
        settings.mode,
        settings.snapshot_frequency if settings.mode is TargetMode.DELTA else None,
    )
    copy = temporary_beside(request.output)
    try:
        wal = copy_database(source, copy)
        report.file_before = file_bytes(source.path.expanduser().resolve())
        report.tables_before = table_bytes(copy)
        _convert_copy(copy, request, report, progress, wal)
        report.tables_after = table_bytes(copy)
        os.replace(copy, request.output)
        report.file_after = file_bytes(request.output)
    finally:
        for leftover in (copy, *sidecars(copy)):
            leftover.unlink(missing_ok=True)
    return report


def _convert_copy(
    copy: Path,
    request: ConvertRequest,
    report: ConversionReport,
    progress: Callable[[int], None] | None,
    wal: bool,
) -> None:
    target = SqliteTarget(copy)
    reader, backend = open_reader(target, sizes=True)
    histories = SqliteLineageHistories(target)
    writer = SqliteRowWriter(copy)
    selection = ALL_THREADS if request.thread_ids is None else ThreadSelection(thread_ids=request.thread_ids)
    try:
        for results in iter_thread_results(reader, backend, ShapeSettings(), selection):
            thread = _convert_thread(results, histories, writer, request.settings)
            report.threads.append(thread)
            if progress is not None:
                progress(thread.checkpoints)
    finally:
        histories.close()
    writer.finish(wal)


def _convert_thread(
    results: list[LineageResult],
    histories: SqliteLineageHistories,
    writer: SqliteRowWriter,
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
                _convert_lineage(result, histories, writer, settings, thread)
    except _Refused as exc:
        thread.refused = str(exc)
        thread.rewritten = thread.bytes_after = thread.stored_values = thread.stored_value_bytes = 0
    return thread


def _convert_lineage(
    result: LineageResult,
    histories: SqliteLineageHistories,
    writer: SqliteRowWriter,
    settings: ConversionSettings,
    thread: ThreadConversion,
) -> None:
    lineage = result.lineage
    history = histories.history(lineage)
    planner = LineagePlanner(settings, {c.checkpoint_id: c for c in history.checkpoints})
    steps = what_if_steps(result.graph)
    predicted = (
        delta_what_if(steps, settings.snapshot_frequency, result.graph.backend)
        if settings.mode is TargetMode.DELTA
        else full_what_if(steps, result.graph.backend)
    )
    thread.predicted_value_bytes += predicted.retained_bytes

    def store(checkpoint: HistoryCheckpoint, fold: list[StoredMessage] | None) -> None:
        if fold is None:
            raise _Refused(
                f"the replay cannot follow it at checkpoint {checkpoint.checkpoint_id} (verify-shape --deep)"
            )
        key = (lineage.thread_id, lineage.checkpoint_ns, checkpoint.checkpoint_id)
        row = writer.row(*key)
        if row is None:
            raise _Refused(f"checkpoint {checkpoint.checkpoint_id}'s key is not stored as text")
        kind, data, metadata = row
        if kind != "msgpack" or not isinstance(data, bytes) or not isinstance(metadata, bytes | str):
            raise _Refused(f"checkpoint {checkpoint.checkpoint_id} is not stored as msgpack")
        try:
            top = split_checkpoint(data)
            decided = planner.decide(checkpoint, fold, has_messages_version(top))
            new_data = with_messages(top, decided.messages)
            new_metadata = _metadata(metadata, settings, decided)
        except RowNotRewritable as exc:
            raise _Refused(f"checkpoint {checkpoint.checkpoint_id}: {exc}") from None
        thread.bytes_before += len(data) + _length(metadata)
        thread.bytes_after += len(new_data) + _length(new_metadata)
        if decided.messages is not None:
            thread.stored_values += 1
            thread.stored_value_bytes += _value_bytes(decided)
        if new_data != data or new_metadata != metadata:
            writer.update(key, new_data, new_metadata)
            thread.rewritten += 1

    proof = prove_lineage(history, store)
    if proof.unprovable:
        raise _Refused(f"its replay cannot be proven: {proof.unprovable[0]}")
    if proof.differing:
        raise _Refused("a stored list differs from the replay of its writes (CK106)")


def _metadata(raw: bytes | str, settings: ConversionSettings, decided: CheckpointTarget) -> bytes | str:
    metadata = metadata_dict(raw)
    if settings.mode is TargetMode.DELTA:
        return metadata_bytes(delta_metadata(metadata, decided.counters), raw)
    return metadata_bytes(full_metadata(metadata), raw)


def _value_bytes(decided: CheckpointTarget) -> int:
    """As the what-if counts a SQLite value: a snapshot's ext payload, a list whole."""
    assert decided.messages is not None
    if not decided.snapshot:
        return len(decided.messages)
    from deerflow_ckpt.store.lean import ext_header

    header = ext_header(decided.messages)
    return len(decided.messages) - (header[1] if header is not None else 0)


def _length(value: bytes | str) -> int:
    return len(value.encode()) if isinstance(value, str) else len(value)
