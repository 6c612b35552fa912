"""Message history for the deep proof: per lineage, each checkpoint's stored list and the writes under it.

On SQLite, built beside the shape scan from its records (SqliteLineageHistories); on Postgres, and for
`inspect thread --deep`, a second read-only pass in the scan's thread order. It reads only the `messages`
channel: the stored snapshot or list (SQLite: inline in the checkpoint; Postgres: the blob at the
version the checkpoint names, where it has the marker or holds a plain list) and the `messages` write
rows, each parsed by store.messages without building a message.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterator
from typing import Any

from deerflow_ckpt import native
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.redact import redact
from deerflow_ckpt.store.lean import read_checkpoint
from deerflow_ckpt.store.messages import (
    NULL_TASK_ID,
    HistoryCheckpoint,
    LineageHistory,
    MessageCache,
    StoredList,
    Unprovable,
    checkpoint_messages,
    message_write,
    stored_list,
)
from deerflow_ckpt.store.records import Lineage, Shape, key_text
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection
from deerflow_ckpt.store.source import DatabaseTarget, PostgresTarget, SqliteTarget
from deerflow_ckpt.store.sqlite_text import key_in, text_parameter
from deerflow_ckpt.store.writes import MESSAGES_CHANNEL

# The largest stored value (a checkpoint row, a write, a blob) the proof reads; a larger one is left in the
# database, its size said, and what it holds is unprovable (docs/security.md, "Security model and limits"). Under it,
# a value is held about three times at most (SQLite's or libpq's copy, the driver's row, a stored list or a
# message new to the lineage taken from it), so one value never costs the proof much more than 192 MiB.
VALUE_LIMIT = 64 << 20
# What the compiled SQLite reader holds of one thread's rows to hand them over (Lineage.messages_rows): their
# bytes, and HANDED_ROW_COST a row. The scan holds a thread's lineages until it has read them all (and the next
# thread's first before it hands the thread on), so the budget is the thread's, and at most two are held; a
# lineage past it is read again by the proof, one row at a time. 0: nothing is handed over.
HANDOVER_BUDGET = 32 << 20
# A handed row's objects besides its value and key text: a write's tuple, its strings' and ints' headers, the
# list's slot (measured with sys.getsizeof: about 320 bytes a write, 200 a stored row).
HANDED_ROW_COST = 384


def _sqlite_value(column: str) -> str:
    """A payload column as the proof selects it: its bytes, NULL past VALUE_LIMIT, then its size in bytes
    (a BLOB's length is read from the record header, without loading the value)."""
    size = f"CASE typeof({column}) WHEN 'blob' THEN length({column}) ELSE length(CAST({column} AS BLOB)) END"
    return f"CASE WHEN {size} > {VALUE_LIMIT} THEN NULL ELSE CAST({column} AS BLOB) END, {size}"


def _postgres_value(column: str) -> str:
    """As _sqlite_value, for a bytea column (octet_length reads a TOASTed value's size from its header)."""
    return f"CASE WHEN octet_length({column}) > {VALUE_LIMIT} THEN NULL ELSE {column} END, octet_length({column})"


def past_limit(where: str, size: int) -> str:
    """Why a value the proof left in the database is not read."""
    return f"{where} is {size:,} bytes, past the {VALUE_LIMIT >> 20} MiB the deep proof reads of one value"


_SQLITE_CHECKPOINTS = f"""
SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, CAST(metadata AS BLOB),
       {_sqlite_value("checkpoint")}
FROM checkpoints {{where}} ORDER BY thread_id, checkpoint_ns, checkpoint_id
"""
_SQLITE_WRITES = f"""
SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, {{task_path}}, idx, type, {_sqlite_value("value")}
FROM writes WHERE channel = 'messages' {{and_where}}
ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx
"""
_PG_CHECKPOINTS = """
SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata->>'source', metadata->>'step',
       checkpoint->'channel_values'->'messages' = 'true'::jsonb,
       checkpoint->'channel_versions'->>'messages'
FROM {checkpoints} {where}
ORDER BY thread_id{c}, checkpoint_ns{c}, checkpoint_id{c}
"""
_PG_BLOBS = f"""
SELECT thread_id, checkpoint_ns, version, type, {_postgres_value("blob")}
FROM {{blobs}} WHERE channel = 'messages' {{and_where}}
ORDER BY thread_id{{c}}, checkpoint_ns{{c}}, version{{c}}
"""
_PG_WRITES = f"""
SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, {{task_path}}, idx, type, {_postgres_value("blob")}
FROM {{writes}} WHERE channel = 'messages' {{and_where}}
ORDER BY thread_id{{c}}, checkpoint_ns{{c}}, checkpoint_id{{c}}, task_id, idx
"""
# Rows per round trip: small rows in thousands; blobs hold whole snapshots, so fewer.
_FETCH_ROWS = 2000
_BLOB_ROWS = 200


def open_history(target: DatabaseTarget) -> SqliteHistoryReader | PostgresHistoryReader:
    if isinstance(target, SqliteTarget):
        return SqliteHistoryReader(target)
    assert isinstance(target, PostgresTarget)
    return PostgresHistoryReader(target)


def _add_write(checkpoint: HistoryCheckpoint, row: tuple[Any, ...], has_path: bool, cache: MessageCache) -> None:
    task_id, task_path, idx, kind, data, size = row
    if checkpoint.writes_unprovable is not None:
        return
    if type(task_id) is not str or type(task_path) is not str or type(idx) is not int:
        task_id, task_path, idx = key_text(task_id), key_text(task_path or ""), idx if type(idx) is int else 0
    where = f"the messages write of task {task_id}"
    if data is None and size is not None:
        checkpoint.writes_unprovable = past_limit(where, size)
        return
    if kind != "msgpack" or data is None:
        checkpoint.writes_unprovable = f"{where} is not msgpack ({key_text(kind)})"
        return
    try:
        write = message_write(task_id, task_path, idx, data, where, cache)
    except Unprovable as exc:
        checkpoint.writes_unprovable = str(exc)
        return
    # Without a task_path (a saver before the column, or rows from before it), parallel tasks' writes have
    # no stored order; graph input and Command updates (the null task) are applied apart and need none.
    if (not has_path or not task_path) and task_id != NULL_TASK_ID:
        others = [w for w in checkpoint.writes if w.task_id not in (task_id, NULL_TASK_ID) and not w.task_path]
        checkpoint.order_unknown = checkpoint.order_unknown or bool(others)
    checkpoint.writes.append(write)


def _set_stored(checkpoint: HistoryCheckpoint, kind: Any, data: bytes | memoryview, where: str) -> None:
    if kind != "msgpack":
        checkpoint.unprovable = f"{where} is not msgpack ({key_text(kind)})"
        return
    try:
        checkpoint.stored = stored_list(data, where)
    except Unprovable as exc:
        checkpoint.unprovable = str(exc)


def _set_from_checkpoint(checkpoint: HistoryCheckpoint, kind: Any, data: bytes | None, size: int | None) -> None:
    if data is None and size is not None:
        checkpoint.unprovable = past_limit("the checkpoint", size)
        return
    if kind != "msgpack" or data is None:
        checkpoint.unprovable = "the checkpoint is not msgpack (see the shape findings)"
        return
    try:
        found = checkpoint_messages(data, "the stored messages")
    except Unprovable as exc:
        checkpoint.unprovable = str(exc)
        return
    if found is not None:
        checkpoint.stored = found


class SqliteHistoryReader:
    def __init__(self, target: SqliteTarget) -> None:
        self.target = target

    def histories(self, selection: ThreadSelection = ALL_THREADS) -> Iterator[LineageHistory]:
        import sqlite3

        from deerflow_ckpt.store.sqlite import connect_readonly, has_task_path, thread_ids_nullable

        connection = connect_readonly(self.target)
        try:
            has_path = has_task_path(connection)
            nullable = thread_ids_nullable(connection)
            clauses, parameters = selection.conditions("thread_id", "?", sqlite=True, nullable=nullable)
            where = "WHERE " + " AND ".join(clauses) if clauses else ""
            and_where = "AND " + " AND ".join(clauses) if clauses else ""
            checkpoints = connection.execute(_SQLITE_CHECKPOINTS.format(where=where), parameters)
            writes = connection.cursor().execute(
                _SQLITE_WRITES.format(and_where=and_where, task_path="task_path" if has_path else "''"), parameters
            )
            yield from _merge(_sqlite_checkpoints(checkpoints), writes, has_path)
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self.target.describe()} failed: {exc}") from None
        finally:
            connection.close()


_LINEAGE_STORED = f"""
SELECT checkpoint_id, type, {_sqlite_value("checkpoint")} FROM checkpoints
WHERE {{lineage}} AND {{ids}}
"""
# In the primary key's order (checkpoint_ns first): rows stream from the index, where an order SQLite must
# sort by would copy every value of the lineage into its sorter. The proof orders a step's writes itself.
_LINEAGE_WRITES = f"""
SELECT checkpoint_id, task_id, {{task_path}}, idx, type, {_sqlite_value("value")} FROM writes
WHERE {{lineage}} AND channel = 'messages'
ORDER BY checkpoint_ns, checkpoint_id, task_id, idx
"""
# A NULL namespace reads as '' in the scan's records.
_LINEAGE = "thread_id = {thread} AND (checkpoint_ns = {ns} OR ({ns} = '' AND checkpoint_ns IS NULL))"


def _lineage_condition(lineage: Lineage) -> tuple[str, list[Any]]:
    """The lineage's rows by key, and the parameters: a key that is not UTF-8 bound as its stored bytes."""
    thread, thread_value = text_parameter("?", lineage.thread_id)
    ns, ns_value = text_parameter("?", lineage.checkpoint_ns)
    return _LINEAGE.format(thread=thread, ns=ns), [thread_value, ns_value, ns_value]


class SqliteLineageHistories:
    """The message history of lineages the shape scan has just read, one lineage at a time (SQLite).

    The scan's records already carry each checkpoint's id, parent, source, step and whether it stores a
    messages value. The compiled reader hands over the rows that store one and the lineage's `messages` writes
    with the lineage (Lineage.messages_rows, within HANDOVER_BUDGET a thread); otherwise they are read again,
    by primary key: not the whole table a second time. One read transaction, opened with the scan's.
    """

    def __init__(self, target: SqliteTarget) -> None:
        import sqlite3

        from deerflow_ckpt.store.sqlite import connect_readonly, has_task_path

        self.target = target
        # Through the read-ahead layer: the stored lists read again are long runs of overflow pages.
        self._connection = connect_readonly(target, read_ahead=True)
        try:
            self._connection.execute("BEGIN")
            self._connection.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchall()
            self._has_path = has_task_path(self._connection)
        except sqlite3.Error as exc:
            self._connection.close()
            raise StoreError(f"reading {target.describe()} failed: {exc}") from None
        self._task_path = "task_path" if self._has_path else "''"

    def close(self) -> None:
        self._connection.close()

    def history(self, lineage: Lineage) -> LineageHistory:
        import sqlite3

        checkpoints = [HistoryCheckpoint(r.checkpoint_id, r.parent_id, r.source, r.step) for r in lineage.records]
        by_id = {checkpoint.checkpoint_id: checkpoint for checkpoint in checkpoints}
        storing = [r.checkpoint_id for r in lineage.records if r.messages is not Shape.ABSENT]
        storing_ids = set(storing)
        budget = _Budget()
        found: dict[str, int] = {}
        handed = lineage.messages_rows.take() if lineage.messages_rows is not None else None
        try:
            stored_rows, write_rows = (
                (_drained(handed[0]), _drained(handed[1])) if handed is not None else self._rows_again(lineage, storing)
            )
            _take_stored(stored_rows, by_id, storing_ids, found, budget)
            _take_writes(write_rows, by_id, found, self._has_path, budget.cache)
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self.target.describe()} failed: {exc}") from None
        _check_read_again(lineage, by_id, storing_ids, found)
        return LineageHistory(lineage.thread_id, lineage.checkpoint_ns, checkpoints, budget.cache)

    def _rows_again(self, lineage: Lineage, storing: list[str]) -> tuple[Iterator[Any], Iterator[Any]]:
        """The lineage's stored rows and messages writes, read again by key (a lineage not handed over), streamed
        row by row."""
        condition, key = _lineage_condition(lineage)
        stored: Iterator[Any] = iter(())
        if storing:
            ids, array = key_in("checkpoint_id", "?", storing)
            stored = self._connection.execute(_LINEAGE_STORED.format(lineage=condition, ids=ids), (*key, array))
        writes_sql = _LINEAGE_WRITES.format(lineage=condition, task_path=self._task_path)
        # Run once the stored rows are read: sqlite3 reads a first row as it executes, which is not held
        # beside the stored lists.
        return stored, _executed_later(self._connection, writes_sql, key)


def _take_stored(
    rows: Iterator[Any], by_id: dict[str, HistoryCheckpoint], storing: set[str], found: dict[str, int], budget: _Budget
) -> None:
    """Each storing checkpoint's list from its row (a handover also has rows Python classed as storing none)."""
    # Row by row: a long full-mode lineage's lists are kept within the budget, not all at once.
    for checkpoint_id, kind, data, size in rows:
        checkpoint = by_id.get(key_text(checkpoint_id))
        if checkpoint is not None and checkpoint.checkpoint_id in storing:
            found[checkpoint.checkpoint_id] = -1
            _set_from_row(checkpoint, kind, data, size)
            del data  # the row goes before the list copied from it is compacted: one copy less
            budget.keep(checkpoint.stored)


def _take_writes(
    rows: Iterator[Any], by_id: dict[str, HistoryCheckpoint], found: dict[str, int], has_path: bool, cache: MessageCache
) -> None:
    """Each messages write under its checkpoint, in the order LangGraph applies them."""
    for row in rows:
        checkpoint = by_id.get(key_text(row[0]))
        if checkpoint is not None:
            found[checkpoint.checkpoint_id] = max(found.get(checkpoint.checkpoint_id, 0), 0) + 1
            _add_write(checkpoint, row[1:], has_path, cache)


def _executed_later(connection: Any, sql: str, parameters: list[Any]) -> Iterator[Any]:
    yield from connection.execute(sql, parameters)


_END = object()


def _drained(rows: list[Any]) -> Iterator[Any]:
    """The handed rows in order, each let go as it is taken: the consumer holds the only reference to a row (and
    its bytes) while it takes what it keeps of it."""
    queue = deque(rows)
    rows.clear()
    queue.append(_END)
    return iter(queue.popleft, _END)


# Rows the scan read that this reader could not find again by key.
_NOT_READ_AGAIN = (
    "its {what} could not be read again by key (a key stored as other than text, or rows written after the scan began)"
)


def _check_read_again(
    lineage: Lineage, by_id: dict[str, HistoryCheckpoint], storing: set[str], found: dict[str, int]
) -> None:
    """What the scan saw and the re-read did not find is unprovable, never a silent gap in the fold."""
    for record in lineage.records:
        checkpoint = by_id[record.checkpoint_id]
        seen = found.get(record.checkpoint_id, 0)
        if record.checkpoint_id in storing and seen == 0 and checkpoint.unprovable is None:
            checkpoint.unprovable = _NOT_READ_AGAIN.format(what="stored row")
        if max(seen, 0) < record.message_write_rows and checkpoint.writes_unprovable is None:
            checkpoint.writes_unprovable = _NOT_READ_AGAIN.format(what="messages writes")


def _set_from_row(checkpoint: HistoryCheckpoint, kind: Any, data: bytes | None, size: int | None) -> None:
    """The list a checkpoint row stores under channel_values["messages"] (the streamed pass reads it the same
    way, but also reads rows the scan classed as storing none, such as a json-typed checkpoint)."""
    values = read_checkpoint(data) if kind == "msgpack" and data is not None else None
    if values is None:
        _set_from_checkpoint(checkpoint, kind, data, size)
        return
    raw = values.channel_values.get(MESSAGES_CHANNEL)
    if raw is not None:
        _set_stored(checkpoint, "msgpack", raw, "the stored messages")


def _sqlite_checkpoints(rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, Any, HistoryCheckpoint]]:
    # The per-row path of the pass: the compiled judge says which rows store no messages value (most delta
    # steps) and reads source and step from the metadata, so only stored lists are decoded here.
    summary_of = native.checkpoint_summary
    metadata_of = native.metadata_summary
    absent = native.MESSAGES_ABSENT
    for thread_id, ns, checkpoint_id, parent_id, kind, metadata, data, size in rows:
        if type(checkpoint_id) is not str or (parent_id is not None and type(parent_id) is not str):
            checkpoint_id, parent_id = key_text(checkpoint_id), None if parent_id is None else key_text(parent_id)
        facts = metadata_of(metadata) if metadata_of is not None and metadata is not None else None
        if facts is not None:
            checkpoint = HistoryCheckpoint(checkpoint_id, parent_id, facts[1], facts[0])
        else:
            checkpoint = HistoryCheckpoint(checkpoint_id, parent_id, *_source_and_step(metadata))
        if kind == "msgpack" and data is not None:
            summary = summary_of(data) if summary_of is not None else None
            if summary is not None and summary[0] == absent:
                yield thread_id, ns, checkpoint
                continue
            values = read_checkpoint(data)
        else:
            values = None
        if values is None:
            _set_from_checkpoint(checkpoint, kind, data, size)
        else:
            raw = values.channel_values.get(MESSAGES_CHANNEL)
            if raw is not None:
                _set_stored(checkpoint, "msgpack", raw, "the stored messages")
        # The row goes before the consumer compacts the list copied from it: one copy less.
        data = values = raw = None
        yield thread_id, ns, checkpoint


def _source_and_step(metadata: bytes | None) -> tuple[str | None, int | None]:
    """metadata["source"] and ["step"] where the compiled reader abstained, read as the scan reads them."""
    from deerflow_ckpt.store.metadata import metadata_in_python

    step, source, _, _, _ = metadata_in_python(metadata, lean=True, problems=[])
    return source, step


def _merge(
    checkpoints: Iterator[tuple[Any, Any, HistoryCheckpoint]],
    writes: Iterator[tuple[Any, ...]],
    has_path: bool,
) -> Iterator[LineageHistory]:
    """Lineages from the checkpoint stream and the write stream, which share one order."""
    pending = next(writes, None)
    key: tuple[Any, Any] | None = None
    lineage: list[HistoryCheckpoint] = []
    budget = _Budget()
    for thread_id, ns, checkpoint in checkpoints:
        if (thread_id, ns) != key:
            if key is not None:
                pending = _attach(lineage, key, writes, pending, has_path, _sqlite_later, budget.cache)
                yield LineageHistory(key_text(key[0]), key_text(key[1] or ""), lineage, budget.cache)
            key, lineage, budget = (thread_id, ns), [], _Budget()
        budget.keep(checkpoint.stored)
        lineage.append(checkpoint)
    if key is not None:
        _attach(lineage, key, writes, pending, has_path, _sqlite_later, budget.cache)
        yield LineageHistory(key_text(key[0]), key_text(key[1] or ""), lineage, budget.cache)


class _Budget:
    """The bytes of stored lists one lineage keeps as bytes; past it, lists are kept as their messages.

    A full-mode thread stores its whole list at every step, so its bytes grow with the square of its length;
    as references to the lineage's cached messages (each message held once) each list costs 8 bytes a message.
    """

    LIMIT = 32 << 20

    def __init__(self) -> None:
        self.cache = MessageCache()
        self.kept = 0

    def keep(self, stored: StoredList | None) -> None:
        if stored is None:
            return
        self.kept += stored.size()
        if self.kept > self.LIMIT:
            stored.compact(self.cache)


def _attach(
    lineage: list[HistoryCheckpoint],
    key: tuple[Any, Any],
    writes: Iterator[Any],
    pending: Any,
    has_path: bool,
    later: Callable[[tuple[Any, Any], tuple[Any, Any]], bool],
    cache: MessageCache,
) -> Any:
    by_id = {checkpoint.checkpoint_id: checkpoint for checkpoint in lineage}
    while pending is not None:
        row_key = (pending[0], pending[1])
        if row_key != key:
            if later(row_key, key):
                break
        else:
            checkpoint_id = pending[2]
            checkpoint = by_id.get(checkpoint_id if type(checkpoint_id) is str else key_text(checkpoint_id))
            if checkpoint is not None:
                _add_write(checkpoint, pending[3:], has_path, cache)
        pending = next(writes, None)
    return pending


def _sqlite_later(row_key: tuple[Any, Any], key: tuple[Any, Any]) -> bool:
    from deerflow_ckpt.store.sqlite import sqlite_order

    return (sqlite_order(row_key[0]), sqlite_order(row_key[1])) > (sqlite_order(key[0]), sqlite_order(key[1]))


class PostgresHistoryReader:
    def __init__(self, target: PostgresTarget) -> None:
        self.target = target

    def histories(self, selection: ThreadSelection = ALL_THREADS) -> Generator[LineageHistory, None, None]:
        import psycopg
        from psycopg import sql

        from deerflow_ckpt.store.postgres import byte_ordered, connect, table_names, thread_ids_nullable

        connection = connect(self.target)
        try:
            tables = table_names(connection, self.target.schema)
            in_byte_order = byte_ordered(connection)
            suffix = "" if in_byte_order else ' COLLATE "C"'
            nullable = thread_ids_nullable(connection, self.target.schema)
            clauses, values = selection.conditions(f"thread_id{suffix}", "%s", sqlite=False, nullable=nullable)
            where = sql.SQL("WHERE " + " AND ".join(clauses) if clauses else "")
            and_where = sql.SQL("AND " + " AND ".join(clauses) if clauses else "")
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = 'checkpoint_writes' AND column_name = 'task_path'"
                    if not self.target.schema
                    else "SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
                    "AND table_name = 'checkpoint_writes' AND column_name = 'task_path'",
                    () if not self.target.schema else (self.target.schema,),
                )
                has_path = cursor.fetchone() is not None
            collate = sql.SQL(suffix)
            parameters = tuple(values)

            def cursor_for(name: str, query: str, rows: int = _FETCH_ROWS, **parts: Any) -> Iterator[Any]:
                cursor = connection.cursor(name=name, binary=True)
                cursor.itersize = rows
                cursor.execute(sql.SQL(query).format(c=collate, **parts), parameters)
                return iter(cursor)

            checkpoints = cursor_for("h_checkpoints", _PG_CHECKPOINTS, checkpoints=tables["checkpoints"], where=where)
            blobs = cursor_for("h_blobs", _PG_BLOBS, _BLOB_ROWS, blobs=tables["checkpoint_blobs"], and_where=and_where)
            writes = cursor_for(
                "h_writes",
                _PG_WRITES,
                writes=tables["checkpoint_writes"],
                and_where=and_where,
                task_path=sql.SQL("task_path" if has_path else "''"),
            )
            yield from _pg_merge(checkpoints, writes, blobs, has_path)
            connection.rollback()
        except psycopg.Error as exc:
            raise StoreError(f"reading {self.target.describe()} failed: {redact(str(exc)).strip()}") from None
        finally:
            connection.close()


def _pg_merge(
    checkpoints: Iterator[tuple[Any, ...]], writes: Iterator[Any], blobs: Iterator[Any], has_path: bool
) -> Iterator[LineageHistory]:
    """Lineages from the three streams, which share one (byte) order."""
    pending_write, pending_blob = next(writes, None), next(blobs, None)
    key: tuple[Any, Any] | None = None
    lineage: list[HistoryCheckpoint] = []
    references: list[tuple[HistoryCheckpoint, Any, Any]] = []
    budget = _Budget()
    for thread_id, ns, checkpoint_id, parent_id, source, step, marker, version in checkpoints:
        if (thread_id, ns) != key:
            if key is not None:
                pending_write = _attach(lineage, key, writes, pending_write, has_path, _text_later, budget.cache)
                pending_blob = _attach_blobs(references, key, blobs, pending_blob, budget)
                yield LineageHistory(key[0], key[1] or "", lineage, budget.cache)
            key, lineage, references, budget = (thread_id, ns), [], [], _Budget()
        checkpoint = HistoryCheckpoint(checkpoint_id, parent_id, source, _integer(step))
        lineage.append(checkpoint)
        references.append((checkpoint, marker, version))
    if key is not None:
        _attach(lineage, key, writes, pending_write, has_path, _text_later, budget.cache)
        _attach_blobs(references, key, blobs, pending_blob, budget)
        yield LineageHistory(key[0], key[1] or "", lineage, budget.cache)


def _integer(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def _text_later(row_key: tuple[Any, Any], key: tuple[Any, Any]) -> bool:
    # Postgres keys are text, read in byte order, which is the order Python compares str in.
    return (row_key[0], row_key[1] or "") > (key[0], key[1] or "")


def _attach_blobs(
    references: list[tuple[HistoryCheckpoint, Any, Any]],
    key: tuple[Any, Any],
    blobs: Iterator[Any],
    pending: Any,
    budget: _Budget,
) -> Any:
    """Each checkpoint's stored list: the blob at its version where it has the snapshot marker, or where it
    created a plain-list version (full mode); a version it shares with an earlier checkpoint is not its own.
    Blob rows stream past: only the wanted ones are kept, each as a stored list within the lineage's budget."""
    wanted: dict[Any, list[tuple[HistoryCheckpoint, bool]]] = {}
    seen: set[Any] = set()
    for checkpoint, marker, version in references:
        if version is None:
            continue
        created = version not in seen
        seen.add(version)
        if marker is True or created:
            wanted.setdefault(version, []).append((checkpoint, marker is True))
    found: set[Any] = set()
    while pending is not None:
        row_key = (pending[0], pending[1])
        if row_key != key:
            if _text_later(row_key, key):
                break
        elif pending[2] in wanted and (pending[4] is not None or pending[5] is not None):
            found.add(pending[2])
            for checkpoint, marked in wanted[pending[2]]:
                _attach_blob(checkpoint, marked, pending[3], pending[4], pending[5], budget)
        pending = next(blobs, None)
    for version, holders in wanted.items():
        for checkpoint, marked in holders:
            if marked and version not in found:
                checkpoint.unprovable = "the snapshot marker names no stored blob (see the shape findings)"
    return pending


def _attach_blob(
    checkpoint: HistoryCheckpoint, marked: bool, kind: Any, data: Any, size: int | None, budget: _Budget
) -> None:
    if data is None:
        checkpoint.unprovable = past_limit("the stored snapshot" if marked else "the stored messages", size or 0)
        return
    if marked:
        _set_stored(checkpoint, kind, data, "the stored snapshot")
    elif kind == "msgpack":
        _set_stored(checkpoint, kind, data, "the stored messages")
        if checkpoint.stored is not None and checkpoint.stored.snapshot:
            # A snapshot blob without the marker is an inherited version, not this checkpoint's list.
            checkpoint.stored = None
    budget.keep(checkpoint.stored)
