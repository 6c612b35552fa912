"""Run by tests/test_plan_retention.py in a process whose PYTHONPATH puts DeerFlow's pinned Postgres saver first:
`python tests/pinned_saver_probe.py MANIFEST DSN_BEFORE DSN_AFTER`.

On each copy, every thread the saver reads back whole gets one more turn with its last writer's graph, and the
full-mode thread is continued in delta mode (DeerFlow's one-way switch); prints, as json, the saver's version
and each thread's messages after that on both copies.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from fixtures.dbbuilder import readback
from fixtures.dbbuilder.graphs import GraphSpec, run_config
from fixtures.dbbuilder.manifest import Manifest


def _continue(db: str, manifest: Manifest, thread_id: str, spec: GraphSpec) -> list[str]:
    with readback.reader(manifest, db) as (_, factory):
        graph = factory.get(spec)
        for turn in range(2):
            human = HumanMessage(content=f"after retention {turn}", id=f"h-after-{turn}")
            graph.invoke({"messages": [human]}, run_config(thread_id, spec.mode))
    with readback.reader(manifest, db) as (_, factory):
        state = factory.get(spec).get_state(run_config(thread_id, spec.mode))
    return [str(m.id) for m in state.values.get("messages", [])]


def main() -> None:
    manifest = Manifest.read(Path(sys.argv[1]))
    copies = sys.argv[2:4]
    import langgraph.checkpoint.postgres as saver

    result: dict[str, Any] = {
        "saver": saver.__file__,
        "version": version("langgraph-checkpoint-postgres"),
        "threads": {},
    }
    for thread in manifest.threads:
        if (
            thread.read_back != "intact"
            or any(f.injected for f in thread.faults)
            or thread.thread_id.startswith("subgraph")
        ):
            continue
        writer = thread.writers[-1]
        spec = GraphSpec(writer.graph, writer.mode, writer.cadence, writer.ticks_per_turn)
        if writer.mode == "full":  # DeerFlow's supported switch: the next process runs in delta mode
            spec = GraphSpec(writer.graph, "delta", 3, writer.ticks_per_turn)
        result["threads"][thread.thread_id] = [_continue(db, manifest, thread.thread_id, spec) for db in copies]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
