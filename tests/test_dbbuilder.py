"""The fixture builder wrote what its manifest claims: checked with raw SQL and through the real savers."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ormsgpack
import psycopg
import pytest
from conftest import BuiltDatabase

from fixtures.dbbuilder import readback
from fixtures.dbbuilder.build import BuildError, build_postgres, build_sqlite
from fixtures.dbbuilder.bulk import build_bulk_postgres, build_bulk_sqlite
from fixtures.dbbuilder.manifest import Manifest, ThreadRecord
from fixtures.dbbuilder.registry import BY_NAME
from fixtures.dbbuilder.scenarios import OVERRUN_MAX_SUPERSTEPS

REPO = Path(__file__).resolve().parents[1]
ALL_RULES = {
    "CK101", "CK103", "CK104", "CK105", "CK106", "CK201", "CK202", "CK203",
    "CK204", "CK301", "CK302", "CK303", "CK304", "CK305", "CK306", "CK401",
}  # fmt: skip
BACKENDS = [pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def built(request: pytest.FixtureRequest) -> BuiltDatabase:
    db: BuiltDatabase = request.getfixturevalue(f"built_{request.param}")
    return db


# -- inert physical view of the stored rows -------------------------------------------------------------


@dataclass
class Row:
    ns: str
    cid: str
    parent: str | None
    step: int | None
    source: str | None
    counters: list[int] | None
    shape: str  # snapshot | list | absent | dangling | marker-other | inherited | undecodable
    payload: bytes | None = None  # the snapshot's msgpack payload, where there is one


def _ext_code(head: bytes) -> int | None:
    """msgpack ext type from a value's first bytes (fixext d4..d8, ext8/16/32 c7/c8/c9)."""
    if not head:
        return None
    first = head[0]
    offset = {0xD4: 1, 0xD5: 1, 0xD6: 1, 0xD7: 1, 0xD8: 1, 0xC7: 2, 0xC8: 3, 0xC9: 5}.get(first)
    return None if offset is None or len(head) <= offset else head[offset]


def _inert(blob: bytes) -> Any:
    """Decode msgpack turning every ext into (code, data): nothing is imported or constructed."""
    return ormsgpack.unpackb(blob, ext_hook=lambda code, data: ("ext", code, data), option=ormsgpack.OPT_NON_STR_KEYS)


def _sqlite_rows(db: BuiltDatabase, tid: str) -> list[Row]:
    with sqlite3.connect(f"file:{db.path}?mode=ro", uri=True) as conn:
        raw = conn.execute(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints"
            " WHERE thread_id=? ORDER BY checkpoint_id",
            (tid,),
        ).fetchall()
    rows = []
    for ns, cid, parent, ck, meta in raw:
        try:
            md = json.loads(meta)
        except (UnicodeDecodeError, ValueError):
            md = {}
        try:
            value = _inert(ck)["channel_values"].get("messages")
        except ormsgpack.MsgpackDecodeError:
            shape, payload = "undecodable", None
        else:
            is_snap = isinstance(value, tuple) and value[1] == 7
            shape = "snapshot" if is_snap else "list" if isinstance(value, list) else "absent"
            payload = value[2] if is_snap else None
        counters = (md.get("counters_since_delta_snapshot") or {}).get("messages")
        rows.append(Row(ns, cid, parent, md.get("step"), md.get("source"), counters, shape, payload))
    return rows


def _pg_rows(db: BuiltDatabase, tid: str) -> list[Row]:
    with psycopg.connect(db.db) as conn:
        raw = conn.execute(
            """SELECT c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, jsonb_typeof(c.checkpoint),
                      c.checkpoint->'channel_values'->'messages' = 'true'::jsonb, b.blob,
                      CASE WHEN jsonb_typeof(c.metadata) = 'object' THEN c.metadata END
               FROM checkpoints c LEFT JOIN checkpoint_blobs b ON b.thread_id=c.thread_id
                 AND b.checkpoint_ns=c.checkpoint_ns AND b.channel='messages'
                 AND b.version = c.checkpoint->'channel_versions'->>'messages'
               WHERE c.thread_id=%s ORDER BY c.checkpoint_id""",
            (tid,),
        ).fetchall()
    rows = []
    for ns, cid, parent, typ, marker, blob, md in raw:
        blob = bytes(blob) if blob is not None else None
        code = _ext_code(blob[:6]) if blob else None
        is_list = bool(blob) and (0x90 <= blob[0] <= 0x9F or blob[0] in (0xDC, 0xDD))
        if typ != "object":
            shape = "undecodable"
        elif marker:
            shape = "snapshot" if code == 7 else "dangling" if blob is None else "marker-other"
        else:
            shape = "inherited" if code == 7 else "list" if is_list else "absent"
        payload = _inert(blob)[2] if shape == "snapshot" and blob else None
        md = md or {}
        counters = (md.get("counters_since_delta_snapshot") or {}).get("messages")
        rows.append(Row(ns, cid, parent, md.get("step"), md.get("source"), counters, shape, payload))
    return rows


def physical(db: BuiltDatabase, tid: str, ns: str | None = "") -> list[Row]:
    rows = _sqlite_rows(db, tid) if db.backend == "sqlite" else _pg_rows(db, tid)
    return [r for r in rows if ns is None or r.ns == ns]


def message_write_parents(db: BuiltDatabase, tid: str) -> set[str]:
    query = "SELECT checkpoint_id FROM {} WHERE thread_id={} AND channel='messages'"
    if db.backend == "sqlite":
        with sqlite3.connect(f"file:{db.path}?mode=ro", uri=True) as conn:
            return {r[0] for r in conn.execute(query.format("writes", "?"), (tid,))}
    with psycopg.connect(db.db) as conn:
        return {r[0] for r in conn.execute(query.format("checkpoint_writes", "%s"), (tid,))}  # type: ignore[arg-type]


def write_row(db: BuiltDatabase, tid: str, cid: str) -> tuple[str, bytes]:
    """(type, bytes) of the messages write stored under ``cid`` (read raw, never decoded by a saver)."""
    if db.backend == "sqlite":
        with sqlite3.connect(f"file:{db.path}?mode=ro", uri=True) as conn:
            row = conn.execute(
                "SELECT type, value FROM writes WHERE thread_id=? AND checkpoint_id=? AND channel='messages'",
                (tid, cid),
            ).fetchone()
    else:
        with psycopg.connect(db.db) as conn:
            row = conn.execute(
                "SELECT type, blob FROM checkpoint_writes WHERE thread_id=%s AND checkpoint_id=%s"
                " AND channel='messages'",
                (tid, cid),
            ).fetchone()
    assert row is not None
    return str(row[0]), bytes(row[1])


# -- the manifest --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_manifest_round_trips_through_json(built: BuiltDatabase, tmp_path: Path) -> None:
    m = built.manifest
    assert Manifest.from_json(m.to_json()) == m
    m.write(tmp_path / "m.json")
    assert Manifest.read(tmp_path / "m.json") == m


def test_every_rule_has_its_thread_and_ids_are_unique(built: BuiltDatabase) -> None:
    m = built.manifest
    expected = ALL_RULES | ({"CK102"} if built.backend == "postgres" else set())
    assert {f.rule for t in m.threads for f in t.faults} == expected
    ids = [t.thread_id for t in m.threads]
    assert len(ids) == len(set(ids))
    for t in m.threads:
        assert t.scenario in BY_NAME and t.backend == built.backend
        assert set(BY_NAME[t.scenario].rules) >= t.rules
        # One injected fault per thread, on a thread that is otherwise clean.
        assert sum(f.injected for f in t.faults) <= 1


def test_faults_and_events_name_stored_checkpoints(built: BuiltDatabase) -> None:
    for t in built.manifest.threads:
        stored = {(r.ns, r.cid) for r in physical(built, t.thread_id, ns=None)}
        recorded = {(c.checkpoint_ns, c.checkpoint_id) for c in t.checkpoints}
        for f in t.faults:
            assert (f.checkpoint_ns, f.checkpoint_id) in stored, (t.thread_id, f)
        for e in t.events:
            assert (e.checkpoint_ns, e.checkpoint_id) in recorded & stored, (t.thread_id, e)


# -- physical layout ---------------------------------------------------------------------------------


def _snapshot_step(write_no: int) -> int:
    """docs/storage-model.md, "A turn on disk": with 2 writes per turn, write n lands on this step."""
    return 3 * (write_no - 1) // 2 if write_no % 2 else 3 * write_no // 2 - 2


@pytest.mark.parametrize("k", [1, 2, 3, 10])
def test_clean_delta_snapshots_land_where_the_contract_says(built: BuiltDatabase, k: int) -> None:
    t = built.manifest.thread(f"clean-delta-k{k}")
    rows = physical(built, t.thread_id)
    writes = 2 * t.turns
    expected = {_snapshot_step(j * k) for j in range(1, writes // k + 1)}
    assert {r.step for r in rows if r.shape == "snapshot"} == expected
    assert {r.cid for r in rows if r.shape == "snapshot"} == set(t.snapshot_ids())
    assert all(r.counters is None for r in rows if r.shape == "snapshot")
    assert all(r.counters is not None and r.counters[0] < k for r in rows if r.shape != "snapshot")
    assert {r.shape for r in rows} <= {"snapshot", "absent", "inherited"}


def test_k3_layout_matches_storage_contract_table(built: BuiltDatabase) -> None:
    rows = physical(built, "clean-delta-k3")
    table = {  # step: counters (None = snapshot step), docs/storage-model.md, "A turn on disk", K=3
        -1: [0, 1], 0: [1, 2], 1: [2, 3], 2: [2, 4], 3: None, 4: [1, 1],
        5: [1, 2], 6: [2, 3], 7: None, 8: [0, 1], 9: [1, 2], 10: [2, 3], 11: [2, 4], 12: None,
    }  # fmt: skip
    by_step = {r.step: r for r in rows}
    for step, counters in table.items():
        assert by_step[step].counters == counters, step
        assert (by_step[step].shape == "snapshot") == (counters is None), step
    inherited = {r.step for r in rows if r.shape == "inherited"}
    # Postgres: the input checkpoint after a snapshot on a respond checkpoint shares its version.
    assert inherited == ({8, 17, 26} if built.backend == "postgres" else set())
    assert [r.source for r in rows[:4]] == ["input", "loop", "loop", "input"]


def test_recorded_puts_match_stored_rows(built: BuiltDatabase) -> None:
    untouched = [
        t for t in built.manifest.threads if not t.rules & {"CK102", "CK104", "CK204", "CK302", "CK303", "CK306"}
    ]
    for t in untouched:
        rows = physical(built, t.thread_id, ns=None)
        assert {(r.ns, r.cid, r.parent) for r in rows} == {
            (c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id) for c in t.checkpoints
        }, t.thread_id
        snaps = {(c.checkpoint_ns, c.checkpoint_id) for c in t.checkpoints if c.messages == "snapshot"}
        assert {(r.ns, r.cid) for r in rows if r.shape == "snapshot"} == snaps, t.thread_id


# -- reading back through the real savers --------------------------------------------------------------


def test_threads_read_back_as_the_manifest_says(built: BuiltDatabase) -> None:
    m = built.manifest
    with readback.reader(m, built.db) as (_, factory):
        for t in m.threads:
            if t.read_back == "intact":
                assert readback.message_ids(factory, t) == t.message_ids, t.thread_id
            elif t.read_back == "loses":
                got = readback.message_ids(factory, t)
                assert len(got) < len(t.message_ids), t.thread_id
                rest = iter(t.message_ids)
                assert all(i in rest for i in got), t.thread_id  # what is left keeps its order
            elif t.read_back == "raises":
                with pytest.raises(TypeError):
                    readback.state(factory, t)


def test_clean_and_legitimate_threads_materialize_every_message(built: BuiltDatabase) -> None:
    clean = [t for t in built.manifest.threads if not any(f.injected for f in t.faults)]
    assert len(clean) >= 20
    for t in clean:
        assert t.read_back == "intact"
        humans = [i for i in t.message_ids if i.startswith("h")]
        assert humans, t.thread_id


def test_empty_snapshot_really_loses_messages(built: BuiltDatabase) -> None:
    t = built.manifest.thread("fault-ck103-empty-snapshot")
    snap = next(r for r in physical(built, t.thread_id) if r.cid == t.faults[0].checkpoint_id)
    assert snap.shape == "snapshot" and snap.payload == b"\x90"  # _DeltaSnapshot([])
    with readback.reader(built.manifest, built.db) as (_, factory):
        assert readback.message_ids(factory, t, snap.cid) == []
        assert len(readback.message_ids(factory, t)) == 2  # only the writes after it


@pytest.mark.postgres
def test_dangling_marker_makes_get_state_raise(built_postgres: BuiltDatabase) -> None:
    t = built_postgres.manifest.thread("fault-ck102-dangling-marker")
    snap = next(r for r in physical(built_postgres, t.thread_id) if r.cid == t.faults[0].checkpoint_id)
    assert snap.shape == "dangling"
    with readback.reader(built_postgres.manifest, built_postgres.db) as (_, factory):
        # At the marker itself the inline `true` comes back as the value; past it, replay crashes.
        assert readback.state(factory, t, snap.cid)["messages"] is True
        with pytest.raises(TypeError):
            readback.state(factory, t)
    other = built_postgres.manifest.thread("fault-ck102-marker-not-snapshot")
    rows = physical(built_postgres, other.thread_id)
    assert next(r for r in rows if r.cid == other.faults[0].checkpoint_id).shape == "marker-other"


# -- each fault is physically there ----------------------------------------------------------------------


def _fault_row(db: BuiltDatabase, t: ThreadRecord) -> Row:
    return next(r for r in physical(db, t.thread_id) if r.cid == t.faults[0].checkpoint_id)


def test_ck101_stuffed_list_is_stored_as_a_plain_list(built: BuiltDatabase) -> None:
    t = built.manifest.thread("fault-ck101-stuffed-list")
    row = _fault_row(built, t)
    assert row.shape == "list" and row.source == "update"
    assert row.counters is not None  # counters copied from the head: still a delta checkpoint


def test_ck104_rows_do_not_decode(built: BuiltDatabase) -> None:
    m = built.manifest
    assert _fault_row(built, m.thread("fault-ck104-checkpoint")).shape == "undecodable"
    meta = m.thread("fault-ck104-metadata")
    assert _fault_row(built, meta).step is None  # metadata unreadable as a JSON object
    w = m.thread("fault-ck104-write")
    typ, value = write_row(built, w.thread_id, w.faults[0].checkpoint_id)
    assert typ == "msgpack" and value[:1] == b"\xc1"
    with pytest.raises(ormsgpack.MsgpackDecodeError):
        _inert(value)
    if built.backend == "postgres":
        assert _fault_row(built, m.thread("fault-ck104-blob")).shape == "marker-other"
    else:  # corrupted, but still BLOBs, as a torn write would leave them
        with sqlite3.connect(f"file:{built.path}?mode=ro", uri=True) as conn:
            kinds = conn.execute(
                "SELECT DISTINCT typeof(checkpoint), typeof(metadata) FROM checkpoints"
                " WHERE thread_id LIKE 'fault-ck104%'"
            ).fetchall()
            assert kinds == [("blob", "blob")]
            assert conn.execute("SELECT DISTINCT typeof(value) FROM writes").fetchall() == [("blob",)]


def test_ck105_unsafe_writes_are_there_and_never_ran(built: BuiltDatabase) -> None:
    m = built.manifest
    pick = m.thread("fault-ck105-pickle")
    assert write_row(built, pick.thread_id, pick.faults[0].checkpoint_id)[0] == "pickle"
    ext = m.thread("fault-ck105-foreign-ext")
    f = ext.faults[0]
    typ, value = write_row(built, ext.thread_id, f.checkpoint_id)
    [(_, code, data)] = _inert(value)
    assert typ == "msgpack" and code == 1
    assert _inert(data) == ["os", "system", [f"touch {f.related['marker_path']}"]]
    assert not Path(f.related["marker_path"]).exists()


def test_ck204_snapshot_is_gone_and_counters_reset(built: BuiltDatabase) -> None:
    t = built.manifest.thread("fault-ck204-stripped-snapshot")
    rows = physical(built, t.thread_id)
    row = _fault_row(built, t)
    assert row.shape == "absent" and row.counters is None
    assert len([r for r in rows if r.shape == "snapshot"]) == len(t.snapshot_ids()) - 1


def test_ck30x_lineage_faults(built: BuiltDatabase) -> None:
    m = built.manifest
    ids = {r.cid for r in physical(built, "fault-ck301-parentless-put")}
    row = _fault_row(built, m.thread("fault-ck301-parentless-put"))
    assert row.parent is None and row.step is not None and row.step > 0 and len(ids) == 22

    t = m.thread("fault-ck302-missing-parent")
    row = _fault_row(built, t)
    assert row.parent == t.faults[0].related["parent"]
    assert row.parent not in {r.cid for r in physical(built, t.thread_id)} and row.parent < row.cid

    above = m.thread("fault-ck303-parent-above-child")
    row = _fault_row(built, above)
    assert row.parent is not None and row.parent > row.cid
    assert row.parent in {r.cid for r in physical(built, above.thread_id)}

    cyc = m.thread("fault-ck303-cycle")
    parent = {r.cid: r.parent for r in physical(built, cyc.thread_id)}
    start = cyc.faults[0].checkpoint_id
    seen, cur = [start], parent[start]
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = parent.get(cur)
    assert cur == start

    pruned = m.thread("fault-ck304-pruned-writes")
    gone = set(pruned.faults[0].related.values())
    assert len(gone) == 2 and not gone & message_write_parents(built, pruned.thread_id)


# -- legitimate special cases and writers ---------------------------------------------------------------


def test_special_cases_are_where_the_manifest_says(built: BuiltDatabase) -> None:
    m = built.manifest
    for tid, kind in (("overwrite-node-k10", "overwrite_node"), ("overwrite-input-k10", "overwrite_input")):
        [ev] = m.thread(tid).events_of(kind)
        assert next(r for r in physical(built, tid) if r.cid == ev.checkpoint_id).shape == "snapshot"
    fresh = m.thread("update-state-fresh-k3")
    root = physical(built, fresh.thread_id)[0]
    assert (root.step, root.source, root.parent, root.shape) == (0, "update", None, "snapshot")
    for tid in ("fork-update-k3", "fork-invoke-k3"):
        [point] = m.thread(tid).events_of("fork_point")
        assert sum(r.parent == point.checkpoint_id for r in physical(built, tid)) == 2
    seed = m.thread("migrated-full-to-delta-k3").events_of("migration_seed")[0]
    seed_row = next(r for r in physical(built, "migrated-full-to-delta-k3") if r.cid == seed.checkpoint_id)
    # SQLite keeps the list inline; Postgres has it in a blob at a version shared with the parent.
    assert seed_row.shape == "list" or built.backend == "postgres"


def test_subgraph_namespaces(built: BuiltDatabase) -> None:
    percall = {r.ns for r in physical(built, "subgraph-percall-k3", ns=None)} - {""}
    assert len(percall) == 6 and all(ns.startswith("sub:") for ns in percall)
    stable = {r.ns for r in physical(built, "subgraph-stable-k3", ns=None)} - {""}
    assert stable == {"sub"}


def test_writers_are_recorded_in_order(built: BuiltDatabase) -> None:
    m = built.manifest
    assert m.thread("mixed-writers-k10-k1000-k10").cadences == [10, 1000, 10]
    assert m.thread("migrated-full-to-delta-k3").modes == ["full", "delta"]
    assert m.thread("delta-then-full-k3").modes == ["delta", "full"]
    bound = m.thread("superstep-bound-5-k1000")
    assert bound.writers[0].superstep_bound == 5
    assert any(r.shape == "snapshot" and r.source == "input" for r in physical(built, bound.thread_id))
    overrun = m.thread("superstep-overrun-k10")
    rows = physical(built, overrun.thread_id)
    assert max(r.counters[1] for r in rows if r.counters) >= 2 * OVERRUN_MAX_SUPERSTEPS
    assert not any(r.shape == "snapshot" for r in rows)


# -- builders and helpers ------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_builds_a_sqlite_database_and_refuses_a_full_one(tmp_path: Path) -> None:
    db, out = tmp_path / "cli.db", tmp_path / "cli.json"
    args = [sys.executable, "-m", "fixtures.dbbuilder", "--sqlite", str(db), "--manifest", str(out)]
    args += ["--scenarios", "clean-full,fault-ck301", "--turns", "4", "--message-bytes", "64"]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    m = Manifest.read(out)
    assert [t.thread_id for t in m.threads] == ["clean-full", "fault-ck301-parentless-put"]
    again = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False)
    assert again.returncode == 2 and "already holds checkpoints" in again.stderr
    with pytest.raises(BuildError):
        build_sqlite(db, ["clean-full"])


def test_bulk_sqlite(tmp_path: Path) -> None:
    m = build_bulk_sqlite(tmp_path / "bulk.db", threads=4, turns=5, cadence=10, message_bytes=300, jobs=2)
    assert [t.thread_id for t in m.threads] == [f"bulk-{i:06d}" for i in range(4)]
    with sqlite3.connect(tmp_path / "bulk.db") as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 4 * 15
        assert conn.execute("SELECT count(*) FROM writes WHERE channel='messages'").fetchone()[0] == 4 * 10
    assert not list(tmp_path.glob("*.part*"))
    with readback.reader(m, str(tmp_path / "bulk.db")) as (_, factory):
        values = readback.state(factory, m.threads[2])
    assert [x.id for x in values["messages"]][:4] == ["h001", "a001", "h002", "a002"]
    assert all(len(str(x.content)) == 300 for x in values["messages"])


@pytest.mark.slow  # builds its own database with the real graphs
@pytest.mark.postgres
def test_bulk_postgres(pg_database: str) -> None:
    m = build_bulk_postgres(pg_database, threads=3, turns=4, cadence=3, message_bytes=100, jobs=2)
    with psycopg.connect(pg_database) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (3 * 12,)
    with readback.reader(m, pg_database) as (_, factory):
        assert len(readback.message_ids(factory, m.threads[0])) == 8


@pytest.mark.slow  # builds its own database with the real graphs
@pytest.mark.postgres
def test_build_into_a_schema_via_search_path(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    m = build_postgres(dsn, schema, ["clean-delta"], turns=4, message_bytes=64)
    with psycopg.connect(dsn) as conn:
        where = conn.execute("SELECT table_schema FROM information_schema.tables WHERE table_name='checkpoints'")
        assert {r[0] for r in where} == {schema}
    with readback.reader(m, dsn) as (_, factory):
        t = m.thread("clean-delta-k2")
        assert readback.message_ids(factory, t) == t.message_ids


@pytest.mark.postgres
def test_readonly_role_can_only_select(built_postgres: BuiltDatabase, pg_readonly_role: Any) -> None:
    ro = pg_readonly_role(built_postgres.db)
    with psycopg.connect(ro, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoint_blobs").fetchone()[0] > 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM checkpoints")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE t (x int)")
