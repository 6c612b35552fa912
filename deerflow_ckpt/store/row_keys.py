"""The primary keys of a lineage's rows, for a retention script that deletes each row by its full key.

One read-only pass beside the lineage readers: checkpoint ids, every write row's (checkpoint id, task id,
idx), and on Postgres each checkpoint's channel versions and the blob rows with their sizes (a blob goes
only when no kept checkpoint names its version). Only key columns and lengths are read, from the primary
keys' indexes where the database can: no stored value is fetched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.redact import redact
from deerflow_ckpt.store.records import LineageRows
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection
from deerflow_ckpt.store.source import DatabaseTarget, PostgresTarget, SqliteTarget


def lineage_rows(target: DatabaseTarget, selection: ThreadSelection = ALL_THREADS) -> Iterator[LineageRows]:
    """Every lineage's row keys in (thread_id, checkpoint_ns) order, from one read transaction."""
    if isinstance(target, SqliteTarget):
        yield from _sqlite_rows(target, selection)
    else:
        yield from _postgres_rows(target, selection)


# -- SQLite ----------------------------------------------------------------------------------------------

# One row per lineage, from the primary key's index: its count, greatest id, and ids that are not text.
_SQLITE_CHECKPOINTS = (
    "SELECT thread_id, checkpoint_ns, count(*), max(checkpoint_id), sum(typeof(checkpoint_id) <> 'text') "
    "FROM checkpoints {where} GROUP BY thread_id, checkpoint_ns ORDER BY thread_id, checkpoint_ns"
)
_SQLITE_WRITES = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM writes {where} ORDER BY 1, 2, 3, 4, 5"
)


def _sqlite_rows(target: SqliteTarget, selection: ThreadSelection) -> Iterator[LineageRows]:
    from deerflow_ckpt.store.sqlite import connect_readonly, sqlite_order, thread_ids_nullable

    connection = connect_readonly(target)
    try:
        clauses, parameters = selection.conditions(
            "thread_id", "?", sqlite=True, nullable=thread_ids_nullable(connection)
        )
        where = "WHERE " + " AND ".join(clauses) if clauses else ""
        # One read transaction: the two passes see the same database while a writer carries on.
        connection.execute("BEGIN")
        checkpoints = connection.execute(_SQLITE_CHECKPOINTS.format(where=where), parameters)
        writes = connection.execute(_SQLITE_WRITES.format(where=where), parameters)
        order = lambda key: tuple(sqlite_order(part) for part in key)  # noqa: E731
        yield from _merge(checkpoints, writes, iter(()), order, aggregated=True)
        connection.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"reading {target.path} failed: {exc}") from exc
    finally:
        connection.close()


def _merge(
    checkpoints: Iterator[Any], writes: Iterator[Any], blobs: Iterator[Any], order: Any, aggregated: bool
) -> Iterator[LineageRows]:
    """Lineages from streams that share one order of (thread_id, checkpoint_ns); write and blob rows of a
    lineage without checkpoints are passed over. `aggregated`: one checkpoints row per lineage (SQLite)."""
    pending_write = next(writes, None)
    pending_blob = next(blobs, None)
    current: LineageRows | None = None
    for row in checkpoints:
        thread_id, ns = row[0], row[1]
        if current is None or thread_id != current.thread_id or ns != current.checkpoint_ns:
            if current is not None:
                pending_write, pending_blob = _fill(current, writes, pending_write, blobs, pending_blob, order)
                yield current
            current = LineageRows(thread_id, ns)
        if aggregated:
            current.checkpoints, current.newest, current.ids_are_text = row[2], row[3], not row[4]
        else:
            current.add_checkpoint(row[2])
            if isinstance(row[3], dict):
                current.versions[str(row[2])] = {str(k): str(v) for k, v in row[3].items()}
    if current is not None:
        _fill(current, writes, pending_write, blobs, pending_blob, order)
        yield current


def _fill(
    lineage: LineageRows, writes: Iterator[Any], write: Any, blobs: Iterator[Any], blob: Any, order: Any
) -> tuple[Any, Any]:
    """Take the lineage's write and blob rows from the streams, passing over rows of lineages before it."""
    thread_id, ns = lineage.thread_id, lineage.checkpoint_ns
    here = order((thread_id, ns))
    appended = lineage.writes.append
    while write is not None:
        if write[0] == thread_id and write[1] == ns:
            appended((write[2], write[3], write[4]))
        elif order((write[0], write[1])) > here:
            break
        write = next(writes, None)
    while blob is not None:
        if blob[0] == thread_id and blob[1] == ns:
            lineage.blobs.append((blob[2], blob[3], int(blob[4] or 0)))
        elif order((blob[0], blob[1])) > here:
            break
        blob = next(blobs, None)
    return write, blob


# -- Postgres --------------------------------------------------------------------------------------------

_PG_CHECKPOINTS = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint->'channel_versions' FROM {table} {where} "
    "ORDER BY thread_id{c}, checkpoint_ns{c}, checkpoint_id{c}"
)
_PG_WRITES = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM {table} {where} "
    "ORDER BY thread_id{c}, checkpoint_ns{c}, checkpoint_id{c}, task_id{c}, idx"
)
_PG_BLOBS = (
    "SELECT thread_id, checkpoint_ns, channel, version, octet_length(blob) FROM {table} {where} "
    "ORDER BY thread_id{c}, checkpoint_ns{c}, channel{c}, version{c}"
)
_PG_BATCH_ROWS = 5000


def postgres_tables(target: PostgresTarget) -> dict[str, str]:
    """The checkpoint tables as a script must name them: schema-qualified, quoted, wherever the scan found
    them (a DSN's search_path may pick a schema the operator's psql session would not)."""
    from deerflow_ckpt.store.postgres import TABLES, connect

    connection = connect(target)
    try:
        with connection.cursor() as cursor:
            names: dict[str, str] = {}
            for table in TABLES:
                qualified = f"{target.schema}.{table}" if target.schema else table
                cursor.execute(
                    "SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(%s)",
                    (qualified,),
                )
                row = cursor.fetchone()
                if row is None:
                    raise StoreError(f"no {table} table in {target.describe()}")
                names[table] = str(row[0])
        connection.rollback()
        return names
    except Exception as exc:
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"reading {target.describe()} failed: {redact(str(exc)).strip()}") from None
    finally:
        connection.close()


def _postgres_rows(target: PostgresTarget, selection: ThreadSelection) -> Iterator[LineageRows]:
    import psycopg
    from psycopg import sql

    from deerflow_ckpt.store.postgres import byte_ordered, connect, table_names, thread_ids_nullable
    from deerflow_ckpt.store.prefetch import Prefetcher

    connection = connect(target)
    # One snapshot for the three queries: a writer's commit between them must not split a lineage.
    connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    try:
        tables = table_names(connection, target.schema)
        in_byte_order = byte_ordered(connection)
        collate = "" if in_byte_order else ' COLLATE "C"'
        nullable = thread_ids_nullable(connection, target.schema)
        clauses, parameters = selection.conditions(f"thread_id{collate}", "%s", sqlite=False, nullable=nullable)
        where = "WHERE " + " AND ".join(clauses) if clauses else ""
        cursors = []
        for name, query, table in (
            ("ckpt_keys_checkpoints", _PG_CHECKPOINTS, "checkpoints"),
            ("ckpt_keys_writes", _PG_WRITES, "checkpoint_writes"),
            ("ckpt_keys_blobs", _PG_BLOBS, "checkpoint_blobs"),
        ):
            statement = sql.SQL(query.format(table="{table}", where=where, c=collate)).format(table=tables[table])
            cursor = connection.cursor(name=name)
            cursor.execute(statement, tuple(parameters))
            cursors.append(cursor)
        prefetcher = Prefetcher(cursors, _PG_BATCH_ROWS)
        try:
            rows = prefetcher.rows
            yield from _merge(rows(0), rows(1), rows(2), _postgres_order, aggregated=False)
        finally:
            prefetcher.close()
        connection.rollback()
    except psycopg.Error as exc:
        raise StoreError(f"reading {target.describe()} failed: {redact(str(exc)).strip()}") from None
    finally:
        connection.close()


def _postgres_order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    # The queries sort in byte order, which is Python's order for str; a NULL key sorts last there.
    return tuple((1, "") if part is None else (0, part) for part in key)
