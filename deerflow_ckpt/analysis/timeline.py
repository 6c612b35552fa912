"""The database's cadence timeline: which K was in force when, and how each change happened.

Epochs (epochs.py) of every conversation lineage are grouped into cadence classes: the fewest values
of K that every epoch admits (a stabbing of their [lower, upper] bounds); an epoch that admits
exactly one class is that class's evidence, one that admits several is left ambiguous. Between two
classes, the time range of each one's evidence *against* the other tells how the change happened
(docs/cadence-timeline.md):

- clean: every write the newer cadence contradicts precedes every write the older one contradicts,
  within the clock skew allowed between hosts;
- rolling: they overlap, but the older stops within the rolling window after the newer began;
- concurrent: the older keeps writing beyond that window (a worker left on the old config).

The cadence in force now is the class holding the expected K, or, with none expected, the class every
other one changed into. Checkpoints are then judged against the cadence in force when they were
written: history before a clean change is no violation of today's K.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum
from functools import cached_property

from deerflow_ckpt.analysis.epochs import Epoch, FirstEvidence, Fronts, Mark, earliest_time_ns, merge_fronts
from deerflow_ckpt.dataclass import dataclass, field, replace

DEFAULT_CLOCK_SKEW_NS = 5 * 1_000_000_000
DEFAULT_ROLLING_WINDOW_NS = 15 * 60 * 1_000_000_000


@dataclass(frozen=True)
class TimelineSettings:
    # How far apart two hosts' clocks may be: writes closer than this are not ordered.
    clock_skew_ns: int = DEFAULT_CLOCK_SKEW_NS
    # How long both cadences may write after a change before it counts as concurrent writers.
    rolling_window_ns: int = DEFAULT_ROLLING_WINDOW_NS


class ChangeKind(StrEnum):
    CLEAN = "clean"
    ROLLING = "rolling"
    CONCURRENT = "concurrent"


def bounds_label(lower: int | None, upper: int | None) -> str:
    """K=10, K>=41, K<=12 or K in [3, 12]; 'K unknown' when nothing bounds it."""
    if lower is not None and lower == upper:
        return f"K={lower}"
    if upper is None:
        return f"K>={lower}" if lower is not None and lower > 1 else "K unknown"
    if lower is None or lower <= 1:
        return f"K<={upper}"
    return f"K in [{lower}, {upper}]"


@dataclass(eq=False)
class CadenceClass:
    """Epochs that admit one common K, and only that class's: one cadence the writers ran at."""

    # The K the class was cut at (None: unbounded, the class of epochs that never closed an interval).
    point: int | None
    epochs: list[Epoch] = field(default_factory=list)
    lower: int | None = None
    upper: int | None = None
    # Where a scan kept its epochs' first-time fronts apart, by the epochs' evidence bounds (FirstEvidence).
    first_evidence: dict[tuple[int | None, int | None], FirstEvidence] = field(default_factory=dict)

    @cached_property
    def fronts(self) -> Fronts:
        """Its epochs' fronts together; merged only when another class needs comparing with it."""
        bounds = {epoch.evidence_bounds for epoch in self.epochs}
        kept_apart = [self.first_evidence[b].fronts() for b in bounds if b in self.first_evidence]
        return merge_fronts([*(epoch.fronts for epoch in self.epochs), *kept_apart])

    @property
    def label(self) -> str:
        return bounds_label(self.lower, self.upper)

    @property
    def threads(self) -> int:
        return len({epoch.thread_id for epoch in self.epochs})

    @property
    def checkpoints(self) -> int:
        return sum(epoch.checkpoints for epoch in self.epochs)

    @cached_property
    def first_time_ns(self) -> int | None:
        return earliest_time_ns(epoch.first_id for epoch in self.epochs)

    @cached_property
    def last_time_ns(self) -> int | None:
        return earliest_time_ns((epoch.last_id for epoch in self.epochs), latest=True)

    def admits(self, cadence: int) -> bool:
        return (self.lower is None or self.lower <= cadence) and (self.upper is None or cadence <= self.upper)

    def overlaps(self, epoch: Epoch) -> bool:
        """The epoch admits some K this class admits."""
        return (self.lower is None or epoch.upper is None or self.lower <= epoch.upper) and (
            self.upper is None or epoch.lower is None or epoch.lower <= self.upper
        )

    def evidence_against(self, other: CadenceClass) -> tuple[Mark | None, Mark | None]:
        """The first and last of this class's writes that `other`'s cadence cannot explain."""
        return (
            self.fronts.first_against(other.lower, other.upper),
            self.fronts.last_against(other.lower, other.upper),
        )


@dataclass(frozen=True)
class Change:
    """How `older` gave way to `newer`."""

    older: CadenceClass
    newer: CadenceClass
    kind: ChangeKind
    # The newer cadence's first write the older cannot explain, and the older's last such write.
    newer_first: Mark
    older_last: Mark
    # Threads both cadences wrote: across the change (clean), or inside the window (rolling).
    threads: tuple[str, ...] = ()

    @property
    def at_ns(self) -> int:
        return self.newer_first.time_ns

    @property
    def overlap_ns(self) -> int:
        return self.older_last.time_ns - self.newer_first.time_ns


def _relation(a: CadenceClass, b: CadenceClass, settings: TimelineSettings, end_ns: int | None = None) -> Change | None:
    """How the two classes follow each other in time; None when one has no timed evidence against the other.

    `end_ns`: the database's last timed write (default: the newer class's last write against the older).
    """
    a_first, a_last = a.evidence_against(b)
    b_first, b_last = b.evidence_against(a)
    if a_first is None or a_last is None or b_first is None or b_last is None:
        return None
    skew = settings.clock_skew_ns
    a_then_b = a_last.time_ns <= b_first.time_ns + skew
    b_then_a = b_last.time_ns <= a_first.time_ns + skew
    if a_then_b and b_then_a:
        # All inside the skew (an instant restart at machine speed): the one still writing later is the newer.
        # The raw times only name the change; no verdict rests on this order (judge_thread excuses it).
        a_then_b = (a_last.time_ns, a_first.time_ns) <= (b_last.time_ns, b_first.time_ns)
        b_then_a = not a_then_b
    if a_then_b:
        return Change(a, b, ChangeKind.CLEAN, b_first, a_last)
    if b_then_a:
        return Change(b, a, ChangeKind.CLEAN, a_first, b_last)
    if a_first.time_ns <= b_first.time_ns:
        older, newer, newer_first, older_last, newer_last = a, b, b_first, a_last, b_last
    else:
        older, newer, newer_first, older_last, newer_last = b, a, a_first, b_last, a_last
    # Rolling: the older stopped within the window, and has been silent since for at least as long as both
    # wrote (else a cadence that appeared minutes before the data ends would pass for a finished change).
    overlap = older_last.time_ns - newer_first.time_ns
    end = max(newer_last.time_ns, end_ns or 0)
    stopped = end - older_last.time_ns >= max(skew, overlap)
    within = stopped and overlap <= settings.rolling_window_ns
    return Change(older, newer, ChangeKind.ROLLING if within else ChangeKind.CONCURRENT, newer_first, older_last)


def _admits(bounds: tuple[int | None, int | None], cadence: int) -> bool:
    lower, upper = bounds
    return (lower is None or lower <= cadence) and (upper is None or cadence <= upper)


def _stab(epochs: Sequence[Epoch]) -> list[CadenceClass]:
    """The fewest K values every epoch admits one of (greedy by upper bound), one class each."""
    bounds = [e.evidence_bounds for e in epochs]
    bounded = sorted((b for b in bounds if b[1] is not None), key=lambda b: b[1] or 0)
    points: list[int | None] = []
    for epoch_bounds in bounded:
        if not any(p is not None and _admits(epoch_bounds, p) for p in points):
            points.append(epoch_bounds[1])
    if any(b[1] is None and not any(p is not None and _admits(b, p) for p in points) for b in bounds):
        points.append(None)
    return [CadenceClass(point) for point in points]


def _admits_point(epoch: Epoch, point: int | None) -> bool:
    bounds = epoch.evidence_bounds
    return bounds[1] is None if point is None else _admits(bounds, point)


@dataclass(frozen=True)
class UnplacedEpochs:
    """Ambiguous epochs of one cadence (by their own bounds, as the findings name it): too few snapshots to tell
    which of the classes they fit wrote them."""

    label: str
    first_time_ns: int | None
    last_time_ns: int | None
    threads: int
    epochs: int
    checkpoints: int
    # The classes they fit, in time order.
    fits: tuple[str, ...]
    # The cadence in force explains every one of them: no finding quotes them.
    fits_in_force: bool


@dataclass
class Timeline:
    """Cadence classes in time order, the changes between them, and the class in force now."""

    classes: list[CadenceClass]
    # Between consecutive classes in time order.
    changes: list[Change]
    current: CadenceClass | None
    # How every other class relates to the one in force, by position in `classes` (None: not ordered).
    relations: dict[int, Change | None]
    # The classes the one in force took over from: older than it, and in force one after another.
    prior: list[CadenceClass]
    # The changes from the first of those to the class in force, one after another.
    path: list[Change]
    # Epochs that admit more than one class (too little evidence to tell which cadence wrote them).
    ambiguous: list[Epoch]
    settings: TimelineSettings
    expected: int | None

    @property
    def settled(self) -> bool:
        """The cadence in force took over from earlier ones, which ran one after another: history before
        it was written at the cadence then in force (with no such change, nothing is excused by time)."""
        return bool(self.prior)

    def class_of(self, epoch: Epoch) -> CadenceClass | None:
        """The class the epoch is evidence of; None when it admits several (or none)."""
        found = [c for c in self.classes if _admits_point(epoch, c.point)]
        return found[0] if len(found) == 1 else None

    def unplaced(self) -> list[UnplacedEpochs]:
        """The ambiguous epochs grouped by their own cadence, the first written first: what a reader who saw that
        cadence in a finding looks for when no class of that name covers the time."""
        groups: dict[str, list[Epoch]] = {}
        for epoch in self.ambiguous:
            groups.setdefault(bounds_label(epoch.lower, epoch.upper), []).append(epoch)
        found = [
            UnplacedEpochs(
                label,
                earliest_time_ns(epoch.first_id for epoch in epochs),
                earliest_time_ns((epoch.last_id for epoch in epochs), latest=True),
                len({epoch.thread_id for epoch in epochs}),
                len(epochs),
                sum(epoch.checkpoints for epoch in epochs),
                tuple(c.label for c in self.classes if any(_admits_point(epoch, c.point) for epoch in epochs)),
                self.current is not None and all(self.fits_current(epoch) for epoch in epochs),
            )
            for label, epochs in groups.items()
        ]
        found.sort(key=lambda group: (group.first_time_ns is None, group.first_time_ns or 0, group.label))
        return found

    def fits_current(self, epoch: Epoch) -> bool:
        if self.current is None:
            return True
        if self.expected is not None:
            return _admits(epoch.evidence_bounds, self.expected)
        return _admits_point(epoch, self.current.point)

    def relation_to_current(self, cadence_class: CadenceClass | None) -> Change | None:
        if cadence_class is None or cadence_class is self.current:
            return None
        return self.relations.get(self.classes.index(cadence_class))

    def began_against(self, cadence_class: CadenceClass | None) -> int | None:
        """When the cadence in force first wrote what `cadence_class` (None: any earlier one) cannot explain."""
        current = self.current
        if current is None:
            return None
        if cadence_class is None:
            return self.current_since_ns()
        mark = current.fronts.first_against(cadence_class.lower, cadence_class.upper)
        return mark.time_ns if mark is not None else current.first_time_ns

    def current_since_ns(self) -> int | None:
        """When the cadence in force began (see `_began`), or its first write when nothing dates it."""
        current = self.current
        if current is None:
            return None
        began = _began(current, self.classes, self.settings)
        return began if began is not None else current.first_time_ns

    def written_after_current(self) -> list[tuple[CadenceClass, Mark]]:
        """Other cadences that wrote what the one in force cannot explain after it began, beyond the clock skew,
        with their last such write: an old worker, a stray or a later process (a rolling change's old cadence
        inside its window is not one)."""
        current = self.current
        if current is None:
            return []
        lower, upper = (self.expected, self.expected) if self.expected is not None else (current.lower, current.upper)
        found = []
        for index, other in enumerate(self.classes):
            relation = self.relations.get(index)
            if other is current or (relation is not None and relation.kind is ChangeKind.ROLLING):
                continue
            began = self.began_against(other) if other in self.prior else self.current_since_ns()
            last = other.fronts.last_against(lower, upper)
            if last is not None and began is not None and last.time_ns > began + self.settings.clock_skew_ns:
                found.append((other, last))
        return found


def build_timeline(
    epochs: Iterable[Epoch],
    settings: TimelineSettings | None = None,
    expected: int | None = None,
    first_evidence: dict[tuple[int | None, int | None], FirstEvidence] | None = None,
) -> Timeline:
    """Classes from the conversation epochs of a whole database, ordered, with the class in force now.

    `first_evidence`: the epochs' first-time fronts, where a scan kept them apart by bounds.
    """
    settings = settings or TimelineSettings()
    every = list(epochs)
    # The database's last timed write, short conversations that bound no K included.
    end_ns = earliest_time_ns((epoch.last_id for epoch in every), latest=True)
    epochs = [epoch for epoch in every if epoch.lower is not None or epoch.upper is not None]
    classes = _stab(epochs)
    for cadence_class in classes:
        cadence_class.first_evidence = first_evidence or {}
    ambiguous: list[Epoch] = []
    for epoch in epochs:
        admitted = [c for c in classes if _admits_point(epoch, c.point)]
        if len(admitted) == 1:
            admitted[0].epochs.append(epoch)
        else:
            ambiguous.append(epoch)
    for cadence_class in classes:
        lowers = [lower for e in cadence_class.epochs if (lower := e.evidence_bounds[0]) is not None]
        uppers = [upper for e in cadence_class.epochs if (upper := e.evidence_bounds[1]) is not None]
        cadence_class.lower = max(lowers, default=None)
        cadence_class.upper = min(uppers, default=None)
    classes = [c for c in classes if c.epochs]
    starts = {id(c): _start(c, classes) for c in classes}
    classes.sort(key=lambda c: (starts[id(c)] is None, starts[id(c)] or 0, c.point is None, c.point or 0))
    changes = [
        _with_threads(change, settings)
        for older, newer in itertools.pairwise(classes)
        if (change := _relation(older, newer, settings, end_ns)) is not None
    ]
    current = _current(classes, settings, expected, end_ns)
    relations: dict[int, Change | None] = {}
    prior: list[CadenceClass] = []
    path: list[Change] = []
    if current is not None:
        for index, other in enumerate(classes):
            if other is not current:
                relation = _relation(other, current, settings, end_ns)
                relations[index] = None if relation is None else _with_threads(relation, settings)
        prior = _prior(classes, current, settings, end_ns)
        # The changes on the way to the class in force, in the order the classes began.
        steps = [*prior, current]
        path = [
            _with_threads(change, settings)
            for older, newer in itertools.pairwise(steps)
            if (change := _relation(older, newer, settings, end_ns)) is not None
        ]
    return Timeline(classes, changes, current, relations, prior, path, ambiguous, settings, expected)


def _current(
    classes: list[CadenceClass], settings: TimelineSettings, expected: int | None, end_ns: int | None
) -> CadenceClass | None:
    if expected is not None:
        return next((c for c in classes if c.admits(expected)), None)
    for candidate in classes:
        changes = [_relation(other, candidate, settings, end_ns) for other in classes if other is not candidate]
        # A class with no timed evidence against the candidate (ids that tell no time) orders nothing.
        known = [c for c in changes if c is not None]
        ordered = all(c.newer is candidate and c.kind is not ChangeKind.CONCURRENT for c in known)
        if ordered and (known or len(classes) == 1):
            return candidate
    return None


def _prior(
    classes: list[CadenceClass], current: CadenceClass, settings: TimelineSettings, end_ns: int | None
) -> list[CadenceClass]:
    """The classes the one in force took over from: those whose change into it (clean, rolling or
    concurrent: an old worker left running counts) has it as the newer cadence, if they ran one after
    another; else none. Where several were already side by side before it, no single cadence was in force
    then, so it took over from none of them (their threads are still judged by time, see _judge_epoch)."""
    older = [
        other
        for other in classes
        if other is not current
        and (relation := _relation(other, current, settings, end_ns)) is not None
        and relation.newer is current
    ]
    for a, b in itertools.combinations(older, 2):
        relation = _relation(a, b, settings, end_ns)
        if relation is None or relation.kind is ChangeKind.CONCURRENT:
            return []
    return older


def _began(current: CadenceClass, classes: list[CadenceClass], settings: TimelineSettings) -> int | None:
    """The cadence in force's first write that a cadence already written by then cannot explain.

    Only cadences already written count: a process's epoch can open with writes an earlier process made
    (they fit both), which a cadence that appears only later would date back to before the change.
    """
    found = []
    for other in classes:
        if other is current:
            continue
        mark = current.fronts.first_against(other.lower, other.upper)
        first = other.first_time_ns
        if mark is not None and first is not None and first <= mark.time_ns + settings.clock_skew_ns:
            found.append(mark.time_ns)
    return min(found, default=None)


def _start(cadence_class: CadenceClass, classes: list[CadenceClass]) -> int | None:
    """When the class first wrote something another class cannot explain (its first write otherwise):
    the order of changes, unmoved by earlier processes' writes an epoch of it opens with."""
    marks = [cadence_class.fronts.first_against(o.lower, o.upper) for o in classes if o is not cadence_class]
    known = [mark.time_ns for mark in marks if mark is not None]
    return min(known) if known else cadence_class.first_time_ns


def _with_threads(change: Change, settings: TimelineSettings) -> Change:
    """The change, naming the threads both of its cadences wrote (inside the window, when rolling)."""
    newer_threads = {epoch.thread_id for epoch in change.newer.epochs}
    newer = change.newer
    threads = sorted(
        {
            epoch.thread_id
            for epoch in change.older.epochs
            if epoch.thread_id in newer_threads
            and (
                change.kind is not ChangeKind.ROLLING
                or (
                    (mark := epoch.fronts.last_against(newer.lower, newer.upper)) is not None
                    and mark.time_ns > change.newer_first.time_ns + settings.clock_skew_ns
                )
            )
        }
    )
    return Change(change.older, change.newer, change.kind, change.newer_first, change.older_last, tuple(threads))


class Verdict(StrEnum):
    """What the timeline makes of one thread's cadence evidence against the cadence in force."""

    FITS = "fits"  # every epoch admits the cadence in force
    HISTORY = "history"  # other cadences wrote it only before the one in force began (within the skew)
    ROLLING = "rolling"  # another cadence wrote inside a rolling change's window
    CONCURRENT = "concurrent"  # another cadence wrote after the one in force took over, or nothing is ordered
    UNKNOWN = "unknown"  # no class in force, or evidence without a readable write time


_RANK = {Verdict.FITS: 0, Verdict.HISTORY: 1, Verdict.ROLLING: 2, Verdict.UNKNOWN: 3, Verdict.CONCURRENT: 4}


@dataclass(frozen=True)
class ThreadJudgement:
    verdict: Verdict
    # The latest updates counter and the latest cadence interval the cadence in force cannot explain.
    counter: Mark | None = None
    interval: Mark | None = None
    # The cadence that wrote them, and since when the one in force was writing.
    other: str | None = None
    since_ns: int | None = None
    # The cadence in force took over from the one that wrote them, which kept writing (an old process).
    leftover: bool = False
    # Over a thread of several epochs, every one the cadence in force cannot explain, as (first id, last id, its own
    # judgement), whose cadence and start go with its marks (empty: this judgement is one epoch's).
    epochs: tuple[tuple[str, str, ThreadJudgement], ...] = ()

    def named_for(self, checkpoint_id: str | None) -> ThreadJudgement:
        """What a finding at `checkpoint_id` is timed by: the cadence that wrote the epoch holding it, at that
        cadence's latest write in the thread (this judgement when it is one epoch's, or none holds it)."""
        own = next((j for first, last, j in self.epochs if checkpoint_id and first <= checkpoint_id <= last), None)
        if own is None or own.latest is None:
            return self
        same = [judgement for _, _, judgement in self.epochs if judgement.other == own.other]
        return _latest_by(same, lambda judgement: judgement.latest) or own

    def source(self, counter: bool) -> ThreadJudgement:
        """The epoch judgement the counter (else the interval) came from."""
        return _latest_by(self._at_verdict(), lambda j: j.counter if counter else j.interval) or self

    @property
    def leftover_writer(self) -> ThreadJudgement | None:
        """The epoch judgement a CK207 names: the latest old cadence still writing (None: none did)."""
        if not self.leftover:
            return None
        return _latest_by([j for j in self._at_verdict() if j.leftover], lambda j: j.latest) or self

    def _at_verdict(self) -> list[ThreadJudgement]:
        return [judgement for _, _, judgement in self.epochs if judgement.verdict is self.verdict]

    @property
    def latest(self) -> Mark | None:
        return _later(self.counter, self.interval)


def judge_thread(timeline: Timeline, epochs: Sequence[Epoch]) -> ThreadJudgement:
    """The worst verdict over a thread's conversation epochs; with several epochs at it, the latest counter, the
    latest interval and the latest old writer, each with the epoch judgement it came from."""
    current = timeline.current
    if current is None:
        return ThreadJudgement(Verdict.UNKNOWN)
    expected = timeline.expected
    lower, upper = (expected, expected) if expected is not None else (current.lower, current.upper)
    unexplained = [epoch for epoch in epochs if not timeline.fits_current(epoch)]
    judged = [_judge_epoch(timeline, epoch, lower, upper) for epoch in unexplained]
    if not judged:
        return ThreadJudgement(Verdict.FITS)
    own = tuple(
        (epoch.first_id, epoch.last_id, judgement) for epoch, judgement in zip(unexplained, judged, strict=True)
    )
    verdict = max((judgement.verdict for judgement in judged), key=_RANK.__getitem__)
    worst = [judgement for judgement in judged if judgement.verdict is verdict]
    if len(worst) == 1:
        return replace(worst[0], epochs=own) if len(judged) > 1 else worst[0]
    counter_source = _latest_by(worst, lambda judgement: judgement.counter)
    interval_source = _latest_by(worst, lambda judgement: judgement.interval)
    counter = counter_source.counter if counter_source is not None else None
    interval = interval_source.interval if interval_source is not None else None
    if counter is None and interval is None:
        return replace(worst[0], epochs=own)  # epochs without a timed mark: nothing to name or date
    # Named after the epoch that wrote the latest of them (`latest`): a finding gives that time for that cadence.
    named = counter_source if _later(counter, interval) is counter else interval_source
    assert named is not None
    return ThreadJudgement(
        verdict,
        counter,
        interval,
        named.other,
        named.since_ns,
        any(judgement.leftover for judgement in worst),
        own,
    )


def _latest_by(
    judgements: Sequence[ThreadJudgement], mark_of: Callable[[ThreadJudgement], Mark | None]
) -> ThreadJudgement | None:
    """The judgement whose mark is the latest (the first of equals); None when none has one."""
    found, latest = None, None
    for judgement in judgements:
        mark = mark_of(judgement)
        if mark is not None and (latest is None or mark.time_ns > latest.time_ns):
            found, latest = judgement, mark
    return found


def _later(a: Mark | None, b: Mark | None) -> Mark | None:
    if a is None or b is None:
        return a or b
    return a if a.time_ns >= b.time_ns else b


def _judge_epoch(timeline: Timeline, epoch: Epoch, lower: int | None, upper: int | None) -> ThreadJudgement:
    counter = epoch.fronts.last_against(None, upper)
    interval = epoch.fronts.last_against(lower, None)
    latest = _later(counter, interval)
    if latest is None:
        return ThreadJudgement(Verdict.UNKNOWN)
    cadence_class = timeline.class_of(epoch)
    other = cadence_class.label if cadence_class is not None else bounds_label(epoch.lower, epoch.upper)
    in_prior = cadence_class is not None and cadence_class in timeline.prior
    began = timeline.began_against(cadence_class) if in_prior else timeline.current_since_ns()
    if began is None:
        return ThreadJudgement(Verdict.CONCURRENT, counter, interval, other, began)
    skew = timeline.settings.clock_skew_ns
    # Inside the skew no write is after another: a cadence that wrote this thread no later than that after the
    # one in force began never wrote it after the change, whatever kind of change it was.
    if latest.time_ns <= began + skew:
        return ThreadJudgement(Verdict.HISTORY, counter, interval, other, began)
    change = timeline.relation_to_current(cadence_class)
    rolling = change is not None and change.newer is timeline.current and change.kind is ChangeKind.ROLLING
    if rolling and latest.time_ns <= began + timeline.settings.rolling_window_ns:
        return ThreadJudgement(Verdict.ROLLING, counter, interval, other, began)
    # "An old process still writes" needs the old cadence clearly writing before the one in force began.
    first = cadence_class.first_time_ns if cadence_class is not None else None
    leftover = in_prior and first is not None and first + skew < began
    return ThreadJudgement(Verdict.CONCURRENT, counter, interval, other, began, leftover)


# Time slices of inspect summary's cadence chart in JSON (the text chart fits the terminal's width).
CHART_CELLS = 40


@dataclass(frozen=True)
class TimelineChart:
    """How many epochs of each class were writing, in equal slices of the database's time span."""

    start_ns: int
    end_ns: int
    # (class label, epochs writing in each slice), one row per class in time order.
    rows: tuple[tuple[str, tuple[int, ...]], ...]


def timeline_chart(timeline: Timeline, cells: int) -> TimelineChart | None:
    """None when no class has a readable write time."""
    spans = [(c, c.first_time_ns, c.last_time_ns) for c in timeline.classes]
    starts = [start for _, start, _ in spans if start is not None]
    ends = [end for _, _, end in spans if end is not None]
    if not starts or not ends or cells < 1:
        return None
    start, end = min(starts), max(ends)
    width = max(1, end - start)
    rows = []
    for cadence_class, _, _ in spans:
        counts = [0] * cells
        for epoch in cadence_class.epochs:
            first, last = epoch.first_time_ns, epoch.last_time_ns
            if first is None or last is None:
                continue
            low = min(cells - 1, (first - start) * cells // width)
            high = min(cells - 1, (last - start) * cells // width)
            for cell in range(low, high + 1):
                counts[cell] += 1
        rows.append((cadence_class.label, tuple(counts)))
    return TimelineChart(start, end, tuple(rows))
