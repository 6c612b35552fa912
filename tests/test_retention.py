"""The retention closure (analysis/retention.py) on the whole fixture catalogue, damaged threads included.

Invariants every plan keeps, checked lineage by lineage against the records the readers give; and the
plan's script applied to a copy leaves verify-shape nothing new to report, on both backends, whatever the
policy (a cut never lands where a verify-shape rule would see a broken chain or a moved value).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.retention import KeepReason, RetentionPolicy, plan_lineage
from deerflow_ckpt.store.readers import open_reader
from deerflow_ckpt.store.records import Backend, CheckpointRecord, Lineage, Shape
from deerflow_ckpt.store.source import target_from_argument
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase, create_database, drop_database, dsn_for

POLICIES = [
    RetentionPolicy(keep_newest=3),
    RetentionPolicy(keep_newest=1),
    RetentionPolicy(heads_only=True),
    RetentionPolicy(only_safe_shapes=True),
    RetentionPolicy(keep_newest=5, only_safe_shapes=True),
]


def _walk_ends(record: CheckpointRecord, backend: Backend) -> bool:
    """Where the saver's replay walk stops, restated from docs/retention.md apart from the code it checks."""
    if record.messages_version is None:
        return True
    if backend is Backend.POSTGRES:
        return record.messages in {Shape.SNAPSHOT, Shape.DANGLING_MARKER, Shape.MARKER_WITHOUT_SNAPSHOT}
    if record.messages in {Shape.SNAPSHOT, Shape.SNAPSHOT_AT_VERSION}:
        return True
    return record.messages in {Shape.LIST, Shape.OTHER} and not record.delta


def _lineages(db: str) -> list[Lineage]:
    reader, _ = open_reader(target_from_argument(db))
    return list(reader.lineages())


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.describe())
def test_every_kept_checkpoint_keeps_its_read_chain(built_sqlite: BuiltDatabase, policy: RetentionPolicy) -> None:
    planned = 0
    for lineage in _lineages(built_sqlite.db):
        plan = plan_lineage(lineage, Backend.SQLITE, policy)
        graph = LineageGraph(lineage, Backend.SQLITE)
        head = graph.head()
        assert plan.kept[head.checkpoint_id] is KeepReason.NEWEST
        assert set(plan.kept) | set(plan.deleted) == set(graph.by_id) and not set(plan.kept) & set(plan.deleted)
        assert plan.policy_kept <= plan.kept.keys()
        for checkpoint_id in plan.kept:
            record = graph.by_id[checkpoint_id]
            # It, and any turn written after it, read back to where the walk ends: all of that stays.
            current, seen = record, {record.checkpoint_id}
            while not _walk_ends(current, Backend.SQLITE) and current.parent_record is not None:
                current = current.parent_record
                assert current.checkpoint_id in plan.kept, (lineage.thread_id, checkpoint_id)
                if current.checkpoint_id in seen:
                    break  # a cycle of parent ids (CK303)
                seen.add(current.checkpoint_id)
            if record.message_write_rows + record.other_write_rows and checkpoint_id not in graph.children:
                assert checkpoint_id in plan.kept  # pending writes are state
        # A cut lands only on a checkpoint whose read needs no ancestor, and leaves no parent id dangling.
        gone = set(plan.deleted)
        for reparent in plan.reparented:
            record = graph.by_id[reparent.checkpoint_id]
            assert _walk_ends(record, Backend.SQLITE) and reparent.old_parent in gone
            assert reparent.new_parent is None or reparent.new_parent in plan.kept
        cut = {r.checkpoint_id for r in plan.reparented}
        assert cut == {r.checkpoint_id for r in graph.records if r.checkpoint_id in plan.kept and r.parent_id in gone}
        if policy.only_safe_shapes and policy.keep_newest is None:
            assert {head.checkpoint_id, *(a.checkpoint_id for a in graph.ancestors(head))} <= plan.kept.keys()
        planned += bool(plan.deleted)
    assert planned >= (4 if policy.only_safe_shapes else 10)


def test_a_policy_that_keeps_everything_deletes_nothing(built_sqlite: BuiltDatabase) -> None:
    for lineage in _lineages(built_sqlite.db):
        plan = plan_lineage(lineage, Backend.SQLITE, RetentionPolicy(keep_newest=10_000))
        assert not plan.deleted and not plan.naive_breaks and plan.freed.checkpoints == 0


def test_the_widening_is_explained(built_sqlite: BuiltDatabase) -> None:
    """keep-newest 3 on a K=10 delta thread keeps back to the nearest snapshot: the widest chain says how far."""
    lineage = next(x for x in _lineages(built_sqlite.db) if x.thread_id == "clean-delta-k10" and x.checkpoint_ns == "")
    plan = plan_lineage(lineage, Backend.SQLITE, RetentionPolicy(keep_newest=3))
    graph = LineageGraph(lineage, Backend.SQLITE)
    assert plan.widest is not None and plan.widened_by >= plan.widest[1] > 0
    oldest_kept = min(plan.kept)
    assert graph.by_id[oldest_kept].seed, "the widened chain ends at a stored value"


def _apply(built: BuiltDatabase, db: str, script: str) -> None:
    if built.backend == "sqlite":
        done = subprocess.run(["sqlite3", db], input=script, capture_output=True, text=True, check=False)
    else:
        done = subprocess.run(["psql", db, "-q", "-f", "-"], input=script, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _findings(db: str) -> set[tuple[str, str, str | None]]:
    code, out, err = run_ckpt("verify-shape", "--db", db, "--format", "json", "--exit-zero", "-q", "--jobs", "1")
    assert code == 0, err
    return {(f["rule"], f["thread_id"], f.get("checkpoint_id")) for f in json.loads(out)["findings"]}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("policy", [["--keep-newest", "3"], ["--keep-heads-only"]], ids=["keep-newest-3", "heads"])
def test_nothing_new_for_verify_shape_on_the_whole_catalogue(
    backend: str, policy: list[str], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Damaged threads included: a stuffed list (CK101), pruned writes, cycles, a missing parent..."""
    built: BuiltDatabase = request.getfixturevalue(f"built_{backend}")
    name = None
    if backend == "sqlite":
        db = str(tmp_path / "copy.db")
        shutil.copyfile(built.path, db)
    else:
        import psycopg
        from psycopg import sql

        from tests.conftest import admin_dsn

        name = create_database("ckpt_catalogue_copy")
        drop_database(name)
        with psycopg.connect(admin_dsn(), autocommit=True) as connection:
            template = sql.Identifier(built.dbname or "")
            connection.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), template))
        db = dsn_for(name)
    try:
        code, script, err = run_ckpt("plan", "retention", "--db", db, *policy, "--format", "sql", "-q")
        assert code == 0, err
        assert script.count("DELETE FROM") >= 2
        _apply(built, db, script)
        assert _findings(db) <= _findings(built.db)
    finally:
        if name is not None:
            drop_database(name)
