"""What `ckpt inspect` knows about a thread: snapshot intervals, the cadence its writers used, the bytes
it stores by kind, and what another snapshot cadence K would have cost it (pure: records in, values out).

Counting follows docs/storage-model.md, "Intervals and cadence": physical snapshot steps only (never a
Postgres checkpoint that inherits an earlier snapshot's version), intervals in message-writing steps by the
counters and along the chain, cadence bounds [max updates + 1, min cadence-triggered interval]. Sizes are
the stored column lengths DeerFlow's benchmark counts. The what-if replays this lineage's own message
writes under another K: a snapshot at every K-th message-writing step holds every message written so far,
framed the way the saver frames it, so for an append-only thread it matches a database written at that K
byte for byte.
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
from deerflow_ckpt.analysis.epochs import Epoch, FirstEvidence, FirstSink, lineage_epochs
from deerflow_ckpt.analysis.histogram import Histogram, distinct_values, histogram
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.replay import ProofResult
from deerflow_ckpt.analysis.shape import CONVERSATION_NS, LineageResult
from deerflow_ckpt.analysis.timeline import Timeline, TimelineSettings, build_timeline
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
    timeline: TimelineSettings = field(default_factory=TimelineSettings)


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
    """What holds for the whole lineage; the interval histograms are per epoch (EpochInspection)."""

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
    # The epoch modelled (its index), from its first checkpoint on; None: the whole lineage.
    epoch: int | None = None


@dataclass(frozen=True)
class EpochInspection:
    """One cadence epoch (epochs.py): its K bounds, when it was written, and its own intervals."""

    epoch: Epoch
    message_writing_steps: int
    snapshot_steps: int
    # Cadence-triggered snapshots of this epoch only; `counters` is the histogram shown, `chain` the cross-check.
    counters: Histogram
    chain: Histogram
    cadence: CadenceReport
    # Intervals longer than the epoch's K: its first snapshot closing what an earlier, larger-K epoch
    # left open (the counters carry over a change), kept out of the histogram.
    carried_over: tuple[int, ...] = ()


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
    # The cadence of the current (last) epoch; each epoch's own in `epochs`.
    cadence: CadenceReport
    storage: StorageBytes
    what_if: WhatIf | None
    epochs: tuple[EpochInspection, ...] = ()

    @property
    def current_epoch(self) -> EpochInspection | None:
        return self.epochs[-1] if self.epochs else None


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
    # inspect thread --deep: the shown lineage's stored lists against the replay of its writes.
    proof: ProofResult | None = None


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
        forced=forced,
        open_tail=profile.open_tail,
        disagreements=disagreements,
    )


def cadence_report(bounds: CadenceBounds, expected: int | None, delta: bool) -> CadenceReport:
    """How one epoch's bounds read against the expected K (an epoch's bounds never contradict)."""
    lower, upper, inferred = bounds.lower, bounds.upper, bounds.inferred
    if not delta and lower is None and upper is None:
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


def model_check(steps: Sequence[_Step], backend: Backend, start: int = 0) -> ModelCheck | None:
    """The model's size for each snapshot stored from step `start` on, against the bytes stored there."""
    items = item_bytes = snapshots = modelled = measured = 0
    for index, step in enumerate(steps):
        items += step.items
        item_bytes += step.item_bytes
        if step.snapshot_step and index >= start:
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


def delta_what_if(steps: Sequence[_Step], cadence: int, backend: Backend, start: int = 0) -> WhatIfRow:
    """A snapshot at every `cadence`-th message-writing step from step `start` on (counted as if one were
    taken there), each holding every message written so far."""
    items = item_bytes = 0
    since = replay_bytes = 0
    stored = retained = worst_depth = worst_bytes = 0
    for index, step in enumerate(steps):
        if not step.wrote:
            continue
        items += step.items
        item_bytes += step.item_bytes
        if index < start:
            continue
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


def full_what_if(steps: Sequence[_Step], backend: Backend, start: int = 0) -> WhatIfRow:
    """Full mode from step `start` on: Postgres stores a list blob per new version (each message-writing
    step); SQLite stores the list inline in every checkpoint once there is one, input checkpoints included."""
    items = item_bytes = 0
    written = False
    stored = retained = 0
    for index, step in enumerate(steps):
        if step.wrote:
            items += step.items
            item_bytes += step.item_bytes
            written = True
        if index < start:
            continue
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


def what_if(graph: LineageGraph, cadences: Iterable[int], epoch: Epoch | None = None) -> WhatIf:
    """Another K for the lineage, or from `epoch`'s first checkpoint on (the messages before it still count)."""
    steps = _steps(graph)
    start = epoch.start if epoch is not None else 0
    rows = [delta_what_if(steps, cadence, graph.backend, start) for cadence in cadences]
    rows.append(full_what_if(steps, graph.backend, start))
    rewrote = any(record.removal_written or record.overwrite_written for record in graph.records[start:])
    written = sum(1 for step in steps[start:] if step.wrote)
    index = epoch.index if epoch is not None else None
    return WhatIf(tuple(rows), written, not rewrote, model_check(steps, graph.backend, start), index)


# -- one lineage, one thread ----------------------------------------------------------------------------


def thread_kind(graph: LineageGraph, profile: CadenceProfile) -> str:
    """delta, full or migrated, decided the way verify-shape decides it."""
    return LineageResult(graph.lineage, graph, profile).kind


def inspect_epochs(graph: LineageGraph, profile: CadenceProfile, expected: int | None) -> tuple[EpochInspection, ...]:
    """Each epoch with the snapshots and message-writing steps inside it, and its cadence against `expected`."""
    epochs = lineage_epochs(graph, profile)
    position = {id(record): index for index, record in enumerate(graph.records)}
    delta = any(graph.is_delta(record) for record in graph.records)
    inspected = []
    for epoch in epochs:
        inside = [e for e in profile.snapshots if epoch.start <= position[id(e.record)] < epoch.stop]
        upper = epoch.upper
        by_cadence = [e for e in inside if not e.trigger.forced]
        cadence = [e for e in by_cadence if upper is None or e.counter_interval <= upper]
        carried = tuple(e.counter_interval for e in by_cadence if upper is not None and e.counter_interval > upper)
        bounds = CadenceBounds(epoch.lower, None, epoch.upper, None)
        inspected.append(
            EpochInspection(
                epoch=epoch,
                message_writing_steps=sum(1 for r in graph.records[epoch.start : epoch.stop] if r.wrote),
                snapshot_steps=len(inside),
                counters=histogram(e.counter_interval for e in cadence),
                chain=histogram(e.chain_interval for e in cadence),
                cadence=cadence_report(bounds, expected, delta),
                carried_over=carried,
            )
        )
    return tuple(inspected)


def inspect_lineage(graph: LineageGraph, settings: InspectSettings) -> LineageInspection:
    profile = cadence_profile(graph, settings.superstep_bound)
    conversation = graph.lineage.checkpoint_ns == CONVERSATION_NS
    expected = settings.expected_cadence if conversation else None
    epochs = inspect_epochs(graph, profile, expected)
    current = epochs[-1]
    head = graph.head()
    wanted = settings.what_if
    what = None
    if wanted is None or wanted:
        modelled = current.epoch if len(epochs) > 1 else None
        what = what_if(graph, what_if_cadences(wanted, expected, current.cadence.inferred), modelled)
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
        cadence=current.cadence,
        storage=storage_bytes(graph),
        what_if=what,
        epochs=epochs,
    )


def namespace_pattern(checkpoint_ns: str) -> str:
    return _TASK_ID.sub("*", checkpoint_ns)


def _group(pattern: str, members: list[LineageInspection]) -> NamespaceGroup:
    # Over every epoch of every member: where they contradict each other, the group shows mixed.
    lowers = [e.epoch.lower for m in members for e in m.epochs if e.epoch.lower is not None]
    uppers = [e.epoch.upper for m in members for e in m.epochs if e.epoch.upper is not None]
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
    quiet = InspectSettings(settings.expected_cadence, (), settings.superstep_bound, settings.timeline)
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
    # Conversations whose current epoch's K is not pinned down, by status (open, not_delta).
    unsettled: Counter[str] = field(default_factory=Counter)
    # Conversations written at more than one cadence (several epochs).
    changed: int = 0
    storage: StorageBytes = field(default_factory=StorageBytes)
    # Conversation epochs for the timeline, their first-time fronts kept per bounds (as a scan keeps them).
    epochs: list[Epoch] = field(default_factory=list)
    first_evidence: FirstSink = field(default_factory=dict)
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
        shown = thread.shown
        if shown.checkpoint_ns == CONVERSATION_NS:
            self.changed += len(shown.epochs) > 1
            for inspected in shown.epochs:
                epoch = inspected.epoch
                self.first_evidence.setdefault(epoch.bounds, FirstEvidence()).add(epoch.fronts)
                self.epochs.append(epoch.without_first_fronts())

    def timeline(self, settings: InspectSettings) -> Timeline:
        return build_timeline(self.epochs, settings.timeline, settings.expected_cadence, self.first_evidence)

    @property
    def cadence_distribution(self) -> Histogram:
        return distinct_values(self.inferred_cadences)

    @property
    def heaviest(self) -> list[ThreadInspection]:
        return self._top.result()
