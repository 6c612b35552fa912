"""verify-shape --deep: every stored message list against the replay of its writes, on both backends.

The fixture databases are written by real graphs; the CK106 faults are edits made afterwards through the
saver (SQLite) or targeted SQL on the blob (Postgres). The real savers are the oracle: what LangGraph
reads at a checkpoint, in strict msgpack mode, equals the inert fold there, message by message.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from deerflow_ckpt.analysis.replay import prove_lineage
from deerflow_ckpt.analysis.shape import ShapeSettings
from deerflow_ckpt.commands.verify_shape import ScanReport, ScanRequest, scan
from deerflow_ckpt.store.history import open_history
from deerflow_ckpt.store.messages import StoredMessage
from deerflow_ckpt.store.records import Shape, key_text
from deerflow_ckpt.store.source import DatabaseChoice, target_from_argument
from fixtures.dbbuilder import readback
from tests.conftest import BuiltDatabase
from tests.test_verify_shape_rules import expected, located

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
# Scenarios whose threads must prove every stored list they hold (and hold some).
PROVED_SCENARIOS = (
    "clean-delta",
    "clean-full",
    "migration",
    "overwrite",
    "remove",
    "update-state",
    "fork",
    "superstep-bound",
    "mixed-writers",
    "subgraph",
)


@pytest.fixture(params=BACKENDS)
def built(request: pytest.FixtureRequest) -> BuiltDatabase:
    database: BuiltDatabase = request.getfixturevalue(f"built_{request.param}")
    return database


_reports: dict[str, ScanReport] = {}


def deep_scan(built: BuiltDatabase, jobs: int = 1) -> ScanReport:
    key = f"{built.db}|{built.schema}|{jobs}"
    if key not in _reports:
        choice = DatabaseChoice(target_from_argument(built.db, built.schema or ""), "test")
        _reports[key] = scan(ScanRequest(choice, ShapeSettings(deep=True), "test"), jobs=jobs)
    return _reports[key]


def test_deep_scan_reports_exactly_the_faults(built: BuiltDatabase) -> None:
    """Every fault is found where it was injected, CK106 ones included, and nothing else is."""
    report = deep_scan(built)
    for thread in built.manifest.threads:
        assert located(report.findings, thread.thread_id) == expected(thread, {"deep": True}), thread.thread_id
    ck106 = [f for f in report.findings if f.rule == "CK106"]
    assert {f.thread_id for f in ck106} == {
        "fault-ck103-empty-snapshot",
        "fault-ck106-snapshot-missing",
        "fault-ck106-content-altered",
        "fault-ck106-swapped",
        "fault-ck106-foreign-snapshot",
        "fault-ck106-full-diverged",
    }
    assert report.proof is not None and report.proof.differing_lists == len(ck106)


def test_each_ck106_fault_is_caught_by_that_rule_alone(built: BuiltDatabase) -> None:
    """Without --deep the edited threads are clean: no shape rule sees a list that lost or changed a message."""
    choice = DatabaseChoice(target_from_argument(built.db, built.schema or ""), "test")
    plain = scan(ScanRequest(choice, ShapeSettings(), "test"))
    deep = deep_scan(built)
    for thread in built.manifest.by_scenario("fault-ck106"):
        assert located(plain.findings, thread.thread_id) == set(), thread.thread_id
    by_thread = {f.thread_id: f.message for f in deep.findings if f.rule == "CK106"}
    assert "missing 'a002'" in by_thread["fault-ck106-snapshot-missing"]
    assert "content changed in 'h002'" in by_thread["fault-ck106-content-altered"]
    assert "reordered" in by_thread["fault-ck106-swapped"]
    assert "content changed in 'h001', 'a001'" in by_thread["fault-ck106-foreign-snapshot"]
    assert "stored message list" in by_thread["fault-ck106-full-diverged"]
    assert "first divergence at the write of task" in by_thread["fault-ck106-snapshot-missing"]


def test_parallel_deep_scan_agrees(built: BuiltDatabase) -> None:
    one, two = deep_scan(built), deep_scan(built, jobs=2)
    assert sorted(map(repr, one.findings)) == sorted(map(repr, two.findings))
    assert one.proof is not None and two.proof is not None
    assert (one.proof.proved_lists, one.proof.lineages) == (two.proof.proved_lists, two.proof.lineages)


def _histories(built: BuiltDatabase) -> Iterator[Any]:
    yield from open_history(target_from_argument(built.db, built.schema or "")).histories()


def test_legitimate_threads_prove_clean(built: BuiltDatabase) -> None:
    """RemoveMessage, REMOVE_ALL, replaced ids, Overwrite, forks, migrations, update_state and several K."""
    results = {}
    for history in _histories(built):
        results[(history.thread_id, history.checkpoint_ns)] = prove_lineage(history)
    for scenario in PROVED_SCENARIOS:
        threads = built.manifest.by_scenario(scenario)
        assert threads, scenario
        for thread in threads:
            mine = [r for (tid, _), r in results.items() if tid == thread.thread_id]
            assert mine and all(not r.findings and not r.unprovable for r in mine), (thread.thread_id, mine)
            assert sum(r.proved for r in mine) > 0, thread.thread_id


def message_fields(payload: bytes) -> dict[str, Any]:
    """The field map of a stored message (ext 5: [module, class, fields, method]), for comparing in tests."""
    inner = msgspec.msgpack.decode(payload, ext_hook=lambda code, data: msgspec.msgpack.decode(data))
    fields: dict[str, Any] = inner[2]
    return fields


def _as_compared(messages: list[StoredMessage]) -> list[tuple[Any, ...]]:
    """(id, type, content) of each message, from its stored bytes."""
    return [(message.id, message.kind, message_fields(message.payload)["content"]) for message in messages]


@pytest.mark.slow
def test_the_real_saver_reads_what_the_fold_says(built: BuiltDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle: LangGraph's read (strict msgpack) at the head and at sampled checkpoints equals the fold;
    at a CK106 snapshot it reads the stored list, which the fold shows to be wrong."""
    monkeypatch.setenv("LANGGRAPH_STRICT_MSGPACK", "true")
    monkeypatch.setattr("langgraph.checkpoint.serde._msgpack.STRICT_MSGPACK_ENABLED", True)
    folds: dict[tuple[str, str], list[StoredMessage] | None] = {}
    for history in _histories(built):
        if history.checkpoint_ns == "":
            prove_lineage(
                history,
                lambda checkpoint, fold, tid=history.thread_id: folds.__setitem__(
                    (tid, checkpoint.checkpoint_id), None if fold is None else list(fold)
                ),
            )
    faulted = {t.thread_id: f.checkpoint_id for t in built.manifest.threads for f in t.faults if f.rule == "CK106"}
    compared = differed = 0
    with readback.reader(built.manifest, built.db) as (_, factory):
        for thread in built.manifest.threads:
            if thread.read_back in ("unsafe", "raises") or any(f.rule in ("CK104", "CK303") for f in thread.faults):
                continue
            puts = [c for c in thread.checkpoints if c.checkpoint_ns == ""]
            sample = {puts[-1].checkpoint_id, *(c.checkpoint_id for c in puts[::4])}
            damaged = faulted.get(thread.thread_id)
            if damaged is not None:
                # Reads after a damaged list start from it: only what lies before it is compared.
                sample = {cid for cid in sample if cid < damaged} | {damaged}
            for cid in sorted(sample):
                fold = folds.get((thread.thread_id, cid))
                if fold is None:
                    continue
                read = readback.state(factory, thread, cid).get("messages", [])
                got = [(m.id, type(m).__name__, m.content) for m in read]
                if cid == damaged:
                    assert got != _as_compared(fold), (thread.thread_id, cid)
                    differed += 1
                else:
                    assert got == _as_compared(fold), (thread.thread_id, cid)
                    compared += 1
    assert compared >= 150 and differed == len(faulted)


# -- the CLI -------------------------------------------------------------------------------------------


def test_verify_shape_deep_cli(built: BuiltDatabase) -> None:
    from tests.cli import run_ckpt
    from tests.test_inspect_cli import db_args

    result = run_ckpt("verify-shape", *db_args(built), "--deep", "--format", "json", "--jobs", "1")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["settings"]["deep"] is True
    proof = document["proof"]
    assert proof["differing_lists"] == 6 and proof["proved_lists"] > 200
    assert proof["unprovable_lineages"] == len(proof["unprovable"]) >= 4
    text = run_ckpt("verify-shape", *db_args(built), "--deep", "--thread", "fault-ck106-swapped")
    assert text.exit_code == 1
    assert "deep proof: 3 stored message lists equal the replay of their writes, 1 differ (CK106)" in text.stdout
    assert "CK106 error thread fault-ck106-swapped" in text.stdout
    plain = run_ckpt("verify-shape", *db_args(built), "--thread", "fault-ck106-swapped")
    assert plain.exit_code == 0 and "deep proof" not in plain.stdout


def test_inspect_thread_shows_the_proof(built: BuiltDatabase) -> None:
    from tests.test_inspect_cli import as_json, db_args, run

    document = as_json(built, "thread", "fault-ck106-content-altered", "remove-messages-k3", "--deep")
    by_id = {thread["thread_id"]: thread["proof"] for thread in document["threads"]}
    assert by_id["fault-ck106-content-altered"]["status"] == "differs"
    assert by_id["fault-ck106-content-altered"]["findings"][0]["rule"] == "CK106"
    assert by_id["remove-messages-k3"]["status"] == "proved" and by_id["remove-messages-k3"]["proved_lists"] > 0
    text = run("thread", "fault-ck106-snapshot-missing", "--deep", *db_args(built))
    assert text.exit_code == 0, text.output
    assert "proof: 1 stored list differs from the replay of its writes" in text.stdout
    assert as_json(built, "thread", "remove-messages-k3")["threads"][0]["proof"] is None
    refused = run("thread", "--all", "--deep", *db_args(built))
    assert refused.exit_code == 2 and "--deep proves named threads" in refused.output


# -- what cannot be proven is said, never guessed ---------------------------------------------------------


def test_messages_without_ids_are_not_guessed(tmp_path: Path) -> None:
    """A stored write holding a message without an id (LangGraph gives it a random id on every replay):
    that stretch is unprovable, and the proof resumes at the next stored snapshot, finding nothing wrong."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, StateGraph

    from fixtures.dbbuilder.graphs import state_schema

    def respond(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"answer {len(state['messages'])}", id=f"a{len(state['messages'])}")]}

    builder = StateGraph(state_schema("delta", 2))
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    path = tmp_path / "ids.db"
    connection = sqlite3.connect(path, check_same_thread=False)
    graph = builder.compile(checkpointer=SqliteSaver(connection))
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(4):
        graph.invoke({"messages": [HumanMessage(content=f"q{turn}", id=f"h{turn}")]}, config)
    # The savers store a write after the reducer gave its messages ids; a write stored before (or by
    # another writer) can lack one. Made here by targeted SQL on the first answer's write.
    kind, value = JsonPlusSerializer().dumps_typed([AIMessage(content="answer 1")])
    changed = connection.execute(
        "UPDATE writes SET type = ?, value = ? WHERE channel = 'messages' AND checkpoint_id = "
        "(SELECT checkpoint_id FROM writes WHERE channel = 'messages' ORDER BY checkpoint_id LIMIT 1 OFFSET 1)",
        (kind, value),
    ).rowcount
    connection.commit()
    connection.close()
    assert changed == 1
    (history,) = open_history(target_from_argument(str(path))).histories()
    result = prove_lineage(history)
    assert result.findings == []
    assert len(result.unprovable) == 1 and "without an id" in result.unprovable[0]
    # The first snapshot after the id-less write starts the proof again; the later ones are proven.
    assert result.proved >= 2 and result.status == "unprovable"


def test_parallel_message_writes_without_task_path_are_not_ordered_by_guess() -> None:
    from deerflow_ckpt.store.messages import HistoryCheckpoint, LineageHistory, MessageWrite, serialized_list
    from deerflow_ckpt.store.messages import StoredList as Stored

    def message(mid: str) -> StoredMessage:
        fields = {"content": mid, "id": mid, "type": "ai"}
        body = msgspec.msgpack.encode(["langchain_core.messages.ai", "AIMessage", fields, "model_validate_json"])
        return StoredMessage(mid, "AIMessage", msgspec.msgpack.encode(msgspec.msgpack.Ext(5, body)))

    start = HistoryCheckpoint("c0", None, "input")
    start.writes = [MessageWrite("t2", "", 0, (message("b"),)), MessageWrite("t1", "", 0, (message("a"),))]
    start.order_unknown = True
    child = HistoryCheckpoint(
        "c1", "c0", "loop", stored=Stored(serialized_list([message("a"), message("b")]), True, "")
    )
    result = prove_lineage(LineageHistory("t", "", [start, child]))
    assert result.findings == [] and "task_path" in result.unprovable[0]
    start.order_unknown = False
    start.writes = [MessageWrite("t2", "~a", 0, (message("b"),)), MessageWrite("t1", "~b", 0, (message("a"),))]
    ordered = prove_lineage(LineageHistory("t", "", [start, child]))
    assert ordered.differing == 1 and "reordered" in ordered.findings[0].message
    start.writes = [MessageWrite("t2", "~b", 0, (message("b"),)), MessageWrite("t1", "~a", 0, (message("a"),))]
    assert prove_lineage(LineageHistory("t", "", [start, child])).proved == 1


# -- histories real runs write that a naive fold gets wrong ----------------------------------------------------


def _graph(path: Path, mode: str, cadence: int, nodes: dict[str, Any]) -> tuple[Any, sqlite3.Connection]:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    from fixtures.dbbuilder.graphs import state_schema

    builder = StateGraph(state_schema(mode, cadence if mode == "delta" else None))
    for name, node in nodes.items():
        builder.add_node(name, node)
        builder.add_edge(START, name)
        builder.add_edge(name, END)
    connection = sqlite3.connect(path, check_same_thread=False)
    return builder.compile(checkpointer=SqliteSaver(connection)), connection


def _proof_of(path: Path) -> Any:
    (history,) = open_history(target_from_argument(str(path))).histories()
    return prove_lineage(history)


@pytest.mark.parametrize("mode", ["delta", "full"])
def test_command_update_at_a_resume_is_its_own_step(tmp_path: Path, mode: str) -> None:
    """Command(resume=..., update={"messages": Overwrite(...)}) is stored under the same checkpoint as the
    resumed task's write; LangGraph applies it first, on its own, then the task's."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.types import Command, Overwrite, interrupt

    def respond(state: dict[str, Any]) -> dict[str, Any]:
        n = len(state["messages"])
        if state["messages"][-1].content.startswith("ask"):
            interrupt("question")
        return {"messages": [AIMessage(content=f"a{n}", id=f"a{n}")]}

    graph, connection = _graph(tmp_path / "resume.db", mode, 3, {"respond": respond})
    config: Any = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [HumanMessage(content="h0", id="h0")]}, config)
    graph.invoke({"messages": [HumanMessage(content="ask1", id="h1")]}, config)
    update = {"messages": Overwrite([HumanMessage(content="summary", id="s1")])}
    graph.invoke(Command(resume="yes", update=update), config)
    for i in range(2, 6):
        graph.invoke({"messages": [HumanMessage(content=f"h{i}", id=f"h{i}")]}, config)
    connection.close()
    result = _proof_of(tmp_path / "resume.db")
    assert result.findings == [] and result.unprovable == [] and result.proved >= 3


@pytest.mark.parametrize("after", ["update", "update_as_node", "fork_head", "input", "resume"])
def test_a_partly_failed_superstep_proves_clean(tmp_path: Path, after: str) -> None:
    """One of two parallel nodes fails: the other's write stays stored under the checkpoint. A resume applies
    it; new input, update_state or a fork from the head does not (LangGraph snapshots there instead)."""
    from langchain_core.messages import AIMessage, HumanMessage

    failing = {"on": False}

    def first(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage(content="x", id=f"x{len(state['messages'])}")]}

    def second(state: dict[str, Any]) -> dict[str, Any]:
        if failing["on"]:
            failing["on"] = False
            raise RuntimeError("boom")
        return {"messages": [AIMessage(content="y", id=f"y{len(state['messages'])}")]}

    graph, connection = _graph(tmp_path / "failed.db", "delta", 3, {"first": first, "second": second})
    config: Any = {"configurable": {"thread_id": "t"}}
    for i in range(3):
        graph.invoke({"messages": [HumanMessage(content=f"h{i}", id=f"h{i}")]}, config)
    failing["on"] = True
    with pytest.raises(RuntimeError):
        graph.invoke({"messages": [HumanMessage(content="hf", id="hf")]}, config)
    if after == "update":
        graph.update_state(config, {"messages": [HumanMessage(content="hu", id="hu")]})
    elif after == "update_as_node":
        graph.update_state(config, {"messages": [AIMessage(content="hu", id="hu")]}, as_node="second")
    elif after == "fork_head":
        graph.invoke(None, graph.get_state(config).config)
    elif after == "input":
        graph.invoke({"messages": [HumanMessage(content="hn", id="hn")]}, config)
    else:
        graph.invoke(None, config)
    for i in range(4):
        graph.invoke({"messages": [HumanMessage(content=f"k{i}", id=f"k{i}")]}, config)
    connection.close()
    result = _proof_of(tmp_path / "failed.db")
    assert result.findings == [] and result.unprovable == [] and result.proved >= 3, result


@pytest.mark.parametrize("cadence", [3, 10])
def test_exit_durability_is_unprovable_not_wrong(tmp_path: Path, cadence: int) -> None:
    """durability="exit" saves only a run's last checkpoint: the supersteps between are not replayable."""
    from langchain_core.messages import AIMessage, HumanMessage

    def respond(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage(content="a", id=f"a{len(state['messages'])}")]}

    graph, connection = _graph(tmp_path / "exit.db", "delta", cadence, {"respond": respond})
    config: Any = {"configurable": {"thread_id": "t"}}
    for i in range(8):
        graph.invoke({"messages": [HumanMessage(content=f"h{i}", id=f"h{i}")]}, config, durability="exit")
    connection.close()
    result = _proof_of(tmp_path / "exit.db")
    assert result.findings == []
    assert result.unprovable and "durability='exit'" in result.unprovable[0]


def test_a_list_the_replay_starts_from_is_not_called_proven(tmp_path: Path) -> None:
    """update_state on a new thread stores its list at the first checkpoint, with no write before it: that
    list starts the replay and cannot itself be proven, and the report says so instead of "nothing stored"."""
    from langchain_core.messages import AIMessage, HumanMessage

    def respond(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage(content="a", id=f"a{len(state['messages'])}")]}

    graph, connection = _graph(tmp_path / "seeded.db", "delta", 100, {"respond": respond})
    config: Any = {"configurable": {"thread_id": "t"}}
    graph.update_state(config, {"messages": [HumanMessage(content=f"s{i}", id=f"s{i}") for i in range(3)]})
    graph.invoke({"messages": [HumanMessage(content="h", id="h")]}, config)
    connection.close()
    result = _proof_of(tmp_path / "seeded.db")
    assert (result.status, result.started, result.proved, result.findings) == ("start only", 1, 0, [])
    from deerflow_ckpt.report.inspect_text import proof_line

    assert "1 stored list where the replay starts, none to prove" in proof_line(result).plain


def test_lists_kept_as_messages_past_the_budget_prove_the_same(
    built: BuiltDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lineage past its byte budget keeps stored lists as cached messages (bounded memory for long
    full-mode threads): with a budget of nothing, every list is kept that way and the proof is the same."""
    from deerflow_ckpt.store import history

    def outcome() -> list[tuple[Any, ...]]:
        return [
            (
                h.thread_id,
                h.checkpoint_ns,
                r.proved,
                r.differing,
                r.started,
                r.unprovable,
                [f.message for f in r.findings],
            )
            for h in _histories(built)
            for r in [prove_lineage(h)]
        ]

    as_bytes = outcome()
    monkeypatch.setattr(history._Budget, "LIMIT", -1)
    compacted = list(_histories(built))
    assert any(c.stored is not None and c.stored.data is None for h in compacted for c in h.checkpoints)
    assert outcome() == as_bytes


def _ai(mid: str) -> bytes:
    """A message as LangGraph stores it: ext 5 around [module, class, fields, method]."""
    body = msgspec.msgpack.encode(["langchain_core.messages.ai", "AIMessage", {"content": mid, "id": mid}, None])
    return msgspec.msgpack.encode(msgspec.msgpack.Ext(5, body))


def test_postgres_stored_lists_are_chosen_by_marker_and_creating_version() -> None:
    """Postgres keeps lists by version: a marked checkpoint stores the snapshot at its version, the first
    checkpoint of a plain-list version stores that list, and later ones sharing a version store nothing."""
    from deerflow_ckpt.store.history import _attach_blobs, _Budget
    from deerflow_ckpt.store.messages import HistoryCheckpoint, serialized_list

    messages = [StoredMessage("a", "AIMessage", _ai("a")), StoredMessage("b", "AIMessage", _ai("b"))]
    plain = serialized_list(messages)
    snapshot = msgspec.msgpack.encode(msgspec.msgpack.Ext(7, plain))
    marked, inherits, creates, shares, dangling = (HistoryCheckpoint(f"c{i}", None) for i in range(5))
    references = [(marked, True, "v1"), (inherits, None, "v1"), (creates, None, "v2"), (shares, None, "v2")]
    references.append((dangling, True, "v3"))
    stored = [("t", "", "v1", "msgpack", snapshot, len(snapshot)), ("t", "", "v2", "msgpack", plain, len(plain))]
    rows = iter([*stored, ("u", "", "v1", "x", b"", 0)])
    left = _attach_blobs(references, ("t", ""), rows, next(rows), _Budget())
    assert left == ("u", "", "v1", "x", b"", 0)  # the next lineage's row is handed back
    assert marked.stored is not None and marked.stored.snapshot and marked.stored.equals(messages)
    assert creates.stored is not None and not creates.stored.snapshot and creates.stored.equals(messages)
    assert inherits.stored is None and shares.stored is None
    assert dangling.stored is None and dangling.unprovable is not None and "marker" in dangling.unprovable


def test_a_stored_list_beside_an_unreadable_write_is_still_compared() -> None:
    """The writes under a checkpoint and the list stored at it are judged apart: a bad write stops the fold
    after it, not the comparison of the list stored there."""
    from deerflow_ckpt.store.messages import HistoryCheckpoint, LineageHistory, MessageWrite, serialized_list
    from deerflow_ckpt.store.messages import StoredList as Stored

    a = StoredMessage("a", "AIMessage", _ai("a"))
    start = HistoryCheckpoint("c0", None, "input")
    start.writes = [MessageWrite("t1", "~a", 0, (a,))]
    middle = HistoryCheckpoint("c1", "c0", "loop", stored=Stored(serialized_list([]), True, "the stored snapshot"))
    middle.writes_unprovable = "the messages write of task t2 is not msgpack (pickle)"
    end = HistoryCheckpoint("c2", "c1", "loop")
    result = prove_lineage(LineageHistory("t", "", [start, middle, end]))
    assert result.differing == 1 and "missing 'a'" in result.findings[0].message
    assert result.unprovable == ["checkpoint c1: the messages write of task t2 is not msgpack (pickle)"]


def test_the_scan_and_the_streaming_pass_prove_the_same(built: BuiltDatabase) -> None:
    """SQLite proves beside the scan, lineage by lineage, from the records it read; Postgres (and inspect)
    stream the history in a pass of their own. Both give the same proof."""
    report = deep_scan(built)
    streamed = [prove_lineage(history) for history in _histories(built)]
    assert report.proof is not None
    assert report.proof.lineages == len(streamed)
    assert report.proof.proved_lists == sum(r.proved for r in streamed)
    assert report.proof.started_lists == sum(r.started for r in streamed)
    assert report.proof.unprovable_lineages == sum(1 for r in streamed if r.unprovable)
    ck106 = sorted((f.thread_id, f.checkpoint_id, f.message) for f in report.findings if f.rule == "CK106")
    assert ck106 == sorted((f.thread_id, f.checkpoint_id, f.message) for r in streamed for f in r.findings)


def test_a_key_stored_as_a_blob_is_never_a_false_finding(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """The saver's schema lets a BLOB sit in a TEXT key column. Rows the scan read under such a key are
    matched by their text form, or, where they cannot be read again by key, make the stretch unprovable."""
    import shutil

    copy = tmp_path / "blob-key.db"
    shutil.copy(built_sqlite.db, copy)
    connection = sqlite3.connect(copy)
    # A checkpoint with a messages write under it and no stored list: its id becomes a BLOB in both tables.
    (checkpoint_id,) = connection.execute(
        "SELECT w.checkpoint_id FROM writes w JOIN checkpoints c USING (thread_id, checkpoint_ns, checkpoint_id) "
        "WHERE w.thread_id = 'clean-delta-k3' AND w.channel = 'messages' AND length(c.checkpoint) < 2000 "
        "ORDER BY w.checkpoint_id LIMIT 1 OFFSET 3"
    ).fetchone()
    for table in ("checkpoints", "writes"):
        connection.execute(
            f"UPDATE {table} SET checkpoint_id = CAST(checkpoint_id AS BLOB) "
            "WHERE thread_id = 'clean-delta-k3' AND checkpoint_id = ?",
            (checkpoint_id,),
        )
    # And a whole thread's keys as BLOBs.
    for table in ("checkpoints", "writes"):
        connection.execute(
            f"UPDATE {table} SET thread_id = CAST(thread_id AS BLOB) WHERE thread_id = 'remove-messages-k3'"
        )
    connection.commit()
    connection.close()
    report = scan(
        ScanRequest(DatabaseChoice(target_from_argument(str(copy)), "test"), ShapeSettings(deep=True), "test")
    )
    ck106 = {f.thread_id for f in report.findings if f.rule == "CK106"}
    assert ck106 == {t.thread_id for t in built_sqlite.manifest.threads if any(f.rule == "CK106" for f in t.faults)}
    assert report.proof is not None and report.proof.unprovable_lineages >= 1


def _proof_outcome(result: Any) -> tuple[Any, ...]:
    return (result.status, result.proved, result.differing, result.started, result.unprovable,
            [(f.checkpoint_id, f.message) for f in result.findings])  # fmt: skip


# The threads of _handover_copy with a key stored as a BLOB (a thread id, a namespace, a messages write's keys).
BLOB_KEYED = (key_text(b"remove-messages-k3"), "clean-delta-k1", "update-state-existing-k3", "interrupt-regenerate-k3")


def _handover_copy(built: BuiltDatabase, tmp_path: Path) -> Path:
    """A copy of the SQLite fixture with rows the fixtures lack: a messages write of None, one whose value is
    NULL, a checkpoint the compiled judge leaves to Python (json), a second task's messages write ordered
    before the first by its task_path, a write under no checkpoint of its lineage, and lineages under BLOB keys
    (a thread id, a checkpoint id, an empty namespace)."""
    import shutil

    copy = tmp_path / "handover.db"
    shutil.copy(built.db, copy)
    connection = sqlite3.connect(copy)
    messages_write = (
        "SELECT rowid FROM writes WHERE thread_id = ? AND channel = 'messages' ORDER BY checkpoint_id LIMIT 1 OFFSET ?"
    )
    (rowid,) = connection.execute(messages_write, ("clean-delta-k3", 4)).fetchone()
    connection.execute("UPDATE writes SET type = 'null', value = X'' WHERE rowid = ?", (rowid,))
    (rowid,) = connection.execute(messages_write, ("clean-delta-k3", 7)).fetchone()
    connection.execute("UPDATE writes SET value = NULL WHERE rowid = ?", (rowid,))
    connection.execute(
        "UPDATE checkpoints SET type = 'json' WHERE rowid = (SELECT rowid FROM checkpoints "
        "WHERE thread_id = 'clean-delta-k2' ORDER BY length(checkpoint) DESC LIMIT 1)"
    )
    # Another task's message, applied first in its superstep ('~0' sorts before '~__pregel_pull'): the order
    # comes from task_path, and a later snapshot then differs from the replay (CK106).
    (rowid,) = connection.execute(messages_write, ("clean-delta-k10", 6)).fetchone()
    (donor,) = connection.execute(
        "SELECT value FROM writes WHERE thread_id = 'fork-invoke-k3' AND channel = 'messages' LIMIT 1"
    ).fetchone()
    connection.execute(
        "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value) "
        "SELECT thread_id, checkpoint_ns, checkpoint_id, 'zz-task', '~0', 3, channel, type, ? "
        "FROM writes WHERE rowid = ?",
        (donor, rowid),
    )
    # A write under no checkpoint of its lineage: read again, it is read and left aside; never handed over.
    connection.execute(
        "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value) "
        "SELECT thread_id, checkpoint_ns, 'zzzz-orphan', task_id, task_path, idx, channel, type, value "
        "FROM writes WHERE rowid = ?",
        (rowid,),
    )
    for table in ("checkpoints", "writes"):
        connection.execute(
            f"UPDATE {table} SET thread_id = CAST(thread_id AS BLOB) WHERE thread_id = 'remove-messages-k3'"
        )
        # An empty BLOB namespace, which the scan reads as '' (as NULL) and the proof cannot find as ''.
        connection.execute(f"UPDATE {table} SET checkpoint_ns = X'' WHERE thread_id = 'clean-delta-k1'")
        connection.execute(
            f"UPDATE {table} SET checkpoint_id = CAST(checkpoint_id AS BLOB) WHERE thread_id = 'overwrite-node-k10' "
            "AND checkpoint_id = (SELECT min(checkpoint_id) FROM checkpoints WHERE thread_id = 'overwrite-node-k10')"
        )
    # Keys of one messages write alone (its checkpoint's row keeps them as text): a BLOB checkpoint id, an empty
    # BLOB namespace. A write of another channel under a BLOB id, which the proof never reads, hands over as before.
    (rowid,) = connection.execute(messages_write, ("update-state-existing-k3", 2)).fetchone()
    connection.execute("UPDATE writes SET checkpoint_id = CAST(checkpoint_id AS BLOB) WHERE rowid = ?", (rowid,))
    (rowid,) = connection.execute(messages_write, ("interrupt-regenerate-k3", 2)).fetchone()
    connection.execute("UPDATE writes SET checkpoint_ns = X'' WHERE rowid = ?", (rowid,))
    connection.execute(
        "UPDATE writes SET checkpoint_id = CAST(checkpoint_id AS BLOB) WHERE rowid = (SELECT rowid FROM writes "
        "WHERE thread_id = 'clean-delta-post-k3' AND channel = 'post_turns' LIMIT 1)"
    )
    connection.commit()
    connection.close()
    return copy


def test_rows_the_scan_hands_over_are_the_rows_read_again(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """On SQLite the compiled reader hands the deep proof the rows it has just read (each stored list's
    checkpoint, each messages write). They are the rows the proof reads again by key (as it does past the
    handover's budget), column for column, and prove the same, lineage by lineage; the shape scan counts the
    same with the handover as without. A lineage under a key the proof cannot find again by its text (a BLOB)
    is not handed over: read again, its stretch is unprovable either way."""
    import dataclasses

    from deerflow_ckpt.store.history import SqliteLineageHistories
    from deerflow_ckpt.store.source import SqliteTarget
    from deerflow_ckpt.store.sqlite import SqliteCheckpointReader

    target = SqliteTarget(_handover_copy(built_sqlite, tmp_path))
    lineages = list(SqliteCheckpointReader(target, messages_rows=True).lineages())
    assert lineages == list(SqliteCheckpointReader(target).lineages())  # records (and their counts) unchanged
    # A second pass, whose handed rows are compared with the rows read again.
    compared = list(SqliteCheckpointReader(target, messages_rows=True).lineages())
    histories = SqliteLineageHistories(target)
    handed_kinds: set[Any] = set()
    try:
        for lineage, twin in zip(lineages, compared, strict=True):
            blob_keyed = lineage.thread_id in BLOB_KEYED or any(
                r.checkpoint_id.startswith("x'") for r in lineage.records
            )
            assert (lineage.messages_rows is None) == blob_keyed, lineage.thread_id
            again = prove_lineage(histories.history(dataclasses.replace(lineage, messages_rows=None)))
            if lineage.messages_rows is None:
                continue
            storing = [r.checkpoint_id for r in lineage.records if r.messages is not Shape.ABSENT]
            ids = {r.checkpoint_id for r in lineage.records}
            stored_again, writes_again = (list(rows) for rows in histories._rows_again(lineage, storing))
            writes_again = [row for row in writes_again if row[0] in ids]  # the ones under its checkpoints
            assert twin.messages_rows is not None
            rows = twin.messages_rows.take()
            assert rows is not None and twin.messages_rows.take() is None  # handed over once
            stored, writes = rows
            handed_kinds |= {row[1] for row in stored} | {row[4] for row in writes}
            assert writes == writes_again, lineage.thread_id
            assert sorted(row for row in stored if row[0] in storing) == sorted(stored_again), lineage.thread_id
            handed = prove_lineage(histories.history(lineage))
            assert _proof_outcome(handed) == _proof_outcome(again), (lineage.thread_id, lineage.checkpoint_ns)
            # Its handover taken, a second history of the lineage reads the rows again, and proves the same.
            assert _proof_outcome(prove_lineage(histories.history(lineage))) == _proof_outcome(again)
    finally:
        histories.close()
    assert {"msgpack", "json", "null", "pickle"} <= handed_kinds
    # The Python reader hands nothing over: its lineages' rows are read again.
    assert all(lineage.messages_rows is None for lineage in SqliteCheckpointReader(target, compiled=False).lineages())


def test_the_deep_scan_proves_from_the_handover(built_sqlite: BuiltDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify-shape --deep on SQLite reads no lineage's rows again while its handover is within budget; past a
    small budget, the lineages over it are read again, and the report is the same."""
    from deerflow_ckpt.store import history

    def report_of() -> tuple[Any, ...]:
        choice = DatabaseChoice(target_from_argument(built_sqlite.db), "test")
        report = scan(ScanRequest(choice, ShapeSettings(deep=True), "test"), jobs=1)
        assert report.proof is not None
        findings = sorted((f.rule, f.thread_id or "", f.checkpoint_id or "", f.message) for f in report.findings)
        return findings, report.proof.proved_lists, report.proof.started_lists, report.proof.unprovable_lineages

    read_again: list[str] = []
    rows_again = history.SqliteLineageHistories._rows_again

    def counted(self: Any, lineage: Any, storing: Any) -> Any:
        read_again.append(lineage.thread_id)
        return rows_again(self, lineage, storing)

    monkeypatch.setattr(history.SqliteLineageHistories, "_rows_again", counted)
    handed = report_of()
    assert read_again == []
    monkeypatch.setattr(history, "HANDOVER_BUDGET", 30_000)
    assert report_of() == handed
    lineages = sum(1 for _ in open_history(target_from_argument(built_sqlite.db)).histories())
    assert 0 < len(read_again) < lineages  # some lineages over the small budget, others under it


def _handover_cost(rows: tuple[list[Any], list[Any]]) -> int:
    """What the compiled reader counts of a lineage's handed rows against the budget (_inert_sqlite.c,
    handed_value): each value's bytes (none past VALUE_LIMIT), a write's task_id and task_path bytes, and
    HANDED_ROW_COST a row."""
    from deerflow_ckpt.store.history import HANDED_ROW_COST

    def text(value: str) -> int:
        return len(value.encode("utf-8", "surrogateescape"))

    stored, writes = rows
    return sum(HANDED_ROW_COST + (len(row[2]) if row[2] is not None else 0) for row in stored) + sum(
        HANDED_ROW_COST + text(row[1]) + text(row[2]) + (len(row[5]) if row[5] is not None else 0) for row in writes
    )


def test_the_handover_budget_is_a_threads(built_sqlite: BuiltDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan holds a thread's namespaces until it has read them all, so the budget counts a thread's handed
    rows: of two namespaces that each fit it alone, not together, the first is handed over and the second read
    again; the next thread starts a budget of its own."""
    from deerflow_ckpt.store import history
    from deerflow_ckpt.store.source import SqliteTarget
    from deerflow_ckpt.store.sqlite import SqliteCheckpointReader

    target = SqliteTarget(Path(built_sqlite.db))
    thread = "subgraph-stable-k3"
    costs: dict[tuple[str, str], int] = {}
    for lineage in SqliteCheckpointReader(target, messages_rows=True).lineages():
        rows = lineage.messages_rows.take() if lineage.messages_rows is not None else None
        assert rows is not None
        costs[lineage.thread_id, lineage.checkpoint_ns] = _handover_cost(rows)
    own = [cost for (thread_id, _), cost in costs.items() if thread_id == thread]
    assert len(own) == 2
    keys = list(costs)
    following = keys[max(i for i, key in enumerate(keys) if key[0] == thread) + 1]
    assert following[0] != thread

    def handed_with(budget: int) -> dict[tuple[str, str], bool]:
        monkeypatch.setattr(history, "HANDOVER_BUDGET", budget)
        return {
            (lineage.thread_id, lineage.checkpoint_ns): lineage.messages_rows is not None
            for lineage in SqliteCheckpointReader(target, messages_rows=True).lineages()
        }

    handed = handed_with(max(*own, costs[following]))
    assert [handed[key] for key in keys if key[0] == thread] == [True, False]
    assert handed[following]
    # The reader counts what _handover_cost counts, to the byte.
    first = keys[0]
    assert handed_with(costs[first])[first] and not handed_with(costs[first] - 1)[first]


def test_the_compiled_reader_refuses_a_query_it_would_misread(built_sqlite: BuiltDatabase) -> None:
    """Handing rows over reads two more columns of the writes query: a query without them is refused at open, as
    are negative limits and a row's cost past the budget; nothing is read past a query's columns."""
    from deerflow_ckpt import native
    from deerflow_ckpt.store import sqlite as sqlite_store
    from deerflow_ckpt.store.records import CheckpointRecord
    from deerflow_ckpt.store.selection import ALL_THREADS
    from deerflow_ckpt.store.source import SqliteTarget

    open_lineages = native.open_lineages
    assert open_lineages is not None
    _, uri = sqlite_store.readonly_uri(SqliteTarget(Path(built_sqlite.db)))
    checkpoints_sql, plain_writes, parameters = sqlite_store._queries(ALL_THREADS, False)
    _, handover_writes, _ = sqlite_store._queries(ALL_THREADS, False, handed_task_path="task_path")

    def opened(writes_sql: str, *limits: int) -> Any:
        record = CheckpointRecord
        return open_lineages(
            uri, checkpoints_sql, writes_sql, tuple(parameters), sqlite_store._SHAPES_BY_KIND, record, *limits
        )

    refused = [(plain_writes, (100, 1000, 10)), (handover_writes, ()), (handover_writes, (100, -1, 0))]
    for writes_sql, limits in [*refused, (handover_writes, (100, 1000, 1001))]:
        with pytest.raises(ValueError):
            opened(writes_sql, *limits)
    stream = opened(handover_writes, 1 << 20, 1 << 30, 10)
    assert next(stream)[4] is not None  # rows handed over
    stream.close()
