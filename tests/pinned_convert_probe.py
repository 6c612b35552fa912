"""Run by tests/test_convert_postgres.py in a process whose PYTHONPATH puts DeerFlow's pinned Postgres saver
first: `python tests/pinned_convert_probe.py MANIFEST DSN TARGET_SCHEMA MODE THREADS_JSON`.

Reads every checkpoint of each named thread, in every namespace, from the source (the search path's schema,
in its writer's mode) and from the converted copy in TARGET_SCHEMA (in MODE, K=3), both through the pinned
saver; prints, as json, the saver's version and where the two reads differ.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psycopg

from fixtures.dbbuilder.backends import PostgresBackend
from fixtures.dbbuilder.content import TextPool
from fixtures.dbbuilder.graphs import GraphFactory, GraphSpec, run_config
from fixtures.dbbuilder.manifest import Manifest


def _read(factory: GraphFactory, spec: GraphSpec, thread_id: str, ns: str, checkpoint_id: str) -> Any:
    config = run_config(thread_id, spec.mode, checkpoint_id)
    config["configurable"]["checkpoint_ns"] = ns
    snapshot = factory.get(spec).get_state(config)
    return repr((snapshot.values, snapshot.next, [(t.id, t.name, t.error) for t in snapshot.tasks]))


def main() -> None:
    manifest = Manifest.read(Path(sys.argv[1]))
    dsn, schema, mode = sys.argv[2], sys.argv[3], sys.argv[4]
    threads = set(json.loads(Path(sys.argv[5]).read_text()))
    import langgraph.checkpoint.postgres as saver

    pool = TextPool(manifest.seed, manifest.message_bytes)
    source, target = PostgresBackend(dsn, None, None), PostgresBackend(dsn, schema, None)
    was, now = GraphFactory(source.plain, pool), GraphFactory(target.plain, pool)
    compared, differ = 0, []
    with psycopg.connect(dsn) as connection:
        for thread in manifest.threads:
            if thread.thread_id not in threads:
                continue
            writer = thread.writers[-1]
            own = GraphSpec(writer.graph, writer.mode, writer.cadence, writer.ticks_per_turn)
            converted = GraphSpec(writer.graph, mode, 3 if mode == "delta" else None, writer.ticks_per_turn)
            keys = connection.execute(
                "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = %s ORDER BY 1, 2",
                (thread.thread_id,),
            ).fetchall()
            for ns, checkpoint_id in keys:
                compared += 1
                if _read(was, own, thread.thread_id, ns, checkpoint_id) != _read(
                    now, converted, thread.thread_id, ns, checkpoint_id
                ):
                    differ.append([thread.thread_id, ns, checkpoint_id])
    source.close()
    target.close()
    print(
        json.dumps(
            {
                "saver": saver.__file__,
                "version": version("langgraph-checkpoint-postgres"),
                "compared": compared,
                "differ": differ,
            }
        )
    )


if __name__ == "__main__":
    main()
