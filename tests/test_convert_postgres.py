"""ckpt convert on Postgres databases written by real graphs: converted copies in a new schema read the same,
and the switch script moves them in only while the source is what was converted, and back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from psycopg import sql

from deerflow_ckpt.analysis.conversion import ConversionSettings, TargetMode
from deerflow_ckpt.commands.convert import ConversionReport, ConvertRequest, convert
from deerflow_ckpt.report.convert_sql import backup_schema, swap_back_script, swap_script_text
from deerflow_ckpt.store.source import DatabaseChoice, postgres_target
from fixtures.dbbuilder.build import build_postgres
from fixtures.dbbuilder.graphs import run_config
from fixtures.dbbuilder.manifest import Manifest
from tests.conftest import BuiltDatabase
from tests.test_convert import _readable, _Reader

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _convert(dsn: str, schema: str, mode: TargetMode, cadence: int = 3, catch_up: bool = False) -> ConversionReport:
    choice = DatabaseChoice(postgres_target(dsn, ""), "test")
    return convert(ConvertRequest(choice, ConversionSettings(mode, cadence), target_schema=schema, catch_up=catch_up))


def _drop(dsn: str, *schemas: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        for schema in schemas:
            connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _checkpoint_keys(dsn: str, schema: str, thread_id: str) -> list[tuple[str, str]]:
    """(namespace, id) of every checkpoint of the thread, subgraph namespaces included."""
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            sql.SQL("SELECT checkpoint_ns, checkpoint_id FROM {} WHERE thread_id = %s ORDER BY 1, 2").format(
                sql.Identifier(schema, "checkpoints")
            ),
            (thread_id,),
        ).fetchall()
    return [(row[0], row[1]) for row in rows]


@pytest.fixture(scope="module")
def pg_converted(built_postgres: BuiltDatabase) -> Iterator[dict[str, Any]]:
    tag = uuid.uuid4().hex[:8]
    schemas = {"delta": f"cv_delta_{tag}", "full": f"cv_full_{tag}"}
    try:
        reports = {
            "delta": _convert(built_postgres.db, schemas["delta"], TargetMode.DELTA),
            "full": _convert(built_postgres.db, schemas["full"], TargetMode.FULL),
        }
        yield {"dsn": built_postgres.db, "schemas": schemas, "reports": reports, "manifest": built_postgres.manifest}
    finally:
        _drop(built_postgres.db, *schemas.values())


@pytest.mark.usefixtures("strict_msgpack")
@pytest.mark.parametrize("mode", ["delta", "full"])
def test_every_checkpoint_reads_the_same_on_postgres(pg_converted: dict[str, Any], mode: str) -> None:
    manifest: Manifest = pg_converted["manifest"]
    dsn, schema = pg_converted["dsn"], pg_converted["schemas"][mode]
    source, target = _Reader((dsn, None), manifest), _Reader((dsn, schema), manifest)
    compared = threads = subgraph = 0
    try:
        for thread in _readable(manifest, pg_converted["reports"][mode]):
            threads += 1
            for ns, checkpoint_id in _checkpoint_keys(dsn, "public", thread.thread_id):
                was = source.state(thread, checkpoint_id, None, None, ns)
                now = target.state(thread, checkpoint_id, mode, 3, ns)
                assert now == was, (thread.thread_id, ns, checkpoint_id)
                compared += 1
                subgraph += ns != ""
    finally:
        source.close()
        target.close()
    assert threads >= 20 and compared >= 600 and subgraph >= 30


def test_postgres_shapes_are_the_target_modes(pg_converted: dict[str, Any]) -> None:
    """To delta: the snapshot marker exactly where a messages blob holds a _DeltaSnapshot (ext 7), the clean
    full thread marked where the K=3 delta thread is; to full: no marker, a plain list at every version."""
    dsn, schemas = pg_converted["dsn"], pg_converted["schemas"]
    marked = sql.SQL(
        "SELECT c.checkpoint_id, c.checkpoint->'channel_values'->'messages' = 'true'::jsonb, "
        "substring(b.blob from 1 for 1) FROM {c} c LEFT JOIN {b} b ON b.thread_id = c.thread_id "
        "AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = 'messages' "
        "AND b.version = c.checkpoint->'channel_versions'->>'messages' "
        "WHERE c.thread_id = %s AND c.checkpoint_ns = '' ORDER BY c.checkpoint_id"
    )
    with psycopg.connect(dsn) as connection:

        def rows(schema: str, thread_id: str) -> list[tuple[Any, ...]]:
            query = marked.format(c=sql.Identifier(schema, "checkpoints"), b=sql.Identifier(schema, "checkpoint_blobs"))
            return connection.execute(query, (thread_id,)).fetchall()

        converted = [bool(m) for _, m, _ in rows(schemas["delta"], "clean-full")]
        written = [bool(m) for _, m, _ in rows("public", "clean-delta-k3")]
        assert converted == written and sum(converted) >= 5
        full = rows(schemas["full"], "clean-delta-k3")
        assert not any(m for _, m, _ in full)
        assert all(head is not None and (head[0] & 0xF0 == 0x90 or head[0] in (0xDC, 0xDD)) for _, _, head in full[1:])


def _psql(dsn: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["psql", dsn, "-X", "-q", "-v", "ON_ERROR_STOP=1"], input=script, capture_output=True, text=True, check=False
    )


def _rows(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    with psycopg.connect(dsn) as connection:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            query = sql.SQL("SELECT * FROM {} ORDER BY 1, 2, 3, 4").format(sql.Identifier(schema, table))
            out[table] = connection.execute(query).fetchall()
    return out


SWAP_SCENARIOS = ["clean-delta", "clean-full", "fork", "fault-ck105"]


@pytest.mark.usefixtures("strict_msgpack")
def test_the_switch_moves_converted_tables_in_only_while_the_source_is_unchanged(pg_database: str) -> None:
    """The switch refuses (changing nothing) once a writer added a turn; after --catch-up it moves the converted
    tables in, DeerFlow's view of the live schema reads every thread the same and continues it; the way back
    restores the tables it replaced, row for row."""
    manifest = build_postgres(pg_database, scenarios=SWAP_SCENARIOS)
    schema = f"cv_{uuid.uuid4().hex[:8]}"
    report = _convert(pg_database, schema, TargetMode.DELTA, 3)
    assert report.refused and all("CK105" in (t.refused or "") for t in report.refused)
    live = _Reader((pg_database, None), manifest)
    try:
        thread = next(t for t in manifest.threads if t.thread_id == "clean-full")
        live.graph(thread, None, None).invoke(
            {"messages": [HumanMessage(content="while converting", id="h-live")]}, run_config("clean-full", "full")
        )
    finally:
        live.close()
    original = _rows(pg_database, "public")
    refused = _psql(pg_database, swap_script_text(report, "swap.sql"))
    assert refused.returncode != 0 and "changed since they were converted" in refused.stderr
    assert _rows(pg_database, "public") == original

    caught = _convert(pg_database, schema, TargetMode.DELTA, 3, catch_up=True)
    assert [t.thread_id for t in caught.threads] == ["clean-full"] and caught.carried_over
    before = {}
    reader = _Reader((pg_database, None), manifest)
    try:
        for thread in _readable(manifest, caught):
            before[thread.thread_id] = reader.state(thread, None, None, None)
    finally:
        reader.close()
    done = _psql(pg_database, swap_script_text(caught, "swap.sql"))
    assert done.returncode == 0, done.stderr
    assert _rows(pg_database, backup_schema(caught)) == original
    after = _Reader((pg_database, None), manifest)
    try:
        for thread in _readable(manifest, caught):
            assert after.state(thread, None, "delta", 3) == before[thread.thread_id], thread.thread_id
            turn = {"messages": [HumanMessage(content="after the switch", id="h-after")]}
            state = after.graph(thread, "delta", 3).invoke(turn, run_config(thread.thread_id, "delta"))
            ids = [m.id for m in state["messages"]]
            assert ids[:-2] == [m.id for m in before[thread.thread_id]["values"]["messages"]], thread.thread_id
            assert ids[-2] == "h-after", thread.thread_id
    finally:
        after.close()
    back = _psql(pg_database, swap_back_script(caught, "swap.back.sql"))
    assert back.returncode == 0, back.stderr
    assert _rows(pg_database, "public") == original


@pytest.mark.parametrize("mode", ["delta", "full"])
def test_converted_copies_read_the_same_under_deerflows_pinned_saver(
    pg_converted: dict[str, Any], pinned_saver: Path, mode: str, tmp_path: Path
) -> None:
    """DeerFlow pins the Postgres saver below 3.2 (3.1.1), whose delta walk stops only at a snapshot's inline
    marker: every checkpoint of every converted thread reads the same under it as the source does."""
    manifest_path, threads = tmp_path / "manifest.json", tmp_path / "threads.json"
    pg_converted["manifest"].write(manifest_path)
    converted = _readable(pg_converted["manifest"], pg_converted["reports"][mode])
    threads.write_text(json.dumps([thread.thread_id for thread in converted]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pinned_saver), str(REPO)])}
    probe = [
        sys.executable, str(REPO / "tests" / "pinned_convert_probe.py"), str(manifest_path), pg_converted["dsn"],
        pg_converted["schemas"][mode], mode, str(threads),
    ]  # fmt: skip
    ran = subprocess.run(probe, capture_output=True, text=True, env=env, check=False, timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    assert result["version"] == "3.1.1" and str(pinned_saver) in result["saver"]
    assert result["compared"] >= 600 and result["differ"] == []
