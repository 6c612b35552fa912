"""What `ckpt inspect` knows about a thread: snapshot intervals, the cadence its writers used, the bytes
it stores by kind, and what another snapshot cadence K would have cost it (pure: records in, values out).

Counting follows storage-contract.md §6: physical snapshot steps only (never a Postgres checkpoint that
inherits an earlier snapshot's version), intervals in message-writing steps by the counters and along
the chain, cadence bounds [max updates + 1, min cadence-triggered interval]. Sizes are the stored column
lengths DeerFlow's benchmark counts. The what-if replays this lineage's own message writes under another
K: a snapshot at every K-th message-writing step holds every message written so far, framed the way the
saver frames it, so for an append-only thread it matches a database written at that K byte for byte.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from deerflow_ckpt.analysis.cadence import (
    DEFAULT_SUPERSTEP_BOUND,
    CadenceBounds,
    CadenceProfile,
    Trigger,
    cadence_profile,
)
from deerflow_ckpt.analysis.histogram import Histogram, distinct_values, histogram
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.shape import CONVERSATION_NS, LineageResult
from deerflow_ckpt.store.peek import array_header_size, ext_header_size
from deerflow_ckpt.store.records import Backend, CheckpointRecord, Lineage, MessagesShape

# The cadences every what-if shows unless the operator picks others (the expected K is always added).
DEFAULT_WHAT_IF = (1, 10, 100, 1000)
# A per-call subgraph namespace ends in the calling task's id; summaries group those calls together.
_TASK_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class CadenceStatus(StrEnum):
    """How the bounds read against the expected K."""

    MATCHES = "matches"  # the bounds meet at the expected K
    CONSISTENT = "consistent"  # the expected K lies within bounds that do not meet yet
    DIFFERS = "differs"  # the expected K lies outside the bounds
    INFERRED = "inferred"  # no expected K; the bounds meet
    OPEN = "open"  # no expected K; the bounds do not meet (too few writes, or only forced snapshots)
    MIXED_WRITERS = "mixed_writers"  # contradictory bounds: writers with different K shared the thread
    NOT_DELTA = "not_delta"  # no counters and no snapshots: full mode


class RankBy(StrEnum):
    SIZE = "size"
    CHECKPOINTS = "checkpoints"
    REPLAY_DEPTH = "replay-depth"


@dataclass(frozen=True)
class InspectSettings:
    # The conversation's expected K (--cadence or the config); subgraph namespaces carry their own.
    expected_cadence: int | None = None
    # Cadences for the what-if; None: DEFAULT_WHAT_IF. An empty tuple skips the what-if.
    what_if: tuple[int, ...] | None = None
    superstep_bound: int = DEFAULT_SUPERSTEP_BOUND


@dataclass(frozen=True)
class InspectionScope:
    """What an inspection ran on, for the reports' headers."""

    database: str
    found_via: str
    backend: Backend
    settings: InspectSettings
    # Where the expected cadence came from ("--cadence", the config file, or why it is unknown).
    cadence_source: str


@dataclass(frozen=True)
class ForcedSnapshot:
    """A snapshot stored for another reason than the cadence: its interval says nothing about K."""

    checkpoint_id: str
    step: int | None
    trigger: Trigger
    counter_interval: int
    chain_interval: int


@dataclass(frozen=True)
class MethodDisagreement:
    """A snapshot whose interval differs by the counters and along the chain (something was removed)."""

    checkpoint_id: str
    step: int | None
    counter_interval: int
    chain_interval: int


@dataclass(frozen=True)
class IntervalReport:
    # Cadence-triggered snapshots only; `counters` is the histogram shown, `chain` the cross-check.
    counters: Histogram
    chain: Histogram
    forced: tuple[ForcedSnapshot, ...]
    # Message-writing steps since the last snapshot at the head: an interval not closed yet.
    open_tail: int
    disagreements: tuple[MethodDisagreement, ...]


@dataclass(frozen=True)
class CadenceReport:
    lower: int | None
    upper: int | None
    inferred: int | None
    expected: int | None
    status: CadenceStatus


@dataclass(frozen=True)
class StorageBytes:
    """Stored column lengths by kind, as DeerFlow's benchmark counts them.

    On SQLite a snapshot is inline in the checkpoint column: its payload counts as `snapshots` and
    the rest of the row (ext header included) as `checkpoints`. On Postgres every blob other than a
    snapshot, the full-mode message lists among them, counts as `other_blobs`.
    """

    snapshots: int = 0
    message_writes: int = 0
    checkpoints: int = 0
    other_writes: int = 0
    other_blobs: int = 0

    @property
    def total(self) -> int:
        return self.snapshots + self.message_writes + self.checkpoints + self.other_writes + self.other_blobs

    def __add__(self, other: StorageBytes) -> StorageBytes:
        return StorageBytes(
            self.snapshots + other.snapshots,
            self.message_writes + other.message_writes,
            self.checkpoints + other.checkpoints,
            self.other_writes + other.other_writes,
            self.other_blobs + other.other_blobs,
        )


@dataclass(frozen=True)
class WhatIfRow:
    # None: full mode, a message list stored instead of snapshots.
    cadence: int | None
    # Snapshots (delta) or message lists (full) the thread would have stored.
    stored_values: int
    retained_bytes: int
    # The most message-writing steps a read would have replayed, and their stored bytes.
    worst_replay_depth: int
    worst_replay_bytes: int


@dataclass(frozen=True)
class ModelCheck:
    """The model against this lineage's own snapshots: equal when its writes only ever append messages."""

    snapshots: int
    modelled_bytes: int
    measured_bytes: int

    @property
    def exact(self) -> bool:
        return self.modelled_bytes == self.measured_bytes


@dataclass(frozen=True)
class WhatIf:
    rows: tuple[WhatIfRow, ...]
    message_writing_steps: int
    # False when a removal or an Overwrite was written: the model keeps every written message.
    append_only: bool
    # None when the lineage stores no snapshot to check the model against.
    check: ModelCheck | None


@dataclass(frozen=True)
class LineageInspection:
    thread_id: str
    checkpoint_ns: str
    backend: Backend
    kind: str
    checkpoints: int
    message_writing_steps: int
    snapshot_steps: int
    replay_depth_head: int
    replay_depth_max: int
    intervals: IntervalReport
    cadence: CadenceReport
    storage: StorageBytes
    what_if: WhatIf | None


@dataclass(frozen=True)
class NamespaceGroup:
    """Subgraph namespaces summarised apart from the shown one; per-call task ids shown as '*'."""

    pattern: str
    lineages: int
    checkpoints: int
    message_writing_steps: int
    snapshot_steps: int
    # Combined over the group: K >= the largest lower bound and K <= the smallest upper bound.
    bounds: CadenceBounds
    storage: StorageBytes


@dataclass(frozen=True)
class ThreadInspection:
    thread_id: str
    shown: LineageInspection
    subgraphs: tuple[NamespaceGroup, ...]
    namespaces: tuple[str, ...]
    # Over every namespace of the thread.
    checkpoints: int
    storage: StorageBytes


class NamespaceNotFound(LookupError):
    def __init__(self, thread_id: str, namespace: str, namespaces: Sequence[str]) -> None:
        self.thread_id, self.namespace, self.namespaces = thread_id, namespace, tuple(namespaces)
        known = ", ".join(repr(ns) for ns in namespaces)
        super().__init__(f"thread {thread_id!r} has no namespace {namespace!r} (it has {known})")


# -- storage --------------------------------------------------------------------------------------------


def stored_snapshot_bytes(graph: LineageGraph, record: CheckpointRecord) -> int:
    """Snapshot bytes this row stores itself: a Postgres copy at its parent's version stores none."""
    if record.messages is not MessagesShape.SNAPSHOT:
        return 0
    if graph.backend is Backend.POSTGRES and not graph.is_snapshot_step(record):
        return 0
    return record.snapshot_bytes


def storage_bytes(graph: LineageGraph) -> StorageBytes:
    snapshots = message_writes = checkpoints = other_writes = other_blobs = 0
    inline = graph.backend is Backend.SQLITE
    for record in graph.records:
        snapshot = stored_snapshot_bytes(graph, record)
        snapshots += snapshot
        message_writes += record.message_write_bytes
        other_writes += record.other_write_bytes
        other_blobs += record.other_blob_bytes
        checkpoints += record.checkpoint_bytes + record.metadata_bytes - (snapshot if inline else 0)
    return StorageBytes(snapshots, message_writes, checkpoints, other_writes, other_blobs)


# -- intervals and cadence ------------------------------------------------------------------------------


def interval_report(profile: CadenceProfile) -> IntervalReport:
    cadence = [event for event in profile.snapshots if not event.trigger.forced]
    forced = tuple(
        ForcedSnapshot(e.record.checkpoint_id, e.record.step, e.trigger, e.counter_interval, e.chain_interval)
        for e in profile.snapshots
        if e.trigger.forced
    )
    disagreements = tuple(
        MethodDisagreement(e.record.checkpoint_id, e.record.step, e.counter_interval, e.chain_interval)
        for e in profile.snapshots
        if e.counter_interval != e.chain_interval
    )
    return IntervalReport(
        counters=histogram(e.counter_interval for e in cadence),
        chain=histogram(e.chain_interval for e in cadence),
        forced=forced,
        open_tail=profile.open_tail,
        disagreements=disagreements,
    )


def cadence_report(bounds: CadenceBounds, expected: int | None, delta: bool) -> CadenceReport:
    lower, upper, inferred = bounds.lower, bounds.upper, bounds.inferred
    if bounds.contradictory:
        status = CadenceStatus.MIXED_WRITERS
    elif not delta and lower is None and upper is None:
        status = CadenceStatus.NOT_DELTA
    elif expected is None:
        status = CadenceStatus.INFERRED if inferred is not None else CadenceStatus.OPEN
    elif inferred is not None:
        status = CadenceStatus.MATCHES if inferred == expected else CadenceStatus.DIFFERS
    elif (lower is None or lower <= expected) and (upper is None or expected <= upper):
        status = CadenceStatus.CONSISTENT
    else:
        status = CadenceStatus.DIFFERS
    return CadenceReport(lower, upper, inferred, expected, status)


# -- what-if --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    """One checkpoint of the lineage, as the what-if replays it."""

    wrote: bool
    items: int
    item_bytes: int
    write_bytes: int
    # The snapshot bytes this checkpoint really stores (0: none), for the model check.
    stored_snapshot: int
    snapshot_step: bool


def _steps(graph: LineageGraph) -> list[_Step]:
    steps = []
    for record in graph.records:
        parent = record.parent_record
        snapshot_step = graph.is_snapshot_step(record)
        stored = stored_snapshot_bytes(graph, record) if snapshot_step else 0
        if graph.wrote(record) and parent is not None:
            written = (parent.message_write_items, parent.message_item_bytes, parent.message_write_bytes)
            steps.append(_Step(True, *written, stored, snapshot_step))
        else:
            steps.append(_Step(False, 0, 0, 0, stored, snapshot_step))
    return steps


def model_check(steps: Sequence[_Step], backend: Backend) -> ModelCheck | None:
    """The model's size for each snapshot this lineage stored, against the bytes stored there."""
    items = item_bytes = snapshots = modelled = measured = 0
    for step in steps:
        items += step.items
        item_bytes += step.item_bytes
        if step.snapshot_step:
            snapshots += 1
            modelled += snapshot_bytes(items, item_bytes, backend)
            measured += step.stored_snapshot
    return ModelCheck(snapshots, modelled, measured) if snapshots else None


def list_bytes(items: int, item_bytes: int) -> int:
    """A stored msgpack list of `items` messages whose encodings take `item_bytes`."""
    return array_header_size(items) + item_bytes


def snapshot_bytes(items: int, item_bytes: int, backend: Backend) -> int:
    """A `_DeltaSnapshot` of that list as the store measures it: the ext payload inline in a SQLite
    checkpoint, the whole ext value in a Postgres blob."""
    payload = list_bytes(items, item_bytes)
    return payload if backend is Backend.SQLITE else ext_header_size(payload) + payload


def delta_what_if(steps: Sequence[_Step], cadence: int, backend: Backend) -> WhatIfRow:
    """A snapshot at every `cadence`-th message-writing step, holding every message written so far."""
    items = item_bytes = 0
    since = replay_bytes = 0
    stored = retained = worst_depth = worst_bytes = 0
    for step in steps:
        if not step.wrote:
            continue
        items += step.items
        item_bytes += step.item_bytes
        since += 1
        replay_bytes += step.write_bytes
        if since >= cadence:
            stored += 1
            retained += snapshot_bytes(items, item_bytes, backend)
            since = replay_bytes = 0
        else:
            worst_depth = max(worst_depth, since)
            worst_bytes = max(worst_bytes, replay_bytes)
    return WhatIfRow(cadence, stored, retained, worst_depth, worst_bytes)


def full_what_if(steps: Sequence[_Step], backend: Backend) -> WhatIfRow:
    """Full mode: Postgres stores a list blob per new version (each message-writing step); SQLite stores
    the list inline in every checkpoint once there is one, non-writing input checkpoints included."""
    items = item_bytes = 0
    written = False
    stored = retained = 0
    for step in steps:
        if step.wrote:
            items += step.items
            item_bytes += step.item_bytes
            written = True
        if step.wrote or (written and backend is Backend.SQLITE):
            stored += 1
            retained += list_bytes(items, item_bytes)
    return WhatIfRow(None, stored, retained, 0, 0)


def what_if_cadences(requested: Iterable[int] | None, expected: int | None, inferred: int | None) -> tuple[int, ...]:
    """The requested cadences (default 1, 10, 100, 1000) plus the expected K, or else the inferred one."""
    chosen = set(DEFAULT_WHAT_IF if requested is None else requested)
    own = expected if expected is not None else inferred
    if own is not None:
        chosen.add(own)
    return tuple(sorted(chosen))


def what_if(graph: LineageGraph, cadences: Iterable[int]) -> WhatIf:
    steps = _steps(graph)
    rows = [delta_what_if(steps, cadence, graph.backend) for cadence in cadences]
    rows.append(full_what_if(steps, graph.backend))
    rewrote = any(record.removal_written or record.overwrite_written for record in graph.records)
    written = sum(1 for step in steps if step.wrote)
    return WhatIf(tuple(rows), written, not rewrote, model_check(steps, graph.backend))


# -- one lineage, one thread ----------------------------------------------------------------------------


def thread_kind(graph: LineageGraph, profile: CadenceProfile) -> str:
    """delta, full or migrated, decided the way verify-shape decides it."""
    return LineageResult(graph.lineage, graph, profile).kind


def inspect_lineage(graph: LineageGraph, settings: InspectSettings) -> LineageInspection:
    profile = cadence_profile(graph, settings.superstep_bound)
    conversation = graph.lineage.checkpoint_ns == CONVERSATION_NS
    expected = settings.expected_cadence if conversation else None
    delta = any(graph.is_delta(record) for record in graph.records)
    cadence = cadence_report(profile.bounds, expected, delta)
    head = graph.head()
    wanted = settings.what_if
    what = None
    if wanted is None or wanted:
        what = what_if(graph, what_if_cadences(wanted, expected, cadence.inferred))
    return LineageInspection(
        thread_id=graph.lineage.thread_id,
        checkpoint_ns=graph.lineage.checkpoint_ns,
        backend=graph.backend,
        kind=thread_kind(graph, profile),
        checkpoints=len(graph.records),
        message_writing_steps=profile.message_writing_steps,
        snapshot_steps=len(profile.snapshots),
        replay_depth_head=profile.replay_depth.get(head.checkpoint_id, 0),
        replay_depth_max=max(profile.replay_depth.values(), default=0),
        intervals=interval_report(profile),
        cadence=cadence,
        storage=storage_bytes(graph),
        what_if=what,
    )


def namespace_pattern(checkpoint_ns: str) -> str:
    return _TASK_ID.sub("*", checkpoint_ns)


def _group(pattern: str, members: list[LineageInspection]) -> NamespaceGroup:
    lowers = [m.cadence.lower for m in members if m.cadence.lower is not None]
    uppers = [m.cadence.upper for m in members if m.cadence.upper is not None]
    storage = StorageBytes()
    for member in members:
        storage += member.storage
    return NamespaceGroup(
        pattern=pattern,
        lineages=len(members),
        checkpoints=sum(m.checkpoints for m in members),
        message_writing_steps=sum(m.message_writing_steps for m in members),
        snapshot_steps=sum(m.snapshot_steps for m in members),
        bounds=CadenceBounds(max(lowers, default=None), None, min(uppers, default=None), None),
        storage=storage,
    )


def inspect_thread(
    lineages: Sequence[Lineage], backend: Backend, settings: InspectSettings, namespace: str = CONVERSATION_NS
) -> ThreadInspection:
    """The `namespace` lineage in full; every other subgraph namespace summarised apart, by pattern.

    Raises NamespaceNotFound when the thread has no such namespace.
    """
    if not lineages:
        raise ValueError("a thread has at least one lineage")
    thread_id = lineages[0].thread_id
    namespaces = tuple(lineage.checkpoint_ns for lineage in lineages)
    shown: LineageInspection | None = None
    others: dict[str, list[LineageInspection]] = {}
    quiet = InspectSettings(settings.expected_cadence, (), settings.superstep_bound)
    storage = StorageBytes()
    for lineage in lineages:
        graph = LineageGraph(lineage, backend)
        if lineage.checkpoint_ns == namespace:
            shown = inspect_lineage(graph, settings)
            storage += shown.storage
            continue
        inspection = inspect_lineage(graph, quiet)
        storage += inspection.storage
        if lineage.checkpoint_ns != CONVERSATION_NS:
            others.setdefault(namespace_pattern(lineage.checkpoint_ns), []).append(inspection)
    if shown is None:
        raise NamespaceNotFound(thread_id, namespace, namespaces)
    groups = tuple(_group(pattern, members) for pattern, members in sorted(others.items()))
    checkpoints = sum(len(lineage.records) for lineage in lineages)
    return ThreadInspection(thread_id, shown, groups, namespaces, checkpoints, storage)


# -- ranking and the database summary -------------------------------------------------------------------


def rank_key(thread: ThreadInspection, by: RankBy) -> int:
    if by is RankBy.SIZE:
        return thread.storage.total
    if by is RankBy.CHECKPOINTS:
        return thread.checkpoints
    return thread.shown.replay_depth_max


class TopThreads:
    """The `limit` largest threads by `by` seen so far (ties: the smaller thread id first)."""

    def __init__(self, limit: int, by: RankBy) -> None:
        self.limit, self.by = limit, by
        self._heap: list[tuple[int, _Reversed, ThreadInspection]] = []

    def add(self, thread: ThreadInspection) -> None:
        if self.limit <= 0:
            return
        entry = (rank_key(thread, self.by), _Reversed(thread.thread_id), thread)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, entry)
        elif entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

    def result(self) -> list[ThreadInspection]:
        return [thread for _, _, thread in sorted(self._heap, key=lambda e: e[:2], reverse=True)]


@dataclass(frozen=True, order=False)
class _Reversed:
    """Orders thread ids backwards, so that among equal keys the heap drops the larger id first."""

    value: str

    def __lt__(self, other: _Reversed) -> bool:
        return self.value > other.value

    def __gt__(self, other: _Reversed) -> bool:
        return self.value < other.value


@dataclass
class DatabaseSummary:
    """The whole database at a glance: built one thread at a time, memory bounded by `heaviest`."""

    heaviest_limit: int = 10
    threads: int = 0
    lineages: int = 0
    checkpoints: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    inferred_cadences: Counter[int] = field(default_factory=Counter)
    # Conversations whose K is not pinned down, by status (open, mixed_writers, not_delta).
    unsettled: Counter[str] = field(default_factory=Counter)
    storage: StorageBytes = field(default_factory=StorageBytes)
    _top: TopThreads = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._top = TopThreads(self.heaviest_limit, RankBy.SIZE)

    def add(self, thread: ThreadInspection) -> None:
        self.threads += 1
        self.lineages += len(thread.namespaces)
        self.checkpoints += thread.checkpoints
        self.kinds[thread.shown.kind] += 1
        cadence = thread.shown.cadence
        if cadence.inferred is not None:
            self.inferred_cadences[cadence.inferred] += 1
        else:
            self.unsettled[cadence.status.value] += 1
        self.storage += thread.storage
        self._top.add(thread)

    @property
    def cadence_distribution(self) -> Histogram:
        return distinct_values(self.inferred_cadences)

    @property
    def heaviest(self) -> list[ThreadInspection]:
        return self._top.result()
