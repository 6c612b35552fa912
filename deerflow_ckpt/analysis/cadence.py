"""Snapshot steps, their intervals and triggers, and the cadence bounds they imply.

Two interval methods: the counters (`updates` of the parent plus whether this step wrote) and the chain
(message-writing steps counted along parent links since the previous stored seed). They agree on
healthy threads; where they differ, something was removed. The facts: docs/storage-model.md, "Intervals and
cadence".
"""

from __future__ import annotations

from enum import StrEnum

from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.store.records import CheckpointRecord

# LangGraph's DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT default.
DEFAULT_SUPERSTEP_BOUND = 5000


class Trigger(StrEnum):
    """Why a snapshot was stored where it was."""

    CADENCE = "cadence"
    OVERWRITE = "overwrite"
    FORK = "fork"
    FRESH_UPDATE = "fresh_update_state"
    SUPERSTEP_BOUND = "superstep_bound"
    ROOT = "parentless"
    UNEXPLAINED = "unexplained"

    @property
    def forced(self) -> bool:
        return self is not Trigger.CADENCE


@dataclass(frozen=True)
class SnapshotEvent:
    record: CheckpointRecord
    trigger: Trigger
    # Counter method: updates recorded by the parent plus this step's own write.
    counter_interval: int
    # Chain method: message-writing steps since the previous stored seed, this one included.
    chain_interval: int


@dataclass(frozen=True)
class CadenceBounds:
    """K >= lower (largest `updates` seen, plus one) and K <= upper (shortest cadence interval)."""

    lower: int | None
    lower_at: CheckpointRecord | None
    upper: int | None
    upper_at: CheckpointRecord | None

    @property
    def contradictory(self) -> bool:
        return self.lower is not None and self.upper is not None and self.lower > self.upper

    @property
    def inferred(self) -> int | None:
        """K when both bounds meet."""
        return self.lower if self.lower is not None and self.lower == self.upper else None


@dataclass(frozen=True)
class CadenceProfile:
    snapshots: list[SnapshotEvent]
    bounds: CadenceBounds
    message_writing_steps: int
    # Writes the read walk replays, per checkpoint id (0 where a seed is stored).
    replay_depth: dict[str, int]
    # Writes since the last snapshot at the head, as its counters record them.
    open_tail: int
    # The checkpoints (not snapshot steps) where the largest updates counter so far rose, in order.
    low_rises: list[CheckpointRecord] = field(default_factory=list)

    @property
    def cadence_intervals(self) -> list[int]:
        return [event.counter_interval for event in self.snapshots if not event.trigger.forced]


def replay_depths(graph: LineageGraph) -> dict[str, int]:
    """For every checkpoint, the message writes a read replays from the nearest stored seed."""
    depth: dict[str, int] = {}
    for record in graph.records:
        parent = record.parent_record
        # Parents usually sort first, so most depths follow from one already known.
        if record.seed or parent is None:
            depth[record.checkpoint_id] = 0
            continue
        below = depth.get(parent.checkpoint_id)
        if below is not None:
            depth[record.checkpoint_id] = below + 1 if record.wrote else below
            continue
        pending: list[CheckpointRecord] = []
        current: CheckpointRecord | None = record
        visiting: set[str] = set()
        while current is not None and current.checkpoint_id not in depth:
            if current.checkpoint_id in visiting:  # a cycle: nothing beyond it can be replayed
                break
            visiting.add(current.checkpoint_id)
            pending.append(current)
            if current.seed:
                break
            current = current.parent_record
        for item in reversed(pending):
            if item.seed:
                depth[item.checkpoint_id] = 0
                continue
            parent = item.parent_record
            below = depth.get(parent.checkpoint_id, 0) if parent is not None else 0
            depth[item.checkpoint_id] = below + (1 if item.wrote else 0)
    return depth


def classify_trigger(graph: LineageGraph, record: CheckpointRecord, superstep_bound: int) -> Trigger:
    parent = record.parent_record
    if parent is None:
        return Trigger.FRESH_UPDATE if record.source == "update" else Trigger.ROOT
    if parent.overwrite_written:
        return Trigger.OVERWRITE
    if len(graph.children.get(parent.checkpoint_id, ())) > 1:
        return Trigger.FORK
    if (parent.supersteps or 0) + 1 >= superstep_bound:
        return Trigger.SUPERSTEP_BOUND
    if (parent.updates or 0) + (1 if record.wrote else 0) >= 1:
        return Trigger.CADENCE
    return Trigger.UNEXPLAINED


def cadence_profile(graph: LineageGraph, superstep_bound: int = DEFAULT_SUPERSTEP_BOUND) -> CadenceProfile:
    depth = replay_depths(graph)
    snapshots: list[SnapshotEvent] = []
    lower: int | None = None
    lower_at: CheckpointRecord | None = None
    writing_steps = 0
    top_supersteps: int | None = None  # no non-snapshot checkpoint reached the writers' bound
    low_rises: list[CheckpointRecord] = []
    for record in graph.records:
        writing_steps += record.wrote
        supersteps = record.supersteps
        if supersteps is not None and (top_supersteps is None or supersteps > top_supersteps):
            top_supersteps = supersteps
        if record.snapshot_step:
            parent = record.parent_record
            wrote = 1 if record.wrote else 0
            counter_interval = (parent.updates or 0) + wrote if parent is not None else wrote
            chain_interval = wrote + (depth.get(parent.checkpoint_id, 0) if parent is not None else 0)
            trigger = classify_trigger(graph, record, superstep_bound)
            snapshots.append(SnapshotEvent(record, trigger, counter_interval, chain_interval))
        elif record.updates is not None and (lower is None or record.updates + 1 > lower):
            lower, lower_at = record.updates + 1, record
            low_rises.append(record)
    observed_bound = None if top_supersteps is None else top_supersteps + 1
    snapshots = _explain_by_observed_bound(graph, snapshots, lower, observed_bound)
    upper: int | None = None
    upper_at: CheckpointRecord | None = None
    for event in snapshots:
        if not event.trigger.forced and (upper is None or event.counter_interval < upper):
            upper, upper_at = event.counter_interval, event.record
    head = graph.head()
    return CadenceProfile(
        snapshots=snapshots,
        bounds=CadenceBounds(lower, lower_at, upper, upper_at),
        message_writing_steps=writing_steps,
        replay_depth=depth,
        open_tail=head.updates or 0,
        low_rises=low_rises,
    )


def _explain_by_observed_bound(
    graph: LineageGraph, snapshots: list[SnapshotEvent], lower: int | None, bound: int | None
) -> list[SnapshotEvent]:
    """Snapshots taken whenever supersteps hit one level, some of them too early for any cadence.

    A writer started with a small LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT snapshots at that bound
    whatever its updates counter says: several snapshots at the highest supersteps level, at least one
    closing fewer writes than the counters allow a cadence to. One snapshot alone proves nothing.
    `bound` is the least bound the writers can have had: one above the largest supersteps counter seen.
    """
    if bound is None or lower is None:
        return snapshots

    def at_bound(event: SnapshotEvent) -> bool:
        parent = graph.parent(event.record)
        return event.trigger is Trigger.CADENCE and parent is not None and (parent.supersteps or 0) + 1 == bound

    level = [event for event in snapshots if at_bound(event)]
    if len(level) < 2 or not any(event.counter_interval < lower for event in level):
        return snapshots
    return [
        SnapshotEvent(e.record, Trigger.SUPERSTEP_BOUND, e.counter_interval, e.chain_interval) if at_bound(e) else e
        for e in snapshots
    ]
