"""Bucket math for histograms of non-negative integers (pure).

Every bucket has an inclusive lower bound and an exclusive upper bound (None: unbounded), the
convention of Google Cloud's Distribution and of `ckpt`'s JSON and CSV output. Narrow ranges get one
bucket per value, so an interval histogram reads as exact counts; wide ranges get power-of-two
buckets, so a K=1000 writer next to a K=10 one still fits on a screen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from deerflow_ckpt.dataclass import dataclass

# A range of at most this many values is shown one bucket per value.
UNIT_BUCKET_SPAN = 16


@dataclass(frozen=True)
class Bucket:
    lower: int
    upper: int | None
    count: int

    def holds(self, value: int) -> bool:
        return self.lower <= value and (self.upper is None or value < self.upper)


@dataclass(frozen=True)
class Histogram:
    buckets: tuple[Bucket, ...]
    count: int
    total: int
    minimum: int | None
    maximum: int | None

    @property
    def largest_bucket(self) -> int:
        return max((bucket.count for bucket in self.buckets), default=0)


EMPTY = Histogram((), 0, 0, None, None)


def _power_of_two_floor(value: int) -> int:
    return 0 if value == 0 else 1 << (value.bit_length() - 1)


def _edges(low: int, high: int, unit_span: int) -> list[tuple[int, int]]:
    """Contiguous [lower, upper) pairs covering low..high."""
    if high - low < unit_span:
        return [(value, value + 1) for value in range(low, high + 1)]
    edges: list[tuple[int, int]] = []
    lower = _power_of_two_floor(low)
    while lower <= high:
        upper = 1 if lower == 0 else lower * 2
        edges.append((lower, upper))
        lower = upper
    return edges


def histogram(values: Iterable[int], unit_span: int = UNIT_BUCKET_SPAN) -> Histogram:
    """Contiguous buckets from the smallest to the largest value; empty buckets in between are kept."""
    ordered = sorted(values)
    if not ordered:
        return EMPTY
    if ordered[0] < 0:
        raise ValueError(f"histogram values must be non-negative, got {ordered[0]}")
    low, high = ordered[0], ordered[-1]
    buckets = []
    position = 0
    for lower, upper in _edges(low, high, unit_span):
        start = position
        while position < len(ordered) and ordered[position] < upper:
            position += 1
        buckets.append(Bucket(lower, upper, position - start))
    return Histogram(tuple(buckets), len(ordered), sum(ordered), low, high)


def distinct_values(counts: Mapping[int, int]) -> Histogram:
    """One bucket per value that occurs (zero counts left out): for categorical integers such as K."""
    present = Counter({value: n for value, n in counts.items() if n > 0})
    if not present:
        return EMPTY
    buckets = tuple(Bucket(value, value + 1, present[value]) for value in sorted(present))
    total = sum(value * n for value, n in present.items())
    return Histogram(buckets, sum(present.values()), total, min(present), max(present))
