"""ckpt convert on Postgres databases written by real graphs: converted copies in a new schema read the same,
and the switch script moves them in only while the source is what was converted, and back."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
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
from deerflow_ckpt.errors import OutputError
from deerflow_ckpt.report.convert_sql import backup_schema, swap_back_script, swap_script_text
from deerflow_ckpt.store.convert_postgres import backup_schema_name, relation_bytes
from deerflow_ckpt.store.source import DatabaseChoice, PostgresTarget, PostgresTimeouts, postgres_target
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


def _schema_exists(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn) as connection:
        row = connection.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return bool(row and row[0])


def test_a_failed_first_run_leaves_no_schema(pg_database: str) -> None:
    """Interrupted after the copy committed (an operator's Ctrl-C lands in the progress callback): the schema it
    created is dropped, so no half-converted copy is left for --catch-up or the switch to take."""
    build_postgres(pg_database, scenarios=["clean-delta", "clean-full"])
    schema = f"cv_{uuid.uuid4().hex[:8]}"
    seen = []

    def interrupted(checkpoints: int) -> None:
        seen.append(checkpoints)
        raise KeyboardInterrupt

    choice = DatabaseChoice(postgres_target(pg_database, ""), "test")
    request = ConvertRequest(choice, ConversionSettings(TargetMode.DELTA, 3), target_schema=schema)
    with pytest.raises(KeyboardInterrupt):
        convert(request, interrupted)
    assert seen and not _schema_exists(pg_database, schema)


def test_catch_up_refuses_a_schema_without_the_record_or_with_another_mode(pg_database: str) -> None:
    """Another deployment's saver tables are not a previous run's output: catch-up writes nothing there; a
    previous run at another mode or K is refused too."""
    build_postgres(pg_database, scenarios=["clean-delta", "clean-full"])
    tag = uuid.uuid4().hex[:8]
    other, schema = f"other_{tag}", f"cv_{tag}"
    with psycopg.connect(pg_database, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(other)))
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"):
            into, source = sql.Identifier(other, table), sql.Identifier("public", table)
            connection.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(into, source))
            connection.execute(sql.SQL("INSERT INTO {} SELECT * FROM {} LIMIT 3").format(into, source))
    try:
        kept = _rows(pg_database, other)
        with pytest.raises(OutputError, match="no record of a ckpt conversion"):
            _convert(pg_database, other, TargetMode.DELTA, 3, catch_up=True)
        assert _rows(pg_database, other) == kept
        _convert(pg_database, schema, TargetMode.DELTA, 3)
        for mode, cadence in ((TargetMode.FULL, 3), (TargetMode.DELTA, 4)):
            with pytest.raises(OutputError, match="give the same options"):
                _convert(pg_database, schema, mode, cadence, catch_up=True)
        assert _convert(pg_database, schema, TargetMode.DELTA, 3, catch_up=True).threads == []
    finally:
        _drop(pg_database, other, schema)


def _head(dsn: str, thread_id: str) -> str:
    with psycopg.connect(dsn) as connection:
        row = connection.execute(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''", (thread_id,)
        ).fetchone()
    assert row is not None and row[0]
    return str(row[0])


def _error_write(dsn: str, thread_id: str, checkpoint_id: str, text: str) -> None:
    """A special write (ERROR, idx -1) through the saver: written again, PostgresSaver upserts it in place."""
    from langgraph.checkpoint.postgres import PostgresSaver

    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.put_writes(config, [("__error__", text)], "task-ckpt-test")  # type: ignore[arg-type]


@pytest.mark.parametrize("upsert", ["metadata", "special-write"])
def test_a_row_upserted_in_place_refuses_the_switch_and_is_caught_up(pg_database: str, upsert: str) -> None:
    """PostgresSaver's ON CONFLICT DO UPDATE changes a row without adding one: the same count and ids. The switch
    refuses it, and --catch-up converts that thread (and only it) again."""
    build_postgres(pg_database, scenarios=["clean-delta", "clean-full"])
    head = _head(pg_database, "clean-delta-k3")
    if upsert == "special-write":
        _error_write(pg_database, "clean-delta-k3", head, "first")
    schema = f"cv_{uuid.uuid4().hex[:8]}"
    try:
        report = _convert(pg_database, schema, TargetMode.DELTA, 3)
        with psycopg.connect(pg_database) as connection:
            counts = connection.execute(
                "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM checkpoint_writes)"
            ).fetchone()
        if upsert == "metadata":
            with psycopg.connect(pg_database) as connection:
                connection.execute(
                    "UPDATE checkpoints SET metadata = metadata || '{\"ckpt_test\": 1}' WHERE thread_id = %s "
                    "AND checkpoint_ns = '' AND checkpoint_id = %s",
                    ("clean-delta-k3", head),
                )
        else:
            _error_write(pg_database, "clean-delta-k3", head, "second")
        with psycopg.connect(pg_database) as connection:
            assert (
                connection.execute(
                    "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM checkpoint_writes)"
                ).fetchone()
                == counts
            )
        original = _rows(pg_database, "public")
        refused = _psql(pg_database, swap_script_text(report, "swap.sql"))
        assert refused.returncode != 0 and "changed since they were converted" in refused.stderr
        assert _rows(pg_database, "public") == original
        caught = _convert(pg_database, schema, TargetMode.DELTA, 3, catch_up=True)
        assert [t.thread_id for t in caught.threads] == ["clean-delta-k3"] and caught.carried_over
        # The writes are never rewritten: the copy holds the upserted one.
        assert sorted(_rows(pg_database, schema)["checkpoint_writes"]) == sorted(original["checkpoint_writes"])
        done = _psql(pg_database, swap_script_text(caught, "swap.sql"))
        assert done.returncode == 0, done.stderr
    finally:
        _drop(pg_database, schema, backup_schema_name(schema))


def test_schema_names_with_quotes_and_dollar_tags_are_one_identifier(pg_database: str) -> None:
    """A target schema named with the swap script's own dollar-quote tag is converted, switched and switched back;
    renamed to hold a double quote (the scan's reader cannot address such a name yet: store/postgres.py
    table_names), the switch and the way back still address exactly it, and its size is measured, not zero. A
    name whose backup schema would pass 63 bytes is refused before anything is written."""
    build_postgres(pg_database, scenarios=["clean-delta", "clean-full"])
    tag = uuid.uuid4().hex[:8]
    # Built in two parts: the suite's check of the $VARs tests read would take "$" and "_" for one.
    plain, hostile = "cv$ckpt$" + f"_{tag}", 'cv"$ckpt$' + f" {tag}"
    try:
        report = _convert(pg_database, plain, TargetMode.FULL)
        assert report.converted
        original, converted = _rows(pg_database, "public"), _rows(pg_database, plain)
        for schema in (plain, hostile):
            if schema == hostile:
                with psycopg.connect(pg_database, autocommit=True) as connection:
                    rename = sql.SQL("ALTER SCHEMA {} RENAME TO {}")
                    connection.execute(rename.format(sql.Identifier(plain), sql.Identifier(hostile)))
                report = dataclasses.replace(report, output=hostile)
                copy = PostgresTarget(postgres_target(pg_database, "").conninfo, hostile)
                assert relation_bytes(copy, hostile, ("checkpoints",)) > 0
            done = _psql(pg_database, swap_script_text(report, "swap.sql"))
            assert done.returncode == 0, done.stderr
            assert _rows(pg_database, "public") == converted and _rows(pg_database, backup_schema(report)) == original
            back = _psql(pg_database, swap_back_script(report, "swap.back.sql"))
            assert back.returncode == 0, back.stderr
            assert _rows(pg_database, "public") == original and _rows(pg_database, schema) == converted
    finally:
        _drop(pg_database, plain, hostile, backup_schema_name(plain), backup_schema_name(hostile))
    long = "s" * (63 - len("_replaced") + 1)
    with pytest.raises(OutputError, match="63 bytes"):
        _convert(pg_database, long, TargetMode.FULL)
    assert not _schema_exists(pg_database, long[:63])


def test_a_long_server_side_copy_outlives_a_short_network_timeout(pg_database: str) -> None:
    """--network-timeout 1 s, and a copy whose INSERT the server works on for longer: a CHECK constraint on the
    source's checkpoint_migrations (copied by LIKE ... INCLUDING ALL) sleeps 0.3 s per row on the server. The
    conversion finishes; the deadline still ends a statement that is silent past the server-work allowance."""
    build_postgres(pg_database, scenarios=["clean-delta"])
    with psycopg.connect(pg_database, autocommit=True) as connection:
        connection.execute(
            "CREATE FUNCTION ckpt_test_slow(integer) RETURNS boolean LANGUAGE sql AS 'SELECT pg_sleep(0.3) IS NOT NULL'"
        )
        connection.execute("ALTER TABLE checkpoint_migrations ADD CONSTRAINT slow CHECK (ckpt_test_slow(v))")
        row = connection.execute("SELECT count(*) FROM checkpoint_migrations").fetchone()
    assert row is not None and row[0] * 0.3 > 2
    schema = f"cv_{uuid.uuid4().hex[:8]}"
    base = postgres_target(pg_database, "")
    source = PostgresTarget(base.conninfo, base.schema, PostgresTimeouts(network=1.0))
    started = time.monotonic()
    try:
        report = convert(
            ConvertRequest(
                DatabaseChoice(source, "test"), ConversionSettings(TargetMode.DELTA, 3), target_schema=schema
            )
        )
        assert report.converted and time.monotonic() - started > row[0] * 0.3
    finally:
        _drop(pg_database, schema)


def _pg_findings(dsn: str, schema: str) -> set[tuple[str, str, str | None]]:
    from deerflow_ckpt.analysis.shape import ShapeSettings
    from deerflow_ckpt.commands.verify_shape import ScanRequest, scan

    choice = DatabaseChoice(postgres_target(dsn, schema), "test")
    report = scan(ScanRequest(choice, ShapeSettings(deep=True), "test"))
    return {(str(f.rule), f.thread_id or "", f.checkpoint_id) for f in report.findings if f.severity.rank >= 1}


def test_verify_shape_deep_finds_nothing_new_on_postgres(pg_converted: dict[str, Any]) -> None:
    """verify-shape --deep on each converted schema: nothing the source did not have, warnings included."""
    before = _pg_findings(pg_converted["dsn"], "")
    assert before, "the fixture's faults are findings"
    for mode, schema in pg_converted["schemas"].items():
        after = _pg_findings(pg_converted["dsn"], schema)
        assert after <= before, (mode, after - before)


@pytest.mark.usefixtures("strict_msgpack")
def test_every_thread_continues_the_same_on_postgres(pg_database: str) -> None:
    """One more turn on the source (in its writer's mode) and on the converted schema (in the target mode) leaves
    the same state, on a database of its own (turns write)."""
    manifest = build_postgres(pg_database, scenarios=["clean-delta", "clean-full", "migration", "fork", "remove"])
    schema = f"cv_more_{uuid.uuid4().hex[:8]}"
    report = _convert(pg_database, schema, TargetMode.DELTA, 3)
    source, target = _Reader((pg_database, None), manifest), _Reader((pg_database, schema), manifest)
    continued = 0
    try:
        for thread in _readable(manifest, report):
            config = run_config(thread.thread_id, thread.writers[-1].mode)
            if source.graph(thread, None, None).get_state(config).next:
                continue
            turn = {"messages": [HumanMessage(content="one more turn", id="h-one-more")]}
            was = source.graph(thread, None, None).invoke(turn, config)
            now = target.graph(thread, "delta", 3).invoke(turn, run_config(thread.thread_id, "delta"))
            assert now == was, thread.thread_id
            continued += 1
    finally:
        source.close()
        target.close()
    assert continued >= 8
