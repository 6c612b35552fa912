"""What `ckpt inspect` knows about a thread: snapshot intervals, the cadence its writers used, its cadence
epochs, the bytes it stores by kind and the what-if (pure: records in, values out).

Counting follows docs/storage-model.md, "Intervals and cadence": physical snapshot steps only (never a
Postgres checkpoint that inherits an earlier snapshot's version), intervals in message-writing steps by the
counters and along the chain, cadence bounds [max updates + 1, min cadence-triggered interval]. Sizes are
the stored column lengths DeerFlow's benchmark counts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from deerflow_ckpt.analysis.cadence import (
    DEFAULT_SUPERSTEP_BOUND,
    CadenceBounds,
    CadenceProfile,
    Trigger,
    cadence_profile,
)
from deerflow_ckpt.analysis.epochs import Epoch, lineage_epochs
from deerflow_ckpt.analysis.histogram import Histogram, histogram
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.mode import StatedMode
from deerflow_ckpt.analysis.replay import ProofResult
from deerflow_ckpt.analysis.shape import CONVERSATION_NS, LineageResult, ThreadKind
from deerflow_ckpt.analysis.stored_bytes import StorageBytes, storage_bytes
from deerflow_ckpt.analysis.timeline import TimelineSettings
from deerflow_ckpt.analysis.what_if import WhatIf, what_if, what_if_cadences
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.store.records import Backend, Lineage

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
    # The deployment's mode as stated (--mode, or the config that chose the database).
    mode: StatedMode = field(default_factory=StatedMode)


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
    kind: ThreadKind
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


def thread_kind(graph: LineageGraph, profile: CadenceProfile) -> ThreadKind:
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
