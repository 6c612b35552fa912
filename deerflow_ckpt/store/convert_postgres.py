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
from typing import Any

from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.errors import OutputError, StoreError
from deerflow_ckpt.redact import redact
from deerflow_ckpt.store.postgres import connect
from deerflow_ckpt.store.rewrite import RowChange, RowNotRewritable, converted_metadata
from deerflow_ckpt.store.source import PostgresTarget
from deerflow_ckpt.store.writes import MESSAGES_CHANNEL

# The saver's tables, in the order they are copied and moved (migrations last: it tells the saver's generation).
SAVER_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
# Kept in the target schema beside the copies (the swap moves only SAVER_TABLES): see _RECORD_DDL.
RECORD_TABLE = "ckpt_conversion"
THREADS_TABLE = "ckpt_conversion_threads"
# The swap keeps the tables it replaces in `<target>_replaced`.
BACKUP_SUFFIX = "_replaced"
# PostgreSQL's identifier limit (NAMEDATALEN - 1): longer names are truncated silently.
IDENTIFIER_BYTES = 63
# The silence allowed to a statement the server works on before answering (server_work), in seconds.
SERVER_WORK_TIMEOUT = 6 * 3600.0


@dataclass(frozen=True)
class SourceFingerprint:
    """What the swap script compares under its lock: the source's rows as they were copied."""

    schema: str
    tables: tuple[str, ...]
    # Per table, "rows:sum" of the rows' hashes (fingerprint_sql): changes with any row added, removed or
    # upserted in place.
    digests: dict[str, str]


@dataclass(frozen=True)
class CopyResult:
    copy: PostgresTarget
    fingerprint: SourceFingerprint
    # Whether this run created the schema (a failed first run drops it again).
    created: bool
    # --catch-up: the threads copied afresh, and how many were carried over as the previous run left them.
    changed: list[str] | None
    carried_over: int | None
    # The source's value bytes per saver table, measured in the copy's snapshot.
    tables_before: dict[str, int]


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


def _qualified(schema: str, table: str) -> str:
    return f"{quoted(schema)}.{quoted(table)}"


def backup_schema_name(schema: str) -> str:
    """Where the swap keeps the live tables it replaces."""
    return schema + BACKUP_SUFFIX


def check_target_schema(schema: str) -> None:
    """PostgreSQL truncates a longer name silently: the schema, or the swap's backup beside it, would be
    another name than the one reported."""
    if len(backup_schema_name(schema).encode()) > IDENTIFIER_BYTES:
        raise OutputError(
            f"--target-schema {schema}: {backup_schema_name(schema)}, where the switch keeps the replaced tables, "
            f"is longer than PostgreSQL's {IDENTIFIER_BYTES} bytes: name a shorter schema"
        )


def _row_hash(table: str, alias: str) -> str:
    """60 bits of an md5 of one row as a bigint: summed per table (or thread), an order-independent digest that
    sees every row added, removed or upserted in place. Blobs count by key, type and length: the saver never
    rewrites one (ON CONFLICT DO NOTHING), and hashing their bytes would read the largest table whole."""
    if table == "checkpoint_blobs":
        text = (
            f"CAST(ROW({alias}.thread_id, {alias}.checkpoint_ns, {alias}.channel, {alias}.version, {alias}.type, "
            f"octet_length({alias}.blob)) AS text)"
        )
    else:
        # The whole row as text: bytea prints per bytea_output, which every fingerprinting session sets to hex.
        text = f"CAST({alias} AS text)"
    return f"('x' || left(md5({text}), 15))::bit(60)::bigint"


# Row text must not depend on the session: set in every transaction that computes a digest.
DIGEST_SETTINGS = "SET LOCAL bytea_output = 'hex'"


def fingerprint_sql(schema: str, tables: tuple[str, ...]) -> tuple[str, ...]:
    """The queries a fingerprint is made of, for this module and the swap script alike: one per table, each
    returning "rows:sum of row hashes" as text (run after DIGEST_SETTINGS)."""
    return tuple(
        f"SELECT count(*) || ':' || coalesce(sum({_row_hash(name, 'r')}), 0) FROM {_qualified(schema, name)} AS r"
        for name in tables
    )


def _thread_digests_sql(schema: str, tables: tuple[str, ...]) -> str:
    """Per thread, its rows' digest over the tables keyed by thread: what tells a thread the source changed."""
    parts = [
        f"SELECT '{name}' AS t, thread_id, count(*) AS n, sum({_row_hash(name, 'r')}) AS h "
        f"FROM {_qualified(schema, name)} AS r GROUP BY thread_id"
        for name in tables
        if name != "checkpoint_migrations"
    ]
    return (
        "SELECT thread_id, string_agg(t || ':' || n || ':' || h, ' ' ORDER BY t) FROM ("
        + " UNION ALL ".join(parts)
        + ") AS per_table GROUP BY thread_id"
    )


@contextmanager
def server_work(connection: Any) -> Iterator[None]:
    """Statements the server works on for long before answering (a copy, VACUUM FULL, a digest over every row)
    send nothing back meanwhile: their silence is not a stalled network, so --network-timeout is raised to
    SERVER_WORK_TIMEOUT for them (TCP keepalives still find a dead peer); the streaming reads keep it."""
    was = connection.network_timeout
    connection.network_timeout = max(was, SERVER_WORK_TIMEOUT)
    try:
        yield
    finally:
        connection.network_timeout = was


def copy_tables(
    source: PostgresTarget, schema: str, mode: str, snapshot_frequency: int | None, catch_up: bool = False
) -> CopyResult:
    """Copy the source's saver tables into `schema` in one consistent snapshot of the source: all of them into a
    new schema, or with `catch_up` only the threads that changed since the previous run's record."""
    import psycopg
    from psycopg import sql

    check_target_schema(schema)
    connection = connect(source, writable=True)
    # One snapshot for the copy and the fingerprint: a live writer's rows are in both or in neither.
    connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    changed: list[str] | None = None
    carried_over: int | None = None
    created = False
    try:
        with server_work(connection), connection.cursor() as cursor:
            cursor.execute(DIGEST_SETTINGS)
            live = source_schema(connection, source)
            if live == schema:
                raise OutputError(
                    f"--target-schema {schema} is the source's schema: convert never writes where it reads"
                )
            tables = tuple(name for name in SAVER_TABLES if _exists(cursor, live, name))
            if catch_up:
                changed, carried_over = _catch_up(cursor, live, schema, tables, mode, snapshot_frequency)
            else:
                created = _copy_all(cursor, live, schema, tables, mode, snapshot_frequency)
            digests = {}
            for name, query in zip(tables, fingerprint_sql(live, tables), strict=True):
                cursor.execute(sql.SQL(query))
                found = cursor.fetchone()
                digests[name] = str(found[0]) if found is not None else ""
            before = _value_bytes(cursor, live)
            connection.commit()
    except psycopg.Error as exc:
        raise _fail(source, exc, "copying the saver's tables of") from None
    finally:
        connection.close()
    fingerprint = SourceFingerprint(live, tables, digests)
    copy = PostgresTarget(source.conninfo, schema, source.timeouts)
    return CopyResult(copy, fingerprint, created, changed, carried_over, before)


def _copy_all(
    cursor: Any, live: str, schema: str, tables: tuple[str, ...], mode: str, snapshot_frequency: int | None
) -> bool:
    """Create the copies and the record; whether the schema was created here."""
    from psycopg import sql

    cursor.execute(
        "SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = %s), "
        "(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s)",
        (schema, schema),
    )
    row = cursor.fetchone()
    existed, relations = (int(row[0]), int(row[1])) if row is not None else (0, 0)
    if relations:
        raise OutputError(f"--target-schema {schema} exists and is not empty: name a new schema, or --catch-up")
    cursor.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    for name in tables:
        into, source = sql.Identifier(schema, name), sql.Identifier(live, name)
        cursor.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(into, source))
        cursor.execute(sql.SQL("INSERT INTO {} SELECT * FROM {}").format(into, source))
    cursor.execute(sql.SQL(_RECORD_DDL).format(sql.Identifier(schema, RECORD_TABLE)))
    cursor.execute(sql.SQL(_THREADS_DDL).format(sql.Identifier(schema, THREADS_TABLE)))
    cursor.execute(
        sql.SQL("INSERT INTO {} (source_schema, mode, snapshot_frequency, complete) VALUES (%s, %s, %s, false)").format(
            sql.Identifier(schema, RECORD_TABLE)
        ),
        (live, mode, snapshot_frequency),
    )
    cursor.execute(
        sql.SQL("INSERT INTO {} (thread_id, digest) ").format(sql.Identifier(schema, THREADS_TABLE))
        + sql.SQL(_thread_digests_sql(live, tables))
    )
    return not existed


# The record a conversion keeps in its target schema (the swap moves only the saver's tables, so it stays):
# what it converted to, from where, which threads it refused, and whether it finished. `pending`: the threads a
# catch-up copied afresh and has not finished converting.
_RECORD_DDL = (
    "CREATE TABLE {} (source_schema text NOT NULL, mode text NOT NULL, snapshot_frequency integer, "
    "refused text[] NOT NULL DEFAULT '{{}}', pending text[], complete boolean NOT NULL, "
    "updated_at timestamptz NOT NULL DEFAULT now())"
)
# Per thread, the source's digest when it was copied (the copies are rewritten, so they cannot be compared).
_THREADS_DDL = "CREATE TABLE {} (thread_id text PRIMARY KEY, digest text NOT NULL)"


def _catch_up(
    cursor: Any, live: str, schema: str, tables: tuple[str, ...], mode: str, snapshot_frequency: int | None
) -> tuple[list[str], int]:
    """Replace the copy's rows of every thread the source changed (or dropped) since the record's digests, and
    of every thread a failed catch-up left pending, with the source's."""
    from psycopg import sql

    record, threads = sql.Identifier(schema, RECORD_TABLE), sql.Identifier(schema, THREADS_TABLE)
    if not all(_exists(cursor, schema, name) for name in (*tables, RECORD_TABLE, THREADS_TABLE)):
        raise OutputError(
            f"--catch-up: schema {schema} holds no record of a ckpt conversion ({RECORD_TABLE}): "
            "catch-up writes only into a schema convert made"
        )
    cursor.execute(
        sql.SQL("SELECT source_schema, mode, snapshot_frequency, pending, complete FROM {} FOR UPDATE").format(record)
    )
    rows = cursor.fetchall()
    if len(rows) != 1:
        raise OutputError(f"--catch-up: the record in schema {schema} is not one row: not a conversion ckpt made")
    was_source, was_mode, was_k, pending, complete = rows[0]
    if (was_source, was_mode, was_k) != (live, mode, snapshot_frequency):
        raise OutputError(
            f"--catch-up: schema {schema} converted schema {was_source} to {_mode_text(was_mode, was_k)}; this run "
            f"asks schema {live} to {_mode_text(mode, snapshot_frequency)}: give the same options, or a new schema"
        )
    if not complete and pending is None:
        raise OutputError(
            f"--catch-up: the first conversion into schema {schema} did not finish: drop the schema and convert again"
        )
    cursor.execute(sql.SQL(_thread_digests_sql(live, tables)))
    fresh = {row[0]: row[1] for row in cursor.fetchall()}
    cursor.execute(sql.SQL("SELECT thread_id, digest FROM {}").format(threads))
    before = {row[0]: row[1] for row in cursor.fetchall()}
    unfinished = set(pending or ())
    changed = sorted(t for t, digest in fresh.items() if before.get(t) != digest or t in unfinished)
    replaced = changed + sorted((set(before) | unfinished) - set(fresh))
    for name in tables:
        if name == "checkpoint_migrations":
            continue
        into, source = sql.Identifier(schema, name), sql.Identifier(live, name)
        cursor.execute(sql.SQL("DELETE FROM {} WHERE thread_id = ANY(%s)").format(into), (replaced,))
        cursor.execute(
            sql.SQL("INSERT INTO {} SELECT * FROM {} WHERE thread_id = ANY(%s)").format(into, source), (changed,)
        )
    cursor.execute(sql.SQL("DELETE FROM {} WHERE thread_id = ANY(%s)").format(threads), (replaced,))
    cursor.executemany(
        sql.SQL("INSERT INTO {} (thread_id, digest) VALUES (%s, %s)").format(threads), [(t, fresh[t]) for t in changed]
    )
    # Until finish_record: the threads copied afresh are pending, and no refusal of a replaced thread stands.
    cursor.execute(
        sql.SQL(
            "UPDATE {} SET complete = false, pending = %s, updated_at = now(), "
            "refused = ARRAY(SELECT t FROM unnest(refused) AS t WHERE t <> ALL(%s) ORDER BY t)"
        ).format(record),
        (changed, replaced),
    )
    return changed, len(fresh) - len(changed)


def _mode_text(mode: str, snapshot_frequency: int | None) -> str:
    return f"{mode} (K={snapshot_frequency})" if snapshot_frequency is not None else mode


@contextmanager
def _session(target: PostgresTarget, doing: str, writable: bool = False, autocommit: bool = False) -> Iterator[Any]:
    """A connection for one short piece of work, committed at the end (a read-only one rolled back); a driver
    error is one line naming what was being done."""
    import psycopg

    connection = connect(target, writable=writable)
    connection.autocommit = autocommit
    try:
        yield connection
        if not autocommit:
            connection.commit() if writable else connection.rollback()
    except psycopg.Error as exc:
        raise _fail(target, exc, doing) from None
    finally:
        connection.close()


def finish_record(copy: PostgresTarget, refused: list[str]) -> None:
    """Mark the conversion in `copy`'s schema complete, with the threads this run refused added."""
    from psycopg import sql

    with _session(copy, "recording the conversion in", writable=True) as connection, connection.cursor() as cursor:
        cursor.execute(
            sql.SQL(
                "UPDATE {} SET complete = true, pending = NULL, updated_at = now(), "
                "refused = ARRAY(SELECT DISTINCT t FROM unnest(refused || %s::text[]) AS t ORDER BY t)"
            ).format(sql.Identifier(copy.schema, RECORD_TABLE)),
            (refused,),
        )


def discard(source: PostgresTarget, schema: str, created: bool) -> None:
    """Undo a failed first run: drop the schema it created, or the tables it created in an empty one."""
    from psycopg import sql

    doing = f"dropping the unfinished schema {schema} of"
    with _session(source, doing, writable=True) as connection, connection.cursor() as cursor:
        if created:
            cursor.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        else:
            for name in (*SAVER_TABLES, RECORD_TABLE, THREADS_TABLE):
                cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(schema, name)))


def _exists(cursor: Any, schema: str, table: str) -> bool:
    cursor.execute("SELECT to_regclass(%s)", (_qualified(schema, table),))
    row = cursor.fetchone()
    return row is not None and row[0] is not None


_VALUE_BYTES = {
    "checkpoints": "SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)), 0) FROM {}",
    "checkpoint_blobs": "SELECT coalesce(sum(octet_length(blob)), 0) FROM {}",
    "checkpoint_writes": "SELECT coalesce(sum(octet_length(blob)), 0) FROM {}",
}


def _value_bytes(cursor: Any, schema: str) -> dict[str, int]:
    from psycopg import sql

    out = {}
    for table, query in _VALUE_BYTES.items():
        cursor.execute(sql.SQL(query).format(sql.Identifier(schema, table)))
        row = cursor.fetchone()
        out[table] = int(row[0]) if row is not None else 0
    return out


def table_bytes(target: PostgresTarget, schema: str) -> dict[str, int]:
    """Stored bytes per saver table as DeerFlow's benchmark counts them (values' lengths), read-only."""
    with _session(target, "measuring") as connection, server_work(connection), connection.cursor() as cursor:
        return _value_bytes(cursor, schema)


def compact(target: PostgresTarget, schema: str, tables: tuple[str, ...], full: bool = True) -> None:
    """VACUUM (FULL) the rewritten copies: an UPDATE leaves the old row versions behind until then. The copies
    are nobody else's yet, so the exclusive lock VACUUM FULL takes stops no one."""
    from psycopg import sql

    how = sql.SQL("VACUUM (FULL, ANALYZE) {}" if full else "VACUUM (ANALYZE) {}")
    with (
        _session(target, "compacting", writable=True, autocommit=True) as connection,
        server_work(connection),
        connection.cursor() as cursor,
    ):
        for table in tables:
            cursor.execute(how.format(sql.Identifier(schema, table)))


def relation_bytes(target: PostgresTarget, schema: str, tables: tuple[str, ...]) -> int:
    """The tables' size on disk with TOAST and indexes (pg_total_relation_size)."""
    total = 0
    with _session(target, "measuring") as connection, connection.cursor() as cursor:
        for table in tables:
            cursor.execute("SELECT pg_total_relation_size(to_regclass(%s))", (_qualified(schema, table),))
            row = cursor.fetchone()
            total += int(row[0] or 0) if row is not None else 0
    return total


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
        # version -> the fold identity the core gave for it, and the first checkpoint that had it.
        self._folds: dict[str, tuple[object, str]] = {}

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

    def _check_fold(self, checkpoint_id: str, version: Any, fold_identity: object) -> None:
        if fold_identity is None or version is None:
            return
        # One blob per version holds one list: every checkpoint at the version must read that list. An older
        # delta writer's fork of a checkpoint with pending writes stored nothing and shares its version, yet
        # reads the writes replayed on top.
        first = self._folds.setdefault(str(version), (fold_identity, checkpoint_id))
        if first[0] != fold_identity:
            raise RowNotRewritable(
                f"checkpoints {first[1]} and {checkpoint_id} share messages version {version} but read different "
                "lists: Postgres keeps one blob per version, so they cannot both keep their reads"
            )

    def store(
        self,
        checkpoint_id: str,
        messages: bytes | None,
        counters: tuple[int, int] | None,
        stores_now: bool,
        fold_identity: object = None,
    ) -> RowChange:
        """`stores_now` is for the SQLite rewrite; here the lineage's rows and blobs are read whole.
        `fold_identity`, where the core gives one, is equal exactly where two checkpoints' folds are equal."""
        checkpoint, metadata = self._checkpoint(checkpoint_id)
        self._check_start(checkpoint_id)
        values = dict(checkpoint.get("channel_values") or {})
        version = (checkpoint.get("channel_versions") or {}).get(MESSAGES_CHANNEL)
        self._check_fold(checkpoint_id, version, fold_identity)
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
