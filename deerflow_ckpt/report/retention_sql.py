"""A retention plan as a script for the database's own shell: `sqlite3 DB < plan.sql` or `psql DSN -f plan.sql`.
ckpt never runs it.

The script names every row it deletes by its full primary key, loaded into temporary tables first. Before it
deletes anything it checks that each planned lineage still has exactly the checkpoints and write rows it had
when planned (count and newest id): a writer that appended a checkpoint or a write after the plan makes the
transaction delete nothing. It holds the database's write lock from that check to its commit (SQLite:
BEGIN IMMEDIATE, waiting up to 10 s for a writer; Postgres: a SHARE ROW EXCLUSIVE lock on the three tables,
so writers wait until it is done). A kept checkpoint whose parent goes is re-parented in the same transaction.

One transaction holds the whole plan; `batch` splits it into transactions of whole lineages of about that many
deleted checkpoints each, every one guarded on its own, so a live SQLite database is never locked for long. The
script stops at the first transaction whose lineages changed: those before it are applied, the rest are not.
The script is written piece by piece, in one pass over the plan's lineages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from deerflow_ckpt.analysis.retention import LineagePlan
from deerflow_ckpt.analysis.storage import human_bytes
from deerflow_ckpt.commands.plan_retention import RetentionPlan
from deerflow_ckpt.redact import redact
from deerflow_ckpt.report.printable import printable, shell_word
from deerflow_ckpt.store.records import Backend
from deerflow_ckpt.store.source import PostgresTarget
from deerflow_ckpt.store.sqlite_text import stored_bytes

# Rows per INSERT: a statement each shell parses quickly, and few of them.
ROWS_PER_INSERT = 500
GUARD_MESSAGE = "a planned thread changed after the plan was made; nothing was deleted: plan again"
# How long a SQLite transaction waits for a writer's lock before it gives up (the shell's .timeout, in ms).
SQLITE_WAIT_MS = 10_000
_SQLITE_TABLES = {"checkpoints": "main.checkpoints", "checkpoint_writes": "main.writes"}
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


def _sqlite_text(value: str) -> str:
    if value.isprintable():
        return f"'{value}'" if "'" not in value else "'" + value.replace("'", "''") + "'"
    # Control characters stay out of the script's text: the bytes, spelled in hex. A key that is not UTF-8
    # (read as surrogate escapes) is spelled as the very bytes stored, so it names that key and no other.
    return f"CAST(x'{stored_bytes(value).hex()}' AS TEXT)"


def _postgres_text(value: str) -> str:
    # The transaction sets standard_conforming_strings, so a backslash in '...' is itself.
    if value.isprintable():
        return f"'{value}'" if "'" not in value else "'" + value.replace("'", "''") + "'"
    return f"convert_from(decode('{value.encode('utf-8').hex()}', 'hex'), 'UTF8')"


def shell_command(plan: RetentionPlan, script: str = "plan.sql") -> str:
    """The command that runs the script on the planned database (a DSN's password masked), safe to print as
    it is: each argument a shell word that names it exactly, its control characters escaped."""
    target = plan.target
    if isinstance(target, PostgresTarget):
        return f"psql {shell_word(redact(target.conninfo))} -f {shell_word(script)}"
    return f"sqlite3 {shell_word(str(target.path))} < {shell_word(script)}"


def _header(plan: RetentionPlan, script: str, batch: int | None) -> Iterator[str]:
    freed = plan.freed
    blobs = f", {freed.blobs:,} blob rows" if plan.backend is Backend.POSTGRES else ""
    shape = (
        "in one transaction"
        if batch is None
        else f"in transactions of whole threads of about {batch:,} deleted checkpoints each, each guarded on its own"
    )
    mode = ""
    if plan.backend is Backend.POSTGRES:
        mode = (
            f"full-mode threads planned as in a full-mode deployment ({plan.full_mode_from}); "
            if plan.full_mode_from
            else f"deployment mode {plan.mode.describe()}: full-mode threads keep their whole chain; "
        )
    described = [
        f"ckpt plan retention {plan.policy.describe()}",
        f"database: {plan.database}, planned at {plan.planned_at}; {mode}".rstrip("; "),
        *(f"warning: {conflict}" for conflict in [plan.mode_conflict()] if conflict is not None),
        f"deletes {freed.checkpoints:,} checkpoints, {freed.writes:,} write rows{blobs} "
        f"({human_bytes(freed.total_bytes)} stored) in {plan.deleting:,} lineages, {shape}; "
        f"re-parents {plan.reparented:,} checkpoints",
    ]
    lines = [
        # A path or a DSN may hold anything: one comment line, every control character escaped.
        *(printable(line) for line in described),
        # Safe as it is; printable() again would double a path's backslashes, naming another file.
        f"Review it, then run it with the database's shell: {shell_command(plan, script)}",
        "It deletes nothing of a transaction whose threads changed after the plan was made, and stops there; the",
        "freed pages go back to the disk only after a VACUUM (ckpt inspect storage says whether one is worth it).",
    ]
    for line in lines:
        yield "-- " + line + "\n"


def _rows(lineage: LineagePlan, text: Callable[[str], str]) -> dict[str, list[str]]:
    """The lineage's rows for each temporary table, each spelled as a SQL tuple (its key spelled once)."""
    deletion = lineage.deletion
    assert deletion is not None
    key = f"{text(lineage.thread_id)}, {text(lineage.checkpoint_ns)}"
    newest, checkpoints, writes = deletion.guard_newest, deletion.guard_checkpoints, deletion.guard_writes
    # Each deleted checkpoint's id spelled once, for itself and all its write rows.
    spelled = {checkpoint_id: text(checkpoint_id) for checkpoint_id in lineage.deleted}
    reparents = []
    for r in lineage.reparented:
        parent = "NULL" if r.new_parent is None else text(r.new_parent)
        reparents.append(f"({key}, {text(r.checkpoint_id)}, {text(r.old_parent)}, {parent})")
    return {
        "lineages": [f"({key}, {checkpoints}, {text(newest)}, {writes})"],
        "checkpoints": [f"({key}, {spelled_id})" for spelled_id in spelled.values()],
        "writes": [f"({key}, {spelled[c]}, {text(t)}, {i})" for c, t, i in deletion.writes],
        "blobs": [f"({key}, {text(channel)}, {text(version)})" for channel, version in deletion.blobs],
        "reparent": reparents,
    }


class _Inserts:
    """INSERT statements of ROWS_PER_INSERT rows into each temporary table, written as they fill."""

    def __init__(self, names: list[str]) -> None:
        self.pending: dict[str, list[str]] = {name: [] for name in names}

    def add(self, rows: dict[str, list[str]]) -> Iterator[str]:
        for name, pending in self.pending.items():
            pending.extend(rows[name])
            while len(pending) >= ROWS_PER_INSERT:
                yield self._statement(name, pending[:ROWS_PER_INSERT])
                del pending[:ROWS_PER_INSERT]

    def flush(self) -> Iterator[str]:
        for name, pending in self.pending.items():
            if pending:
                yield self._statement(name, pending)
                pending.clear()

    @staticmethod
    def _statement(name: str, rows: list[str]) -> str:
        return f"INSERT INTO ckpt_plan_{name} VALUES\n  " + ",\n  ".join(rows) + ";\n"


def _transactions(
    plan: RetentionPlan, batch: int | None, text: Callable[[str], str], names: list[str], begin: str, end: str
) -> Iterator[str]:
    """The lineages the script changes, loaded transaction by transaction (whole lineages of about `batch`
    deleted checkpoints each, or all in one): `begin`, the INSERTs, then `end` (the guard, the deletes, the
    commit). One pass over the plan's lineages, none held beyond its own rows."""
    inserts: _Inserts | None = None
    size = 0
    thread: str | None = None
    for lineage in plan.deleting_lineages():
        # A transaction ends only between threads: the guard keeps or skips a thread whole.
        new_thread = lineage.thread_id != thread
        thread = lineage.thread_id
        if inserts is not None and batch is not None and new_thread and size + len(lineage.deleted) > batch:
            yield from inserts.flush()
            yield end
            inserts = None
        if inserts is None:
            yield begin
            inserts, size = _Inserts(names), 0
        yield from inserts.add(_rows(lineage, text))
        size += len(lineage.deleted)
    if inserts is not None:
        yield from inserts.flush()
        yield end


def _changed_lineages(checkpoints: str, writes: str, newest: str, distinct: str) -> str:
    """The planned lineages whose checkpoints or write rows are not what the plan saw."""
    return f"""SELECT l.thread_id, l.checkpoint_ns FROM ckpt_plan_lineages l
WHERE l.checkpoints <> (SELECT count(*) FROM {checkpoints} c
                        WHERE c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns)
   OR l.newest {distinct} (SELECT max({newest}) FROM {checkpoints} c
                           WHERE c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns)
   OR l.writes <> (SELECT count(*) FROM {writes} w
                   WHERE w.thread_id = l.thread_id AND w.checkpoint_ns = l.checkpoint_ns)"""


def sqlite_script(plan: RetentionPlan, script: str = "plan.sql", batch: int | None = None) -> Iterator[str]:
    checkpoints, writes = _SQLITE_TABLES["checkpoints"], _SQLITE_TABLES["checkpoint_writes"]
    names = [name for name in _COLUMNS if name != "blobs"]
    yield from _header(plan, script, batch)
    # Stop at the first error (the open transaction is rolled back as the shell exits); wait for a writer's lock.
    yield f".bail on\n.timeout {SQLITE_WAIT_MS}\n"
    yield "".join(f"CREATE TEMP TABLE ckpt_plan_{name} ({_COLUMNS[name]});\n" for name in names)
    yield "CREATE TEMP TABLE ckpt_plan_changed (thread_id TEXT, checkpoint_ns TEXT);\n"
    guard = f'changed INTEGER NOT NULL CONSTRAINT "{GUARD_MESSAGE}" CHECK (changed = 0)'
    yield f"CREATE TEMP TABLE ckpt_plan_guard ({guard});\n"
    changed = _changed_lineages(checkpoints, writes, "c.checkpoint_id", "IS NOT")
    # Each statement also tests the guard: a shell that carried on past the failed check still deletes nothing.
    unchanged = "NOT EXISTS (SELECT 1 FROM ckpt_plan_changed)"
    end = (
        f"DELETE FROM ckpt_plan_changed;\nINSERT INTO ckpt_plan_changed\n{changed};\n"
        "INSERT INTO ckpt_plan_guard SELECT count(*) FROM ckpt_plan_changed;\n"
        f"DELETE FROM {writes} WHERE (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) IN\n"
        f"  (SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM ckpt_plan_writes) AND {unchanged};\n"
        f"UPDATE {checkpoints} SET parent_checkpoint_id = (SELECT r.new_parent FROM ckpt_plan_reparent r\n"
        f"  WHERE r.thread_id = checkpoints.thread_id AND r.checkpoint_ns = checkpoints.checkpoint_ns\n"
        f"    AND r.checkpoint_id = checkpoints.checkpoint_id)\n"
        f"WHERE (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id) IN\n"
        f"  (SELECT thread_id, checkpoint_ns, checkpoint_id, old_parent FROM ckpt_plan_reparent) AND {unchanged};\n"
        f"DELETE FROM {checkpoints} WHERE (thread_id, checkpoint_ns, checkpoint_id) IN\n"
        f"  (SELECT thread_id, checkpoint_ns, checkpoint_id FROM ckpt_plan_checkpoints) AND {unchanged};\n"
        # The temporary tables are emptied for the next transaction.
        + "".join(f"DELETE FROM ckpt_plan_{name};\n" for name in [*names, "guard"])
        + "COMMIT;\n"
    )
    yield from _transactions(plan, batch, _sqlite_text, names, "BEGIN IMMEDIATE;\n", end)


def _same(table: str, plan: str, column: str) -> str:
    """The join on a lineage's key and one more column between a checkpoint table and a plan table."""
    return " AND ".join(f"{table}.{c} = {plan}.{c}" for c in ("thread_id", "checkpoint_ns", column))


def postgres_script(plan: RetentionPlan, script: str = "plan.sql", batch: int | None = None) -> Iterator[str]:
    tables = plan.tables
    checkpoints, writes, blobs = tables["checkpoints"], tables["checkpoint_writes"], tables["checkpoint_blobs"]
    names = list(_COLUMNS)
    yield from _header(plan, script, batch)
    yield "\\set ON_ERROR_STOP on\n"
    # Emptied at every commit: each transaction loads its own lineages.
    yield "".join(f"CREATE TEMP TABLE ckpt_plan_{name} ({_COLUMNS[name]}) ON COMMIT DELETE ROWS;\n" for name in names)
    changed = _changed_lineages(checkpoints, writes, 'c.checkpoint_id COLLATE "C"', "IS DISTINCT FROM")
    # Writers wait from the check to the commit, so nothing can change between them; readers do not wait.
    begin = (
        "BEGIN;\nSET LOCAL lock_timeout = '10s';\nSET LOCAL standard_conforming_strings = on;\n"
        f"LOCK TABLE {checkpoints}, {writes}, {blobs} IN SHARE ROW EXCLUSIVE MODE;\n"
    )
    end = (
        "DO $ckpt$\nDECLARE changed text;\nBEGIN\n"
        f"  SELECT thread_id INTO changed FROM ({changed}) AS x LIMIT 1;\n"
        f"  IF FOUND THEN RAISE EXCEPTION '{GUARD_MESSAGE} (thread %)', changed; END IF;\nEND\n$ckpt$;\n"
        f"DELETE FROM {writes} w USING ckpt_plan_writes p\n"
        f"WHERE {_same('w', 'p', 'checkpoint_id')}\n  AND w.task_id = p.task_id AND w.idx = p.idx;\n"
        f"DELETE FROM {blobs} b USING ckpt_plan_blobs p\n"
        f"WHERE {_same('b', 'p', 'channel')} AND b.version = p.version;\n"
        f"UPDATE {checkpoints} c SET parent_checkpoint_id = r.new_parent FROM ckpt_plan_reparent r\n"
        f"WHERE {_same('c', 'r', 'checkpoint_id')}\n  AND c.parent_checkpoint_id = r.old_parent;\n"
        f"DELETE FROM {checkpoints} c USING ckpt_plan_checkpoints p\nWHERE {_same('c', 'p', 'checkpoint_id')};\n"
        "COMMIT;\n"
    )
    yield from _transactions(plan, batch, _postgres_text, names, begin, end)


def plan_to_sql(plan: RetentionPlan, script: str = "plan.sql", batch: int | None = None) -> Iterator[str]:
    """The script in pieces, as it is written: a large plan's script is never held whole. `script` is the name
    the header's command gives it."""
    if plan.backend is Backend.POSTGRES:
        return postgres_script(plan, script, batch)
    return sqlite_script(plan, script, batch)
