"""verify-shape as a CI gate an app can tune: --allow-type for the app's own state types (CK105), and a
baseline (--write-baseline / --baseline) that reports only findings not recorded yet."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from deerflow_ckpt.store.peek import parse_allowed_type
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase


@dataclass
class Itinerary:
    """An app's own state value: LangGraph stores it as a msgpack constructor ext naming this class."""

    stops: int
    city: str


ITINERARY = f"{Itinerary.__module__}:{Itinerary.__name__}"


class TripState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    plan: Itinerary


def _plan(state: TripState) -> dict[str, Any]:
    stops = len(state["messages"])
    return {"messages": [AIMessage(f"plan with {stops} stops")], "plan": Itinerary(stops, "Lisbon")}


def app_serializer() -> JsonPlusSerializer:
    """What the app hands its saver: LangGraph's strict allowlist extended with its own dataclass."""
    return JsonPlusSerializer(allowed_msgpack_modules=[Itinerary])


def run_trip_app(checkpointer: Any, threads: list[str], turns: int = 3) -> None:
    """A plain LangGraph app (no DeerFlow): its own StateGraph, full-mode messages, a dataclass in state."""
    graph = StateGraph(TripState)
    graph.add_node("plan", _plan)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", END)
    app = graph.compile(checkpointer=checkpointer)
    for thread_id in threads:
        for turn in range(turns):
            app.invoke({"messages": [HumanMessage(f"turn {turn}")]}, {"configurable": {"thread_id": thread_id}})


def trip_store_sqlite(path: Path, threads: list[str], turns: int = 3) -> Path:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with sqlite3.connect(path, check_same_thread=False) as connection:
        run_trip_app(SqliteSaver(connection, serde=app_serializer()), threads, turns)
    connection.close()
    return path


def scan(*args: str) -> tuple[int, dict[str, Any], str]:
    result = run_ckpt("verify-shape", "--format", "json", *args)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout), result.stderr


# -- --allow-type -----------------------------------------------------------------------------------


@pytest.mark.slow  # runs a real LangGraph app
def test_an_allowlisted_dataclass_is_ck105_without_allow_type_and_clean_with_it(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = trip_store_sqlite(tmp_path / "trips.db", ["trip-1", "trip-2"])
    code, document, _ = scan("--db", str(db))
    assert code == 1
    named = [f for f in document["findings"] if f["rule"] == "CK105"]
    assert named and {f["rule"] for f in document["findings"]} == {"CK105"}
    assert {f["thread_id"] for f in named} == {"trip-1", "trip-2"}
    for finding in named:
        assert f"names {Itinerary.__module__}.Itinerary" in finding["message"]
        # Each finding says how to trust the type if it is the app's own: flag, config key, LangGraph's entry.
        assert f"--allow-type {ITINERARY}" in finding["message"]
        assert f'allowed_types = ["{ITINERARY}"]' in finding["message"]
        assert f'("{Itinerary.__module__}", "Itinerary")' in finding["message"]

    code, document, _ = scan("--db", str(db), "--allow-type", ITINERARY)
    assert code == 0 and document["findings"] == []
    # The key the finding names, in a project file: the same trust (the command line would add to it).
    project = tmp_path / "project"
    project.mkdir()
    (project / ".ckpt.toml").write_text(f'allowed_types = ["{ITINERARY}"]\n', encoding="utf-8")
    result = run_ckpt("verify-shape", "--format", "json", "--db", str(db), cwd=project)
    assert result.exit_code == 0 and json.loads(result.stdout)["settings"]["allowed_types"] == [ITINERARY]
    # Another type of the same module is not trusted by it: exactly the named ones are.
    code, document, _ = scan("--db", str(db), "--allow-type", f"{Itinerary.__module__}:Other")
    assert code == 1 and {f["rule"] for f in document["findings"]} == {"CK105"}

    # The mapping holds against LangGraph itself: the entry --allow-type names is what its allowlist takes,
    # and its strict loader constructs the dataclass from that store only with it.
    entry = parse_allowed_type(ITINERARY)
    with sqlite3.connect(db, check_same_thread=False) as connection:
        config = {"configurable": {"thread_id": "trip-1"}}
        allowed = SqliteSaver(connection, serde=JsonPlusSerializer(allowed_msgpack_modules=[entry]))
        loaded = allowed.get_tuple(config)  # type: ignore[arg-type]
        assert loaded is not None and loaded.checkpoint["channel_values"]["plan"] == Itinerary(5, "Lisbon")
        strict = SqliteSaver(connection, serde=JsonPlusSerializer(allowed_msgpack_modules=None))
        blocked = strict.get_tuple(config)  # type: ignore[arg-type]
        assert blocked is not None and not isinstance(blocked.checkpoint["channel_values"]["plan"], Itinerary)
    connection.close()


@pytest.mark.parametrize("value", ["Itinerary", "app.models:", ":Itinerary", "app models:Itinerary", "a:b.C", "a:B:c"])
def test_allow_type_refuses_what_is_not_module_colon_name(value: str) -> None:
    result = run_ckpt("verify-shape", "--db", "unused.db", "--allow-type", value)
    assert result.exit_code == 2
    assert "--allow-type" in result.stderr and "module:Name" in result.stderr


def test_allow_type_reads_as_langgraphs_allowlist_entry() -> None:
    assert parse_allowed_type("app.models:Itinerary") == ("app.models", "Itinerary")
    assert parse_allowed_type("models:Plan_2") == ("models", "Plan_2")


# -- baseline ---------------------------------------------------------------------------------------


def _keys(document: dict[str, Any]) -> Counter[tuple[str, str, str]]:
    """Findings by where they are (one checkpoint can hold several: its own blob and its writes)."""
    return Counter((f["rule"], f["thread_id"], f["checkpoint_id"]) for f in document["findings"])


def baseline_round_trip(db: str, tmp_path: Path, add_turn: Any, delete_thread: Any) -> None:
    """Write a baseline, add faults (one more turn of trip-1 stores its dataclass again), fix some (trip-2
    deleted): only the new findings are reported and the exit code counts them; the fixed ones are gone."""
    baseline = tmp_path / "ckpt-baseline.json"
    _, before, _ = scan("--db", db)
    assert before["findings"]
    code, written, _ = scan("--db", db, "--write-baseline", str(baseline))
    assert code == 0 and written["findings"] == []
    assert written["baseline"] == {
        "file": str(baseline),
        "written": True,
        "recorded": len(before["findings"]),
        "known": len(before["findings"]),
        "new": 0,
        "gone": 0,
        "gone_findings": [],
    }
    recorded = json.loads(baseline.read_bytes())
    assert recorded["schema_version"] == 1 and recorded["command"] == "verify-shape"
    assert Counter((e["rule"], e["thread_id"], e["checkpoint_id"]) for e in recorded["findings"]) == _keys(before)

    code, unchanged, _ = scan("--db", db, "--baseline", str(baseline))
    assert code == 0 and unchanged["findings"] == [] and unchanged["baseline"]["gone"] == 0

    add_turn()
    delete_thread("trip-2")
    _, now, _ = scan("--db", db)
    code, gated, _ = scan("--db", db, "--baseline", str(baseline))
    new = _keys(now) - _keys(before)
    assert code == 1 and new and _keys(gated) == new
    assert {thread for _, thread, _ in new} == {"trip-1"}
    assert gated["summary"]["by_rule"] == {"CK105": new.total()}
    gone = Counter((e["rule"], e["thread_id"], e["checkpoint_id"]) for e in gated["baseline"]["gone_findings"])
    assert gone == Counter({key: n for key, n in _keys(before).items() if key[1] == "trip-2"})
    assert gated["baseline"]["gone"] == gone.total() > 0
    assert gated["baseline"]["known"] == len(before["findings"]) - gone.total()

    text = run_ckpt("verify-shape", "--db", db, "--baseline", str(baseline), "--color", "never")
    assert text.exit_code == 1
    assert f"{new.total()} new, {gone.total()} gone" in text.stdout
    assert text.stdout.count("CK105 error thread") == new.total()
    sarif = run_ckpt("verify-shape", "--db", db, "--baseline", str(baseline), "--format", "sarif")
    assert sarif.exit_code == 1 and len(json.loads(sarif.stdout)["runs"][0]["results"]) == new.total()
    github = run_ckpt("verify-shape", "--db", db, "--baseline", str(baseline), "--format", "github")
    assert github.exit_code == 1 and github.stdout.count("::error") == new.total()
    # The new ones are the app's own type: allowing it leaves nothing new, the fixed ones still gone.
    code, allowed, _ = scan("--db", db, "--baseline", str(baseline), "--allow-type", ITINERARY)
    assert code == 0 and allowed["findings"] == [] and allowed["baseline"]["gone"] == len(before["findings"])


@pytest.mark.slow  # runs a real LangGraph app
def test_baseline_round_trip_sqlite(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = trip_store_sqlite(tmp_path / "trips.db", ["trip-1", "trip-2", "trip-3"])

    def add_turn() -> None:
        with sqlite3.connect(db, check_same_thread=False) as connection:
            run_trip_app(SqliteSaver(connection, serde=app_serializer()), ["trip-1"], turns=1)
        connection.close()

    def delete_thread(thread_id: str) -> None:
        with sqlite3.connect(db, check_same_thread=False) as connection:
            SqliteSaver(connection).delete_thread(thread_id)
        connection.close()

    baseline_round_trip(str(db), tmp_path, add_turn, delete_thread)


@pytest.mark.slow  # runs a real LangGraph app
@pytest.mark.postgres
def test_baseline_round_trip_postgres(pg_database: str, tmp_path: Path) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_database) as saver:
        saver.setup()
    with PostgresSaver.from_conn_string(pg_database) as saver:
        saver.serde = app_serializer()
        run_trip_app(saver, ["trip-1", "trip-2", "trip-3"])

    def add_turn() -> None:
        with PostgresSaver.from_conn_string(pg_database) as saver:
            saver.serde = app_serializer()
            run_trip_app(saver, ["trip-1"], turns=1)

    def delete_thread(thread_id: str) -> None:
        with PostgresSaver.from_conn_string(pg_database) as saver:
            saver.delete_thread(thread_id)

    baseline_round_trip(pg_database, tmp_path, add_turn, delete_thread)


def test_a_baseline_that_is_not_one_is_refused(tmp_path: Path) -> None:
    for text, why in (
        ("not json", "not JSON"),
        ('{"command": "lint-config"}', "not a ckpt baseline"),
        ('{"command": "verify-shape", "schema_version": 9, "findings": []}', "schema_version 9"),
    ):
        file = tmp_path / "baseline.json"
        file.write_text(text)
        result = run_ckpt("verify-shape", "--db", str(tmp_path / "none.db"), "--baseline", str(file))
        # Refused before the scan (the database does not even exist), saying why.
        assert result.exit_code == 2 and why in result.stderr, result.output


def test_write_baseline_never_replaces_the_database(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    database = tmp_path / "deerflow.db"
    database.write_bytes(built_sqlite.path.read_bytes())
    original = database.read_bytes()
    for target in (database, tmp_path / "deerflow.db-wal"):
        result = run_ckpt("verify-shape", "--db", str(database), "--write-baseline", str(target))
        assert result.exit_code == 2 and "the baseline would overwrite it" in result.stderr, result.output
    assert database.read_bytes() == original and not (tmp_path / "deerflow.db-wal").exists()
    # Both options at once is refused too: which file would the run read?
    result = run_ckpt("verify-shape", "--db", str(database), "--write-baseline", "a.json", "--baseline", "b.json")
    assert result.exit_code == 2 and "not both" in result.stderr
