"""`inspect thread`'s numbers against the builder's manifest, on SQLite and on Postgres.

The manifest records every put (its parent, counters and whether it stored a _DeltaSnapshot) and every
messages write as the saver received them, before any fault was injected. The expected intervals,
bounds, inferred K, replay depths and open tail are worked out here from those records by the
definitions in docs/storage-model.md, "Intervals and cadence", never read from the database and never
hard-coded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cache

import pytest

from deerflow_ckpt.analysis.cadence import Trigger
from deerflow_ckpt.analysis.histogram import Histogram
from deerflow_ckpt.analysis.inspection import (
    CadenceStatus,
    InspectSettings,
    LineageInspection,
    ThreadInspection,
    inspect_thread,
)
from deerflow_ckpt.store.readers import open_reader
from deerflow_ckpt.store.selection import ThreadSelection
from deerflow_ckpt.store.source import target_from_argument
from fixtures.dbbuilder.graphs import SUBGRAPH_CADENCE
from fixtures.dbbuilder.manifest import CheckpointRecord, ThreadRecord
from tests.conftest import BuiltDatabase

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
# Threads whose rows the builder left as the graphs wrote them, or changed only by stripping a snapshot.
SCENARIOS = (
    "clean-delta",
    "clean-full",
    "migration",
    "overwrite",
    "subgraph",
    "update-state",
    "fork",
    "superstep-bound",
    "mixed-writers",
    "fault-ck204",
)
# Events whose checkpoint is a snapshot the writer was forced to store.
FORCED_EVENTS = {"overwrite_node": Trigger.OVERWRITE, "overwrite_input": Trigger.OVERWRITE}
BOUND_EVENT = "bound_snapshot"


@pytest.fixture(params=BACKENDS)
def built(request: pytest.FixtureRequest) -> BuiltDatabase:
    database: BuiltDatabase = request.getfixturevalue(f"built_{request.param}")
    return database


@cache
def _inspect(db: str, schema: str, thread_id: str, namespace: str, cadence: int | None) -> ThreadInspection:
    reader, backend = open_reader(target_from_argument(db, schema))
    lineages = list(reader.lineages(ThreadSelection(thread_id=thread_id)))
    return inspect_thread(lineages, backend, InspectSettings(expected_cadence=cadence), namespace)


def inspect_of(
    built: BuiltDatabase, thread_id: str, namespace: str = "", cadence: int | None = None
) -> ThreadInspection:
    return _inspect(built.db, built.schema or "", thread_id, namespace, cadence)


@dataclass(frozen=True)
class SnapshotTruth:
    checkpoint_id: str
    counter_interval: int
    chain_interval: int
    trigger: Trigger


@dataclass(frozen=True)
class LineageTruth:
    """What docs/storage-model.md says a lineage shows, worked out from the manifest."""

    snapshots: list[SnapshotTruth]
    message_writing_steps: int
    lower: int | None
    open_tail: int
    replay_head: int
    replay_max: int

    @property
    def cadence_intervals(self) -> list[int]:
        return [s.counter_interval for s in self.snapshots if s.trigger is Trigger.CADENCE]

    @property
    def chain_cadence_intervals(self) -> list[int]:
        return [s.chain_interval for s in self.snapshots if s.trigger is Trigger.CADENCE]

    @property
    def upper(self) -> int | None:
        return min(self.cadence_intervals, default=None)


def truth(thread: ThreadRecord, namespace: str = "") -> LineageTruth:
    puts = [c for c in thread.checkpoints if c.checkpoint_ns == namespace]
    by_id = {c.checkpoint_id: c for c in puts}
    writes = {w.checkpoint_id for w in thread.writes if w.checkpoint_ns == namespace}
    overwrites = {
        w.checkpoint_id for w in thread.writes if w.checkpoint_ns == namespace and w.value_kind == "overwrite"
    }
    stripped = {f.checkpoint_id for f in thread.faults if f.rule == "CK204"}
    snapshot_ids = set(thread.snapshot_ids(namespace)) - stripped
    bound = {e.checkpoint_id for e in thread.events_of(BOUND_EVENT) if e.checkpoint_ns == namespace}
    children = Counter(c.parent_checkpoint_id for c in puts if c.parent_checkpoint_id is not None)

    def parent(c: CheckpointRecord) -> CheckpointRecord | None:
        return by_id.get(c.parent_checkpoint_id) if c.parent_checkpoint_id else None

    def wrote(c: CheckpointRecord) -> int:
        return 1 if c.parent_checkpoint_id in writes else 0

    depth: dict[str, int] = {}
    for c in sorted(puts, key=lambda c: c.checkpoint_id):
        p = parent(c)
        seed = c.checkpoint_id in snapshot_ids or c.messages == "list"
        depth[c.checkpoint_id] = 0 if seed else wrote(c) + (depth[p.checkpoint_id] if p is not None else 0)

    def trigger(c: CheckpointRecord) -> Trigger:
        p = parent(c)
        if p is None:
            return Trigger.FRESH_UPDATE if c.source == "update" else Trigger.ROOT
        if p.checkpoint_id in overwrites:
            return Trigger.OVERWRITE
        if children[p.checkpoint_id] > 1:
            return Trigger.FORK
        if c.checkpoint_id in bound:
            return Trigger.SUPERSTEP_BOUND
        return Trigger.CADENCE

    snapshots = []
    for c in sorted(puts, key=lambda c: c.checkpoint_id):
        if c.checkpoint_id not in snapshot_ids:
            continue
        p = parent(c)
        counter = (p.counters[0] if p is not None and p.counters else 0) + wrote(c)
        chain = wrote(c) + (depth[p.checkpoint_id] if p is not None else 0)
        snapshots.append(SnapshotTruth(c.checkpoint_id, counter, chain, trigger(c)))
    counted = [c.counters[0] for c in puts if c.counters and c.checkpoint_id not in snapshot_ids]
    head = max(puts, key=lambda c: c.checkpoint_id)
    return LineageTruth(
        snapshots=snapshots,
        message_writing_steps=sum(wrote(c) for c in puts),
        lower=max(counted) + 1 if counted else None,
        open_tail=head.counters[0] if head.counters else 0,
        replay_head=depth[head.checkpoint_id],
        replay_max=max(depth.values()),
    )


def assert_histogram_holds(histogram: Histogram, values: list[int]) -> None:
    """Every value in exactly one bucket, contiguous half-open buckets, exact totals."""
    assert histogram.count == len(values)
    assert histogram.total == sum(values)
    assert histogram.minimum == (min(values) if values else None)
    assert histogram.maximum == (max(values) if values else None)
    for bucket in histogram.buckets:
        assert bucket.count == sum(1 for v in values if bucket.holds(v)), bucket
    for before, after in zip(histogram.buckets, histogram.buckets[1:], strict=False):
        assert before.upper == after.lower


def assert_epoch_histograms(shown: LineageInspection, expected: LineageTruth) -> None:
    """Each epoch's histograms hold exactly the cadence snapshots written inside it, except the ones that
    close an interval an earlier, larger-K epoch left open (shown apart as carried over)."""
    cadence = [s for s in expected.snapshots if s.trigger is Trigger.CADENCE]
    covered = 0
    for inspected in shown.epochs:
        epoch = inspected.epoch
        inside = [s for s in cadence if epoch.first_id <= s.checkpoint_id <= epoch.last_id]
        kept = [s for s in inside if epoch.upper is None or s.counter_interval <= epoch.upper]
        assert_histogram_holds(inspected.counters, [s.counter_interval for s in kept])
        assert_histogram_holds(inspected.chain, [s.chain_interval for s in kept])
        assert inspected.carried_over == tuple(s.counter_interval for s in inside if s not in kept)
        covered += len(inside)
    assert covered == len(cadence)


def lineage_bounds(shown: LineageInspection) -> tuple[int | None, int | None]:
    """K >= the largest lower bound of any epoch and K <= the smallest upper: the whole lineage's bounds."""
    lowers = [e.epoch.lower for e in shown.epochs if e.epoch.lower is not None]
    uppers = [e.epoch.upper for e in shown.epochs if e.epoch.upper is not None]
    return max(lowers, default=None), min(uppers, default=None)


def threads(built: BuiltDatabase) -> list[ThreadRecord]:
    return [t for scenario in SCENARIOS for t in built.manifest.by_scenario(scenario)]


def test_every_chosen_scenario_is_present(built: BuiltDatabase) -> None:
    assert {t.scenario for t in threads(built)} == set(SCENARIOS)


def test_conversation_numbers_follow_the_manifest(built: BuiltDatabase) -> None:
    for thread in threads(built):
        expected = truth(thread)
        shown = inspect_of(built, thread.thread_id).shown
        where = thread.thread_id
        assert shown.checkpoint_ns == ""
        assert shown.message_writing_steps == expected.message_writing_steps, where
        assert shown.snapshot_steps == len(expected.snapshots), where
        assert_epoch_histograms(shown, expected)
        forced = [(s.checkpoint_id, s.trigger, s.counter_interval) for s in expected.snapshots if s.trigger.forced]
        assert [(f.checkpoint_id, f.trigger, f.counter_interval) for f in shown.intervals.forced] == forced, where
        assert shown.intervals.open_tail == expected.open_tail, where
        assert (shown.replay_depth_head, shown.replay_depth_max) == (expected.replay_head, expected.replay_max), where
        assert lineage_bounds(shown) == (expected.lower, expected.upper), where
        disagree = [s.checkpoint_id for s in expected.snapshots if s.counter_interval != s.chain_interval]
        assert [d.checkpoint_id for d in shown.intervals.disagreements] == disagree, where


@pytest.mark.parametrize("cadence", [1, 2, 3, 10])
def test_single_writer_at_each_cadence_is_inferred_exactly(built: BuiltDatabase, cadence: int) -> None:
    """One writer at K: every closed cadence interval is K, the bounds meet at K, and K matches."""
    (thread,) = [t for t in built.manifest.by_scenario("clean-delta") if t.thread_id == f"clean-delta-k{cadence}"]
    assert [w.cadence for w in thread.writers] == [cadence]
    expected = truth(thread)
    shown = inspect_of(built, thread.thread_id, cadence=cadence).shown
    assert expected.cadence_intervals == [cadence] * (thread.turns * 2 // cadence)
    (only,) = shown.epochs
    assert [(b.lower, b.upper, b.count) for b in only.counters.buckets] == [
        (cadence, cadence + 1, len(expected.cadence_intervals))
    ]
    assert shown.cadence.inferred == cadence
    assert shown.cadence.status is CadenceStatus.MATCHES
    other = inspect_of(built, thread.thread_id, cadence=cadence + 1).shown
    assert other.cadence.status is CadenceStatus.DIFFERS


def test_every_clean_single_writer_thread_infers_its_writers_k(built: BuiltDatabase) -> None:
    checked = 0
    for thread in threads(built):
        cadences = {w.cadence for w in thread.writers if w.mode == "delta"}
        if len(cadences) != 1 or thread.faults or not truth(thread).cadence_intervals:
            continue
        assert inspect_of(built, thread.thread_id).shown.cadence.inferred == cadences.pop(), thread.thread_id
        checked += 1
    assert checked >= 10


def test_mixed_writers_give_one_epoch_per_writer(built: BuiltDatabase) -> None:
    """K=10, K=1000, K=10 on one thread: three epochs, cut where each writer's first checkpoint is, never
    one histogram mixing two K; the K=1000 epoch never closed an interval, so it keeps a lower bound only."""
    (thread,) = built.manifest.by_scenario("mixed-writers")
    expected = truth(thread)
    small_k = min(w.cadence for w in thread.writers if w.cadence is not None)
    large_k = max(w.cadence for w in thread.writers if w.cadence is not None)
    shown = inspect_of(built, thread.thread_id).shown
    assert [(e.epoch.lower, e.epoch.upper) for e in shown.epochs] == [
        (small_k, small_k),
        (expected.lower, None),
        (small_k, small_k),
    ]
    assert expected.lower is not None and small_k < expected.lower <= large_k
    changes = [e.checkpoint_id for e in thread.events_of("writer_change")]
    assert [e.epoch.first_id for e in shown.epochs[1:]] == changes[1:]
    assert_epoch_histograms(shown, expected)
    # The K=10 writer resuming after the K=1000 one closes a longer interval: carried over, not in a histogram.
    assert shown.epochs[2].carried_over and max(shown.epochs[2].carried_over) > small_k
    assert shown.cadence.inferred == small_k and shown.cadence is shown.epochs[-1].cadence
    assert shown.what_if is not None and shown.what_if.epoch == 2
    assert lineage_bounds(shown) == (expected.lower, small_k)


def test_stripped_snapshot_shows_as_a_method_disagreement(built: BuiltDatabase) -> None:
    (thread,) = built.manifest.by_scenario("fault-ck204")
    (cadence,) = {w.cadence for w in thread.writers}
    assert cadence is not None
    shown = inspect_of(built, thread.thread_id).shown
    # The counters still close every interval at K; along the chain the one after the gap spans 2K.
    assert set(truth(thread).cadence_intervals) == {cadence}
    assert shown.cadence.inferred == cadence
    assert [(d.counter_interval, d.chain_interval) for d in shown.intervals.disagreements] == [(cadence, 2 * cadence)]
    assert shown.snapshot_steps == len(thread.snapshot_ids()) - 1


def test_overwrite_snapshots_are_forced_and_kept_out_of_the_histogram(built: BuiltDatabase) -> None:
    for thread in built.manifest.by_scenario("overwrite"):
        (cadence,) = {w.cadence for w in thread.writers}
        forced_ids = {e.checkpoint_id for kind in FORCED_EVENTS for e in thread.events_of(kind)}
        shown = inspect_of(built, thread.thread_id).shown
        assert {f.checkpoint_id for f in shown.intervals.forced} == forced_ids
        assert all(f.trigger is Trigger.OVERWRITE and f.counter_interval < cadence for f in shown.intervals.forced)
        (only,) = shown.epochs
        assert {b.lower for b in only.counters.buckets if b.count} == {cadence}
        assert shown.cadence.inferred == cadence


def test_subgraph_namespaces_are_summarised_apart(built: BuiltDatabase) -> None:
    for thread in built.manifest.by_scenario("subgraph"):
        subgraph_namespaces = [ns for ns in thread.namespaces() if ns]
        assert subgraph_namespaces
        inspected = inspect_of(built, thread.thread_id)
        conversation = truth(thread, "")
        # Only the conversation's own snapshots are in its histogram.
        assert_epoch_histograms(inspected.shown, conversation)
        assert inspected.shown.cadence.inferred == thread.writers[0].cadence
        (group,) = inspected.subgraphs
        assert group.lineages == len(subgraph_namespaces)
        expected = [truth(thread, ns) for ns in subgraph_namespaces]
        assert group.snapshot_steps == sum(len(e.snapshots) for e in expected)
        assert group.message_writing_steps == sum(e.message_writing_steps for e in expected)
        assert group.bounds.inferred == SUBGRAPH_CADENCE
        assert sorted(inspected.namespaces) == sorted(thread.namespaces())
        # Picked with --ns, a subgraph namespace is shown in full with its own cadence.
        chosen = subgraph_namespaces[0]
        shown = inspect_of(built, thread.thread_id, chosen).shown
        assert shown.checkpoint_ns == chosen
        assert_epoch_histograms(shown, truth(thread, chosen))
        assert shown.cadence.inferred == SUBGRAPH_CADENCE


def test_superstep_bound_snapshots_leave_the_cadence_open(built: BuiltDatabase) -> None:
    (thread,) = built.manifest.by_scenario("superstep-bound")
    shown = inspect_of(built, thread.thread_id).shown
    assert [e.counters.count for e in shown.epochs] == [0]
    assert {f.trigger for f in shown.intervals.forced} == {Trigger.SUPERSTEP_BOUND}
    assert shown.cadence.status is CadenceStatus.OPEN
    assert shown.cadence.upper is None and shown.cadence.lower == truth(thread).lower
    expected_k = thread.writers[0].cadence
    consistent = inspect_of(built, thread.thread_id, cadence=expected_k).shown
    assert consistent.cadence.status is CadenceStatus.CONSISTENT


def test_full_and_migrated_threads(built: BuiltDatabase) -> None:
    (full,) = built.manifest.by_scenario("clean-full")
    shown = inspect_of(built, full.thread_id).shown
    assert shown.kind == "full"
    assert shown.cadence.status is CadenceStatus.NOT_DELTA
    assert shown.snapshot_steps == 0
    (migrated,) = built.manifest.by_scenario("migration")
    assert inspect_of(built, migrated.thread_id).shown.kind == "migrated"
