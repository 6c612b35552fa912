"""A plain LangGraph app's store (fixtures/plain_app.py: its own StateGraph, full mode, no DeerFlow config or
marker), written through the real SqliteSaver and PostgresSaver: every command describes it honestly (no
snapshots, no cadence), `--mode full` lets `plan retention` cut its history on Postgres, the cut store still
reads and continues through the app's own graph, and a `--mode` the store contradicts is said so.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from fixtures import plain_app
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase, create_database, drop_database, dsn_for, require_postgres

CHECKPOINTS = plain_app.THREADS * plain_app.TURNS * 3  # each turn: input, the input applied, the answer
FULL_STORE = f"full mode: none of the {plain_app.THREADS} threads holds a delta-mode checkpoint"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def plain_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app's store on each backend, written once for the module: what `--db` takes."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("plain-app") / "app.db"
        yield str(plain_app.write_sqlite(path))
        return
    require_postgres()
    name = create_database("ckpt_plain")
    try:
        yield plain_app.write_postgres(dsn_for(name))
    finally:
        drop_database(name)


# Measured 0.5-1.0 s (several ckpt runs).
@pytest.mark.slow
def test_verify_shape_says_full_mode_not_a_missing_cadence(plain_store: str) -> None:
    code, out, err = run_ckpt("verify-shape", "--db", plain_store)
    assert code == 0, out + err
    assert FULL_STORE in out
    assert "none settled" not in out and "inferred per thread" not in out
    assert f"{plain_app.THREADS} threads (0 delta, {plain_app.THREADS} full, 0 migrated)" in out
    assert "No storage-shape violations found." in out


def test_inspect_summary_has_no_cadence_sections(plain_store: str) -> None:
    code, out, err = run_ckpt("inspect", "summary", "--db", plain_store, "--mode", "full")
    assert code == 0, out + err
    assert "deployment mode: full (from --mode)" in out
    assert FULL_STORE in out
    assert "Inferred K" not in out and "Cadence over time" not in out and "warning" not in out
    document = json.loads(run_ckpt("inspect", "summary", "--db", plain_store, "--format", "json").stdout)
    assert document["settings"]["mode"] is None and document["summary"]["mode_conflict"] is None


def test_inspect_thread_has_no_snapshot_lines(plain_store: str) -> None:
    code, out, err = run_ckpt("inspect", "thread", plain_app.thread_id(1), "--db", plain_store)
    assert code == 0, out + err
    assert "full mode: each checkpoint stores the whole message list" in out
    assert f"{plain_app.TURNS * 3} checkpoints, {plain_app.TURNS * 2} message-writing steps" in out
    for delta_only in ("open tail", "since the last snapshot", "Snapshot intervals", "Cadence:"):
        assert delta_only not in out


def test_inspect_storage_names_no_snapshots(plain_store: str) -> None:
    code, out, err = run_ckpt("inspect", "storage", "--db", plain_store)
    assert code == 0, out + err
    assert "Bytes by channel" in out and "messages" in out and "answered" in out
    assert "snapshot" not in out.lower()


# Measured 0.5-1.0 s (several ckpt runs).
@pytest.mark.slow
def test_plan_retention_full_mode_keeps_what_the_policy_names(plain_store: str) -> None:
    kept = 2 * plain_app.THREADS
    code, out, err = run_ckpt("plan", "retention", "--db", plain_store, "--mode", "full", "--keep-newest", "2")
    assert code == 0, out + err
    assert "deployment mode: full (from --mode)" in out
    assert f"{CHECKPOINTS} checkpoints: keeps {kept} (0 of them beyond the policy" in out
    assert f"deletes {CHECKPOINTS - kept}" in out
    assert "would break" not in out and "warning" not in out


def test_plan_retention_without_mode_says_how_to_state_it(plain_store: str) -> None:
    """Postgres: an unstated mode keeps full-mode history (a delta process may continue it) and says why;
    SQLite: the walk does not depend on the mode, so nothing is said and the policy alone is kept."""
    code, out, err = run_ckpt("plan", "retention", "--db", plain_store, "--keep-newest", "2")
    assert code == 0, out + err
    if plain_store.startswith("postgresql://"):
        assert f"keeps {CHECKPOINTS} (" in out
        assert "pass --mode full if every process writing here runs full mode" in out
    else:
        assert f"keeps {2 * plain_app.THREADS} (0 of them beyond" in out and "deployment mode" not in out


# Measured 0.5-1.0 s (several ckpt runs).
@pytest.mark.slow
def test_mode_delta_on_a_full_store_is_said_so(plain_store: str) -> None:
    contradiction = "--mode says delta mode, but no delta-mode checkpoint is in the 5 threads read"
    for command in (["verify-shape"], ["inspect", "summary"], ["plan", "retention", "--keep-newest", "2"]):
        code, out, err = run_ckpt(*command, "--db", plain_store, "--mode", "delta")
        assert code == 0, out + err
        assert contradiction in out, command
    code, out, err = run_ckpt(
        "plan", "retention", "--db", plain_store, "--mode", "delta", "--keep-newest", "2", "--format", "json"
    )
    assert code == 0, err
    assert contradiction in json.loads(out)["mode"]["conflict"] and contradiction in err
    code, out, err = run_ckpt("inspect", "thread", plain_app.thread_id(0), "--db", plain_store, "--mode", "delta")
    assert "--mode says delta mode, but no delta-mode checkpoint is in the 1 thread read" in out


# Measured 0.5-1.0 s (several ckpt runs).
@pytest.mark.slow
def test_mode_full_on_a_delta_store_is_said_so(built_sqlite: BuiltDatabase) -> None:
    code, out, err = run_ckpt("verify-shape", "--db", built_sqlite.db, "--mode", "full", "--exit-zero")
    assert code == 0, err
    assert "deployment mode: full (from --mode)" in out
    assert "--mode says full mode, but" in out and "hold delta-mode checkpoints" in out
    document = json.loads(
        run_ckpt("verify-shape", "--db", built_sqlite.db, "--mode", "full", "--format", "json", "--exit-zero").stdout
    )
    assert document["settings"]["mode"] == "full" and "--mode says full mode" in document["summary"]["mode_conflict"]
    _, without, _ = run_ckpt("verify-shape", "--db", built_sqlite.db, "--exit-zero")
    assert "warning: --mode" not in without and "deployment mode" not in without


def test_mode_is_full_or_delta() -> None:
    code, _, err = run_ckpt("verify-shape", "--db", "nowhere.db", "--mode", "fast")
    assert code == 2 and "--mode" in err


def _apply(db: str, script: str) -> None:
    if db.startswith("postgresql://"):
        done = subprocess.run(["psql", db, "-q", "-v", "ON_ERROR_STOP=1", "-f", "-"], input=script, text=True)
    else:
        done = subprocess.run(["sqlite3", db], input=script, text=True, capture_output=True)
    assert done.returncode == 0


def _checkpoints(db: str) -> int:
    if db.startswith("postgresql://"):
        with psycopg.connect(db) as connection:
            row = connection.execute("SELECT count(*) FROM checkpoints").fetchone()
    else:
        with sqlite3.connect(db) as connection:
            row = connection.execute("SELECT count(*) FROM checkpoints").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_full_mode_plan_applied_leaves_a_store_the_app_continues(backend: str, tmp_path: Path) -> None:
    """The script of `--mode full --keep-newest 2`, run with the backend's shell, leaves every thread whole
    for the app's own graph: all its messages read back, and a new turn runs on each."""
    name = None
    if backend == "sqlite":
        db = str(plain_app.write_sqlite(tmp_path / "app.db"))
    else:
        require_postgres()
        name = create_database("ckpt_plain_cut")
        db = plain_app.write_postgres(dsn_for(name))
    try:
        plan = run_ckpt("plan", "retention", "--db", db, "--mode", "full", "--keep-newest", "2", "--format", "sql")
        assert plan.exit_code == 0, plan.stderr
        _apply(db, plan.stdout)
        assert _checkpoints(db) == 2 * plain_app.THREADS
        verified = run_ckpt("verify-shape", "--db", db, "--mode", "full")
        assert verified.exit_code == 0 and "No storage-shape violations found." in verified.stdout
        with _saver(db) as saver:
            app = plain_app.build_graph(saver)
            for index in range(plain_app.THREADS):
                config = {"configurable": {"thread_id": plain_app.thread_id(index)}}
                assert len(app.get_state(config).values["messages"]) == 2 * plain_app.TURNS
                state = app.invoke({"messages": [HumanMessage(content="one more", id=f"h{index}-more")]}, config)
                assert len(state["messages"]) == 2 * plain_app.TURNS + 2
                assert state["answered"] == plain_app.TURNS + 1
    finally:
        if name is not None:
            drop_database(name)


def _saver(db: str) -> AbstractContextManager[BaseCheckpointSaver[Any]]:
    if db.startswith("postgresql://"):
        from langgraph.checkpoint.postgres import PostgresSaver

        return PostgresSaver.from_conn_string(db)
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver.from_conn_string(db)


def test_the_app_is_plain_langgraph(tmp_path: Path) -> None:
    """The fixture writes no DeerFlow marker: what makes the store 'not DeerFlow' is checked, not assumed."""
    db = plain_app.write_sqlite(tmp_path / "app.db", threads=1, turns=2)
    with sqlite3.connect(db) as connection:
        metadata = [row[0] for row in connection.execute("SELECT CAST(metadata AS TEXT) FROM checkpoints")]
    assert metadata and not any("deerflow" in value for value in metadata)
