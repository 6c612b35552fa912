"""Cadence epochs: a lineage's history cut into the fewest runs that one snapshot cadence K explains.

Every checkpoint says something about the K of the process that wrote it (docs/cadence-timeline.md):
a checkpoint that stored no snapshot with an updates counter u needs K > u (a *low*, u + 1); a
cadence-triggered snapshot that closed an interval of I message writes needs K <= I (a *high*, I).
A run of checkpoints is one epoch while max(lows) <= min(highs). The cut is made from the newest
checkpoint backwards, so evidence that fits both sides of a change goes to the later epoch: an epoch
that never closed an interval itself keeps only its lower bound ("K >= 41"), never a guessed K.

Each epoch also keeps *fronts*: for any threshold, the first and the last time its lows reached it
and its highs fell to it. The database timeline (timeline.py) asks them when one cadence's writes
stopped contradicting another's, without keeping a record per checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from deerflow_ckpt.analysis.cadence import CadenceProfile
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.dataclass import dataclass, field, replace
from deerflow_ckpt.store.clock import write_time_ns
from deerflow_ckpt.store.records import CheckpointRecord

# Lows above this are kept on the first-time front only when they grow by a sixteenth: a K=1000
# writer's counters climb one by one, and the front needs their shape, not every step.
_EXACT_LOW_LEVELS = 128


@dataclass(frozen=True, slots=True)
class Mark:
    """One piece of evidence: a low or high `value`, written by `checkpoint_id` (its id tells when)."""

    value: int
    checkpoint_id: str
    step: int | None

    @property
    def time_ns(self) -> int:
        """When it was written (0 for an id with no write time: ask `timed` first, as the fronts do)."""
        return write_time_ns(self.checkpoint_id) or 0

    @property
    def timed(self) -> bool:
        return write_time_ns(self.checkpoint_id) is not None


@dataclass(frozen=True, slots=True)
class Fronts:
    """When evidence reached each threshold, first and last (Pareto fronts, times increasing).

    first_low: lows increasing; the first entry with value >= x is the first time a low reached x.
    last_low: lows decreasing; the last entry with value >= x is the last time a low reached x.
    first_high / last_high: the same for highs falling to a threshold (value <= x).
    """

    first_low: tuple[Mark, ...] = ()
    last_low: tuple[Mark, ...] = ()
    first_high: tuple[Mark, ...] = ()
    last_high: tuple[Mark, ...] = ()

    def first_against(self, lower: int | None, upper: int | None) -> Mark | None:
        """The earliest evidence that no K in [lower, upper] can explain."""
        found = []
        if upper is not None:
            found.append(next((m for m in self.first_low if m.value > upper and m.timed), None))
        if lower is not None:
            found.append(next((m for m in self.first_high if m.value < lower and m.timed), None))
        return min((m for m in found if m is not None), key=lambda m: m.time_ns, default=None)

    def last_against(self, lower: int | None, upper: int | None) -> Mark | None:
        """The latest evidence that no K in [lower, upper] can explain."""
        found: list[Mark | None] = []
        if upper is not None:
            found.append(_last_of_prefix(self.last_low, lambda value: value > upper))
        if lower is not None:
            found.append(_last_of_prefix(self.last_high, lambda value: value < lower))
        return max((m for m in found if m is not None), key=lambda m: m.time_ns, default=None)


def _last_of_prefix(marks: Sequence[Mark], holds: Callable[[int], bool]) -> Mark | None:
    last = None
    for mark in marks:
        if not holds(mark.value):
            break
        if mark.timed:
            last = mark
    return last


def _is_uuid6(checkpoint_id: str) -> bool:
    """Cheap test before comparing ids as times: canonical UUIDv6 ids sort by write time as strings."""
    return len(checkpoint_id) == 36 and checkpoint_id[14] == "6"


@dataclass
class FirstEvidence:
    """The earliest low and the earliest high of each value, over many epochs with the same bounds.

    A scan keeps this per bounds instead of every epoch's first-time fronts: only the class of those
    bounds ever asks when its evidence first appeared, and ids compare as write times without parsing.
    """

    lows: dict[int, Mark] = field(default_factory=dict)
    highs: dict[int, Mark] = field(default_factory=dict)

    def add(self, fronts: Fronts) -> None:
        _keep_earliest(self.lows, fronts.first_low)
        _keep_earliest(self.highs, fronts.first_high)

    def add_earliest(
        self, lows: Sequence[tuple[int, CheckpointRecord]], highs: Sequence[tuple[int, CheckpointRecord]]
    ) -> None:
        """As `add`, from (value, record) pairs: a Mark is made only for a pair that is the earliest yet."""
        for earliest, entries in ((self.lows, lows), (self.highs, highs)):
            for value, record in entries:
                known = earliest.get(value)
                checkpoint_id = record.checkpoint_id
                if (known is None or checkpoint_id < known.checkpoint_id) and _is_uuid6(checkpoint_id):
                    earliest[value] = Mark(value, checkpoint_id, record.step)

    def merge(self, other: FirstEvidence) -> None:
        _keep_earliest(self.lows, other.lows.values())
        _keep_earliest(self.highs, other.highs.values())

    def fronts(self) -> Fronts:
        return Fronts(first_low=tuple(self.lows.values()), first_high=tuple(self.highs.values()))


def _keep_earliest(earliest: dict[int, Mark], marks: Iterable[Mark]) -> None:
    for mark in marks:
        known = earliest.get(mark.value)
        if _is_uuid6(mark.checkpoint_id) and (known is None or mark.checkpoint_id < known.checkpoint_id):
            earliest[mark.value] = mark


def merge_fronts(all_fronts: Iterable[Fronts]) -> Fronts:
    """The fronts of several epochs together: for every threshold, the earliest first and latest last."""
    first_low: list[Mark] = []
    last_low: list[Mark] = []
    first_high: list[Mark] = []
    last_high: list[Mark] = []
    for fronts in all_fronts:
        first_low.extend(fronts.first_low)
        last_low.extend(fronts.last_low)
        first_high.extend(fronts.first_high)
        last_high.extend(fronts.last_high)
    return Fronts(
        _front(first_low, earliest=True, larger=True),
        _front(last_low, earliest=False, larger=True),
        _front(first_high, earliest=True, larger=False),
        _front(last_high, earliest=False, larger=False),
    )


def _front(marks: list[Mark], earliest: bool, larger: bool) -> tuple[Mark, ...]:
    """Marks no other mark beats on both time (earlier or later) and value (larger or smaller)."""
    kept: list[Mark] = []
    best: int | None = None
    timed = [(mark.time_ns, mark) for mark in marks if mark.timed]
    for _, mark in sorted(timed, key=lambda entry: entry[0], reverse=not earliest):
        if best is None or (mark.value > best if larger else mark.value < best):
            kept.append(mark)
            best = mark.value
    return tuple(kept if earliest else reversed(kept))


@dataclass(frozen=True, slots=True)
class Epoch:
    """A maximal run of a lineage's checkpoints (in id order) that one cadence K explains."""

    thread_id: str
    index: int
    # Positions in the lineage's records: [start, stop).
    start: int
    stop: int
    # K >= lower (largest updates counter + 1) and K <= upper (shortest cadence interval); None: open.
    lower: int | None
    upper: int | None
    first_id: str
    last_id: str
    fronts: Fronts = field(default_factory=Fronts)
    # Cadence-triggered intervals closed in the epoch.
    closed: int = 0

    @property
    def first_time_ns(self) -> int | None:
        return write_time_ns(self.first_id)

    @property
    def last_time_ns(self) -> int | None:
        return write_time_ns(self.last_id)

    @property
    def checkpoints(self) -> int:
        return self.stop - self.start

    @property
    def bounds(self) -> tuple[int | None, int | None]:
        return self.lower, self.upper

    @property
    def evidence_bounds(self) -> tuple[int | None, int | None]:
        """Its bounds as evidence of a cadence class (see `evidence_bounds`): what decides its class."""
        return evidence_bounds(self.lower, self.upper, self.closed)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Plain tuples to and from a scan's worker processes: a slots dataclass would pickle a dict each.
        fronts = tuple(tuple((m.value, m.checkpoint_id, m.step) for m in marks) for marks in (
            self.fronts.first_low, self.fronts.last_low, self.fronts.first_high, self.fronts.last_high))  # fmt: skip
        fields = (self.thread_id, self.index, self.start, self.stop, self.lower, self.upper, self.first_id)
        return _unpickle_epoch, (*fields, self.last_id, fronts, self.closed)

    def without_first_fronts(self) -> Epoch:
        """The epoch as a scan keeps it once its first-time fronts went into a FirstEvidence."""
        fronts = Fronts(last_low=self.fronts.last_low, last_high=self.fronts.last_high)
        return replace(self, fronts=fronts)

    @property
    def inferred(self) -> int | None:
        return self.lower if self.lower is not None and self.lower == self.upper else None

    def admits(self, cadence: int) -> bool:
        return (self.lower is None or self.lower <= cadence) and (self.upper is None or cadence <= self.upper)


def evidence_bounds(lower: int | None, upper: int | None, closed: int) -> tuple[int | None, int | None]:
    """An epoch's K bounds as evidence of a cadence class. One closed interval that merely meets the counters
    below it pins no K: the snapshot and its parent may be two processes (the first snapshot of a smaller-K
    process after a change, on a step that wrote messages), so only the lower bound counts."""
    if closed == 1 and lower is not None and lower == upper:
        return lower, None
    return lower, upper


def _unpickle_epoch(
    thread_id: str,
    index: int,
    start: int,
    stop: int,
    lower: int | None,
    upper: int | None,
    first_id: str,
    last_id: str,
    fronts: tuple[tuple[tuple[int, str, int | None], ...], ...],
    closed: int,
) -> Epoch:
    marks = (tuple(Mark(*entry) for entry in front) for front in fronts)
    return Epoch(thread_id, index, start, stop, lower, upper, first_id, last_id, Fronts(*marks), closed)


def earliest_time_ns(checkpoint_ids: Iterable[str], latest: bool = False) -> int | None:
    """The first (or last) write time among ids, compared as strings: UUIDv6 ids sort by time."""
    timed = [checkpoint_id for checkpoint_id in checkpoint_ids if write_time_ns(checkpoint_id) is not None]
    if not timed:
        return None
    return write_time_ns(max(timed) if latest else min(timed))


def _evidence(graph: LineageGraph, profile: CadenceProfile) -> list[tuple[int | None, int | None]]:
    """(low, high) per record, in the lineage's order: what each says about its writer's K."""
    highs = {id(e.record): e.counter_interval for e in profile.snapshots if not e.trigger.forced}
    evidence: list[tuple[int | None, int | None]] = []
    for record in graph.records:
        if record.snapshot_step:
            evidence.append((None, highs.get(id(record))))
        elif record.updates is not None:
            evidence.append((record.updates + 1, None))
        else:
            evidence.append((None, None))
    return evidence


# First-time fronts kept apart by the epochs' evidence bounds: epochs with the same ones fall in the same class.
FirstSink = dict[tuple[int | None, int | None], FirstEvidence]


def lineage_epochs(graph: LineageGraph, profile: CadenceProfile, sink: FirstSink | None = None) -> list[Epoch]:
    """The lineage's cadence epochs, oldest first (one when its counters never contradict each other).

    With a `sink`, the first-time fronts go into it, per bounds, and the epochs keep only the last-time
    ones: a database scan keeps one epoch per conversation, so it keeps them small.
    """
    records = graph.records
    if not records:
        return []
    thread_id = graph.lineage.thread_id
    if not profile.bounds.contradictory:
        return [_single_epoch(thread_id, records, profile, sink)]
    evidence = _evidence(graph, profile)
    epochs = [
        _epoch(thread_id, index, records, evidence, start, stop, lower, upper)
        for index, (start, stop, lower, upper) in enumerate(_cut_backwards(evidence))
    ]
    if sink is None:
        return epochs
    for epoch in epochs:
        sink.setdefault(epoch.evidence_bounds, FirstEvidence()).add(epoch.fronts)
    return [epoch.without_first_fronts() for epoch in epochs]


def _single_epoch(
    thread_id: str, records: Sequence[CheckpointRecord], profile: CadenceProfile, sink: FirstSink | None
) -> Epoch:
    """The whole lineage as one epoch, its fronts from what the profile already found (the common case)."""
    bounds = profile.bounds
    # Suffix maxima: walking back from the head until the largest low, which nothing earlier can beat.
    last_low: list[Mark] = []
    if bounds.lower is not None:
        for record in reversed(records):
            updates = record.updates
            if record.snapshot_step or updates is None or (last_low and updates + 1 <= last_low[-1].value):
                continue
            last_low.append(Mark(updates + 1, record.checkpoint_id, record.step))
            if updates + 1 >= bounds.lower:
                break
        last_low.reverse()
    cadence_events = [event for event in profile.snapshots if not event.trigger.forced]
    # Running minimum forwards, suffix minima backwards; both stop at the shortest interval.
    first_high: list[tuple[int, CheckpointRecord]] = []
    for event in cadence_events:
        if not first_high or event.counter_interval < first_high[-1][0]:
            first_high.append((event.counter_interval, event.record))
            if event.counter_interval == bounds.upper:
                break
    last_high: list[Mark] = []
    for event in reversed(cadence_events):
        if not last_high or event.counter_interval < last_high[-1].value:
            last_high.append(Mark(event.counter_interval, event.record.checkpoint_id, event.record.step))
            if event.counter_interval == bounds.upper:
                break
    last_high.reverse()
    rises = [(record.updates + 1, record) for record in profile.low_rises if record.updates is not None]
    if sink is None:
        first_low, first_highs = _marks(_thinned(rises)), _marks(first_high)
    else:
        key = evidence_bounds(bounds.lower, bounds.upper, len(cadence_events))
        first_seen = sink.get(key)
        if first_seen is None:
            first_seen = sink[key] = FirstEvidence()
        first_seen.add_earliest(_thinned(rises), first_high)
        first_low = first_highs = ()
    return Epoch(
        thread_id=thread_id,
        index=0,
        start=0,
        stop=len(records),
        lower=bounds.lower,
        upper=bounds.upper,
        first_id=records[0].checkpoint_id,
        last_id=records[-1].checkpoint_id,
        fronts=Fronts(first_low, tuple(last_low), first_highs, tuple(last_high)),
        closed=len(cadence_events),
    )


def _thinned(rises: list[tuple[int, CheckpointRecord]]) -> list[tuple[int, CheckpointRecord]]:
    """Every rise up to _EXACT_LOW_LEVELS, then only rises of a sixteenth, and always the last (the top)."""
    kept: list[tuple[int, CheckpointRecord]] = []
    for rise in rises:
        if not kept or rise[0] <= _EXACT_LOW_LEVELS or rise[0] * 16 >= kept[-1][0] * 17:
            kept.append(rise)
    if rises and kept[-1] is not rises[-1]:
        kept.append(rises[-1])
    return kept


def _cut_backwards(evidence: list[tuple[int | None, int | None]]) -> list[tuple[int, int, int | None, int | None]]:
    """Greedy from the newest record: a record whose evidence the later run cannot take starts an older one."""
    cuts: list[tuple[int, int, int | None, int | None]] = []
    lower: int | None = None
    upper: int | None = None
    stop = len(evidence)
    for position in range(len(evidence) - 1, -1, -1):
        low, high = evidence[position]
        new_lower = lower if low is None or (lower is not None and lower >= low) else low
        new_upper = upper if high is None or (upper is not None and upper <= high) else high
        if new_lower is not None and new_upper is not None and new_lower > new_upper:
            cuts.append((position + 1, stop, lower, upper))
            stop, lower, upper = position + 1, low, high
        else:
            lower, upper = new_lower, new_upper
    cuts.append((0, stop, lower, upper))
    cuts.reverse()
    return cuts


def _epoch(
    thread_id: str,
    index: int,
    records: Sequence[CheckpointRecord],
    evidence: list[tuple[int | None, int | None]],
    start: int,
    stop: int,
    lower: int | None,
    upper: int | None,
) -> Epoch:
    rises: list[tuple[int, CheckpointRecord]] = []
    last_low: list[tuple[int, CheckpointRecord]] = []
    first_high: list[tuple[int, CheckpointRecord]] = []
    last_high: list[tuple[int, CheckpointRecord]] = []
    for position in range(start, stop):
        low, high = evidence[position]
        if low is not None:
            record = records[position]
            if not rises or low > rises[-1][0]:
                rises.append((low, record))
            while last_low and last_low[-1][0] <= low:
                last_low.pop()
            last_low.append((low, record))
        if high is not None:
            record = records[position]
            if not first_high or high < first_high[-1][0]:
                first_high.append((high, record))
            while last_high and last_high[-1][0] >= high:
                last_high.pop()
            last_high.append((high, record))
    return Epoch(
        thread_id=thread_id,
        index=index,
        start=start,
        stop=stop,
        lower=lower,
        upper=upper,
        first_id=records[start].checkpoint_id,
        last_id=records[stop - 1].checkpoint_id,
        fronts=Fronts(_marks(_thinned(rises)), _marks(last_low), _marks(first_high), _marks(last_high)),
        closed=sum(1 for position in range(start, stop) if evidence[position][1] is not None),
    )


def _marks(entries: list[tuple[int, CheckpointRecord]]) -> tuple[Mark, ...]:
    return tuple(Mark(value, record.checkpoint_id, record.step) for value, record in entries)
