"""Bucket math (property-based) and the bars that draw it."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from deerflow_ckpt.analysis.histogram import UNIT_BUCKET_SPAN, distinct_values, histogram
from deerflow_ckpt.report.inspect_text import CountBar, histogram_table

values = st.lists(st.integers(min_value=0, max_value=100_000), max_size=60)


@given(values)
def test_every_value_lands_in_exactly_one_contiguous_bucket(found: list[int]) -> None:
    result = histogram(found)
    assert result.count == len(found)
    assert result.total == sum(found)
    if not found:
        assert result.buckets == () and result.minimum is None and result.maximum is None
        return
    assert (result.minimum, result.maximum) == (min(found), max(found))
    assert result.buckets[0].holds(min(found)) and result.buckets[-1].holds(max(found))
    for before, after in zip(result.buckets, result.buckets[1:], strict=False):
        assert before.upper == after.lower
    for value in found:
        assert sum(1 for bucket in result.buckets if bucket.holds(value)) == 1
    for bucket in result.buckets:
        assert bucket.upper is not None and bucket.lower < bucket.upper
        assert bucket.count == sum(1 for value in found if bucket.holds(value))


@given(values)
def test_narrow_ranges_get_a_bucket_per_value_wide_ones_powers_of_two(found: list[int]) -> None:
    result = histogram(found)
    if not found:
        return
    if max(found) - min(found) < UNIT_BUCKET_SPAN:
        assert all(bucket.upper == bucket.lower + 1 for bucket in result.buckets)
        assert len(result.buckets) == max(found) - min(found) + 1
    else:
        for bucket in result.buckets:
            assert (bucket.lower == 0 and bucket.upper == 1) or bucket.upper == 2 * bucket.lower
            assert bucket.lower & (bucket.lower - 1) == 0


def test_negative_values_are_refused() -> None:
    with pytest.raises(ValueError):
        histogram([3, -1])


def test_distinct_values_leave_out_zero_counts() -> None:
    result = distinct_values({10: 4, 3: 20, 1000: 0, 1: 1})
    assert [(b.lower, b.upper, b.count) for b in result.buckets] == [(1, 2, 1), (3, 4, 20), (10, 11, 4)]
    assert result.count == 25
    assert distinct_values({}).buckets == ()


def _render(renderable: object, encoding: str = "utf-8", width: int = 80) -> str:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding)
    console = Console(file=stream, width=width, color_system=None)
    console.print(renderable)
    stream.flush()
    return raw.getvalue().decode(encoding)


def test_a_tiny_count_is_never_drawn_as_zero() -> None:
    """3 of 5,400 would round to nothing; it gets one eighth of a cell (one '#' in ASCII)."""
    for count in (1, 3):
        assert _render(CountBar(count, 5400, 40, blocks=True)).strip() == "▏"
        assert _render(CountBar(count, 5400, 40, blocks=False), "ascii").strip() == "#"
    assert _render(CountBar(0, 5400, 40, blocks=True)).strip() == ""
    assert _render(CountBar(5400, 5400, 40, blocks=True)).strip() == "█" * 40


def test_every_non_zero_bucket_is_visible_in_the_table() -> None:
    result = histogram([3] * 5000 + [4] + [18])
    for encoding, mark in (("utf-8", "▏"), ("ascii", "#")):
        console = Console(file=io.TextIOWrapper(io.BytesIO(), encoding=encoding), width=100, color_system=None)
        table = histogram_table(result, "interval", console)
        text = _render(table, encoding, 100)
        lines = {line.split()[0]: line for line in text.splitlines()[1:] if line.strip()}
        for bucket in result.buckets:
            label = str(bucket.lower) if bucket.upper == bucket.lower + 1 else f"{bucket.lower}-{bucket.upper - 1}"
            line = lines[label]
            assert (mark in line or "█" in line or "#" in line) == (bucket.count > 0), line
