"""Cadence epochs and their fronts: the fast one-epoch path against the general cut, and the fronts'
answers against a brute-force reading of the same evidence."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deerflow_ckpt.analysis.cadence import cadence_profile
from deerflow_ckpt.analysis.epochs import (
    FirstEvidence,
    Mark,
    _cut_backwards,
    _epoch,
    _evidence,
    lineage_epochs,
    merge_fronts,
)
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.store.clock import boundary_id, write_time_ns
from deerflow_ckpt.store.readers import open_reader
from deerflow_ckpt.store.records import CheckpointRecord, Shape
from deerflow_ckpt.store.source import target_from_argument
from tests.conftest import BuiltDatabase

Builder = Callable[[str, str], BuiltDatabase]


def _conversations(built: BuiltDatabase) -> list[LineageGraph]:
    reader, backend = open_reader(target_from_argument(built.db, built.schema or ""))
    return [LineageGraph(lineage, backend) for lineage in reader.lineages() if lineage.checkpoint_ns == ""]


def test_one_epoch_path_equals_the_general_cut(built_sqlite: BuiltDatabase, built_timelines: Builder) -> None:
    """Where the counters never contradict each other, the profile-fed path builds the same epoch, and a
    sink receives exactly the first-time fronts the epoch would have kept."""
    databases = [built_sqlite, *(built_timelines("sqlite", name) for name in ("clean-switch", "concurrent-writers"))]
    compared = 0
    for built in databases:
        for graph in _conversations(built):
            profile = cadence_profile(graph)
            evidence = _evidence(graph, profile)
            if profile.bounds.contradictory:
                continue
            records = graph.records
            (fast,) = lineage_epochs(graph, profile)
            general = _epoch(
                graph.lineage.thread_id,
                0,
                records,
                evidence,
                0,
                len(records),
                profile.bounds.lower,
                profile.bounds.upper,
            )
            assert fast == general, graph.lineage.thread_id
            sink: dict[tuple[int | None, int | None], FirstEvidence] = {}
            (sunk,) = lineage_epochs(graph, profile, sink)
            assert sunk == general.without_first_fronts()
            expected = FirstEvidence()
            expected.add(general.fronts)
            assert sink == {general.evidence_bounds: expected}
            compared += 1
    assert compared >= 30


def _record(position: int, low: int | None, high: int | None) -> CheckpointRecord:
    checkpoint_id = boundary_id(1_764_000_000 * 10**9 + position * 10**9)
    record = CheckpointRecord("t", "", checkpoint_id, None, position, "loop", "delta", None, None, Shape.ABSENT, None)
    record.updates = None if low is None else low - 1
    record.snapshot_step = high is not None
    return record


EVIDENCE = st.lists(
    st.one_of(
        st.tuples(st.integers(1, 40), st.none()),
        st.tuples(st.none(), st.integers(1, 40)),
        st.tuples(st.none(), st.none()),
    ),
    min_size=1,
    max_size=60,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(EVIDENCE)
def test_the_cut_is_consistent_and_maximal(evidence: list[tuple[int | None, int | None]]) -> None:
    cuts = _cut_backwards(evidence)
    assert cuts[0][0] == 0 and cuts[-1][1] == len(evidence)
    for (start, stop, lower, upper), following in zip(cuts, [*cuts[1:], None], strict=True):
        lows = [low for low, _ in evidence[start:stop] if low is not None]
        highs = [high for _, high in evidence[start:stop] if high is not None]
        assert (lower, upper) == (max(lows, default=None), min(highs, default=None))
        assert lower is None or upper is None or lower <= upper
        if following is not None:
            # The later epoch could not have taken this one's last record: the cut is where it must be.
            low, high = evidence[stop - 1]
            later_lows = [x for x, _ in evidence[stop : following[1]] if x is not None] + ([low] if low else [])
            later_highs = [x for _, x in evidence[stop : following[1]] if x is not None] + ([high] if high else [])
            assert max(later_lows) > min(later_highs)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(EVIDENCE, st.integers(0, 42), st.integers(0, 42))
def test_fronts_answer_as_a_brute_force_reading(
    evidence: list[tuple[int | None, int | None]], lower: int, upper: int
) -> None:
    records = [_record(position, low, high) for position, (low, high) in enumerate(evidence)]
    lows = [v for v, _ in evidence if v is not None]
    highs = [v for _, v in evidence if v is not None]
    epoch = _epoch("t", 0, records, evidence, 0, len(records), max(lows, default=None), min(highs, default=None))
    against = [
        records[i]
        for i, (low, high) in enumerate(evidence)
        if (low is not None and low > upper) or (high is not None and high < lower)
    ]
    for fronts in (epoch.fronts, merge_fronts([epoch.fronts, epoch.fronts])):
        first, last = fronts.first_against(lower, upper), fronts.last_against(lower, upper)
        assert (first.checkpoint_id if first else None) == (against[0].checkpoint_id if against else None)
        assert (last.checkpoint_id if last else None) == (against[-1].checkpoint_id if against else None)


def test_marks_know_their_write_time() -> None:
    mark = Mark(3, boundary_id(1_764_000_000 * 10**9), 7)
    assert mark.timed and mark.time_ns == write_time_ns(mark.checkpoint_id) == 1_764_000_000 * 10**9
    assert not Mark(3, "custom-id", None).timed
