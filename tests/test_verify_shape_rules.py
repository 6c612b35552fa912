"""Every shape rule against databases written by real graphs, on SQLite and on Postgres.

The builder's manifest says, by construction, which findings each thread must produce and where;
clean threads and legitimate special cases must produce none. Both directions are checked per
scenario and backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from deerflow_ckpt.analysis.cadence import DEFAULT_SUPERSTEP_BOUND
from deerflow_ckpt.analysis.shape import Finding, ShapeSettings
from deerflow_ckpt.commands.verify_shape import ScanReport, ScanRequest, scan
from deerflow_ckpt.rules import RULES
from deerflow_ckpt.store.source import DatabaseChoice, target_from_argument
from fixtures.dbbuilder.manifest import ThreadRecord
from fixtures.dbbuilder.registry import SCENARIOS, TIMELINES
from tests.conftest import BuiltDatabase

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
# SQLite stores snapshots inline: there is no marker that could lose its blob.
POSTGRES_ONLY = {"fault-ck102"}


@pytest.fixture(params=BACKENDS)
def built(request: pytest.FixtureRequest) -> BuiltDatabase:
    database: BuiltDatabase = request.getfixturevalue(f"built_{request.param}")
    return database


@cache
def _scan(db: str, schema: str, cadence: int | None, bound: int, thread: str | None, deep: bool) -> ScanReport:
    choice = DatabaseChoice(target_from_argument(db, schema), "test")
    return scan(ScanRequest(choice, ShapeSettings(cadence, bound, deep=deep), "test", thread))


def scan_of(built: BuiltDatabase, cadence: int | None = None, bound: int = DEFAULT_SUPERSTEP_BOUND,
            thread: str | None = None, deep: bool = False) -> ScanReport:  # fmt: skip
    return _scan(built.db, built.schema or "", cadence, bound, thread, deep)


def located(findings: list[Finding], thread_id: str) -> set[tuple[str, str | None, str | None]]:
    return {(f.rule, f.checkpoint_ns, f.checkpoint_id) for f in findings if f.thread_id == thread_id}


def expected(thread: ThreadRecord, options: dict[str, object] | None = None) -> set[tuple[str, str, str]]:
    """The faults that apply under `options` (a fault with `requires` needs exactly those options)."""
    options = options or {}
    return {
        (f.rule, f.checkpoint_ns, f.checkpoint_id)
        for f in thread.faults
        if all(options.get(key) == value for key, value in f.requires.items())
    }


@pytest.mark.parametrize("scenario", [s.name for s in SCENARIOS])
def test_scenario_reports_exactly_its_faults(built: BuiltDatabase, scenario: str) -> None:
    """Default options: each injected fault is found where it was injected, and nothing else is."""
    report = scan_of(built)
    threads = built.manifest.by_scenario(scenario)
    assert threads or (built.backend == "sqlite" and scenario in POSTGRES_ONLY)
    for thread in threads:
        assert located(report.findings, thread.thread_id) == expected(thread), thread.thread_id


def _option_sets(thread: ThreadRecord) -> Iterator[dict[str, object]]:
    seen: list[dict[str, object]] = []
    for fault in thread.faults:
        if fault.requires and fault.requires not in seen:
            seen.append(fault.requires)
            yield fault.requires


def test_rules_that_need_scan_options(built: BuiltDatabase) -> None:
    """CK201 needs the expected cadence and CK203 a superstep bound; with them, they fire exactly there."""
    threads = [t for t in built.manifest.threads if any(f.requires for f in t.faults)]
    assert {f.rule for t in threads for f in t.faults if f.requires} >= {"CK106", "CK201", "CK203"}
    for thread in threads:
        for options in _option_sets(thread):
            cadence = options.get("cadence")
            bound = options.get("max_supersteps", DEFAULT_SUPERSTEP_BOUND)
            assert cadence is None or isinstance(cadence, int)
            assert isinstance(bound, int)
            deep = options.get("deep", False)
            assert isinstance(deep, bool)
            # An expected cadence is judged against the whole database's timeline: alone, a thread whose first
            # K=10 stretch closed one interval (which pins no K) reads as a clean change K>=17 -> K=10.
            only = None if cadence is not None else thread.thread_id
            report = scan_of(built, cadence=cadence, bound=bound, thread=only, deep=deep)
            assert located(report.findings, thread.thread_id) == expected(thread, options), options


def test_clean_threads_stay_silent_at_their_own_cadence(built: BuiltDatabase) -> None:
    """A healthy thread scanned with the K its writer used has nothing to report."""
    checked = 0
    for thread in built.manifest.clean():
        cadences = {w.cadence for w in thread.writers if w.mode == "delta"}
        if len(cadences) != 1 or None in cadences:
            continue
        (cadence,) = cadences
        report = scan_of(built, cadence=cadence, thread=thread.thread_id)
        assert report.findings == [], thread.thread_id
        checked += 1
    assert checked >= 8


def test_every_rule_is_exercised(built: BuiltDatabase) -> None:
    """The fixture set covers every rule in the registry (CK102 only exists on Postgres); the cadence
    timelines are databases of their own (test_cadence_timeline.py)."""
    covered = {fault.rule for thread in built.manifest.threads for fault in thread.faults}
    covered |= {code for timeline in TIMELINES for code in timeline.rules}
    database_rules = {code for code, rule in RULES.items() if not rule.about_config}
    missing = database_rules - covered - ({"CK102"} if built.backend == "sqlite" else set())
    assert not missing


def test_cadence_disagreement_between_threads(built: BuiltDatabase) -> None:
    """With no expected K, conversations settled on different cadences are reported once, database-wide."""
    report = scan_of(built)
    database_level = [f for f in report.findings if f.thread_id is None]
    assert [f.rule for f in database_level] == ["CK202"]
    inferred = {thread.writers[0].cadence for thread in built.manifest.by_scenario("clean-delta")}
    for cadence in inferred:
        assert f"K={cadence} " in database_level[0].message


def test_thread_kinds_are_counted(built: BuiltDatabase) -> None:
    report = scan_of(built)
    assert report.threads == len(built.manifest.threads)
    assert report.kinds["migrated"] == len(built.manifest.by_scenario("migration"))
    full = [t for t in built.manifest.threads if {w.mode for w in t.writers} == {"full"}]
    assert report.kinds["full"] == len(full) == len(built.manifest.by_scenario("clean-full")) + 1


def test_unsafe_payload_is_reported_and_never_executed(built: BuiltDatabase) -> None:
    """The foreign ext names os.system with a touch command: a scan must report it and run nothing."""
    threads = built.manifest.by_scenario("fault-ck105")
    report = scan_of(built)
    for thread in threads:
        assert "CK105" in {rule for rule, _, _ in located(report.findings, thread.thread_id)}
    markers = [
        Path(p)
        for thread in threads
        for fault in thread.faults
        for key, p in fault.related.items()
        if key == "marker_path"
    ]
    assert markers, "the fixture records where the payload would write"
    assert not any(marker.exists() for marker in markers)


def test_parallel_scan_finds_the_same(built: BuiltDatabase) -> None:
    """Thread ranges read by several processes add up to the single-process scan."""
    single = scan_of(built)
    choice = DatabaseChoice(target_from_argument(built.db, built.schema or ""), "test")
    parallel = scan(ScanRequest(choice, ShapeSettings(), "test"), jobs=3)
    assert (parallel.threads, parallel.lineages, parallel.checkpoints) == (
        single.threads,
        single.lineages,
        single.checkpoints,
    )
    assert sorted(parallel.findings, key=repr) == sorted(single.findings, key=repr)
    assert parallel.kinds == single.kinds and parallel.inferred_cadences == single.inferred_cadences
