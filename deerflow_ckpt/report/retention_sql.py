"""A retention plan as one transaction for the database's own shell: `sqlite3 DB < plan.sql` or
`psql DSN -f plan.sql`. ckpt never runs it.

The script names every row it deletes by its full primary key, loaded into temporary tables first. Before it
deletes anything it checks that each planned lineage still has exactly the checkpoints and write rows it had
when planned (count and newest id): a writer that appended a checkpoint or a write after the plan makes the
whole script delete nothing. It holds the database's write lock from that check to its commit (SQLite:
BEGIN IMMEDIATE; Postgres: a SHARE ROW EXCLUSIVE lock on the three tables, so writers wait until it is done).
A kept checkpoint whose parent goes is re-parented onto its nearest kept ancestor in the same transaction.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Iterator

from deerflow_ckpt.analysis.storage import human_bytes
from deerflow_ckpt.commands.plan_retention import RetentionPlan
from deerflow_ckpt.redact import redact
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.store.records import Backend
from deerflow_ckpt.store.source import PostgresTarget

# Rows per INSERT: a statement each shell parses quickly, and few of them.
ROWS_PER_INSERT = 500
GUARD_MESSAGE = "a planned thread changed after the plan was made; nothing was deleted: plan again"
_SQLITE_TABLES = {"checkpoints": "main.checkpoints", "checkpoint_writes": "main.writes"}


def _sqlite_text(value: str) -> str:
    if value.isprintable():
        return f"'{value}'" if "'" not in value else "'" + value.replace("'", "''") + "'"
    # Control characters stay out of the script's text: the bytes, spelled in hex.
    return f"CAST(x'{value.encode('utf-8').hex()}' AS TEXT)"


def _postgres_text(value: str) -> str:
    if value.isprintable():
        return f"'{value}'" if "'" not in value else "'" + value.replace("'", "''") + "'"
    return f"convert_from('\\x{value.encode('utf-8').hex()}'::bytea, 'UTF8')"


def _inserts(table: str, rows: Iterable[str]) -> Iterator[str]:
    """INSERT statements of ROWS_PER_INSERT rows each; `rows` are already spelled as SQL tuples."""
    batch: list[str] = []
    for row in rows:
        batch.append(row)
        if len(batch) == ROWS_PER_INSERT:
            yield f"INSERT INTO {table} VALUES\n  " + ",\n  ".join(batch) + ";\n"
            batch = []
    if batch:
        yield f"INSERT INTO {table} VALUES\n  " + ",\n  ".join(batch) + ";\n"


def shell_command(plan: RetentionPlan, script: str = "plan.sql") -> str:
    """The command that runs the script on the planned database (a DSN's password masked)."""
    target = plan.target
    if isinstance(target, PostgresTarget):
        return f"psql {shlex.quote(redact(target.conninfo))} -f {script}"
    return f"sqlite3 {shlex.quote(str(target.path))} < {script}"


def _header(plan: RetentionPlan) -> Iterator[str]:
    freed = plan.freed
    deleting = plan.deleting
    reparented = sum(len(p.reparented) for p in deleting)
    lines = [
        f"ckpt plan retention {plan.policy.describe()}",
        f"database: {plan.database}, planned at {plan.planned_at}",
        f"deletes {freed.checkpoints:,} checkpoints, {freed.writes:,} write rows"
        + (f", {freed.blobs:,} blob rows" if plan.backend is Backend.POSTGRES else "")
        + f" ({human_bytes(freed.total_bytes)} stored) in {len(deleting):,} lineages;"
        f" re-parents {reparented:,} checkpoints",
        f"Review it, then run it with the database's shell: {shell_command(plan)}",
        "It deletes nothing if a planned thread changed after the plan was made; the freed pages go back to",
        "the disk only after a VACUUM (ckpt inspect storage says whether one is worth it).",
    ]
    for line in lines:
        # A path or a DSN may hold anything: one comment line, every control character escaped.
        yield "-- " + printable(" ".join(line.split())) + "\n"


def _rows(plan: RetentionPlan, name: str, text: Callable[[str], str]) -> Iterator[str]:
    """The rows of temporary table `name`, each spelled as a SQL tuple (a lineage's key spelled once)."""
    for lineage in plan.deleting:
        deletion = lineage.deletion
        assert deletion is not None
        key = f"{text(lineage.thread_id)}, {text(lineage.checkpoint_ns)}"
        if name == "lineages":
            newest, checkpoints, writes = deletion.guard_newest, deletion.guard_checkpoints, deletion.guard_writes
            yield f"({key}, {checkpoints}, {text(newest)}, {writes})"
        elif name == "checkpoints":
            yield from (f"({key}, {text(checkpoint_id)})" for checkpoint_id in lineage.deleted)
        elif name == "writes":
            # Each deleted checkpoint's id spelled once, for all its write rows.
            spelled = {checkpoint_id: text(checkpoint_id) for checkpoint_id in lineage.deleted}
            yield from (f"({key}, {spelled[c]}, {text(t)}, {i})" for c, t, i in deletion.writes)
        elif name == "blobs":
            yield from (f"({key}, {text(channel)}, {text(version)})" for channel, version in deletion.blobs)
        else:
            for r in lineage.reparented:
                parent = "NULL" if r.new_parent is None else text(r.new_parent)
                yield f"({key}, {text(r.checkpoint_id)}, {text(r.old_parent)}, {parent})"


_COLUMNS = {
    "lineages": "thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoints INTEGER NOT NULL, "
    "newest TEXT NOT NULL, writes INTEGER NOT NULL",
    "checkpoints": "thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL",
    "writes": "thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, "
    "task_id TEXT NOT NULL, idx INTEGER NOT NULL",
    "blobs": "thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, channel TEXT NOT NULL, version TEXT NOT NULL",
    "reparent": "thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, "
    "old_parent TEXT NOT NULL, new_parent TEXT",
}


def _load(plan: RetentionPlan, backend: Backend, suffix: str) -> Iterator[str]:
    """The plan's keys into temporary tables ckpt_plan_<name>."""
    text = _sqlite_text if backend is Backend.SQLITE else _postgres_text
    for name, columns in _COLUMNS.items():
        if name == "blobs" and backend is not Backend.POSTGRES:
            continue
        yield f"CREATE TEMP TABLE ckpt_plan_{name} ({columns}){suffix};\n"
        yield from _inserts(f"ckpt_plan_{name}", _rows(plan, name, text))


def _changed_lineages(checkpoints: str, writes: str, newest: str) -> str:
    """The planned lineages whose checkpoints or write rows are not what the plan saw."""
    return f"""SELECT l.thread_id, l.checkpoint_ns FROM ckpt_plan_lineages l
WHERE l.checkpoints <> (SELECT count(*) FROM {checkpoints} c
                        WHERE c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns)
   OR l.newest IS DISTINCT FROM (SELECT max({newest}) FROM {checkpoints} c
                                 WHERE c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns)
   OR l.writes <> (SELECT count(*) FROM {writes} w
                   WHERE w.thread_id = l.thread_id AND w.checkpoint_ns = l.checkpoint_ns)"""


def sqlite_script(plan: RetentionPlan) -> Iterator[str]:
    checkpoints, writes = _SQLITE_TABLES["checkpoints"], _SQLITE_TABLES["checkpoint_writes"]
    yield from _header(plan)
    # Stop at the first error: the open transaction is then rolled back as the shell exits.
    yield ".bail on\nBEGIN IMMEDIATE;\n"
    yield from _load(plan, Backend.SQLITE, "")
    parts: list[str] = []
    changed = _changed_lineages(checkpoints, writes, "c.checkpoint_id").replace("IS DISTINCT FROM", "IS NOT")
    parts.append(f"CREATE TEMP TABLE ckpt_plan_changed AS\n{changed};\n")
    guard = f'changed INTEGER NOT NULL CONSTRAINT "{GUARD_MESSAGE}" CHECK (changed = 0)'
    parts.append(
        f"CREATE TEMP TABLE ckpt_plan_guard ({guard});\n"
        "INSERT INTO ckpt_plan_guard SELECT count(*) FROM ckpt_plan_changed;\n"
    )
    # Each statement also checks the guard: a shell that ignored the failed check still deletes nothing.
    unchanged = "NOT EXISTS (SELECT 1 FROM ckpt_plan_changed)"
    parts.append(
        f"DELETE FROM {writes} WHERE (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) IN\n"
        f"  (SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM ckpt_plan_writes) AND {unchanged};\n"
        f"UPDATE {checkpoints} SET parent_checkpoint_id = (SELECT r.new_parent FROM ckpt_plan_reparent r\n"
        f"  WHERE r.thread_id = checkpoints.thread_id AND r.checkpoint_ns = checkpoints.checkpoint_ns\n"
        f"    AND r.checkpoint_id = checkpoints.checkpoint_id)\n"
        f"WHERE (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id) IN\n"
        f"  (SELECT thread_id, checkpoint_ns, checkpoint_id, old_parent FROM ckpt_plan_reparent) AND {unchanged};\n"
        f"DELETE FROM {checkpoints} WHERE (thread_id, checkpoint_ns, checkpoint_id) IN\n"
        f"  (SELECT thread_id, checkpoint_ns, checkpoint_id FROM ckpt_plan_checkpoints) AND {unchanged};\n"
    )
    parts.append("COMMIT;\n")
    yield "".join(parts)


def postgres_script(plan: RetentionPlan) -> Iterator[str]:
    tables = plan.tables
    checkpoints, writes, blobs = tables["checkpoints"], tables["checkpoint_writes"], tables["checkpoint_blobs"]
    yield from _header(plan)
    yield "\\set ON_ERROR_STOP on\nBEGIN;\nSET LOCAL lock_timeout = '10s';\n"
    # Writers wait from the check to the commit, so nothing can change between them; readers do not wait.
    yield f"LOCK TABLE {checkpoints}, {writes}, {blobs} IN SHARE ROW EXCLUSIVE MODE;\n"
    yield from _load(plan, Backend.POSTGRES, " ON COMMIT DROP")
    parts: list[str] = []
    changed = _changed_lineages(checkpoints, writes, 'c.checkpoint_id COLLATE "C"')
    parts.append(
        "DO $ckpt$\nDECLARE changed text;\nBEGIN\n"
        f"  SELECT thread_id INTO changed FROM ({changed}) AS x LIMIT 1;\n"
        f"  IF FOUND THEN RAISE EXCEPTION '{GUARD_MESSAGE} (thread %)', changed; END IF;\nEND\n$ckpt$;\n"
    )
    parts.append(
        f"DELETE FROM {writes} w USING ckpt_plan_writes p\n"
        "WHERE w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns AND w.checkpoint_id = p.checkpoint_id\n"
        "  AND w.task_id = p.task_id AND w.idx = p.idx;\n"
        f"DELETE FROM {blobs} b USING ckpt_plan_blobs p\n"
        "WHERE b.thread_id = p.thread_id AND b.checkpoint_ns = p.checkpoint_ns AND b.channel = p.channel\n"
        "  AND b.version = p.version;\n"
        f"UPDATE {checkpoints} c SET parent_checkpoint_id = r.new_parent FROM ckpt_plan_reparent r\n"
        "WHERE c.thread_id = r.thread_id AND c.checkpoint_ns = r.checkpoint_ns AND c.checkpoint_id = r.checkpoint_id\n"
        "  AND c.parent_checkpoint_id = r.old_parent;\n"
        f"DELETE FROM {checkpoints} c USING ckpt_plan_checkpoints p\n"
        "WHERE c.thread_id = p.thread_id AND c.checkpoint_ns = p.checkpoint_ns AND c.checkpoint_id = p.checkpoint_id;\n"
    )
    parts.append("COMMIT;\n")
    yield "".join(parts)


def plan_to_sql(plan: RetentionPlan) -> Iterator[str]:
    """The script in pieces, as it is written: a large plan's script is never held whole."""
    if plan.backend is Backend.POSTGRES:
        return postgres_script(plan)
    return sqlite_script(plan)
