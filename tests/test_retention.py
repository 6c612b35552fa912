"""Retention plans (analysis/retention.py) on databases the real graphs wrote, proven by deleting on a copy.

The plan's deletions are applied to a copy of the fixture database by primary key, then every kept
checkpoint of every clean conversation is read back through the real SqliteSaver and the graph of its
last writer: its messages must equal what the same read gave before. The naive policy (keep only what
the policy names) applied to another copy must break reads the plan reports as broken.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.retention import KeepReason, LineagePlan, RetentionPolicy, plan_lineage
from deerflow_ckpt.store.readers import open_reader
from deerflow_ckpt.store.records import Backend, Lineage
from deerflow_ckpt.store.source import target_from_argument
from fixtures.dbbuilder import readback
from fixtures.dbbuilder.manifest import ThreadRecord
from tests.conftest import BuiltDatabase


def _lineages(db: str) -> list[Lineage]:
    reader, _ = open_reader(target_from_argument(db))
    return list(reader.lineages())


def _clean_threads(built: BuiltDatabase) -> dict[str, ThreadRecord]:
    return {t.thread_id: t for t in built.manifest.threads if not t.faults and t.read_back == "intact"}


def _delete(db: Path, plans: list[LineagePlan], naive: bool = False) -> None:
    """Delete what the plans (or the naive policy) delete: checkpoints and their writes, by primary key."""
    connection = sqlite3.connect(db)
    with connection:
        for plan in plans:
            gone = set(plan.deleted) | (set(plan.naive_deleted) if naive else set())
            for checkpoint_id in gone:
                key = (plan.thread_id, plan.checkpoint_ns, checkpoint_id)
                connection.execute(
                    "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", key
                )
                connection.execute(
                    "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", key
                )
    connection.close()


def _messages(built_db: str, built: BuiltDatabase, thread: ThreadRecord, checkpoint_id: str) -> list[Any]:
    with readback.reader(built.manifest, built_db) as (_, factory):
        read = readback.state(factory, thread, checkpoint_id).get("messages", [])
    return [(m.id, type(m).__name__, m.content) for m in read]


POLICIES = [
    RetentionPolicy(keep_newest=3),
    RetentionPolicy(keep_newest=1),
    RetentionPolicy(heads_only=True),
    RetentionPolicy(only_safe_shapes=True),
]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: repr(p))
def test_every_kept_checkpoint_keeps_its_read_chain(built_sqlite: BuiltDatabase, policy: RetentionPolicy) -> None:
    for lineage in _lineages(built_sqlite.db):
        plan = plan_lineage(lineage, Backend.SQLITE, policy)
        graph = LineageGraph(lineage, Backend.SQLITE)
        assert plan.kept[graph.head().checkpoint_id] is KeepReason.NEWEST
        assert set(plan.kept) | set(plan.deleted) == set(graph.by_id) and not set(plan.kept) & set(plan.deleted)
        for checkpoint_id in plan.kept:
            record = graph.by_id[checkpoint_id]
            for ancestor in graph.ancestors(record):
                if graph.stores_seed(record):
                    break
                assert ancestor.checkpoint_id in plan.kept, (lineage.thread_id, checkpoint_id)
                if graph.stores_seed(ancestor):
                    break
            if record.message_write_rows + record.other_write_rows and checkpoint_id not in graph.children:
                assert checkpoint_id in plan.kept
        for checkpoint_id in plan.cut_at:
            assert graph.stores_seed(graph.by_id[checkpoint_id]), "a cut must start at a stored value"


def test_applying_the_plan_keeps_every_read(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """keep-newest 3, applied to a copy: every kept conversation checkpoint reads the same messages."""
    policy = RetentionPolicy(keep_newest=3)
    lineages = _lineages(built_sqlite.db)
    plans = [plan_lineage(lineage, Backend.SQLITE, policy) for lineage in lineages]
    clean = _clean_threads(built_sqlite)
    conversation = [p for p in plans if p.checkpoint_ns == "" and p.thread_id in clean]
    before = {
        (p.thread_id, cid): _messages(built_sqlite.db, built_sqlite, clean[p.thread_id], cid)
        for p in conversation
        for cid in p.kept
    }
    pruned = tmp_path / "pruned.db"
    shutil.copy(built_sqlite.path, pruned)
    _delete(pruned, plans)
    compared = 0
    for (thread_id, checkpoint_id), messages in before.items():
        assert _messages(str(pruned), built_sqlite, clean[thread_id], checkpoint_id) == messages
        compared += 1
    deleted = sum(len(p.deleted) for p in conversation)
    widened = [p for p in conversation if p.widest is not None]
    assert compared >= 50 and deleted >= 50 and widened, (compared, deleted)
    # Nothing of a kept checkpoint went: the pruned copy holds exactly the kept rows.
    after = {(x.thread_id, x.checkpoint_ns): {r.checkpoint_id for r in x.records} for x in _lineages(str(pruned))}
    for plan in plans:
        assert after.get((plan.thread_id, plan.checkpoint_ns), set()) == set(plan.kept)


def test_the_naive_newest_n_breaks_reads_the_plan_keeps(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """Keeping only the newest 3 (what upstream's --keep estimate counts) loses messages on a delta thread;
    the plan names the reads it would break, and keeps the checkpoints that prevent it."""
    policy = RetentionPolicy(keep_newest=3)
    clean = _clean_threads(built_sqlite)
    plans = [plan_lineage(lineage, Backend.SQLITE, policy) for lineage in _lineages(built_sqlite.db)]
    broken = [p for p in plans if p.naive_breaks and p.checkpoint_ns == "" and p.thread_id in clean]
    assert broken
    naive = tmp_path / "naive.db"
    shutil.copy(built_sqlite.path, naive)
    _delete(naive, plans, naive=True)
    lost = 0
    for plan in broken:
        for read in plan.naive_breaks:
            thread = clean[plan.thread_id]
            before = _messages(built_sqlite.db, built_sqlite, thread, read.checkpoint_id)
            after = _messages(str(naive), built_sqlite, thread, read.checkpoint_id)
            lost += after != before
    assert lost == sum(len(p.naive_breaks) for p in broken)


def test_a_policy_that_keeps_everything_deletes_nothing(built_sqlite: BuiltDatabase) -> None:
    for lineage in _lineages(built_sqlite.db):
        plan = plan_lineage(lineage, Backend.SQLITE, RetentionPolicy(keep_newest=10_000))
        assert not plan.deleted and not plan.naive_breaks and plan.freed.checkpoints == 0


def _findings(db: str) -> set[tuple[str, str, str | None]]:
    from deerflow_ckpt.analysis.shape import ShapeSettings
    from deerflow_ckpt.commands.verify_shape import ScanRequest, scan
    from deerflow_ckpt.store.source import DatabaseChoice

    choice = DatabaseChoice(target_from_argument(db), "test")
    report = scan(ScanRequest(choice, ShapeSettings(expected_cadence=None), "test"), jobs=1)
    return {(str(f.rule), f.thread_id, f.checkpoint_id) for f in report.findings}


def test_verify_shape_finds_nothing_the_plan_introduced(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """After the plan, the only new findings are CK306 at the kept checkpoints whose parent went, never the
    CK302/CK304/CK102 of a broken read; the naive deletion on the same database does cause CK302."""
    policy = RetentionPolicy(keep_newest=3)
    plans = [plan_lineage(lineage, Backend.SQLITE, policy) for lineage in _lineages(built_sqlite.db)]
    before = _findings(built_sqlite.db)
    pruned = tmp_path / "pruned.db"
    shutil.copy(built_sqlite.path, pruned)
    _delete(pruned, plans)
    new = _findings(str(pruned)) - before
    cuts = {("CK306", p.thread_id, cid) for p in plans for cid in p.cut_at}
    assert new == cuts and cuts
    naive = tmp_path / "naive.db"
    shutil.copy(built_sqlite.path, naive)
    _delete(naive, plans, naive=True)
    assert {rule for rule, _, _ in _findings(str(naive)) - before} >= {"CK302"}
