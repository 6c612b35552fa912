"""Read a LangGraph Postgres checkpoint database in read-only transactions, one thread at a time.

The messages shape is classified from fields SQL extracts (inline marker, counters) and the first bytes
of the blob at the checkpoint's messages version; every blob, snapshots included, is judged inertly.
Never through PostgresSaver: setup() migrates, and its reads report inherited snapshots as if every
checkpoint stored one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.native import metadata_summary
from deerflow_ckpt.redact import redact
from deerflow_ckpt.rules import RuleCode
from deerflow_ckpt.store.metadata import metadata_in_python
from deerflow_ckpt.store.peek import InertDecoder, head_is_empty_snapshot, head_is_list, head_is_snapshot
from deerflow_ckpt.store.prefetch import Prefetcher
from deerflow_ckpt.store.records import (
    CheckpointRecord,
    Lineage,
    Problem,
    Shape,
)
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection
from deerflow_ckpt.store.source import PostgresTarget, PostgresTimeouts
from deerflow_ckpt.store.writes import MESSAGES_CHANNEL, WriteFolder, check_stored_bytes

# Stored sizes as DeerFlow's benchmark counts them (the metadata's is the length of its text, which the scan
# reads anyway); rendering every checkpoint as text costs the server more than the rest of the query, so only
# readers that report storage ask for it.
_SIZES_SQL = "octet_length(c.checkpoint::text)"
_NO_SIZES_SQL = "0"
# Rows fetched per round trip by the server-side cursors.
FETCH_ROWS = 2000
# TCP keepalives: a peer that stops answering is found dead within about a minute.
_KEEPALIVES = "keepalives=1 keepalives_idle=30 keepalives_interval=10 keepalives_count=3"
# The first bytes of a messages blob, enough to tell a snapshot's ext header or a list's header.
HEAD_BYTES = 8
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")

# Byte order (collation "C") is the order Python compares strings in, so the streams merge; where the
# database's own collation is already byte order the clause is left out and the primary keys serve.
_CHECKPOINTS_SQL = """
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
       convert_to(c.metadata::text, 'UTF8'),
       jsonb_typeof(c.checkpoint) = 'object'
         AND coalesce(jsonb_typeof(c.checkpoint->'channel_values'), 'object') = 'object',
       c.checkpoint->'channel_values'->'messages',
       c.checkpoint->'channel_versions'->>'messages',
       {sizes}
FROM {checkpoints} c
{where}
ORDER BY c.thread_id{collate}, c.checkpoint_ns{collate}, c.checkpoint_id{collate}
"""
_WRITES_SQL = """
SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, channel, type, blob
FROM {writes} {where}
ORDER BY thread_id{collate}, checkpoint_ns{collate}, checkpoint_id{collate}, task_id, idx
"""
# Every blob with its size and bytes: snapshots too, since LangGraph's loader constructs every message in
# one, so their payload is judged like any value. Checkpoints find their messages blob by version in
# Python: a join in SQL compares each checkpoint's version with every messages blob of its thread.
_BLOBS_SQL = """
SELECT thread_id, checkpoint_ns, channel, version, type, octet_length(blob), blob
FROM {blobs} {where}
ORDER BY thread_id{collate}, checkpoint_ns{collate}, channel{collate}, version{collate}
"""
# The messages blob a checkpoint's version names: (type, length, first bytes, found).
_NO_BLOB: tuple[Any, ...] = (None, None, None, False)


def _json_value(data: str | bytes) -> Any:
    """A jsonb value from the server (strict JSON: msgspec reads it several times faster than json)."""
    try:
        return msgspec.json.decode(data)
    except RecursionError:  # nested deeper than a decoder can follow: not a snapshot marker either
        return None


def connect(target: PostgresTarget, writable: bool = False) -> Any:
    """A connection whose every wait on the server ends after --network-timeout (store/deadline.py); its
    transactions are read-only, except `writable` ones for `ckpt convert`'s own copy."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.types.json import set_json_loads

    from deerflow_ckpt.store.deadline import DeadlineConnection, NetworkTimeout

    timeouts = target.timeouts
    # jit off: compiling the scan's expressions costs more than it saves on one pass over the rows. The
    # server ends our session if it sits idle in its transaction past the network timeout (the client is
    # gone), and gives up on a lock after lock_timeout. statement_timeout stays the role's unless asked.
    settings = [
        f"default_transaction_read_only={'off' if writable else 'on'}",
        "jit=off",
        f"lock_timeout={int(timeouts.lock * 1000)}",
        f"idle_in_transaction_session_timeout={int((timeouts.network + 30) * 1000)}",
    ]
    if timeouts.statement is not None:
        settings.append(f"statement_timeout={int(timeouts.statement * 1000)}")
    options = " ".join(f"-c {setting}" for setting in settings)
    try:
        # The DSN's own options (a search_path, say) stay; ours follow them.
        existing = conninfo_to_dict(target.conninfo).get("options")
        options = f"{existing} {options}" if existing else options
        conninfo = make_conninfo(target.conninfo, options=options, connect_timeout=_connect_timeout(timeouts))
        connection = DeadlineConnection.connect(f"{conninfo} {_KEEPALIVES}", autocommit=False)
    except psycopg.errors.ConnectionTimeout:
        raise NetworkTimeout(
            f"cannot connect to {target.describe()}: no answer from the server within {_connect_timeout(timeouts)} s "
            "(the connection attempt's limit, or --network-timeout if shorter)"
        ) from None
    except Exception as exc:  # psycopg raises many kinds; the message may echo the DSN
        raise StoreError(f"cannot connect to {target.describe()}: {redact(str(exc)).strip()}") from None
    connection.network_timeout = timeouts.network
    connection.description = target.describe()
    # Belt and braces over the session default: every transaction begins READ ONLY.
    connection.read_only = not writable
    set_json_loads(_json_value, connection)
    return connection


def _connect_timeout(timeouts: PostgresTimeouts) -> int:
    """libpq's connect_timeout: the connection attempt's limit, or the network timeout if shorter (libpq
    takes whole seconds, at least 2)."""
    return max(2, min(timeouts.connect, math.ceil(timeouts.network)))


_BYTE_ORDER_COLLATIONS = frozenset({"C", "POSIX", "C.UTF-8", "C.utf8", "ucs_basic"})


def byte_ordered(connection: Any) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT datcollate FROM pg_database WHERE datname = current_database()")
        row = cursor.fetchone()
    return row is not None and row[0] in _BYTE_ORDER_COLLATIONS


def table_names(connection: Any, schema: str) -> dict[str, Any]:
    from psycopg import sql

    found: dict[str, Any] = {}
    with connection.cursor() as cursor:
        for table in TABLES:
            qualified = f"{schema}.{table}" if schema else table
            cursor.execute("SELECT to_regclass(%s)", (qualified,))
            row = cursor.fetchone()
            if row is None or row[0] is None:
                where = f"schema {schema}" if schema else "the search path"
                raise StoreError(f"no {table} table in {where}: not a LangGraph Postgres checkpoint database")
            found[table] = sql.Identifier(schema, table) if schema else sql.Identifier(table)
    return found


def thread_ids_nullable(connection: Any, schema: str) -> bool:
    """False when all three tables are plain tables without inheritance children that declare thread_id NOT NULL
    (the savers' primary keys do): a share's range then needs no `OR thread_id IS NULL`, with which the first
    share's index scan cannot stop at its range. A child table, a foreign or partitioned one may hold a NULL
    its parent's flag does not show: those keep the OR."""
    names = [f"{schema}.{table}" if schema else table for table in TABLES]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE a.attname = 'thread_id' AND a.attnotnull AND NOT a.attisdropped AND c.relkind = 'r' "
            "AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid) "
            "AND c.oid IN (SELECT to_regclass(name) FROM unnest(%s::text[]) AS name)",
            (names,),
        )
        row = cursor.fetchone()
    return row is None or int(row[0]) != len(TABLES)


def _classify(record: CheckpointRecord, marker: Any, blob: tuple[Any, ...]) -> None:
    blob_type, blob_length, head, blob_exists = blob
    has_marker = marker is True
    if has_marker:
        record.messages = Shape.DANGLING_MARKER
        if blob_exists and head_is_snapshot(head):
            record.messages = Shape.SNAPSHOT
            record.seed_empty = head_is_empty_snapshot(head)
            record.snapshot_bytes = blob_length or 0
        elif blob_exists and blob_length:
            record.messages = Shape.MARKER_WITHOUT_SNAPSHOT
        return
    if marker is not None:
        record.messages = Shape.OTHER
        return
    if not blob_exists or not blob_length or blob_type == "empty":
        record.messages = Shape.ABSENT
    elif blob_type == "msgpack" and head_is_snapshot(head):
        record.messages = Shape.SNAPSHOT_AT_VERSION
    elif blob_type == "msgpack" and head_is_list(head):
        record.messages = Shape.LIST
        record.seed_empty = head[:1] == b"\x90"
    else:
        record.messages = Shape.OTHER


def _record_from_row(row: tuple[Any, ...]) -> tuple[CheckpointRecord, Any]:
    """The record of one checkpoint row and its inline messages value (the snapshot marker, if any)."""
    thread_id, ns, checkpoint_id, parent_id, metadata, checkpoint_is_object, marker, version, checkpoint_len = row
    # The metadata's JSON text, read as SQLite's is: the compiled reader, or Python's json where it abstains.
    facts = metadata_summary(metadata) if metadata_summary is not None and metadata is not None else None
    problems: list[Problem] = []
    if facts is None:
        facts = metadata_in_python(metadata, True, problems)
    step, source, mode, updates, supersteps = facts
    record = CheckpointRecord(
        thread_id, ns or "", checkpoint_id, parent_id, step, source, mode, updates, supersteps, Shape.ABSENT, version
    )
    record.checkpoint_bytes = checkpoint_len or 0
    record.metadata_bytes = len(metadata) if metadata is not None else 0
    if problems:
        record.problems = problems
        record.metadata_ok = False
    if not checkpoint_is_object:
        record.messages = Shape.UNDECODABLE
        record.problems.append(Problem(RuleCode.CK104, "checkpoint is not a LangGraph checkpoint object"))
    return record, marker


class PostgresCheckpointReader:
    """Streams lineages from a Postgres database through server-side cursors in one read-only transaction."""

    def __init__(self, target: PostgresTarget, sizes: bool = True) -> None:
        self.target = target
        self.sizes = sizes
        self.decoder = InertDecoder(deep=False)

    def lineages(self, selection: ThreadSelection = ALL_THREADS) -> Iterator[Lineage]:
        import psycopg

        connection = connect(self.target)
        try:
            tables = table_names(connection, self.target.schema)
            nullable = thread_ids_nullable(connection, self.target.schema)
            yield from self._stream(connection, tables, selection, byte_ordered(connection), nullable)
            connection.rollback()
        except psycopg.Error as exc:
            raise StoreError(f"reading {self.target.describe()} failed: {redact(str(exc)).strip()}") from None
        finally:
            connection.close()

    def _cursor(self, connection: Any, name: str, query: Any, parameters: tuple[Any, ...]) -> Any:
        # Binary results: bytea arrives as it is stored instead of as hex text to decode.
        cursor = connection.cursor(name=name, binary=True)
        cursor.execute(query, parameters)
        return cursor

    @contextmanager
    def _session(self) -> Iterator[tuple[Any, dict[str, Any], Any]]:
        """A read-only connection with the checkpoint tables and the byte-order collate clause; rolled back."""
        import psycopg
        from psycopg import sql

        connection = connect(self.target)
        try:
            tables = table_names(connection, self.target.schema)
            collate = sql.SQL("") if byte_ordered(connection) else sql.SQL(' COLLATE "C"')
            yield connection, tables, collate
            connection.rollback()
        except psycopg.Error as exc:
            raise StoreError(f"reading {self.target.describe()} failed: {redact(str(exc)).strip()}") from None
        finally:
            connection.close()

    def applied_migrations(self) -> int | None:
        """Rows of checkpoint_migrations: the saver migrations that set the tables up (None without the table)."""
        from psycopg import sql

        with self._session() as (connection, _, _), connection.cursor() as cursor:
            qualified = f"{self.target.schema}.checkpoint_migrations" if self.target.schema else "checkpoint_migrations"
            cursor.execute("SELECT to_regclass(%s)", (qualified,))
            row = cursor.fetchone()
            if row is None or row[0] is None:
                return None
            table = sql.Identifier(*qualified.split(".")) if self.target.schema else sql.Identifier(qualified)
            cursor.execute(sql.SQL("SELECT count(*) FROM {}").format(table))
            counted = cursor.fetchone()
        return None if counted is None else int(counted[0])

    def threads_since(self, boundary: str) -> list[str]:
        """Threads with a checkpoint whose id sorts at or after `boundary` (written then or later), in order."""
        from psycopg import sql

        with self._session() as (connection, tables, collate), connection.cursor() as cursor:
            query = "SELECT DISTINCT thread_id{c} FROM {t} WHERE checkpoint_id{c} >= %s ORDER BY 1"
            cursor.execute(sql.SQL(query).format(c=collate, t=tables["checkpoints"]), (boundary,))
            return [row[0] for row in cursor.fetchall()]

    def split_points(self, parts_for: Callable[[int], int]) -> list[str]:
        """Thread ids that cut the checkpoints into shares of about equal size, as many as `parts_for` says
        for the number of checkpoints stored."""
        from psycopg import sql

        with self._session() as (connection, tables, collate), connection.cursor() as cursor:
            cursor.execute(sql.SQL("SELECT count(*) FROM {}").format(tables["checkpoints"]))
            row = cursor.fetchone()
            total = int(row[0]) if row else 0
            parts = parts_for(total)
            points: list[str] = []
            query = sql.SQL("SELECT thread_id FROM {} ORDER BY thread_id{} LIMIT 1 OFFSET %s")
            for part in range(1, parts):
                cursor.execute(query.format(tables["checkpoints"], collate), (total * part // parts,))
                found = cursor.fetchone()
                if found is not None and (not points or found[0] > points[-1]):
                    points.append(found[0])
            return points

    def stream_queries(
        self, tables: dict[str, Any], selection: ThreadSelection, in_byte_order: bool, nullable: bool
    ) -> tuple[tuple[Any, Any, Any], tuple[Any, ...]]:
        """The checkpoints, writes and blobs queries a scan streams (in one order), and their parameters;
        `nullable`: thread_ids_nullable's answer for the tables."""
        from psycopg import sql

        suffix = "" if in_byte_order else ' COLLATE "C"'
        qualified, values = selection.conditions(f"c.thread_id{suffix}", "%s", sqlite=False, nullable=nullable)
        plain, _ = selection.conditions(f"thread_id{suffix}", "%s", sqlite=False, nullable=nullable)
        filter_sql = sql.SQL("WHERE " + " AND ".join(qualified) if qualified else "")
        plain_filter = sql.SQL("WHERE " + " AND ".join(plain) if plain else "")
        collate = sql.SQL("") if in_byte_order else sql.SQL(' COLLATE "C"')
        checkpoints = sql.SQL(_CHECKPOINTS_SQL).format(
            collate=collate,
            sizes=sql.SQL(_SIZES_SQL if self.sizes else _NO_SIZES_SQL),
            checkpoints=tables["checkpoints"],
            where=filter_sql,
        )
        writes = sql.SQL(_WRITES_SQL).format(writes=tables["checkpoint_writes"], where=plain_filter, collate=collate)
        blobs = sql.SQL(_BLOBS_SQL).format(blobs=tables["checkpoint_blobs"], where=plain_filter, collate=collate)
        return (checkpoints, writes, blobs), tuple(values)

    def _stream(
        self, connection: Any, tables: dict[str, Any], selection: ThreadSelection, in_byte_order: bool, nullable: bool
    ) -> Iterator[Lineage]:
        queries, parameters = self.stream_queries(tables, selection, in_byte_order, nullable)
        checkpoints, writes, blobs = (
            self._cursor(connection, name, query, parameters)
            for name, query in zip(("ckpt_checkpoints", "ckpt_writes", "ckpt_blobs"), queries, strict=True)
        )
        # Blob rows carry their size (column 5): snapshot bytes now cross the wire, so their batches are sized.
        prefetcher = Prefetcher([checkpoints, writes, blobs], FETCH_ROWS, size_columns={2: 5})
        try:
            yield from self._merge(prefetcher.rows(0), prefetcher.rows(1), prefetcher.rows(2))
        finally:
            prefetcher.close()

    def _merge(self, checkpoints: Iterator[Any], writes: Iterator[Any], blobs: Iterator[Any]) -> Iterator[Lineage]:
        """Lineages from the three streams, which share one order."""
        pending_write = next(writes, None)
        pending_blob = next(blobs, None)
        key: tuple[str, str] | None = None
        records: list[CheckpointRecord] = []
        markers: list[Any] = []
        for row in checkpoints:
            row_key = (row[0], row[1] or "")
            if row_key != key:
                if key is not None:
                    pending_write = _attach_writes(records, key, writes, pending_write, self.decoder)
                    pending_blob = _attach_blobs(records, markers, key, blobs, pending_blob, self.decoder)
                    yield Lineage(key[0], key[1], records)
                key, records, markers = row_key, [], []
            record, marker = _record_from_row(row)
            records.append(record)
            markers.append(marker)
        if key is not None:
            _attach_writes(records, key, writes, pending_write, self.decoder)
            _attach_blobs(records, markers, key, blobs, pending_blob, self.decoder)
            yield Lineage(key[0], key[1], records)


def _attach_writes(
    records: list[CheckpointRecord], key: tuple[str, str], writes: Iterator[Any], pending: Any, decoder: InertDecoder
) -> Any:
    folder = WriteFolder(records, decoder)
    while pending is not None:
        thread_id, ns, checkpoint_id, task_id, channel, kind, data = pending
        if thread_id != key[0] or (ns or "") != key[1]:
            if (thread_id, ns or "") > key:
                break
        else:
            folder.add(checkpoint_id, str(task_id), str(channel), kind, bytes(data) if data is not None else None)
        pending = next(writes, None)
    return pending


def _attach_blobs(
    records: list[CheckpointRecord],
    markers: list[Any],
    key: tuple[str, str],
    blobs: Iterator[Any],
    pending: Any,
    decoder: InertDecoder,
) -> Any:
    """Classify each checkpoint by the blob at its messages version, and check every blob inertly.

    A checked blob's problems go to the checkpoint that created its version, and so does its size, save a
    snapshot's, which is counted as the snapshot bytes of the checkpoints that name it.
    """
    creators: dict[str, CheckpointRecord] = {}
    for record in records:
        if record.messages_version is not None:
            creators.setdefault(record.messages_version, record)
    first = records[0] if records else None
    messages_blobs: dict[str, tuple[Any, ...]] = {}
    while pending is not None:
        blob_key = (pending[0], pending[1] or "")
        if blob_key > key:
            break
        if blob_key == key and first is not None:
            _, _, channel, version, kind, length, data = pending
            snapshot = False
            if channel == MESSAGES_CHANNEL:
                head = bytes(data[:HEAD_BYTES]) if data is not None else b""
                snapshot = head_is_snapshot(head)
                messages_blobs[version] = (kind, length, head, True)
            owner = creators.get(version, first) if channel == MESSAGES_CHANNEL else first
            if not snapshot:
                owner.other_blob_bytes += len(data) if data is not None else 0
            where = f"blob of channel {channel!r} at version {version}"
            check_stored_bytes(kind, data, where, owner.problems, decoder)
        pending = next(blobs, None)
    for record, marker in zip(records, markers, strict=True):
        if record.messages is not Shape.UNDECODABLE:
            version = record.messages_version
            _classify(record, marker, _NO_BLOB if version is None else messages_blobs.get(version, _NO_BLOB))
    return pending
