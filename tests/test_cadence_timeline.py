"""Cadence over time: a deliberate change of K is history, not a violation; concurrent writers stay errors.

The timeline databases (fixtures/dbbuilder/timelines.py) are written by real graphs, threads advanced
round-robin, K=1000 then K=10. The manifest says which writer wrote every checkpoint, and the ids carry
when: the expectations below are derived from it, never written down by hand.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.shape import ShapeSettings, check_lineage
from deerflow_ckpt.analysis.timeline import DEFAULT_CLOCK_SKEW_NS
from deerflow_ckpt.commands.verify_shape import ScanReport, ScanRequest, scan
from deerflow_ckpt.store.clock import boundary_id, format_time, write_time_ns
from deerflow_ckpt.store.readers import open_reader
from deerflow_ckpt.store.source import DatabaseChoice, target_from_argument
from fixtures.dbbuilder.manifest import Manifest, ThreadRecord
from fixtures.dbbuilder.timelines import NEW_K, OLD_K
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase

# Postgres timelines are built by the real graphs each session (SQLite's come from the fixture cache): slow.
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=[pytest.mark.postgres, pytest.mark.slow]),
]
Builder = Callable[[str, str], BuiltDatabase]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _scan(built: BuiltDatabase, cadence: int | None = None, since: str | None = None, jobs: int = 1) -> ScanReport:
    choice = DatabaseChoice(target_from_argument(built.db, built.schema or ""), "test")
    return scan(ScanRequest(choice, ShapeSettings(cadence, since=since), "test"), jobs=jobs)


def switch_time(manifest: Manifest) -> int:
    """When the first K=10 writer wrote anything: the restart."""
    times = [
        write_time_ns(c.checkpoint_id)
        for t in manifest.threads
        for c in t.checkpoints
        if c.writer is not None and t.writers[c.writer].cadence == NEW_K
    ]
    return min(t for t in times if t is not None)


def old_writes_after(manifest: Manifest, moment: int) -> set[str]:
    """Threads a K=1000 writer still wrote after `moment`."""
    return {
        t.thread_id
        for t in manifest.threads
        for c in t.checkpoints
        if c.writer is not None
        and t.writers[c.writer].cadence == OLD_K
        and (write_time_ns(c.checkpoint_id) or 0) > moment
    }


def thread_findings(report: ScanReport) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for finding in report.findings:
        if finding.thread_id is not None:
            found.setdefault(finding.thread_id, set()).add(finding.rule)
    return found


def database_rules(report: ScanReport) -> list[str]:
    return [f.rule for f in report.findings if f.thread_id is None]


def config_for(built: BuiltDatabase, directory: Path, cadence: int) -> Path:
    """A DeerFlow config.yaml whose database section points at `built` with snapshot_frequency `cadence`."""
    if built.backend == "sqlite":
        data = directory / "data"
        data.mkdir()
        (data / "deerflow.db").write_bytes(Path(built.db).read_bytes())
        where = "  backend: sqlite\n  sqlite_dir: data\n"
    else:
        where = f"  backend: postgres\n  postgres_url: {built.db}\n"
    config = directory / "config.yaml"
    config.write_text(
        f"database:\n{where}  checkpoint_channel_mode: delta\n  checkpoint_delta:\n    snapshot_frequency: {cadence}\n"
    )
    return config


def cli_json(*args: str) -> tuple[int, dict[str, object]]:
    result = run_ckpt("verify-shape", "--format", "json", *args)
    assert result.exit_code in (0, 1), result.stderr
    document: dict[str, object] = json.loads(result.stdout)
    return result.exit_code, document


# -- the three timelines ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_clean_switch_is_history_reported_once(built_timelines: Builder, backend: str) -> None:
    built = built_timelines(backend, "clean-switch")
    moment = switch_time(built.manifest)
    assert not old_writes_after(built.manifest, moment), "the fixture's old writers all stop before the restart"
    for cadence in (NEW_K, None):
        report = _scan(built, cadence)
        assert report.findings and [f.rule for f in report.findings] == ["CK205"], cadence
        (change,) = report.findings
        assert format_time(moment) in change.message
        spanning = {t.thread_id for t in built.manifest.threads if len({w.cadence for w in t.writers}) == 2}
        assert all(thread in change.message for thread in spanning)
        assert report.timeline is not None and report.timeline.current is not None
        assert report.timeline.current.label == f"K={NEW_K}"
        # The old epochs never closed an interval: a lower bound, never a guessed K.
        (old,) = [c for c in report.timeline.classes if c is not report.timeline.current]
        assert old.upper is None and old.label.startswith("K>=")


def test_clean_switch_exits_0_with_the_cadence_from_a_config(
    built_timelines: Builder, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = built_timelines(backend, "clean-switch")
    monkeypatch.chdir(tmp_path)
    config = config_for(built, tmp_path, NEW_K)
    code, document = cli_json("--config", str(config))
    assert code == 0
    assert document["settings"]["expected_cadence"] == NEW_K  # type: ignore[index]
    assert [f["rule"] for f in document["findings"]] == ["CK205"]  # type: ignore[union-attr]
    assert document["timeline"]["in_force"]["cadence"] == f"K={NEW_K}"  # type: ignore[index]


@pytest.mark.slow
def test_concurrent_writers_flag_exactly_the_threads_old_k_wrote_after_the_switch(
    built_timelines: Builder, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = built_timelines(backend, "concurrent-writers")
    moment = switch_time(built.manifest)
    late = old_writes_after(built.manifest, moment)
    new_only = {t.thread_id for t in built.manifest.threads} - late
    assert late and new_only
    report = _scan(built, NEW_K)
    flagged = {f.thread_id for f in report.findings if f.thread_id is not None and f.severity.value == "error"}
    assert flagged == late
    assert not set(thread_findings(report)) & new_only
    for finding in report.findings:
        if finding.thread_id in late and finding.severity.value == "error":
            # Judged at the cadence in force when written: the named checkpoint is one after the switch.
            assert finding.checkpoint_id is not None and (write_time_ns(finding.checkpoint_id) or 0) > moment
    monkeypatch.chdir(tmp_path)
    code, document = cli_json("--config", str(config_for(built, tmp_path, NEW_K)))
    assert code == 1
    assert {f["thread_id"] for f in document["findings"] if f["severity"] == "error"} == late  # type: ignore[union-attr]


def test_concurrent_writers_without_an_expected_cadence(built_timelines: Builder, backend: str) -> None:
    built = built_timelines(backend, "concurrent-writers")
    report = _scan(built)
    assert report.timeline is not None and report.timeline.current is None
    (database,) = [f for f in report.findings if f.thread_id is None]
    assert database.rule == "CK202" and "side by side" in database.message
    assert f"K={NEW_K}" in database.message


@pytest.mark.slow
def test_rolling_switch_warns_once_naming_the_window_and_its_threads(built_timelines: Builder, backend: str) -> None:
    built = built_timelines(backend, "rolling-switch")
    moment = switch_time(built.manifest)
    touched = old_writes_after(built.manifest, moment)
    assert touched
    for cadence in (NEW_K, None):
        report = _scan(built, cadence)
        assert [f.rule for f in report.findings] == ["CK206"], cadence
        (warning,) = report.findings
        assert warning.severity.value == "warning" and format_time(moment) in warning.message
        named = {t.thread_id for t in built.manifest.threads if t.thread_id in warning.message}
        assert named == touched


def test_parallel_scan_judges_the_same(built_timelines: Builder, backend: str) -> None:
    for scenario in ("clean-switch", "rolling-switch", "concurrent-writers"):
        built = built_timelines(backend, scenario)
        single, parallel = _scan(built, NEW_K), _scan(built, NEW_K, jobs=3)
        assert sorted(map(repr, parallel.findings)) == sorted(map(repr, single.findings)), scenario


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_parallel_scan_runs_under_every_start_method(built_timelines: Builder, backend: str, start_method: str) -> None:
    # macOS and Windows have no fork by default: the workers get everything they need by pickling.
    built = built_timelines(backend, "concurrent-writers")
    choice = DatabaseChoice(target_from_argument(built.db, built.schema or ""), "test")
    request = ScanRequest(choice, ShapeSettings(NEW_K), "test")
    seen: list[int] = []
    parallel = scan(request, seen.append, jobs=2, start_method=start_method)
    single = _scan(built, NEW_K)
    assert sorted(map(repr, parallel.findings)) == sorted(map(repr, single.findings))
    assert parallel.checkpoints == single.checkpoints > 0
    assert seen and seen[-1] == single.checkpoints


def test_single_process_progress_is_a_running_total(built_timelines: Builder) -> None:
    built = built_timelines("sqlite", "clean-switch")
    choice = DatabaseChoice(target_from_argument(built.db), "test")
    seen: list[int] = []
    report = scan(ScanRequest(choice, ShapeSettings(NEW_K), "test"), seen.append)
    assert seen == sorted(seen) and len(seen) == report.threads and seen[-1] == report.checkpoints


# -- --since ---------------------------------------------------------------------------------------------


def test_since_the_switch_time_on_a_clean_switch(built_timelines: Builder, backend: str) -> None:
    built = built_timelines(backend, "clean-switch")
    moment = switch_time(built.manifest)
    at_switch = _scan(built, NEW_K, since=boundary_id(moment))
    assert [f.rule for f in at_switch.findings] == ["CK205"]
    written_since = {t.thread_id for t in built.manifest.threads if any(
        (write_time_ns(c.checkpoint_id) or 0) >= moment for c in t.checkpoints)}  # fmt: skip
    assert at_switch.threads == len(written_since) < len(built.manifest.threads)
    before = _scan(built, NEW_K, since=boundary_id(moment - 3_600 * 10**9))
    assert [f.rule for f in before.findings] == ["CK205"] and before.threads == len(built.manifest.threads)
    after = _scan(built, NEW_K, since=boundary_id(moment + 60 * 10**9))
    assert after.findings == []


def test_since_on_concurrent_writers(built_timelines: Builder, backend: str) -> None:
    built = built_timelines(backend, "concurrent-writers")
    moment = switch_time(built.manifest)
    report = _scan(built, NEW_K, since=boundary_id(moment))
    assert {f.thread_id for f in report.findings if f.severity.value == "error"} == old_writes_after(
        built.manifest, moment
    )
    last_write = max(write_time_ns(c.checkpoint_id) or 0 for t in built.manifest.threads for c in t.checkpoints)
    assert _scan(built, NEW_K, since=boundary_id(last_write + 1)).findings == []


def test_since_accepts_a_time_or_a_checkpoint_id_and_refuses_anything_else(
    built_timelines: Builder, backend: str
) -> None:
    built = built_timelines(backend, "clean-switch")
    moment = switch_time(built.manifest)
    first_new = min(
        c.checkpoint_id
        for t in built.manifest.threads
        for c in t.checkpoints
        if write_time_ns(c.checkpoint_id) == moment
    )
    by_time = cli_json("--db", built.db, "--cadence", "10", "--since", format_time(moment))
    by_id = cli_json("--db", built.db, "--cadence", "10", "--since", first_new)
    assert by_time[1]["summary"] == by_id[1]["summary"]  # type: ignore[index]
    result = run_ckpt("verify-shape", "--db", built.db, "--since", "yesterday")
    assert result.exit_code == 2 and "ISO-8601" in result.stderr


# -- write times and epochs ------------------------------------------------------------------------------


def test_write_time_from_the_id_equals_the_stored_ts(built_timelines: Builder, backend: str) -> None:
    """The id's UUIDv6 timestamp and the checkpoint's own ts agree (read here with the real saver)."""
    from langgraph.checkpoint.base import CheckpointTuple

    built = built_timelines(backend, "clean-switch")
    tuples: list[CheckpointTuple]
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with sqlite3.connect(built.db) as connection:
            tuples = list(SqliteSaver(connection).list(None))
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(built.db) as saver:
            tuples = list(saver.list(None))
    assert len(tuples) == sum(len(t.checkpoints) for t in built.manifest.threads)
    from datetime import datetime

    for item in tuples:
        from_id = write_time_ns(item.checkpoint["id"])
        assert from_id is not None
        stored = datetime.fromisoformat(item.checkpoint["ts"]).timestamp() * 1e9
        assert abs(from_id - stored) < 20_000, item.checkpoint["id"]


def test_epochs_of_a_thread_that_spans_the_switch(built_timelines: Builder, backend: str) -> None:
    built = built_timelines(backend, "clean-switch")
    reader, kind = open_reader(target_from_argument(built.db, built.schema or ""))
    spanning = [t for t in built.manifest.threads if len({w.cadence for w in t.writers}) == 2]
    for thread in spanning:
        from deerflow_ckpt.store.selection import ThreadSelection

        (lineage,) = list(reader.lineages(ThreadSelection(thread_id=thread.thread_id)))
        result = check_lineage(LineageGraph(lineage, kind), ShapeSettings())
        old, new = result.epochs
        assert (old.upper, new.lower, new.upper) == (None, NEW_K, NEW_K)
        assert old.lower is not None and old.lower > NEW_K
        first_new = next(c for c in thread.checkpoints if thread.writers[c.writer or 0].cadence == NEW_K)
        # The cut falls exactly where the K=10 writer's first checkpoint is.
        assert new.first_id == first_new.checkpoint_id
        assert old.stop == new.start and new.stop == len(lineage.records)


def test_ids_that_are_not_uuid6_have_no_write_time() -> None:
    assert write_time_ns("not-an-id") is None
    assert write_time_ns("1f0c0000-0000-4000-8000-000000000000") is None  # UUIDv4
    now = 1_764_000_000 * 10**9
    assert write_time_ns(boundary_id(now)) == now
    assert boundary_id(now) < boundary_id(now + 100) and write_time_ns(boundary_id(now + 1)) == now + 100


# -- inspect ---------------------------------------------------------------------------------------------


def inspect_json(built: BuiltDatabase, *args: str) -> dict[str, Any]:
    result = run_ckpt("inspect", *args, "--db", built.db, "--format", "json")
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.mark.slow
def test_inspect_summary_in_several_processes_draws_the_same_timeline(built_timelines: Builder, backend: str) -> None:
    for scenario in ("clean-switch", "rolling-switch", "concurrent-writers"):
        built = built_timelines(backend, scenario)
        single, parallel = inspect_json(built, "summary", "--jobs", "1"), inspect_json(built, "summary", "--jobs", "3")
        assert parallel == single, scenario


def test_inspect_summary_shows_the_timeline(built_timelines: Builder, backend: str) -> None:
    built = built_timelines(backend, "clean-switch")
    summary = inspect_json(built, "summary")["summary"]
    timeline = summary["timeline"]
    old, new = timeline["classes"]
    assert old["cadence"].startswith("K>=") and old["upper"] is None and new["cadence"] == f"K={NEW_K}"
    spanning = [t for t in built.manifest.threads if len({w.cadence for w in t.writers}) == 2]
    assert summary["threads_with_several_epochs"] == len(spanning)
    assert old["threads"] == len([t for t in built.manifest.threads if OLD_K in {w.cadence for w in t.writers}])
    assert new["threads"] == len([t for t in built.manifest.threads if NEW_K in {w.cadence for w in t.writers}])
    assert old["checkpoints"] + new["checkpoints"] == sum(len(t.checkpoints) for t in built.manifest.threads)
    (change,) = timeline["changes"]
    assert change["kind"] == "clean" and change["at"] == format_time(switch_time(built.manifest))
    assert timeline["in_force"] == {"cadence": f"K={NEW_K}", "since": change["at"]}
    chart = summary["chart"]
    old_row, new_row = (row["writing_epochs"] for row in chart["rows"])
    # Before the restart only K=1000 writes, after it only K=10: the rows never share a time slice.
    assert max(i for i, n in enumerate(old_row) if n) < min(i for i, n in enumerate(new_row) if n)
    text = run_ckpt("inspect", "summary", "--db", built.db).stdout
    assert "Cadence over time" in text and f"in force: K={NEW_K} since {change['at']}, every other cadence" in text
    assert "clean change" in text and "█" in text


def test_inspect_thread_shows_an_epoch_per_cadence(built_timelines: Builder, backend: str) -> None:
    built = built_timelines(backend, "clean-switch")
    (thread,) = [t for t in built.manifest.threads if t.thread_id.endswith("-t0")]
    shown = inspect_json(built, "thread", thread.thread_id)["threads"][0]["shown"]
    old, new = shown["epochs"]
    assert (old["upper"], new["inferred"]) == (None, NEW_K)
    assert old["metrics"][0]["count"] == 0  # K=1000 never closed an interval
    counters = new["metrics"][0]
    assert {(b["lower"], b["count"]) for b in counters["buckets"]} == {(NEW_K, counters["count"])}
    assert new["carried_over_intervals"] and min(new["carried_over_intervals"]) > NEW_K
    assert shown["cadence"]["inferred"] == NEW_K and shown["what_if"]["epoch"] == 1
    text = run_ckpt("inspect", "thread", thread.thread_id, "--db", built.db).stdout
    assert "Cadence epochs" in text and "epoch 2 (K = 10" in text
    assert "What-if: another cadence K for epoch 2 (the current one" in text


def test_rolling_switch_with_the_cadence_from_a_config(
    built_timelines: Builder, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = built_timelines(backend, "rolling-switch")
    monkeypatch.chdir(tmp_path)
    code, document = cli_json("--config", str(config_for(built, tmp_path, NEW_K)))
    assert code == 0
    findings = document["findings"]
    assert [(f["rule"], f["severity"], f["thread_id"]) for f in findings] == [("CK206", "warning", None)]  # type: ignore[union-attr]
    assert document["timeline"]["changes_into_force"][0]["kind"] == "rolling"  # type: ignore[index]
    (tmp_path / "strict").mkdir()
    code, _ = cli_json("--config", str(config_for(built, tmp_path / "strict", NEW_K)), "--fail-on", "warning")
    assert code == 1


def test_since_spreads_its_threads_over_processes(
    built_timelines: Builder, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import deerflow_ckpt.commands.shares as shares_module

    built = built_timelines(backend, "concurrent-writers")
    since = boundary_id(switch_time(built.manifest))
    single = _scan(built, NEW_K, since=since)
    monkeypatch.setattr(shares_module, "THREADS_PER_SHARE", 1)
    parallel = _scan(built, NEW_K, since=since, jobs=3)
    assert parallel.threads == single.threads and parallel.checkpoints == single.checkpoints
    assert sorted(map(repr, parallel.findings)) == sorted(map(repr, single.findings))


def test_summary_chart_on_an_ascii_terminal(built_timelines: Builder) -> None:
    built = built_timelines("sqlite", "clean-switch")
    # A real process: only there is sys.stdout an ASCII stream, as on an ASCII terminal.
    done = run_ckpt("inspect", "summary", "--db", built.db, env={"PYTHONIOENCODING": "ascii"}, process=True)
    assert done.exit_code == 0, done.stderr
    out = done.stdout_bytes.decode("ascii")
    old, new = (line for line in out.splitlines() if line.strip().startswith(("K>=", "K=10 |")) and "|" in line)
    old_cells, new_cells = old.split("|")[1], new.split("|")[1]
    assert set(old_cells) == {"#", "."} == set(new_cells)
    assert old_cells.rindex("#") < new_cells.index("#")


# -- machine speed: changes inside the clock skew (timelines.py, instant-*) ------------------------------


def _span(manifest: Manifest) -> tuple[int, int]:
    times = [write_time_ns(c.checkpoint_id) or 0 for t in manifest.threads for c in t.checkpoints]
    return min(times), max(times)


def _last_old_write(thread: ThreadRecord) -> int | None:
    """When a K=1000 writer last wrote the thread (None: never)."""
    old = [c for c in thread.checkpoints if c.writer is not None and thread.writers[c.writer].cadence == OLD_K]
    return max((write_time_ns(c.checkpoint_id) or 0 for c in old), default=None)


@pytest.mark.slow
def test_an_instant_restart_is_history_on_every_thread(
    built_timelines: Builder, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No pause at the restart, turns 10 ms apart: the whole database is written inside the clock skew, so the
    order of old and new writes is not known, and nothing may be an error because of it."""
    built = built_timelines(backend, "instant-switch")
    first, last = _span(built.manifest)
    assert last - first < DEFAULT_CLOCK_SKEW_NS, "the fixture writes everything inside the skew"
    for cadence in (NEW_K, None):
        report = _scan(built, cadence)
        assert [f.rule for f in report.findings] == ["CK205"], (cadence, report.findings)
        assert report.timeline is not None and report.timeline.current is not None
        assert report.timeline.current.label == f"K={NEW_K}" and report.timeline.prior
    monkeypatch.chdir(tmp_path)
    code, document = cli_json("--config", str(config_for(built, tmp_path, NEW_K)))
    assert code == 0 and [f["rule"] for f in document["findings"]] == ["CK205"]  # type: ignore[union-attr]
    text = run_ckpt("verify-shape", "--db", built.db, "--cadence", str(NEW_K)).stdout
    (in_force,) = [line.strip() for line in text.splitlines() if line.strip().startswith("in force:")]
    assert in_force.startswith(f"in force: K={NEW_K} since ") and "the expected cadence" in in_force
    assert "after a clean change from K>=" in in_force and "also wrote" not in in_force


@pytest.mark.slow
def test_a_rolling_window_ending_near_the_last_write_flags_only_threads_the_old_cadence_wrote_after(
    built_timelines: Builder, backend: str
) -> None:
    """The old pods stop about 5 s before the last write, after writing odd threads for 10 s past the restart:
    called concurrent. Threads the old cadence never wrote after K=10 began (even ones, and one only the old
    cadence ever wrote) get no finding; nothing is an error on the strength of an order inside the skew."""
    built = built_timelines(backend, "instant-rolling")
    moment = switch_time(built.manifest)
    _, last = _span(built.manifest)
    skew = DEFAULT_CLOCK_SKEW_NS
    late = {t.thread_id for t in built.manifest.threads if (_last_old_write(t) or 0) > moment + skew}
    untouched = {t.thread_id for t in built.manifest.threads if (_last_old_write(t) or 0) < moment}
    assert late and untouched and not late & untouched
    assert any(t.thread_id.endswith("old-only") for t in built.manifest.threads if t.thread_id in untouched)
    stopped = max(_last_old_write(t) or 0 for t in built.manifest.threads)
    assert 0 < last - stopped < 10 * 10**9, "the old cadence stops seconds before the last write"
    report = _scan(built, NEW_K)
    assert report.timeline is not None and report.timeline.current is not None
    errors = {f.thread_id for f in report.findings if f.severity.value == "error"}
    assert errors == late
    assert not set(thread_findings(report)) & untouched
    # The old cadence's first write is inside the skew of the restart: not provably "an old process still
    # writing" (CK207), but its writes 10 s after the restart are errors.
    assert "CK207" not in {f.rule for f in report.findings}
    for finding in report.findings:
        if finding.thread_id in late and finding.severity.value == "error":
            assert "still wrote" in finding.message or "which K=10 cannot write" in finding.message
    unexpected = _scan(built)
    assert not {f.thread_id for f in unexpected.findings if f.severity.value == "error"}


@pytest.mark.slow
def test_threads_the_old_cadence_never_touched_after_the_switch_get_no_error(
    built_timelines: Builder, backend: str
) -> None:
    """In every kind of change (clean, rolling, concurrent; simulated clock and machine speed), a thread whose
    old-cadence writes all precede the restart keeps no error."""
    for scenario in ("clean-switch", "rolling-switch", "concurrent-writers", "instant-switch", "instant-rolling"):
        built = built_timelines(backend, scenario)
        moment = switch_time(built.manifest)
        untouched = {t.thread_id for t in built.manifest.threads if (_last_old_write(t) or 0) < moment}
        assert untouched, scenario
        report = _scan(built, NEW_K)
        errors = {f.thread_id for f in report.findings if f.severity.value == "error"}
        assert not errors & untouched, (scenario, errors & untouched)
