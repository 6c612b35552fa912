"""`ckpt plan retention` end to end, on databases the real graphs wrote, on both backends.

The plan's script is applied to a copy with the database's own shell (sqlite3, psql), as an operator would;
then every thread is read back through the real saver with its last writer's graph (the newest state, and
each kept checkpoint of the conversation), a new turn is run on each (the thread resumes), verify-shape
finds nothing the plan introduced, and no write or blob row is left without its checkpoint. The naive
policy (delete all the policy does not name) applied to another copy breaks the reads the plan reports.
The script's guard is shown to delete nothing when a writer changed a planned thread after the plan.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from deerflow_ckpt.report.retention_sql import GUARD_MESSAGE
from fixtures.dbbuilder import readback
from fixtures.dbbuilder.graphs import GraphSpec, run_config
from fixtures.dbbuilder.manifest import Manifest, ThreadRecord
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase, built_sqlite_copy, create_database, drop_database, dsn_for

# Every kind of thread the retention contract distinguishes: delta at several K, full, migrated, Overwrite
# and RemoveMessage, update_state on old and fresh threads, forks by invoke and by update_state, DeerFlow's
# duration-only checkpoints, subgraph namespaces.
SCENARIOS = [
    "clean-delta",
    "clean-full",
    "migration",
    "overwrite",
    "remove",
    "update-state",
    "fork",
    "duration-only",
    "subgraph",
]
POLICIES = {
    "keep-newest-3": ["--keep-newest", "3"],
    "keep-newest-1": ["--keep-newest", "1"],
    "heads-only": ["--keep-heads-only"],
    "safe-shapes": ["--only-safe-shapes"],
}


@pytest.fixture(scope="module")
def retention_sqlite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> BuiltDatabase:
    path = tmp_path_factory.mktemp("retention-sqlite") / "checkpoints.db"
    return BuiltDatabase("sqlite", str(path), None, built_sqlite_copy(request.config, path, SCENARIOS))


@pytest.fixture(scope="module")
def retention_postgres() -> Iterator[BuiltDatabase]:
    from fixtures.dbbuilder.build import build_postgres

    name = create_database("ckpt_retention")
    try:
        dsn = dsn_for(name)
        yield BuiltDatabase("postgres", dsn, None, build_postgres(dsn, scenarios=SCENARIOS), name)
    finally:
        drop_database(name)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def built(request: pytest.FixtureRequest) -> BuiltDatabase:
    return request.getfixturevalue(f"retention_{request.param}")  # type: ignore[no-any-return]


class Copy:
    """A copy of a built database that a test may change: a file, or a database made from it as a template."""

    def __init__(self, built: BuiltDatabase, directory: Path, name: str) -> None:
        self.built = built
        self.dbname: str | None = None
        if built.backend == "sqlite":
            self.db = str(directory / f"{name}.db")
            shutil.copyfile(built.path, self.db)
        else:
            assert built.dbname is not None
            self.dbname = create_database_from(built.dbname)
            self.db = dsn_for(self.dbname)

    def manifest(self) -> Manifest:
        return self.built.manifest

    def apply(self, script: str) -> subprocess.CompletedProcess[str]:
        """Run a script with the backend's own shell, as the operator would."""
        if self.built.backend == "sqlite":
            return subprocess.run(["sqlite3", self.db], input=script, capture_output=True, text=True, check=False)
        return subprocess.run(["psql", self.db, "-q", "-f", "-"], input=script, capture_output=True, text=True)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if self.built.backend == "sqlite":
            with sqlite3.connect(self.db) as connection:
                return list(connection.execute(sql))
        with psycopg.connect(self.db) as connection:
            return list(connection.execute(sql))  # type: ignore[arg-type]

    def drop(self) -> None:
        if self.dbname is not None:
            drop_database(self.dbname)


def create_database_from(template: str) -> str:
    from psycopg import sql

    from tests.conftest import admin_dsn

    name = create_database("ckpt_retention_copy")
    drop_database(name)
    with psycopg.connect(admin_dsn(), autocommit=True) as connection:
        connection.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template))
        )
    return name


@pytest.fixture
def copies(tmp_path: Path) -> Iterator[list[Copy]]:
    made: list[Copy] = []
    yield made
    for copy in made:
        copy.drop()


def _copy(built: BuiltDatabase, tmp_path: Path, copies: list[Copy], name: str) -> Copy:
    copy = Copy(built, tmp_path, name)
    copies.append(copy)
    return copy


def _readable(manifest: Manifest) -> list[ThreadRecord]:
    """Threads the real saver reads back whole (no fault was injected into them)."""
    return [t for t in manifest.threads if t.read_back == "intact" and not any(f.injected for f in t.faults)]


def _messages(db: str, manifest: Manifest, thread: ThreadRecord, checkpoint_id: str | None = None) -> list[Any]:
    with readback.reader(manifest, db) as (_, factory):
        read = readback.state(factory, thread, checkpoint_id).get("messages", [])
    return [(m.id, type(m).__name__, m.content) for m in read]


def _checkpoint_ids(copy: Copy, thread_id: str) -> list[str]:
    query = f"SELECT checkpoint_id FROM checkpoints WHERE thread_id = '{thread_id}' AND checkpoint_ns = ''"
    return sorted(row[0] for row in copy.query(query))


def _plan(db: str, *policy: str, output_format: str = "json") -> str:
    code, out, err = run_ckpt("plan", "retention", "--db", db, *policy, "--format", output_format, "-q")
    assert code == 0, err
    return out


def _findings(db: str) -> set[tuple[str, str, str | None]]:
    code, out, err = run_ckpt("verify-shape", "--db", db, "--format", "json", "--exit-zero", "-q", "--jobs", "1")
    assert code == 0, err
    return {(f["rule"], f["thread_id"], f.get("checkpoint_id")) for f in json.loads(out)["findings"]}


def _orphans(copy: Copy) -> tuple[int, int]:
    """Write rows and blob rows no checkpoint names."""
    writes_table = "writes" if copy.built.backend == "sqlite" else "checkpoint_writes"
    writes = copy.query(
        f"SELECT count(*) FROM {writes_table} w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
        "c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"
    )[0][0]
    if copy.built.backend == "sqlite":
        return writes, 0
    blobs = copy.query(
        "SELECT count(*) FROM checkpoint_blobs b WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
        "c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
        "AND c.checkpoint->'channel_versions'->>b.channel = b.version)"
    )[0][0]
    return writes, blobs


def _before(built: BuiltDatabase, tmp_path: Path, copies: list[Copy]) -> Copy:
    """An untouched copy, for the figures every test compares against."""
    return _copy(built, tmp_path, copies, "before")


def _resume(db: str, manifest: Manifest, thread: ThreadRecord) -> list[Any]:
    """Run one more turn on the thread with its last writer's graph: what DeerFlow does on the next message."""
    writer = thread.writers[-1]
    spec = GraphSpec(writer.graph, writer.mode, writer.cadence, writer.ticks_per_turn)
    with readback.reader(manifest, db) as (_, factory):
        human = HumanMessage(content="after retention", id="h-after-retention")
        values = factory.get(spec).invoke({"messages": [human]}, run_config(thread.thread_id, writer.mode))
    return [(m.id, type(m).__name__, m.content) for m in values["messages"]]


@pytest.mark.slow
@pytest.mark.parametrize("policy", list(POLICIES), ids=list(POLICIES))
def test_the_applied_plan_keeps_every_read(
    built: BuiltDatabase, policy: str, tmp_path: Path, copies: list[Copy]
) -> None:
    before = _before(built, tmp_path, copies)
    pruned = _copy(built, tmp_path, copies, "pruned")
    plan = json.loads(_plan(pruned.db, *POLICIES[policy]))
    script = _plan(pruned.db, *POLICIES[policy], output_format="sql")
    done = pruned.apply(script)
    assert done.returncode == 0, done.stderr
    manifest = built.manifest
    threads = _readable(manifest)
    assert len(threads) >= 15
    deleted = {
        lineage["thread_id"]: set(lineage["deleted"]) for lineage in plan["lineages"] if lineage["checkpoint_ns"] == ""
    }
    compared = 0
    for thread in threads:
        remaining = _checkpoint_ids(pruned, thread.thread_id)
        assert set(remaining) == set(_checkpoint_ids(before, thread.thread_id)) - deleted.get(thread.thread_id, set())
        # The newest state, and the state at every kept checkpoint (at most the 8 newest: enough for every cut).
        assert _messages(pruned.db, manifest, thread) == _messages(before.db, manifest, thread)
        for checkpoint_id in remaining[-8:]:
            assert _messages(pruned.db, manifest, thread, checkpoint_id) == _messages(
                before.db, manifest, thread, checkpoint_id
            ), (thread.thread_id, checkpoint_id)
            compared += 1
    assert plan["totals"]["freed"]["checkpoints"] > (0 if policy == "safe-shapes" else 100)
    assert compared >= len(threads)
    # Nothing the plan introduced: every finding now was there before (on the same checkpoint).
    assert _findings(pruned.db) <= _findings(before.db)
    assert _orphans(pruned) == _orphans(before)
    # The threads resume: a new turn continues each pruned conversation from its newest state.
    for thread in threads:
        if thread.thread_id in deleted and not thread.thread_id.startswith("subgraph"):
            assert _resume(pruned.db, manifest, thread) == _resume(before.db, manifest, thread)


@pytest.mark.slow
def test_the_naive_policy_breaks_the_reads_the_plan_names(
    built: BuiltDatabase, tmp_path: Path, copies: list[Copy]
) -> None:
    """Deleting all but the newest 3 (upstream's --keep estimate) loses messages on delta threads; the plan
    names those reads, keeps the checkpoints that prevent it, and verify-shape sees the damage."""
    before = _before(built, tmp_path, copies)
    naive = _copy(built, tmp_path, copies, "naive")
    plan = json.loads(_plan(naive.db, "--keep-newest", "3"))
    broken = [
        (lineage, b)
        for lineage in plan["lineages"]
        for b in lineage["naive"]["breaks"]
        if lineage["checkpoint_ns"] == ""
    ]
    assert broken and plan["naive"]["breaks"].get("CK302", 0) > 0
    writes_table = "writes" if built.backend == "sqlite" else "checkpoint_writes"
    for lineage in plan["lineages"]:
        gone = set(lineage["deleted"]) | set(lineage["naive"]["deleted_beyond_plan"])
        # The plan never deletes what the naive policy would and the closure keeps.
        assert not set(lineage["deleted"]) & set(lineage["naive"]["deleted_beyond_plan"])
        for checkpoint_id in gone:
            key = (lineage["thread_id"], lineage["checkpoint_ns"], checkpoint_id)
            where = f"thread_id = '{key[0]}' AND checkpoint_ns = '{key[1]}' AND checkpoint_id = '{key[2]}'"
            _execute(naive, f"DELETE FROM checkpoints WHERE {where}")
            _execute(naive, f"DELETE FROM {writes_table} WHERE {where}")
    readable = {t.thread_id: t for t in _readable(built.manifest)}
    lost = 0
    for lineage, read in broken:
        thread = readable.get(lineage["thread_id"])
        if thread is None:
            continue
        try:
            after = _messages(naive.db, built.manifest, thread, read["checkpoint_id"])
        except Exception:  # a read the saver cannot finish is broken too
            after = None
        lost += after != _messages(before.db, built.manifest, thread, read["checkpoint_id"])
    assert lost >= 10
    assert "CK302" in {rule for rule, _, _ in _findings(naive.db) - _findings(before.db)}


def _execute(copy: Copy, statement: str) -> None:
    if copy.built.backend == "sqlite":
        with sqlite3.connect(copy.db) as connection:
            connection.execute(statement)
    else:
        with psycopg.connect(copy.db) as connection:
            connection.execute(statement)  # type: ignore[arg-type]


def _counts(copy: Copy) -> tuple[int, ...]:
    writes_table = "writes" if copy.built.backend == "sqlite" else "checkpoint_writes"
    tables = ["checkpoints", writes_table] + ([] if copy.built.backend == "sqlite" else ["checkpoint_blobs"])
    return tuple(copy.query(f"SELECT count(*) FROM {table}")[0][0] for table in tables)


@pytest.mark.slow
@pytest.mark.parametrize("change", ["new-head", "child-of-a-deleted-checkpoint"])
def test_a_thread_changed_after_the_plan_makes_the_script_delete_nothing(
    built: BuiltDatabase, change: str, tmp_path: Path, copies: list[Copy]
) -> None:
    live = _copy(built, tmp_path, copies, "live")
    plan = json.loads(_plan(live.db, "--keep-newest", "3"))
    script = _plan(live.db, "--keep-newest", "3", output_format="sql")
    thread = next(t for t in _readable(built.manifest) if t.thread_id == "clean-delta-k3")
    planned = next(lineage for lineage in plan["lineages"] if lineage["thread_id"] == thread.thread_id)
    writer = thread.writers[-1]
    spec = GraphSpec(writer.graph, writer.mode, writer.cadence, writer.ticks_per_turn)
    # A writer appends between plan and apply: a new turn on the head, or a fork from a planned deletion.
    at = None if change == "new-head" else planned["deleted"][-1]
    with readback.reader(built.manifest, live.db) as (_, factory):
        factory.get(spec).invoke(
            {"messages": [HumanMessage(content="late", id="h-late")]}, run_config(thread.thread_id, writer.mode, at)
        )
    before = _counts(live)
    done = live.apply(script)
    assert done.returncode != 0
    assert GUARD_MESSAGE in done.stderr
    assert _counts(live) == before
    # Planned again, the same database is pruned: the guard held nothing else back.
    again = live.apply(_plan(live.db, "--keep-newest", "3", output_format="sql"))
    assert again.returncode == 0, again.stderr
    assert _counts(live)[0] < before[0]


def _sum(copy: Copy, sql: str) -> int:
    return int(copy.query(sql)[0][0] or 0)


@pytest.mark.slow
def test_what_it_frees_is_what_the_deletion_takes(built: BuiltDatabase, tmp_path: Path, copies: list[Copy]) -> None:
    """Rows and stored bytes per table, against the database's own sums over what the script deleted."""
    pruned = _copy(built, tmp_path, copies, "pruned")
    sqlite = built.backend == "sqlite"
    writes_table = "writes" if sqlite else "checkpoint_writes"
    value = "value" if sqlite else "blob"
    size = "length" if sqlite else "octet_length"
    text = "" if sqlite else "::text"
    totals = {
        "checkpoint_bytes": f"SELECT sum({size}(checkpoint{text}) + {size}(metadata{text})) FROM checkpoints",
        "checkpoints": "SELECT count(*) FROM checkpoints",
        "writes": f"SELECT count(*) FROM {writes_table}",
        "write_bytes": f"SELECT sum({size}({value})) FROM {writes_table}",
    }
    if not sqlite:
        totals |= {
            "blobs": "SELECT count(*) FROM checkpoint_blobs",
            "blob_bytes": "SELECT sum(octet_length(blob)) FROM checkpoint_blobs",
        }
    before = {name: _sum(pruned, sql) for name, sql in totals.items()}
    plan = json.loads(_plan(pruned.db, "--keep-newest", "2"))
    done = pruned.apply(_plan(pruned.db, "--keep-newest", "2", output_format="sql"))
    assert done.returncode == 0, done.stderr
    freed = plan["totals"]["freed"]
    for name, sql in totals.items():
        assert before[name] - _sum(pruned, sql) == freed[name], name
    assert freed["checkpoints"] > 100 and freed["writes"] > 100 and (sqlite or freed["blobs"] > 10)
    assert sum(lineage["freed"]["total_bytes"] for lineage in plan["lineages"]) == freed["total_bytes"]


@pytest.mark.slow
def test_keep_since_keeps_what_was_written_since(built: BuiltDatabase, tmp_path: Path, copies: list[Copy]) -> None:
    pruned = _copy(built, tmp_path, copies, "pruned")
    ids = sorted(row[0] for row in pruned.query("SELECT checkpoint_id FROM checkpoints"))
    boundary = ids[len(ids) // 2]
    plan = json.loads(_plan(pruned.db, "--keep-since", boundary))
    deleted = {cid for lineage in plan["lineages"] for cid in lineage["deleted"]}
    assert deleted and all(cid < boundary for cid in deleted)
    assert plan["policy"]["keep_since"] == boundary
    done = pruned.apply(_plan(pruned.db, "--keep-since", boundary, output_format="sql"))
    assert done.returncode == 0, done.stderr
    remaining = {row[0] for row in pruned.query("SELECT checkpoint_id FROM checkpoints")}
    assert {cid for cid in ids if cid >= boundary} <= remaining and not remaining & deleted


def test_one_thread_and_the_refusals(retention_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    plan = json.loads(_plan(retention_sqlite.db, "--keep-newest", "2", "--thread", "clean-delta-k3"))
    assert {lineage["thread_id"] for lineage in plan["lineages"]} == {"clean-delta-k3"} and plan["totals"][
        "threads"
    ] == 1
    code, _, err = run_ckpt("plan", "retention", "--db", retention_sqlite.db, "--keep-newest", "2", "--thread", "nope")
    assert code == 2 and "no checkpoints for thread 'nope'" in err
    code, _, err = run_ckpt("plan", "retention", "--db", retention_sqlite.db)
    assert code == 2 and "name a policy" in err
    code, _, err = run_ckpt(
        "plan", "retention", "--db", retention_sqlite.db, "--keep-newest", "2", "-o", retention_sqlite.db
    )
    assert code == 2 and "would overwrite it" in err
    code, _, err = run_ckpt("plan", "retention", "--db", retention_sqlite.db, "--keep-since", "yesterday")
    assert code == 2 and "--keep-since" in err


def test_planning_writes_nothing(retention_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    import hashlib

    def digest() -> str:
        return hashlib.sha256(retention_sqlite.path.read_bytes()).hexdigest()

    before = digest()
    for output_format in ("text", "json", "sql"):
        _plan(retention_sqlite.db, "--keep-newest", "1", output_format=output_format)
    assert digest() == before


def test_the_text_says_what_the_json_counts(retention_sqlite: BuiltDatabase) -> None:
    plan = json.loads(_plan(retention_sqlite.db, "--keep-newest", "3"))
    code, out, err = run_ckpt(
        "plan", "retention", "--db", retention_sqlite.db, "--keep-newest", "3", "--color", "never"
    )
    assert code == 0, err
    totals = plan["totals"]
    deleted = totals["checkpoints"] - totals["keeps"]
    assert f"{totals['checkpoints']:,} checkpoints: keeps {totals['keeps']:,}" in out and f"deletes {deleted:,}" in out
    assert f"re-parents {totals['reparented']:,} kept checkpoint(s)" in out
    breaks = plan["naive"]["breaks"]
    assert f"break {sum(breaks.values()):,} read(s)" in out and f"CK302 x{breaks['CK302']}" in out
    widened = next(lineage for lineage in plan["lineages"] if lineage["widest"])
    assert f"{widened['thread_id']}: --keep-newest 3 keeps {widened['keeps']} here" in out


@pytest.mark.slow
def test_keys_a_script_cannot_name_exactly_are_left_whole(retention_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """A thread id with a quote and a newline is named exactly; one stored as a BLOB is left whole, and said so."""
    db = tmp_path / "odd.db"
    shutil.copyfile(retention_sqlite.path, db)
    odd = "it's\na thread"
    with sqlite3.connect(db) as connection:
        for table in ("checkpoints", "writes"):
            connection.execute(f"UPDATE {table} SET thread_id = ? WHERE thread_id = 'clean-delta-k3'", (odd,))
            connection.execute(
                f"UPDATE {table} SET thread_id = CAST('clean-delta-k2' AS BLOB) WHERE thread_id = 'clean-delta-k2'"
            )
    plan = json.loads(_plan(str(db), "--keep-newest", "2"))
    by_thread = {lineage["thread_id"]: lineage for lineage in plan["lineages"]}
    assert by_thread[odd]["deleted"] and by_thread[odd]["skipped"] is None
    blob = by_thread["x'636c65616e2d64656c74612d6b32'"]
    assert blob["skipped"] and "not all text" in blob["skipped"]
    script = _plan(str(db), "--keep-newest", "2", output_format="sql")
    done = subprocess.run(["sqlite3", str(db)], input=script, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as connection:
        left = {
            row[0] for row in connection.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?", (odd,))
        }
        blobs = connection.execute("SELECT count(*) FROM checkpoints WHERE typeof(thread_id) = 'blob'").fetchone()[0]
    with sqlite3.connect(retention_sqlite.path) as connection:
        whole = connection.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 'clean-delta-k2'").fetchone()[0]
    assert left and not left & set(by_thread[odd]["deleted"])
    assert blobs == whole > 2
