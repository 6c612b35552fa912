"""The Postgres side of `ckpt convert`: copies of the saver's tables in a new schema, rewritten there.

`database.postgres_schema` moves DeerFlow's app tables and the checkpointer together, so the converted
tables cannot live in a schema of their own for good: they are built in `--target-schema` and moved into
the live schema by a reviewed swap script (report/convert_sql.py) that ckpt never runs.

1. One REPEATABLE READ transaction creates the target schema's tables as the source's own (`LIKE ...
   INCLUDING ALL`: the columns, keys and indexes of the saver generation that set the source up, which is
   what the deployment's saver expects) and copies every row, so the copy is one consistent state of a
   live source. The same snapshot measures the source's fingerprint, which the swap script checks.
2. The scan and the proof read the copy read-only; each thread's rows are rewritten in a transaction of
   its own: the checkpoint's JSONB snapshot marker, its metadata, and the `messages` blobs at its versions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from deerflow_ckpt.errors import OutputError, StoreError
from deerflow_ckpt.redact import redact
from deerflow_ckpt.store.postgres import connect
from deerflow_ckpt.store.rewrite import RowChange, RowNotRewritable, converted_metadata
from deerflow_ckpt.store.source import PostgresTarget
from deerflow_ckpt.store.writes import MESSAGES_CHANNEL

# The saver's tables, in the order they are copied and moved (migrations last: it tells the saver's generation).
SAVER_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
_CHECKPOINT_KEYS = "thread_id, checkpoint_ns, checkpoint_id"


@dataclass(frozen=True)
class SourceFingerprint:
    """What the swap script compares under its lock: the source's rows as they were copied."""

    schema: str
    tables: tuple[str, ...]
    # Rows per table, and an md5 over every checkpoint's key and every write's key in key order.
    rows: dict[str, int]
    checkpoint_keys_md5: str
    write_keys_md5: str


def _fail(target: PostgresTarget, exc: Exception, doing: str) -> StoreError:
    return StoreError(f"{doing} {target.describe()} failed: {redact(str(exc)).strip()}")


def source_schema(connection: Any, target: PostgresTarget) -> str:
    """The schema the saver's tables are in: the one named, else where the search path finds them."""
    if target.schema:
        return target.schema
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = to_regclass('checkpoints')"
        )
        row = cursor.fetchone()
    if row is None:
        raise StoreError(f"no checkpoints table in the search path of {target.describe()}")
    return str(row[0])


def quoted(identifier: str) -> str:
    """A PostgreSQL identifier, double-quoted."""
    return '"' + identifier.replace('"', '""') + '"'


def fingerprint_sql(schema: str, tables: tuple[str, ...]) -> tuple[str, ...]:
    """The queries a fingerprint is made of, for this module and the swap script alike: rows per table, then
    an md5 over every checkpoint's key and one over every write's key, each query returning one value."""

    def table(name: str) -> str:
        return f"{quoted(schema)}.{quoted(name)}"

    counts = tuple(f"SELECT count(*) FROM {table(name)}" for name in tables)
    checkpoint_keys = (
        "SELECT md5(coalesce(string_agg(concat_ws(E'\\x1f', thread_id, checkpoint_ns, checkpoint_id), E'\\x1e' "
        'ORDER BY thread_id COLLATE "C", checkpoint_ns COLLATE "C", checkpoint_id COLLATE "C"), \'\')) '
        f"FROM {table('checkpoints')}"
    )
    write_keys = (
        "SELECT md5(coalesce(string_agg(concat_ws(E'\\x1f', thread_id, checkpoint_ns, checkpoint_id, task_id, "
        'idx::text), E\'\\x1e\' ORDER BY thread_id COLLATE "C", checkpoint_ns COLLATE "C", '
        'checkpoint_id COLLATE "C", task_id COLLATE "C", idx), \'\')) '
        f"FROM {table('checkpoint_writes')}"
    )
    return (*counts, checkpoint_keys, write_keys)


# Per thread: what tells a thread that gained (or lost) rows since a previous run (LangGraph appends rows
# under ids that grow with time: a count and the id range are enough).
_THREAD_ROWS = (
    "SELECT c.thread_id, c.n, c.lo, c.hi, coalesce(w.n, 0), w.lo, w.hi FROM "
    "(SELECT thread_id, count(*) AS n, min(checkpoint_id) AS lo, max(checkpoint_id) AS hi FROM {checkpoints} "
    "GROUP BY thread_id) AS c LEFT JOIN "
    "(SELECT thread_id, count(*) AS n, min(checkpoint_id) AS lo, max(checkpoint_id) AS hi FROM {writes} "
    "GROUP BY thread_id) AS w ON w.thread_id = c.thread_id"
)


def copy_tables(
    source: PostgresTarget, schema: str, catch_up: bool = False
) -> tuple[PostgresTarget, SourceFingerprint, tuple[list[str], int] | None]:
    """Copy the source's saver tables into `schema` in one consistent snapshot of the source: all of them into a
    new schema, or with `catch_up` only the threads that changed since the previous run made `schema` (returned
    with how many threads were carried over)."""
    import psycopg
    from psycopg import sql

    connection = connect(source, writable=True)
    # One snapshot for the copy and the fingerprint: a live writer's rows are in both or in neither.
    connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    changed: tuple[list[str], int] | None = None
    try:
        live = source_schema(connection, source)
        if live == schema:
            raise OutputError(f"--target-schema {schema} is the source's schema: convert never writes where it reads")
        with connection.cursor() as cursor:
            tables = tuple(name for name in SAVER_TABLES if _exists(cursor, live, name))
            if catch_up:
                changed = _catch_up(cursor, live, schema, tables)
            else:
                _copy_all(cursor, live, schema, tables)
            values = []
            for query in fingerprint_sql(live, tables):
                cursor.execute(sql.SQL(query))
                found = cursor.fetchone()
                values.append(found[0] if found is not None else None)
        connection.commit()
    except psycopg.Error as exc:
        raise _fail(source, exc, "copying the saver's tables of") from None
    finally:
        connection.close()
    rows = dict(zip(tables, (int(v or 0) for v in values[: len(tables)]), strict=True))
    fingerprint = SourceFingerprint(live, tables, rows, str(values[-2]), str(values[-1]))
    return PostgresTarget(source.conninfo, schema, source.timeouts), fingerprint, changed


def _copy_all(cursor: Any, live: str, schema: str, tables: tuple[str, ...]) -> None:
    from psycopg import sql

    cursor.execute(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
        (schema,),
    )
    row = cursor.fetchone()
    if row is not None and row[0]:
        raise OutputError(f"--target-schema {schema} exists and is not empty: name a new schema, or --catch-up")
    cursor.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    for name in tables:
        into, source = sql.Identifier(schema, name), sql.Identifier(live, name)
        cursor.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(into, source))
        cursor.execute(sql.SQL("INSERT INTO {} SELECT * FROM {}").format(into, source))


def _thread_rows(cursor: Any, schema: str) -> dict[str, tuple[Any, ...]]:
    from psycopg import sql

    query = sql.SQL(_THREAD_ROWS).format(
        checkpoints=sql.Identifier(schema, "checkpoints"), writes=sql.Identifier(schema, "checkpoint_writes")
    )
    cursor.execute(query)
    return {row[0]: tuple(row[1:]) for row in cursor.fetchall()}


def _catch_up(cursor: Any, live: str, schema: str, tables: tuple[str, ...]) -> tuple[list[str], int]:
    """Replace the copy's rows of every thread the source changed (or dropped) since, with the source's."""
    from psycopg import sql

    if not all(_exists(cursor, schema, name) for name in tables):
        raise OutputError(f"--catch-up: schema {schema} does not hold a previous conversion's tables")
    fresh, before = _thread_rows(cursor, live), _thread_rows(cursor, schema)
    changed = sorted(t for t, rows in fresh.items() if before.get(t) != rows)
    replaced = changed + sorted(set(before) - set(fresh))
    for name in tables:
        if name == "checkpoint_migrations":
            continue
        into, source = sql.Identifier(schema, name), sql.Identifier(live, name)
        cursor.execute(sql.SQL("DELETE FROM {} WHERE thread_id = ANY(%s)").format(into), (replaced,))
        cursor.execute(
            sql.SQL("INSERT INTO {} SELECT * FROM {} WHERE thread_id = ANY(%s)").format(into, source), (changed,)
        )
    return changed, len(fresh) - len(changed)


def _exists(cursor: Any, schema: str, table: str) -> bool:
    cursor.execute("SELECT to_regclass(%s)", (f'"{schema}"."{table}"',))
    row = cursor.fetchone()
    return row is not None and row[0] is not None


def table_bytes(target: PostgresTarget, schema: str) -> dict[str, int]:
    """Stored bytes per saver table as DeerFlow's benchmark counts them (values' lengths), read-only."""
    import psycopg
    from psycopg import sql

    queries = {
        "checkpoints": "SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)), 0) FROM {}",
        "checkpoint_blobs": "SELECT coalesce(sum(octet_length(blob)), 0) FROM {}",
        "checkpoint_writes": "SELECT coalesce(sum(octet_length(blob)), 0) FROM {}",
    }
    connection = connect(target)
    try:
        out = {}
        with connection.cursor() as cursor:
            for table, query in queries.items():
                cursor.execute(sql.SQL(query).format(sql.Identifier(schema, table)))
                row = cursor.fetchone()
                out[table] = int(row[0]) if row is not None else 0
        connection.rollback()
        return out
    except psycopg.Error as exc:
        raise _fail(target, exc, "measuring") from None
    finally:
        connection.close()


def compact(target: PostgresTarget, schema: str, tables: tuple[str, ...], full: bool = True) -> None:
    """VACUUM (FULL) the rewritten copies: an UPDATE leaves the old row versions behind until then. The copies
    are nobody else's yet, so the exclusive lock VACUUM FULL takes stops no one."""
    import psycopg
    from psycopg import sql

    connection = connect(target, writable=True)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            for table in tables:
                how = sql.SQL("VACUUM (FULL, ANALYZE) {}" if full else "VACUUM (ANALYZE) {}")
                cursor.execute(how.format(sql.Identifier(schema, table)))
    except psycopg.Error as exc:
        raise _fail(target, exc, "compacting") from None
    finally:
        connection.close()


def relation_bytes(target: PostgresTarget, schema: str, tables: tuple[str, ...]) -> int:
    """The tables' size on disk with TOAST and indexes (pg_total_relation_size)."""
    import psycopg

    connection = connect(target)
    try:
        with connection.cursor() as cursor:
            total = 0
            for table in tables:
                cursor.execute("SELECT pg_total_relation_size(to_regclass(%s))", (f'"{schema}"."{table}"',))
                row = cursor.fetchone()
                total += int(row[0] or 0) if row is not None else 0
        connection.rollback()
        return total
    except psycopg.Error as exc:
        raise _fail(target, exc, "measuring") from None
    finally:
        connection.close()


class PostgresRowWriter:
    """Rewrites the copy's rows lineage by lineage, one thread per transaction."""

    def __init__(self, copy: PostgresTarget) -> None:
        from psycopg import sql

        self.target = copy
        self._connection = connect(copy, writable=True)
        schema = copy.schema
        self._select = sql.SQL(
            "SELECT checkpoint_id, checkpoint, metadata, parent_checkpoint_id FROM {} "
            "WHERE thread_id = %s AND checkpoint_ns = %s"
        ).format(sql.Identifier(schema, "checkpoints"))
        self._update = sql.SQL(
            "UPDATE {} SET checkpoint = %s, metadata = %s WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND checkpoint_id = %s"
        ).format(sql.Identifier(schema, "checkpoints"))
        self._select_blobs = sql.SQL(
            "SELECT version, blob FROM {} WHERE thread_id = %s AND checkpoint_ns = %s AND channel = %s"
        ).format(sql.Identifier(schema, "checkpoint_blobs"))
        self._delete_blobs = sql.SQL(
            "DELETE FROM {} WHERE thread_id = %s AND checkpoint_ns = %s AND channel = %s"
        ).format(sql.Identifier(schema, "checkpoint_blobs"))
        self._insert_blob = sql.SQL(
            "INSERT INTO {} (thread_id, checkpoint_ns, channel, version, type, blob) VALUES (%s, %s, %s, %s, %s, %s)"
        ).format(sql.Identifier(schema, "checkpoint_blobs"))

    def lineage_rows(self, thread_id: str, checkpoint_ns: str) -> dict[str, tuple[Any, Any, str | None]]:
        """checkpoint id -> (checkpoint, metadata, parent id), the first two as JSON values."""
        import psycopg

        try:
            with self._connection.cursor() as cursor:
                cursor.execute(self._select, (thread_id, checkpoint_ns))
                return {row[0]: (row[1], row[2], row[3]) for row in cursor.fetchall()}
        except psycopg.Error as exc:
            raise _fail(self.target, exc, "reading") from None

    def lineage_blobs(self, thread_id: str, checkpoint_ns: str) -> dict[str, bytes]:
        """version -> bytes of the lineage's `messages` blobs."""
        import psycopg

        try:
            with self._connection.cursor(binary=True) as cursor:
                cursor.execute(self._select_blobs, (thread_id, checkpoint_ns, MESSAGES_CHANNEL))
                return {row[0]: bytes(row[1]) for row in cursor.fetchall() if row[1] is not None}
        except psycopg.Error as exc:
            raise _fail(self.target, exc, "reading") from None

    def rewrite(
        self,
        thread_id: str,
        checkpoint_ns: str,
        updates: list[tuple[str, Any, Any]],
        blobs: dict[str, bytes],
    ) -> None:
        """Store the changed checkpoints (id, checkpoint, metadata) and make the lineage's `messages` blobs
        exactly `blobs` (version -> serialized value)."""
        import psycopg
        from psycopg.types.json import Jsonb

        try:
            with self._connection.cursor() as cursor:
                cursor.executemany(
                    self._update,
                    [(Jsonb(c), Jsonb(m), thread_id, checkpoint_ns, cid) for cid, c, m in updates],
                )
                cursor.execute(self._delete_blobs, (thread_id, checkpoint_ns, MESSAGES_CHANNEL))
                cursor.executemany(
                    self._insert_blob,
                    [(thread_id, checkpoint_ns, MESSAGES_CHANNEL, v, "msgpack", data) for v, data in blobs.items()],
                )
        except psycopg.Error as exc:
            raise _fail(self.target, exc, "rewriting") from None

    def lineage(self, thread_id: str, checkpoint_ns: str, delta: bool) -> PostgresLineageRewrite:
        return PostgresLineageRewrite(self, thread_id, checkpoint_ns, delta)

    @contextmanager
    def thread(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self._connection.rollback()
            raise
        self._connection.commit()

    def close(self) -> None:
        self._connection.close()


class PostgresLineageRewrite:
    """One lineage's checkpoints: read together, decided one by one, written together by finish()."""

    def __init__(self, writer: PostgresRowWriter, thread_id: str, checkpoint_ns: str, delta: bool) -> None:
        self._writer = writer
        self._key = (thread_id, checkpoint_ns)
        self._delta = delta
        self._rows = writer.lineage_rows(thread_id, checkpoint_ns)
        self._updates: list[tuple[str, Any, Any]] = []
        # version -> the serialized value stored there (the first checkpoint of a version decides it).
        self._blobs: dict[str, bytes] = {}
        # version -> the checkpoint that started it (its parent had another version, or none).
        self._started: dict[str, str] = {}

    def _checkpoint(self, checkpoint_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        row = self._rows.get(checkpoint_id)
        if row is None:
            raise RowNotRewritable(f"checkpoint {checkpoint_id} was not found again")
        checkpoint, metadata, _ = row
        if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("channel_values", {}), dict):
            raise RowNotRewritable(f"checkpoint {checkpoint_id} is not a LangGraph checkpoint object")
        if not isinstance(metadata, dict):
            raise RowNotRewritable(f"checkpoint {checkpoint_id}'s metadata is not a JSON object")
        return checkpoint, metadata

    def _version(self, checkpoint_id: str | None) -> Any:
        row = self._rows.get(checkpoint_id) if checkpoint_id is not None else None
        versions = row[0].get("channel_versions") if row is not None and isinstance(row[0], dict) else None
        return versions.get(MESSAGES_CHANNEL) if isinstance(versions, dict) else None

    def _check_start(self, checkpoint_id: str) -> None:
        version = self._version(checkpoint_id)
        if version is None:
            return
        # Checkpoints share a version only down a chain that wrote nothing; a raw put that copied a version
        # starts it a second time, and the one blob Postgres keeps per version cannot hold both lists.
        if self._version(self._rows[checkpoint_id][2]) != version:
            other = self._started.setdefault(str(version), checkpoint_id)
            if other != checkpoint_id:
                raise RowNotRewritable(
                    f"checkpoints {other} and {checkpoint_id} both start messages version {version} (a raw put "
                    "copied it): Postgres keeps one blob per version, so they cannot store their own lists"
                )

    def store(
        self, checkpoint_id: str, messages: bytes | None, counters: tuple[int, int] | None, stores_now: bool
    ) -> RowChange:
        """`stores_now` is for the SQLite rewrite; here the lineage's rows and blobs are read whole."""
        checkpoint, metadata = self._checkpoint(checkpoint_id)
        self._check_start(checkpoint_id)
        values = dict(checkpoint.get("channel_values") or {})
        version = (checkpoint.get("channel_versions") or {}).get(MESSAGES_CHANNEL)
        snapshot = self._delta and messages is not None
        # The JSONB keeps the snapshot marker inline; a full-mode list, like every value, lives only in a blob.
        if snapshot:
            values[MESSAGES_CHANNEL] = True
        else:
            values.pop(MESSAGES_CHANNEL, None)
        new_checkpoint = {**checkpoint, "channel_values": values}
        new_metadata = converted_metadata(metadata, self._delta, counters)
        if messages is not None and version is not None:
            self._blobs.setdefault(str(version), messages)
        changed = new_checkpoint != checkpoint or new_metadata != metadata
        if changed:
            self._updates.append((checkpoint_id, new_checkpoint, new_metadata))
        return RowChange(_json_length(checkpoint, metadata), _json_length(new_checkpoint, new_metadata), changed)

    def finish(self) -> tuple[int, int]:
        """Write the lineage; the bytes of its `messages` blobs before and after."""
        stored = self._writer.lineage_blobs(*self._key)
        if self._updates or self._blobs != stored:
            self._writer.rewrite(*self._key, self._updates, self._blobs)
        return sum(map(len, stored.values())), sum(map(len, self._blobs.values()))


def _json_length(*values: Any) -> int:
    """The values' JSON text as jsonb prints it (the same separators), in bytes."""
    return sum(len(json.dumps(value, ensure_ascii=False).encode()) for value in values)
