"""`ckpt plan retention` end to end, on databases the real graphs wrote, on both backends.

The plan's script is applied to a copy with the database's own shell (sqlite3, psql), as an operator would;
then every thread is read back through the real saver with its last writer's graph (the newest state, and
each kept checkpoint of the conversation), a new turn is run on each (the thread resumes), verify-shape
finds nothing the plan introduced, and no write or blob row is left without its checkpoint. The naive
policy (delete all the policy does not name) applied to another copy breaks the reads the plan reports.
The script's guard is shown to delete nothing when a writer changed a planned thread after the plan.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from deerflow_ckpt.report.retention_sql import GUARD_MESSAGE
from fixtures.dbbuilder import readback
from fixtures.dbbuilder.graphs import GraphFactory, GraphSpec, run_config
from fixtures.dbbuilder.manifest import Manifest, ThreadRecord
from tests.cli import REPO, run_ckpt
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
    "old-branches",
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


# One saver per database for the test's whole run: opening one per read (a connection and the saver's setup)
# was most of the applied-plan tests' time on Postgres.
_READERS: dict[str, GraphFactory] = {}
_READER_STACK: list[contextlib.ExitStack] = []


@pytest.fixture(autouse=True)
def _one_reader_per_database(copies: list[Copy]) -> Iterator[None]:
    """Closed before `copies` drops the databases (this fixture is set up after it, so torn down first)."""
    with contextlib.ExitStack() as stack:
        _READER_STACK.append(stack)
        try:
            yield
        finally:
            _READER_STACK.pop()
            _READERS.clear()


def _factory(db: str, manifest: Manifest) -> GraphFactory:
    if db not in _READERS:
        _READERS[db] = _READER_STACK[-1].enter_context(readback.reader(manifest, db))[1]
    return _READERS[db]


def _messages(db: str, manifest: Manifest, thread: ThreadRecord, checkpoint_id: str | None = None) -> list[Any]:
    read = readback.state(_factory(db, manifest), thread, checkpoint_id).get("messages", [])
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


def _introduced(before: str, after: str) -> set[tuple[str, str, str | None]]:
    """Findings on the pruned copy that were not there before, but for the database-level reading of the cadence
    over time (CK202/CK205/CK206 with no thread), which follows whatever history is left: retention deletes
    history by design, and with it the evidence of which cadences wrote side by side."""
    timeline = {"CK202", "CK205", "CK206"}
    return {f for f in _findings(after) - _findings(before) if not (f[1] is None and f[0] in timeline)}


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


def _resume(db: str, manifest: Manifest, thread: ThreadRecord, checkpoint_id: str | None = None) -> list[Any]:
    """Run one more turn on the thread with its last writer's graph: what DeerFlow does on the next message
    (from the newest checkpoint), or on a branch or regenerate (from `checkpoint_id`)."""
    writer = thread.writers[-1]
    spec = GraphSpec(writer.graph, writer.mode, writer.cadence, writer.ticks_per_turn)
    human = HumanMessage(content="after retention", id=f"h-after-{checkpoint_id or 'head'}")
    config = run_config(thread.thread_id, writer.mode, checkpoint_id)
    values = _factory(db, manifest).get(spec).invoke({"messages": [human]}, config)
    return [(m.id, type(m).__name__, m.content) for m in values.get("messages", [])]


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
    assert not _introduced(before.db, pruned.db)
    assert _orphans(pruned) == _orphans(before)
    # The threads resume: a new turn continues each pruned conversation from its newest state, and from each of
    # its kept checkpoints (the 8 newest) as a branch would.
    resumed = 0
    for thread in threads:
        if thread.thread_id not in deleted:
            continue
        kept = _checkpoint_ids(pruned, thread.thread_id)[-8:]
        for checkpoint_id in [None, *kept]:
            assert _resume(pruned.db, manifest, thread, checkpoint_id) == _resume(
                before.db, manifest, thread, checkpoint_id
            ), (thread.thread_id, checkpoint_id)
            resumed += 1
    assert resumed >= len(deleted)


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
        for checkpoint_id in gone:
            key = (lineage["thread_id"], lineage["checkpoint_ns"], checkpoint_id)
            where = f"thread_id = '{key[0]}' AND checkpoint_ns = '{key[1]}' AND checkpoint_id = '{key[2]}'"
            _execute(naive, f"DELETE FROM checkpoints WHERE {where}")
            _execute(naive, f"DELETE FROM {writes_table} WHERE {where}")
    readable = {t.thread_id: t for t in _readable(built.manifest)}
    lost = whole = 0
    for lineage, read in broken:
        thread = readable.get(lineage["thread_id"])
        if thread is None:
            continue
        try:
            after = _messages(naive.db, built.manifest, thread, read["checkpoint_id"])
        except Exception:  # a read the saver cannot finish is broken too
            after = None
        differs = after != _messages(before.db, built.manifest, thread, read["checkpoint_id"])
        # A broken read reads otherwise; where only the next turn breaks, the checkpoint still reads whole.
        if read["breaks"] == "read":
            lost += differs
        elif read["breaks"] == "next turn":
            whole += not differs
    assert lost >= 10
    assert whole == sum(
        1 for lineage, read in broken if read["breaks"] == "next turn" and lineage["thread_id"] in readable
    )
    # The CK302s the plan names are exactly the ones verify-shape finds after the naive deletion.
    named = {
        ("CK302", lineage["thread_id"], b["checkpoint_id"])
        for lineage in plan["lineages"]
        for b in lineage["naive"]["breaks"]
        if b["rule"] == "CK302"
    }
    found = {f for f in _findings(naive.db) - _findings(before.db) if f[0] == "CK302"}
    assert named == found and named


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


@pytest.mark.slow
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
    assert (
        f"break {sum(breaks.values()):,} read(s)" in out
        and f"CK302 (parent id that names no checkpoint) x{breaks['CK302']}" in out
    )
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


def _regenerate_bases(db: str, manifest: Manifest, thread: ThreadRecord) -> dict[str, str | None]:
    """For each message of the thread's newest state, the checkpoint DeerFlow's regenerate would fork from: the
    first one up the parent links whose state lacks the message (as find_checkpoint_before_message walks);
    None where the links end first (DeerFlow then falls back to its history scan)."""
    writer = thread.writers[-1]
    spec = GraphSpec(writer.graph, writer.mode, writer.cadence, writer.ticks_per_turn)
    with readback.reader(manifest, db) as (_, factory):
        graph = factory.get(spec)
        snapshot = graph.get_state(run_config(thread.thread_id, writer.mode))
        wanted = [str(m.id) for m in snapshot.values.get("messages", [])]
        chain: list[tuple[str, set[str]]] = []
        parent = snapshot.parent_config
        while parent is not None and len(chain) < 400:
            state = graph.get_state(parent)
            if state.created_at is None:  # a link to nothing: DeerFlow rejects the lineage, never guesses
                chain.append(("unaddressable", set()))
                break
            chain.append(
                (state.config["configurable"]["checkpoint_id"], {str(m.id) for m in state.values.get("messages", [])})
            )
            parent = state.parent_config
    return {m: next((cid for cid, ids in chain if m not in ids), None) for m in wanted}


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["keep-newest-3", "heads-only"])
def test_regenerate_finds_the_same_turn_or_none(
    built: BuiltDatabase, policy: str, tmp_path: Path, copies: list[Copy]
) -> None:
    """After the plan, regenerating a message forks from the checkpoint it forked from before, or finds none
    (a cut turn: DeerFlow falls back); never from another, earlier state."""
    before = _before(built, tmp_path, copies)
    pruned = _copy(built, tmp_path, copies, "pruned")
    done = pruned.apply(_plan(pruned.db, *POLICIES[policy], output_format="sql"))
    assert done.returncode == 0, done.stderr
    same = cut = 0
    for thread in _readable(built.manifest):
        if thread.thread_id.startswith("subgraph"):
            continue
        old = _regenerate_bases(before.db, built.manifest, thread)
        new = _regenerate_bases(pruned.db, built.manifest, thread)
        assert new.keys() == old.keys()
        for message, base in new.items():
            assert base in (old[message], None), (thread.thread_id, message, base, old[message])
            same += base == old[message]
            cut += base is None and old[message] is not None
    assert same > 10 and cut > 10


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("policy", ["keep-newest-3", "heads-only"])
def test_pruned_threads_continue_under_deerflows_pinned_saver(
    retention_postgres: BuiltDatabase, pinned_saver: Path, policy: str, tmp_path: Path, copies: list[Copy]
) -> None:
    """Two more turns on every pruned thread (the full-mode one switched to delta) read back the same messages
    as on the unpruned copy, with the saver DeerFlow pins."""
    before = _before(retention_postgres, tmp_path, copies)
    pruned = _copy(retention_postgres, tmp_path, copies, "pruned")
    done = pruned.apply(_plan(pruned.db, *POLICIES[policy], output_format="sql"))
    assert done.returncode == 0, done.stderr
    manifest_path = tmp_path / "manifest.json"
    retention_postgres.manifest.write(manifest_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pinned_saver), str(REPO)])}
    probe = [sys.executable, str(REPO / "tests" / "pinned_saver_probe.py"), str(manifest_path), before.db, pruned.db]
    ran = subprocess.run(probe, capture_output=True, text=True, env=env, check=False, timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    assert result["version"] == "3.1.1" and str(pinned_saver) in result["saver"]
    assert len(result["threads"]) >= 15 and "clean-full" in result["threads"]
    for thread_id, (unpruned, after) in result["threads"].items():
        assert after == unpruned, thread_id


@pytest.mark.slow
@pytest.mark.postgres
def test_a_full_mode_thread_on_postgres_goes_only_where_the_deployment_runs_full(
    retention_postgres: BuiltDatabase, tmp_path: Path
) -> None:
    """Without knowing the deployment's mode, a full-mode thread on Postgres keeps its chain back to its start
    (a delta-mode process continuing it would walk past its stored lists, with the pinned saver) and says so;
    with a config in full mode its old checkpoints go."""
    unknown = json.loads(_plan(retention_postgres.db, "--keep-newest", "3", "--thread", "clean-full"))
    (lineage,) = unknown["lineages"]
    assert not lineage["deleted"] and "full-mode thread on Postgres" in lineage["note"]
    assert lineage["naive"]["breaks"], "the naive newest-3 would cut the chain a delta-mode continuation walks"
    config = tmp_path / "config.yaml"
    config.write_text(
        "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n  checkpoint_channel_mode: full\n"
    )
    code, out, err = run_ckpt(
        "plan", "retention", "--config", str(config), "--keep-newest", "3", "--thread", "clean-full", "--format",
        "json", "-q", env={"DATABASE_URL": retention_postgres.db},
    )  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    (full,) = document["lineages"]
    assert full["deleted"] and full["note"] is None and full["keeps"] == 3
    assert document["full_mode_from"] == str(config)
    # The same config, but a database named by --db: the config need not describe it, so its mode is not used.
    code, out, err = run_ckpt(
        "plan", "retention", "--config", str(config), "--db", retention_postgres.db, "--keep-newest", "3",
        "--thread", "clean-full", "--format", "json", "-q", env={"DATABASE_URL": retention_postgres.db},
    )  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    assert document["full_mode_from"] is None and not document["lineages"][0]["deleted"]


@pytest.mark.slow
def test_batches_apply_whole_threads_and_stop_at_a_changed_one(retention_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """--batch N: transactions of whole threads, each guarded on its own; the script does what one transaction
    does, and where a thread changed it stops: the transactions before it applied, that one and the rest not."""
    whole, batched = tmp_path / "whole.db", tmp_path / "batched.db"
    for db in (whole, batched):
        shutil.copyfile(retention_sqlite.path, db)
    script = _plan(str(whole), "--keep-newest", "2", output_format="sql")
    assert script.count("BEGIN IMMEDIATE;") == 1
    batches = _plan(str(batched), "--keep-newest", "2", "--batch", "60", output_format="sql")
    assert batches.count("BEGIN IMMEDIATE;") >= 5
    # Each transaction holds whole threads: no thread is planned in two of them.
    seen: set[str] = set()
    for transaction in batches.split("BEGIN IMMEDIATE;")[1:]:
        loaded = transaction.split("INSERT INTO ckpt_plan_lineages VALUES", 1)[1].split(";", 1)[0]
        threads = {row.split("'")[1] for row in loaded.split("\n") if row.strip().startswith("('")}
        assert threads and not threads & seen, threads & seen
        seen |= threads
    for db, text in ((whole, script), (batched, batches)):
        done = subprocess.run(["sqlite3", str(db)], input=text, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    rows = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id FROM checkpoints ORDER BY 1, 2, 3"
    with sqlite3.connect(whole) as a, sqlite3.connect(batched) as b:
        assert list(a.execute(rows)) == list(b.execute(rows))
    # A thread planned in a later transaction changes: the earlier ones still apply, it and the later do not.
    live = tmp_path / "live.db"
    shutil.copyfile(retention_sqlite.path, live)
    plan = json.loads(_plan(str(live), "--keep-newest", "2", "--batch", "60"))
    batches = _plan(str(live), "--keep-newest", "2", "--batch", "60", output_format="sql")
    order = [lineage["thread_id"] for lineage in plan["lineages"] if lineage["deleted"]]
    late = next(t for t in order[len(order) // 2 :] if not t.startswith("subgraph"))
    thread = next(t for t in _readable(retention_sqlite.manifest) if t.thread_id == late)
    writer = thread.writers[-1]
    spec = GraphSpec(writer.graph, writer.mode, writer.cadence, writer.ticks_per_turn)
    with readback.reader(retention_sqlite.manifest, str(live)) as (_, factory):
        factory.get(spec).invoke(
            {"messages": [HumanMessage(content="late", id="h-late")]}, run_config(late, writer.mode)
        )
    done = subprocess.run(["sqlite3", str(live)], input=batches, capture_output=True, text=True, check=False)
    assert done.returncode != 0 and GUARD_MESSAGE in done.stderr
    deleted = {
        lineage["thread_id"]: set(lineage["deleted"]) for lineage in plan["lineages"] if lineage["checkpoint_ns"] == ""
    }
    with sqlite3.connect(live) as connection:
        left = {
            t: {
                r[0]
                for r in connection.execute(
                    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''", (t,)
                )
            }
            for t in deleted
        }
    assert not left[order[0]] & deleted[order[0]], "the first transaction applied"
    assert deleted[late] <= left[late], "the changed thread's transaction deleted nothing"


@pytest.mark.slow
def test_the_script_waits_for_a_writer(retention_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """A writer holding SQLite's write lock when the script starts: the script waits for it (.timeout), then runs."""
    import threading

    db = tmp_path / "busy.db"
    shutil.copyfile(retention_sqlite.path, db)
    script = _plan(str(db), "--keep-newest", "2", output_format="sql")
    writer = sqlite3.connect(db, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")
    release = threading.Timer(1.5, writer.commit)
    release.start()
    try:
        done = subprocess.run(["sqlite3", str(db)], input=script, capture_output=True, text=True, check=False)
    finally:
        release.join()
        writer.close()
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_keys_with_backslashes_whatever_the_session_says(
    retention_postgres: BuiltDatabase, tmp_path: Path, copies: list[Copy]
) -> None:
    """A thread id with backslashes and a quote is named exactly, even in a session whose
    standard_conforming_strings is off (where '\\' would be read as one backslash)."""
    pruned = _copy(retention_postgres, tmp_path, copies, "pruned")
    odd = "back\\\\slash 'q'"
    for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
        with psycopg.connect(pruned.db) as connection:
            connection.execute(f"UPDATE {table} SET thread_id = %s WHERE thread_id = 'clean-delta-k3'", (odd,))  # type: ignore[arg-type]
    plan = json.loads(_plan(pruned.db, "--keep-newest", "2", "--thread", odd))
    (lineage,) = plan["lineages"]
    assert lineage["thread_id"] == odd and lineage["deleted"]
    script = _plan(pruned.db, "--keep-newest", "2", "--thread", odd, output_format="sql")
    env = {**os.environ, "PGOPTIONS": "-c standard_conforming_strings=off"}
    done = subprocess.run(["psql", pruned.db, "-q", "-f", "-"], input=script, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    with psycopg.connect(pruned.db) as connection:
        query = "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s"
        left = {row[0] for row in connection.execute(query, (odd,))}
    assert left and not left & set(lineage["deleted"]) and len(left) == plan["totals"]["keeps"]


def test_the_script_names_its_own_file(retention_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    spaced = tmp_path / "a  b"
    spaced.mkdir()
    db = spaced / "deer  flow.db"
    shutil.copyfile(retention_sqlite.path, db)
    output = tmp_path / "prune-2.sql"
    code, _, err = run_ckpt(
        "plan", "retention", "--db", str(db), "--keep-newest", "2", "--format", "sql", "-o", str(output)
    )
    assert code == 0, err
    header = [line for line in output.read_text().splitlines() if line.startswith("-- Review")]
    assert header == [f"-- Review it, then run it with the database's shell: sqlite3 '{db}' < {output}"]


def test_the_text_escapes_what_the_database_names(retention_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """Thread and checkpoint ids, and the database's path, cannot drive a terminal through the text report."""
    db = tmp_path / "red\x1b[31m.db"
    shutil.copyfile(retention_sqlite.path, db)
    with sqlite3.connect(db) as connection:
        for table in ("checkpoints", "writes"):
            connection.execute(
                f"UPDATE {table} SET thread_id = 'k3\x1b[2J', checkpoint_id = checkpoint_id || char(7) "
                "WHERE thread_id = 'clean-delta-k10'"
            )
            connection.execute(
                f"UPDATE {table} SET parent_checkpoint_id = parent_checkpoint_id || char(7) "
                "WHERE thread_id = 'k3\x1b[2J'"
            ) if table == "checkpoints" else None
    code, out, err = run_ckpt("plan", "retention", "--db", str(db), "--keep-newest", "3", "--color", "never")
    assert code == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "red\\x1b[31m.db" in out
    code, out, err = run_ckpt(
        "plan", "retention", "--db", str(db), "--keep-newest", "3", "--thread", "k3\x1b[2J", "--color", "never"
    )
    assert code == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "k3\\x1b[2J" in out and "\\x07" in out
