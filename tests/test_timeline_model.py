"""The cadence timeline's model on histories too long for real graphs to write in a test: hours of traffic,
several changes, an old worker left running. Each thread is a sequence of writes by processes at a given
K, with the counters LangGraph keeps (the updates counter carries over from one process to the next);
the epochs are cut from that evidence exactly as from a database's."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from deerflow_ckpt.analysis.cadence_verdicts import judge_in_time
from deerflow_ckpt.analysis.epochs import Epoch, Fronts, _cut_backwards, _epoch
from deerflow_ckpt.analysis.shape import Finding
from deerflow_ckpt.analysis.timeline import (
    ChangeKind,
    Timeline,
    TimelineSettings,
    Verdict,
    build_timeline,
    judge_thread,
)
from deerflow_ckpt.report.timeline_text import SHOWN_UNPLACED, unplaced_lines
from deerflow_ckpt.rules import RuleCode, Severity
from deerflow_ckpt.store.clock import boundary_id, format_time, write_time_ns
from deerflow_ckpt.store.records import CheckpointRecord, Shape

START = 1_764_000_000 * 10**9
MINUTE = 60.0
Write = tuple[float, int | None, int | None]  # (seconds after START, low, high)


class Thread:
    """One thread: turns by processes at some K, one message write per checkpoint."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.writes: list[Write] = []
        self.updates = 0

    def run(self, cadence: int, start: float, stop: float, every: float) -> Thread:
        t = start
        while t < stop:
            self.updates += 1
            if self.updates >= cadence:
                self.writes.append((t, None, self.updates))
                self.updates = 0
            else:
                self.writes.append((t, self.updates + 1, None))
            t += every
        return self

    def epochs(self) -> list[Epoch]:
        writes = sorted(self.writes)
        records = []
        for position, (t, _, _) in enumerate(writes):
            checkpoint_id = boundary_id(START + int(t * 1e9))[:24] + f"{position:012x}"
            records.append(
                CheckpointRecord(
                    self.thread_id, "", checkpoint_id, None, position, "loop", "delta", None, None, Shape.ABSENT, None
                )
            )
        evidence = [(low, high) for _, low, high in writes]
        cuts = _cut_backwards(evidence)
        return [_epoch(self.thread_id, i, records, evidence, *cut) for i, cut in enumerate(cuts)]


def timeline_of(threads: Iterable[Thread], expected: int | None) -> tuple[dict[str, list[Epoch]], Timeline]:
    by_thread = {thread.thread_id: thread.epochs() for thread in threads}
    epochs = [epoch for found in by_thread.values() for epoch in found]
    return by_thread, build_timeline(epochs, TimelineSettings(), expected)


def test_a_thread_moved_after_few_old_writes_is_history_and_the_old_worker_is_named() -> None:
    short = Thread("short").run(1000, 0, 5, 1).run(10, 1000, 1100, 1)  # fewer old writes than the new K
    moved = Thread("moved").run(1000, 0, 60, 1).run(10, 1000, 1100, 1)
    old_worker = Thread("old-worker").run(1000, 1000, 4000, 20)
    by_thread, timeline = timeline_of([short, moved, old_worker], 10)
    assert judge_thread(timeline, by_thread["moved"]).verdict is Verdict.HISTORY
    assert judge_thread(timeline, by_thread["short"]).verdict is Verdict.FITS
    late = judge_thread(timeline, by_thread["old-worker"])
    assert late.verdict is Verdict.CONCURRENT and late.leftover
    assert late.since_ns == START + 1000 * 10**9  # the switch, not the first write of any K=10 thread
    findings = judge_in_time(timeline, by_thread, {})
    assert [(f.rule, f.thread_id) for f in findings] == [("CK207", "old-worker")]


def test_a_cadence_that_appears_just_before_the_data_ends_is_no_change_yet() -> None:
    steady = [Thread(f"t{i}").run(10, i, 36000, MINUTE) for i in range(5)]
    newcomer = Thread("newcomer").run(1000, 35700, 36000, 10)
    _, timeline = timeline_of([*steady, newcomer], None)
    (change,) = timeline.changes
    assert change.kind is ChangeKind.CONCURRENT
    assert timeline.current is None


def test_a_rolling_change_needs_the_old_cadence_silent_for_as_long_as_both_wrote() -> None:
    threads = [Thread(f"t{i}").run(1000, i, 600, 30).run(10, 600 + i, 3600, 30) for i in range(4)]
    late = Thread("late").run(1000, 0, 900, 30).run(10, 900, 3600, 30)  # an old pod served it 5 more minutes
    by_thread, timeline = timeline_of([*threads, late], None)
    (change,) = timeline.changes
    assert change.kind is ChangeKind.ROLLING and change.threads == ("late",)
    assert timeline.current is change.newer
    findings = judge_in_time(timeline, by_thread, {})
    assert [f.rule for f in findings] == ["CK206"] and "late" in findings[0].message


def test_each_change_of_a_chain_is_reported_between_the_right_cadences() -> None:
    threads = [
        Thread(f"t{i}").run(1000, i, 1000, 5).run(100, 2000 + i, 5000, 5).run(10, 6000 + i, 9000, 5) for i in range(3)
    ]
    by_thread, timeline = timeline_of(threads, None)
    findings = judge_in_time(timeline, by_thread, {})
    assert [f.rule for f in findings] == ["CK205", "CK205"]
    first, second = (f.message for f in findings)
    assert "to K=100 at" in first and "from K=100 to K=10 at" in second


def test_an_old_worker_with_a_smaller_k_is_an_error_too() -> None:
    threads = [Thread(f"t{i}").run(10, i, 1000, 5).run(100, 2000 + i, 5000, 5) for i in range(3)]
    old_worker = Thread("old-worker").run(10, 2000, 5000, 7)  # only ever closes intervals of 10
    by_thread, timeline = timeline_of([*threads, old_worker], 100)
    findings = judge_in_time(timeline, by_thread, {})
    assert [(f.rule, f.severity.value, f.thread_id) for f in findings] == [("CK207", "error", "old-worker")]


def test_cadences_side_by_side_from_the_start_stay_flagged() -> None:
    """Two cadences written together from the start: no change is reported, and the thread at the other K
    stays flagged against the expected one, whichever of the two showed its K first."""
    threads = [Thread(f"k{k}").run(k, 0, 3600, 30) for k in (3, 10)]
    by_thread, timeline = timeline_of(threads, 3)
    assert judge_thread(timeline, by_thread["k10"]).verdict is Verdict.CONCURRENT
    assert not [f for f in judge_in_time(timeline, by_thread, {}) if f.rule in ("CK205", "CK206")]
    by_thread, timeline = timeline_of(threads, 10)
    assert judge_thread(timeline, by_thread["k3"]).verdict is Verdict.CONCURRENT
    assert not [f for f in judge_in_time(timeline, by_thread, {}) if f.rule in ("CK205", "CK206")]


def test_a_later_third_cadence_does_not_undo_a_clean_change() -> None:
    """A short thread from before the switch resumed after it, and a K=3 test thread an hour later: the
    switch is still the change, and the moved threads stay history."""
    first = Thread("first").run(1000, 0, 5, 1).run(10, 1500, 1600, 5)
    moved = [Thread(f"moved{i}").run(1000, 10 + i, 600, 5).run(10, 1000 + i, 2000, 5) for i in range(3)]
    late = Thread("k3").run(3, 6000, 6300, 5)
    by_thread, timeline = timeline_of([first, *moved, late], 10)
    since = timeline.current_since_ns()
    assert timeline.settled and since is not None and START + 1000 * 10**9 <= since <= START + 1100 * 10**9
    for thread in moved:
        assert judge_thread(timeline, by_thread[thread.thread_id]).verdict is Verdict.HISTORY
    assert judge_thread(timeline, by_thread["k3"]).verdict is Verdict.CONCURRENT


def test_a_conversation_with_a_few_writes_after_the_switch_makes_no_cadence_of_its_own() -> None:
    """Its one snapshot closes the old counter plus one write: it pins no K, so the change stays one."""
    moved = [Thread(f"moved{i}").run(1000, i, 600, 5).run(10, 1000 + i, 2000, 5) for i in range(3)]
    few = [Thread(f"few{i}").run(1000, 100 * i, 100 * i + 30 * (i + 1), 1).run(10, 1500, 1503, 1) for i in range(3)]
    by_thread, timeline = timeline_of([*moved, *few], 10)
    assert len(timeline.classes) == 2
    findings = judge_in_time(timeline, by_thread, {})
    assert [f.rule for f in findings] == ["CK205"]


def test_a_history_finding_goes_when_only_another_cadence_is_late() -> None:
    """A moved thread's old counters are history; a K=3 writer later shows only intervals: the CK201 about
    the old counters is dropped, not kept as an error."""
    from deerflow_ckpt.analysis.shape import Finding
    from deerflow_ckpt.rules import Severity

    moved = Thread("moved").run(1000, 0, 600, 5).run(10, 1000, 2000, 5).run(3, 4000, 4300, 5)
    others = [Thread(f"t{i}").run(1000, i, 600, 5).run(10, 1000 + i, 5000, 5) for i in range(3)]
    by_thread, timeline = timeline_of([moved, *others], 10)
    old = by_thread["moved"][0]
    held = Finding("CK201", Severity.ERROR, "moved", "", old.first_id, 0, "updates counter reaches 100")
    findings = judge_in_time(timeline, by_thread, {"moved": [held]})
    assert "CK201" not in [f.rule for f in findings]


def test_a_cadence_with_no_write_times_does_not_hide_the_one_in_force() -> None:
    moved = [Thread(f"moved{i}").run(1000, i, 600, 5).run(10, 1000 + i, 2000, 5) for i in range(3)]
    by_thread, timeline = timeline_of(moved, None)
    imported = Thread("imported").run(5, 0, 100, 1).epochs()
    untimed = [replace(epoch, first_id="imported-a", last_id="imported-b", fronts=Fronts()) for epoch in imported]
    epochs = [e for found in by_thread.values() for e in found] + untimed
    timeline = build_timeline(epochs, TimelineSettings(), None)
    assert timeline.current is not None and timeline.current.label == "K=10"


def test_a_clean_change_is_history_whatever_the_pause() -> None:
    """Every process restarted at once, after no pause up to a long one: the old cadence's threads are history
    and the change is said once, whether or not the whole database fits inside the clock skew."""
    for pause in (0.0, 0.5, 3, 6, 12, 600):
        every = 0.01
        old_end = 8 * 20 * every
        threads = [
            Thread(f"t{i}")
            .run(1000, i * every, old_end, 8 * every)
            .run(10, old_end + pause + i * every, 2 * old_end + pause, 8 * every)
            for i in range(8)
        ]
        for expected in (10, None):
            by_thread, timeline = timeline_of(threads, expected)
            assert timeline.current is not None and timeline.current.label == "K=10", (pause, expected)
            findings = judge_in_time(timeline, by_thread, {})
            assert [f.rule for f in findings] == ["CK205"], (pause, expected, findings)


def test_no_error_rests_on_an_order_inside_the_clock_skew() -> None:
    """An old writer that went on up to 4 s after the new one began: nothing is after anything inside the 5 s
    skew, so the thread is history; 8 s after, then silent, a rolling change's thread (a warning); on to the
    end, a concurrent writer's (an error)."""
    moved = [Thread(f"t{i}").run(1000, i, 600, 5).run(10, 600 + i, 1200, 5) for i in range(4)]
    for late_by, verdict in ((4, Verdict.HISTORY), (8, Verdict.ROLLING), (600, Verdict.CONCURRENT)):
        straggler = Thread("straggler").run(1000, 0, 600 + late_by + 0.5, 1)
        by_thread, timeline = timeline_of([*moved, straggler], 10)
        assert judge_thread(timeline, by_thread["straggler"]).verdict is verdict, late_by


def test_epochs_that_fit_two_classes_are_listed_by_their_own_cadence_and_time() -> None:
    """A short stretch at K=10 closes one interval, which bounds K only from below: it fits the K>=... class of a
    K=1000 worker as well as K=10's. It is named as its own epochs are (K=10), with its own time span."""
    steady = [Thread(f"k3-{n}").run(3, 0, 3000, 60) for n in range(3)]
    large = Thread("k1000").run(1000, 600, 1800, 60)
    later = Thread("k10").run(10, 2400, 3600, 20)
    short = [Thread(f"short-{n}").run(10, 300 + 60 * n, 300 + 60 * n + 11, 1) for n in range(2)]
    _, timeline = timeline_of([*steady, large, later, *short], 3)
    labels = [c.label for c in timeline.classes]
    assert "K=10" in labels and any(label.startswith("K>=") for label in labels)
    (unplaced,) = timeline.unplaced()
    assert unplaced.label == "K=10" and unplaced.threads == 2
    assert unplaced.first_time_ns == START + 300 * 10**9
    assert unplaced.last_time_ns == START + (360 + 10) * 10**9
    assert set(unplaced.fits) == {"K=10", next(label for label in labels if label.startswith("K>="))}
    assert list(unplaced.fits) == [label for label in labels if label in unplaced.fits]  # in time order


def test_a_thread_written_at_two_other_cadences_is_named_after_the_one_that_wrote_last() -> None:
    """K=1000, then K=10, with K=3 in force: the time a finding gives is K=10's, so the finding names K=10."""
    steady = [Thread(f"k3-{n}").run(3, 0, 3600, 60) for n in range(3)]
    mixed = Thread("mixed").run(1000, 0, 1800, 60).run(10, 1800, 3600, 20)
    by_thread, timeline = timeline_of([*steady, mixed], 3)
    judgement = judge_thread(timeline, by_thread["mixed"])
    assert judgement.verdict is Verdict.CONCURRENT and judgement.latest is not None
    (named,) = [c for c in timeline.classes if c.label == judgement.other]
    assert named.label == "K=10"
    assert named.first_time_ns is not None and named.last_time_ns is not None
    assert named.first_time_ns <= judgement.latest.time_ns <= named.last_time_ns
    # CK207 names the cadence K=3 took over from (the K=1000 worker's), with a write of that cadence's.
    (taken_over,) = timeline.prior
    findings = judge_in_time(timeline, by_thread, {})
    (leftover,) = [f for f in findings if f.rule is RuleCode.CK207]
    assert leftover.message.startswith(f"the {taken_over.label} cadence, which K=3 took over from, still wrote")
    assert leftover.checkpoint_id is not None and taken_over.first_time_ns is not None
    assert taken_over.last_time_ns is not None
    assert taken_over.first_time_ns <= write_time_ns(leftover.checkpoint_id) <= taken_over.last_time_ns


def test_many_cadences_no_class_holds_are_listed_a_few_then_counted() -> None:
    """Short threads of a K=1000 worker (n writes: K>=n+1) beside K=3, K=10 and K=1000 classes fit several classes.
    Those K=3, in force, cannot explain come first, a few of them; the rest are counted on one line."""
    steady = [Thread(f"k3-{n}").run(3, 0, 3600, 60) for n in range(3)]
    k10 = Thread("k10").run(10, 0, 3600, 20)
    worker = Thread("k1000").run(1000, 0, 3600, 20)
    short = [Thread(f"short-{n}").run(1000, 600 + 60 * n, 600 + 60 * n + n, 1) for n in range(1, 10)]
    _, timeline = timeline_of([*steady, k10, worker, *short], 3)
    groups = timeline.unplaced()
    assert sorted(group.label for group in groups) == sorted(f"K>={n + 1}" for n in range(1, 10))
    assert {group.label for group in groups if group.fits_in_force} == {"K>=2", "K>=3"}
    assert all(group.epochs == group.threads == 1 for group in groups)
    lines = unplaced_lines(timeline)
    shown = [group for group in groups if not group.fits_in_force][:SHOWN_UNPLACED]
    assert len(lines) == SHOWN_UNPLACED + 1
    assert [line.split()[2] for line in lines[:-1]] == [group.label for group in shown]
    assert lines[-1] == (
        "not placed: 4 epochs of 4 more cadences; the cadence in force cannot explain 2 of these cadences (each "
        "listed with --format json)"
    )
    # Without the short threads K=3 cannot explain, the rest is one line that says so.
    fitting = [epoch for epoch in timeline.ambiguous if epoch.lower is not None and epoch.lower <= 3]
    explained = build_timeline([*fitting, *(e for c in timeline.classes for e in c.epochs)], TimelineSettings(), 3)
    assert unplaced_lines(explained) == [
        "not placed: 2 epochs of 2 cadences, which the cadence in force explains too (each listed with --format json)"
    ]
    # With no cadence in force (no expected K, and no change every class took), nothing is said of one.
    unjudged = build_timeline([*timeline.ambiguous, *(e for c in timeline.classes for e in c.epochs)])
    assert unjudged.current is None
    assert unplaced_lines(unjudged)[-1] == "not placed: 4 epochs of 4 more cadences (each listed with --format json)"


def test_a_finding_is_named_after_the_cadence_that_wrote_its_own_epoch() -> None:
    """K=100 in force; a thread written at K=10 and then at K=1000. Its CK202 (intervals of 10) is named after K=10,
    with K=10's last write, though K=1000 wrote the thread later."""
    steady = [Thread(f"k100-{n}").run(100, 0, 3600, 10) for n in range(3)]
    mixed = Thread("mixed").run(10, 600, 1800, 20).run(1000, 1800, 3600, 10)
    by_thread, timeline = timeline_of([*steady, mixed], 100)
    (k10,) = [epoch for epoch in by_thread["mixed"] if epoch.lower == epoch.upper == 10]
    interval = Finding(RuleCode.CK202, Severity.WARNING, "mixed", "", k10.last_id, None, "intervals of 10")
    (kept,) = judge_in_time(timeline, by_thread, {"mixed": [interval]})
    named = re.search(r"; (K\S*) still wrote at (\S+?),", kept.message)
    assert named is not None and named[1] == "K=10", kept.message
    assert named[2] == format_time(write_time_ns(k10.last_id))


def test_a_finding_in_an_epoch_the_change_excuses_is_moved_to_the_write_after_it() -> None:
    """K=10 until the change to K=3, its last writes inside the clock skew of it, then K=1000 long after: a CK201 in
    the K=10 epoch is history; it is moved to K=1000's counter, never timed by K=10's writes around the change."""
    old = [Thread(f"k10-{n}").run(10, 0, 1800, 20) for n in range(3)]
    new = [Thread(f"k3-{n}").run(3, 1800, 7200, 60) for n in range(3)]
    _, before = timeline_of([*old, *new], 3)
    began = before.current_since_ns()
    assert began is not None
    at = (began - START) / 1e9
    mixed = Thread("mixed").run(10, at - 200, at + 3.5, 1).run(1000, 5000, 6000, 20)
    by_thread, timeline = timeline_of([*old, *new, mixed], 3)
    judgement = judge_thread(timeline, by_thread["mixed"])
    excused = [own for _, _, own in judgement.epochs if own.verdict is Verdict.HISTORY and own.counter is not None]
    assert excused and excused[0].counter is not None
    counter = Finding(RuleCode.CK201, Severity.ERROR, "mixed", "", excused[0].counter.checkpoint_id, None, "counter")
    (kept,) = [f for f in judge_in_time(timeline, by_thread, {"mixed": [counter]}) if f.rule is RuleCode.CK201]
    assert judgement.counter is not None and kept.checkpoint_id == judgement.counter.checkpoint_id
    assert kept.message.startswith("updates counter reaches ") and kept.message.endswith(", which K=3 cannot write")
    assert write_time_ns(kept.checkpoint_id) > began + TimelineSettings().clock_skew_ns
