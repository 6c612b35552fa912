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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from deerflow_ckpt.analysis.cadence import CadenceProfile
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.store.clock import write_time_ns
from deerflow_ckpt.store.records import CheckpointRecord

# Lows above this are kept on the first-time front only when they grow by a sixteenth: a K=1000
# writer's counters climb one by one, and the front needs their shape, not every step.
_EXACT_LOW_LEVELS = 128


@dataclass(frozen=True, slots=True)
class Mark:
    """One piece of evidence: a low or high `value` written at `time_ns` by `checkpoint_id`."""

    value: int
    time_ns: int
    checkpoint_id: str
    step: int | None


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
            found.append(next((m for m in self.first_low if m.value > upper), None))
        if lower is not None:
            found.append(next((m for m in self.first_high if m.value < lower), None))
        return min((m for m in found if m is not None), key=lambda m: m.time_ns, default=None)

    def last_against(self, lower: int | None, upper: int | None) -> Mark | None:
        """The latest evidence that no K in [lower, upper] can explain."""
        found: list[Mark | None] = []
        if upper is not None:
            found.append(_last_of_prefix(self.last_low, lambda value: value > upper))
        if lower is not None:
            found.append(_last_of_prefix(self.last_high, lambda value: value < lower))
        return max((m for m in found if m is not None), key=lambda m: m.time_ns, default=None)


def _last_of_prefix(marks: Sequence[Mark], holds: object) -> Mark | None:
    last = None
    for mark in marks:
        if not holds(mark.value):  # type: ignore[operator]
            break
        last = mark
    return last


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
    for mark in sorted(marks, key=lambda m: m.time_ns, reverse=not earliest):
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
    first_time_ns: int | None
    last_time_ns: int | None
    fronts: Fronts = field(default_factory=Fronts)

    @property
    def checkpoints(self) -> int:
        return self.stop - self.start

    @property
    def inferred(self) -> int | None:
        return self.lower if self.lower is not None and self.lower == self.upper else None

    def admits(self, cadence: int) -> bool:
        return (self.lower is None or self.lower <= cadence) and (self.upper is None or cadence <= self.upper)


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


def lineage_epochs(graph: LineageGraph, profile: CadenceProfile) -> list[Epoch]:
    """The lineage's cadence epochs, oldest first (one when its counters never contradict each other)."""
    records = graph.records
    if not records:
        return []
    evidence = _evidence(graph, profile)
    if not profile.bounds.contradictory:
        bounds = [(0, len(records), profile.bounds.lower, profile.bounds.upper)]
    else:
        bounds = _cut_backwards(evidence)
    thread_id = graph.lineage.thread_id
    return [
        _epoch(thread_id, index, records, evidence, start, stop, lower, upper)
        for index, (start, stop, lower, upper) in enumerate(bounds)
    ]


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
    first_low: list[tuple[int, CheckpointRecord]] = []
    top_low: tuple[int, CheckpointRecord] | None = None
    last_low: list[tuple[int, CheckpointRecord]] = []
    first_high: list[tuple[int, CheckpointRecord]] = []
    last_high: list[tuple[int, CheckpointRecord]] = []
    for position in range(start, stop):
        low, high = evidence[position]
        if low is not None:
            record = records[position]
            if top_low is None or low > top_low[0]:
                top_low = (low, record)
                kept = first_low[-1][0] if first_low else 0
                if low <= _EXACT_LOW_LEVELS or low * 16 >= kept * 17:
                    first_low.append(top_low)
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
    if top_low is not None and first_low[-1] is not top_low:
        first_low.append(top_low)  # the largest low always has its place on the front
    first, last = records[start], records[stop - 1]
    return Epoch(
        thread_id=thread_id,
        index=index,
        start=start,
        stop=stop,
        lower=lower,
        upper=upper,
        first_id=first.checkpoint_id,
        last_id=last.checkpoint_id,
        first_time_ns=write_time_ns(first.checkpoint_id),
        last_time_ns=write_time_ns(last.checkpoint_id),
        fronts=Fronts(_marks(first_low), _marks(last_low), _marks(first_high), _marks(last_high)),
    )


def _marks(entries: list[tuple[int, CheckpointRecord]]) -> tuple[Mark, ...]:
    """Evidence with a readable write time (an id that is no UUIDv6 has none, and is left out)."""
    marks = []
    for value, record in entries:
        time_ns = write_time_ns(record.checkpoint_id)
        if time_ns is not None:
            marks.append(Mark(value, time_ns, record.checkpoint_id, record.step))
    return tuple(marks)
