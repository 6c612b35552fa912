"""Property: random appends, replacements and removals, run through a real graph at a random K, prove clean.

Each example writes a fresh SQLite database through the real SqliteSaver; ckpt's inert fold must then
agree with every snapshot it stored, and with LangGraph's own read of the head.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Overwrite

from deerflow_ckpt.analysis.replay import prove_lineage
from deerflow_ckpt.store.history import open_history
from deerflow_ckpt.store.messages import StoredMessage
from deerflow_ckpt.store.source import target_from_argument
from fixtures.dbbuilder.graphs import state_schema
from tests.test_deep_proof import message_fields


def _graph(saver: SqliteSaver, cadence: int, mode: str, parallel: bool) -> Any:
    def respond(state: dict[str, Any]) -> dict[str, Any]:
        # A node write beside the input's: every turn ends with an answer of its own.
        return {"messages": [AIMessage(content=f"answer {len(state['messages'])}", id=f"a{len(state['messages'])}")]}

    def note(state: dict[str, Any]) -> dict[str, Any]:
        # A second task of the same superstep: its write is applied after respond's, by task path.
        return {"messages": [AIMessage(content=f"note {len(state['messages'])}", id=f"n{len(state['messages'])}")]}

    builder = StateGraph(state_schema(mode, cadence if mode == "delta" else None))
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    if parallel:
        builder.add_node("note", note)
        builder.add_edge(START, "note")
    return builder.compile(checkpointer=saver)


def _operations(data: st.DataObject, present: list[str], serial: int) -> tuple[Any, int]:
    """One turn's input: new messages, replacements of present ids, removals (never of an absent id)."""
    out: list[Any] = []
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["append", "append", "replace", "remove", "remove_all", "overwrite"]))
        if kind == "overwrite":
            # The whole value replaced from the input (LangGraph takes it as it is, and snapshots there).
            serial += 1
            kept = [HumanMessage(content=f"kept {serial}", id=mid) for mid in present[-2:]]
            present[:] = [*present[-2:], f"o{serial}"]
            return Overwrite([*kept, HumanMessage(content=f"over {serial}", id=f"o{serial}")]), serial
        if kind == "replace" and present:
            target = data.draw(st.sampled_from(present))
            out.append(HumanMessage(content=f"edited {serial}", id=target))
        elif kind == "remove" and present:
            target = data.draw(st.sampled_from(present))
            present.remove(target)
            out.append(RemoveMessage(id=target))
        elif kind == "remove_all":
            present.clear()
            out.append(RemoveMessage(id=REMOVE_ALL_MESSAGES))
        else:
            serial += 1
            present.append(f"h{serial}")
            out.append(HumanMessage(content=f"message {serial}", id=f"h{serial}"))
    return out, serial


def _compared(messages: list[StoredMessage]) -> list[tuple[Any, ...]]:
    fields = [message_fields(m.payload) for m in messages]
    return [(m.id, m.kind, f["content"]) for m, f in zip(messages, fields, strict=True)]


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    cadence=st.integers(1, 5),
    turns=st.integers(1, 10),
    mode=st.sampled_from(["delta", "delta", "full"]),
    parallel=st.booleans(),
    data=st.data(),
)
def test_random_histories_prove_clean(cadence: int, turns: int, mode: str, parallel: bool, data: st.DataObject) -> None:
    # A new directory per example: Hypothesis replays examples, and a thread must start empty each time.
    with tempfile.TemporaryDirectory() as directory:
        _prove_random_history(Path(directory) / "random.db", cadence, turns, mode, parallel, data)


def _prove_random_history(path: Path, cadence: int, turns: int, mode: str, parallel: bool, data: st.DataObject) -> None:
    connection = sqlite3.connect(path, check_same_thread=False)
    graph = _graph(SqliteSaver(connection), cadence, mode, parallel)
    config: Any = {"configurable": {"thread_id": "t"}}
    present: list[str] = []
    serial = 0
    for _ in range(turns):
        operations, serial = _operations(data, present, serial)
        graph.invoke({"messages": operations}, config)
        present[:] = [str(m.id) for m in graph.get_state(config).values["messages"]]
    head = graph.get_state(config)
    connection.close()

    (history,) = list(open_history(target_from_argument(str(path))).histories())
    folds: dict[str, list[StoredMessage] | None] = {}
    result = prove_lineage(
        history,
        lambda checkpoint, fold: folds.__setitem__(checkpoint.checkpoint_id, None if fold is None else list(fold)),
    )
    assert result.findings == [] and result.unprovable == []
    assert result.proved == sum(1 for c in history.checkpoints if c.stored is not None)
    fold = folds[head.config["configurable"]["checkpoint_id"]]
    assert fold is not None
    assert _compared(fold) == [(m.id, type(m).__name__, m.content) for m in head.values["messages"]]
