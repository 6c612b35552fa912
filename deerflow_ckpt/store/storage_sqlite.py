"""Where a SQLite checkpoint store's bytes are (`ckpt inspect storage`), read without writing.

One `mode=ro` connection (store/sqlite.py) and one read transaction for the PRAGMAs, dbstat, the app
table and the passes, so the figures describe one snapshot even while DeerFlow writes. Nothing here
writes: no PRAGMA that sets anything, no wal_checkpoint. Sizes come from `length()`, which SQLite takes
from the record header without reading overflow pages (never `CAST(... AS BLOB)` in a size query). Only
the per-channel pass (`StorageRequest.channels`) reads the `checkpoint` values: msgspec splits each into
its channels' raw msgpack (store/lean.py's approach), so a channel's bytes are exact and nothing is decoded
with LangGraph's serializer; values of at least `large_value_bytes` are searched for base64 images and
documents by their signatures. A large file's checkpoint pass is cut into thread ranges read by two
processes, as verify-shape does; each reads in its own read transaction.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.store.base64_peek import find_base64_files
from deerflow_ckpt.store.clock import BUCKET_PREFIX, bucket_start_ns, write_time_ns
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.sqlite import connect_readonly, readonly_uri
from deerflow_ckpt.store.storage import (
    AppThreads,
    Bucket,
    ChannelBytes,
    LargeValue,
    Relation,
    SqliteFiles,
    StorageFacts,
    StorageRequest,
    StoredIn,
    ThreadBytes,
)

# Below this size one process reads everything in one transaction; above it the checkpoint pass is split.
SPLIT_BYTES = 256 * 1024 * 1024
DEFAULT_JOBS = 2
APP_TABLE = "threads_meta"
# A base64 run shorter than this inside a large value is not worth naming.
# SQLite's lock-byte page sits at byte offset 1 GiB and belongs to no b-tree.
_LOCK_BYTE_OFFSET = 1 << 30
# The wal-index header in -shm (native byte order): two copies of WalIndexHdr (48 bytes), then WalCkptInfo.
_SHM_HEADER_BYTES = 136
_WAL_INDEX_COPY = 48
_WAL_INDEX_VERSION = 3007000
_SHM_READ_ATTEMPTS = 5


class _Channels(msgspec.Struct):
    """Only a checkpoint's channel values, each left as raw msgpack; the other keys are skipped unbuilt."""

    channel_values: dict[str, msgspec.Raw] = {}


_channels_decoder = msgspec.msgpack.Decoder(_Channels)

# (stored_in, thread, ns, channel, looks_like, digest of the base64) -> [bytes, copies, first checkpoint id]
_HitKey = tuple[str, str, str, str, str, bytes]
_Hits = dict[_HitKey, list[Any]]


def _peek(hits: _Hits, data: bytes, where: StoredIn, thread_id: str, ns: str, channel: str, checkpoint_id: str) -> None:
    for looks_like, start, length in find_base64_files(data):
        digest = hashlib.blake2b(memoryview(data)[start : start + length], digest_size=16).digest()
        key = (where.value, thread_id, ns, channel, looks_like, digest)
        hit = hits.get(key)
        if hit is None:
            hits[key] = [length, 1, checkpoint_id]
        else:
            hit[1] += 1
            if checkpoint_id < hit[2]:
                hit[2] = checkpoint_id


def _timed(checkpoint_id: Any) -> bool:
    """The id is a canonical UUIDv6 (store/clock.py): its first BUCKET_PREFIX digits are a time bucket."""
    return type(checkpoint_id) is str and len(checkpoint_id) == 36 and checkpoint_id[14] == "6"


@dataclass
class _Tally:
    """What the row passes over one share of threads add up (merged across processes)."""

    checkpoints: int = 0
    checkpoint_bytes: int = 0
    metadata_bytes: int = 0
    untimed: int = 0
    # thread -> [checkpoints, checkpoint + metadata + write bytes]
    threads: dict[str, list[int]] = field(default_factory=dict)
    # checkpoint id prefix -> [checkpoints, bytes]
    buckets: dict[str, list[int]] = field(default_factory=dict)
    # channel -> [values, bytes], from the checkpoint values (only with request.channels).
    channels: dict[str, list[int]] = field(default_factory=dict)
    channel_bytes: int = 0
    # channel -> [writes, bytes]
    write_channels: dict[str, list[int]] = field(default_factory=dict)
    undecoded: int = 0
    hits: _Hits = field(default_factory=dict)

    def merge(self, other: _Tally) -> None:
        self.checkpoints += other.checkpoints
        self.checkpoint_bytes += other.checkpoint_bytes
        self.metadata_bytes += other.metadata_bytes
        self.untimed += other.untimed
        self.channel_bytes += other.channel_bytes
        self.undecoded += other.undecoded
        for mine, theirs in (
            (self.threads, other.threads),
            (self.buckets, other.buckets),
            (self.channels, other.channels),
            (self.write_channels, other.write_channels),
        ):
            for key, (count, size) in theirs.items():
                entry = mine.setdefault(key, [0, 0])
                entry[0] += count
                entry[1] += size
        for hit_key, (size, copies, first) in other.hits.items():
            hit = self.hits.setdefault(hit_key, [size, 0, first])
            hit[1] += copies
            hit[2] = min(hit[2], first)


# A share of a table's rows: a half-open rowid range, or None for all of them. The folds need no order and
# no thread kept whole, so a share is a contiguous run of the table's pages: a sequential read each.
RowRange = tuple[int, int] | None


def _where(rows: RowRange) -> tuple[str, list[Any]]:
    return ("", []) if rows is None else ("WHERE rowid >= ? AND rowid < ?", list(rows))


def _thread_key(thread_id: Any) -> str:
    return thread_id if type(thread_id) is str else str(thread_id)


def _count_checkpoints(connection: sqlite3.Connection, rows: RowRange, request: StorageRequest) -> _Tally:
    """One pass over the share's checkpoints: sizes per thread and time bucket, and with request.channels
    each value's channels and the large-value peek."""
    tally = _Tally()
    where, parameters = _where(rows)
    threads, buckets, channels, hits = tally.threads, tally.buckets, tally.channels, tally.hits
    threshold = request.large_value_bytes
    decode = _channels_decoder.decode
    if request.channels:
        query = (
            "SELECT thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, length(metadata) "
            f"FROM checkpoints {where}"
        )
    else:
        query = (
            "SELECT thread_id, checkpoint_ns, checkpoint_id, type, length(checkpoint), length(metadata) "
            f"FROM checkpoints {where}"
        )
    checkpoint_bytes = metadata_bytes = channel_bytes = seen = 0
    for thread_id, ns, checkpoint_id, kind, data, metadata_size in connection.execute(query, parameters):
        seen += 1
        if type(data) is int:
            size = data
        elif data is None:
            size = 0
        else:
            size = len(data) if type(data) is bytes else len(str(data).encode("utf-8", "surrogatepass"))
        metadata_size = metadata_size or 0
        checkpoint_bytes += size
        metadata_bytes += metadata_size
        thread = threads.get(thread_id)
        if thread is None:
            thread = threads[_thread_key(thread_id)] = [0, 0]
        thread[0] += 1
        thread[1] += size + metadata_size
        if _timed(checkpoint_id):
            bucket = buckets.get(checkpoint_id[:BUCKET_PREFIX])
            if bucket is None:
                bucket = buckets[checkpoint_id[:BUCKET_PREFIX]] = [0, 0]
            bucket[0] += 1
            bucket[1] += size + metadata_size
        else:
            tally.untimed += 1
        if type(data) is not bytes:
            continue
        if kind != "msgpack":
            tally.undecoded += 1
            continue
        try:
            values = decode(data).channel_values
        except (msgspec.DecodeError, RecursionError):
            tally.undecoded += 1
            continue
        for channel, raw in values.items():
            length = len(raw)
            channel_bytes += length
            entry = channels.get(channel)
            if entry is None:
                entry = channels[channel] = [0, 0]
            entry[0] += 1
            entry[1] += length
            if length >= threshold:
                _peek(
                    hits,
                    bytes(raw),
                    StoredIn.CHECKPOINTS,
                    _thread_key(thread_id),
                    ns or "",
                    channel,
                    str(checkpoint_id),
                )
    tally.checkpoints = seen
    tally.checkpoint_bytes, tally.metadata_bytes, tally.channel_bytes = checkpoint_bytes, metadata_bytes, channel_bytes
    return tally


def _count_writes(connection: sqlite3.Connection, rows: RowRange, tally: _Tally) -> None:
    """The share's write bytes (stored lengths), per channel, per thread and per time bucket of the
    checkpoint they belong to."""
    where, parameters = _where(rows)
    threads, buckets, channels = tally.threads, tally.buckets, tally.write_channels
    query = f"SELECT thread_id, checkpoint_id, channel, length(value) FROM writes {where}"
    for thread_id, checkpoint_id, channel, size in connection.execute(query, parameters):
        entry = channels.get(channel)
        if entry is None:
            entry = channels[_thread_key(channel)] = [0, 0]
        entry[0] += 1
        if not size:
            continue
        entry[1] += size
        thread = threads.get(thread_id)
        if thread is None:
            thread = threads[_thread_key(thread_id)] = [0, 0]
        thread[1] += size
        if _timed(checkpoint_id):
            bucket = buckets.get(checkpoint_id[:BUCKET_PREFIX])
            if bucket is None:
                bucket = buckets[checkpoint_id[:BUCKET_PREFIX]] = [0, 0]
            bucket[1] += size


def _read_share(target: SqliteTarget, request: StorageRequest, share: tuple[RowRange, RowRange]) -> _Tally:
    """A worker's share: a range of checkpoint rows and one of write rows, in a read transaction of its own."""
    connection = connect_readonly(target)
    try:
        connection.execute("BEGIN")
        tally = _count_checkpoints(connection, share[0], request)
        _count_writes(connection, share[1], tally)
        connection.execute("COMMIT")
        return tally
    except sqlite3.Error as exc:
        raise StoreError(f"reading {target.path} failed: {exc}") from exc
    finally:
        connection.close()


# --- files, pages and the WAL ---------------------------------------------------------------------------------


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def read_wal_index(shm: Path) -> tuple[int, int] | None:
    """(mxFrame, nBackfill) from the -shm wal-index header, read as a file (SQLite is not asked, so nothing
    is checkpointed); None when there is no header or it is not initialised, or its two copies still
    disagree after a few reads (a writer was changing it each time)."""
    for _ in range(_SHM_READ_ATTEMPTS):
        try:
            with shm.open("rb") as stream:
                header = stream.read(_SHM_HEADER_BYTES)
        except OSError:
            return None
        if len(header) < _SHM_HEADER_BYTES:
            return None
        if header[:_WAL_INDEX_COPY] != header[_WAL_INDEX_COPY : 2 * _WAL_INDEX_COPY]:
            continue  # torn: read again
        version, _unused, _change, is_init = struct.unpack_from("=IIIB", header, 0)
        if version != _WAL_INDEX_VERSION or is_init != 1:
            return None
        (frames,) = struct.unpack_from("=I", header, 16)
        (backfilled,) = struct.unpack_from("=I", header, 2 * _WAL_INDEX_COPY)
        return frames, backfilled
    return None


def _pragma(connection: sqlite3.Connection, name: str) -> int:
    (value,) = connection.execute(f"PRAGMA {name}").fetchone()
    return int(value)


def _free_disk(directory: Path) -> int | None:
    try:
        stats = os.statvfs(directory)
    except (OSError, AttributeError):  # no statvfs on Windows
        return None
    return stats.f_bavail * stats.f_frsize


# --- relations ------------------------------------------------------------------------------------------------


def _dbstat_sizes(connection: sqlite3.Connection, only: list[str] | None = None) -> dict[str, int] | None:
    """Bytes of pages per b-tree from dbstat, or None without dbstat. dbstat reads every page of the
    b-trees it covers, overflow pages included: `only` names the b-trees it may read."""
    sql = "SELECT name, pgsize FROM dbstat WHERE aggregate = 1"
    if only is not None:
        sql += f" AND name IN ({', '.join(_quote_literal(name) for name in only) or 'NULL'})"
    try:
        rows = connection.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return None
    return {str(name): int(size) for name, size in rows}


def _schema(connection: sqlite3.Connection) -> tuple[list[str], dict[str, str]]:
    """The tables, and each index's table."""
    tables: list[str] = []
    indexes: dict[str, str] = {}
    for kind, name, table in connection.execute("SELECT type, name, tbl_name FROM sqlite_master ORDER BY name"):
        if kind == "table":
            tables.append(name)
        elif kind == "index":
            indexes[name] = table
    return tables, indexes


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rows(connection: sqlite3.Connection, table: str) -> int:
    (rows,) = connection.execute(f"SELECT count(*) FROM {_quoted(table)}").fetchone()
    return int(rows)


# The tables whose b-trees hold the stored values (blobs in overflow pages).
_VALUE_TABLES = ("checkpoints", "writes")


def _relations(
    connection: sqlite3.Connection, files: SqliteFiles, notes: list[str], read_values: bool = True
) -> list[Relation]:
    """Each table with its indexes. Without `read_values` (--no-channels) dbstat reads only the b-trees
    that hold no stored values, and the value tables share out the rest of the used pages."""
    tables, indexes = _schema(connection)
    only = None
    if not read_values:
        only = [name for name in [*tables, *indexes, "sqlite_schema", "sqlite_master"] if name not in _VALUE_TABLES]
    sizes = _dbstat_sizes(connection, only) if files.dbstat else None
    if sizes is None:
        return _estimated_relations(connection, tables, files, notes)
    if only is not None:
        return _measured_and_shared(connection, tables, indexes, sizes, files, notes)
    index_bytes: dict[str, int] = {}
    for index, table in indexes.items():
        index_bytes[table] = index_bytes.get(table, 0) + sizes.get(index, 0)
    relations = [
        Relation(
            name,
            sizes.get(name, 0) + index_bytes.get(name, 0),
            _rows(connection, name),
            index_bytes=index_bytes.get(name, 0),
        )
        for name in tables
    ]
    schema_name = "sqlite_schema" if "sqlite_schema" in sizes else "sqlite_master"
    (entries,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    relations.append(Relation("sqlite_schema", sizes.get(schema_name, 0), int(entries)))
    return relations


def _measured_and_shared(
    connection: sqlite3.Connection,
    tables: list[str],
    indexes: dict[str, str],
    sizes: dict[str, int],
    files: SqliteFiles,
    notes: list[str],
) -> list[Relation]:
    """dbstat for the small b-trees; the pages left go to the value tables by their summed column lengths."""
    shared = [table for table in tables if table in _VALUE_TABLES]
    rest = [table for table in tables if table not in _VALUE_TABLES]
    used = (files.page_count - files.freelist_count - _lock_byte_pages(files)) * files.page_size
    left = used - sum(sizes.values())
    estimates = {relation.name: relation for relation in _estimated_relations(connection, shared, files, [])}
    whole = sum(relation.bytes for relation in estimates.values()) or 1
    index_bytes: dict[str, int] = {}
    for index, table in indexes.items():
        index_bytes[table] = index_bytes.get(table, 0) + sizes.get(index, 0)
    relations = [
        Relation(name, sizes.get(name, 0) + index_bytes.get(name, 0), _rows(connection, name),
                 index_bytes=index_bytes.get(name, 0))
        for name in rest
    ]  # fmt: skip
    for name in shared:
        estimate = estimates[name]
        table_bytes = left * estimate.bytes // whole
        relations.append(
            Relation(name, table_bytes + index_bytes.get(name, 0), estimate.rows, exact=False,
                     index_bytes=index_bytes.get(name, 0))
        )  # fmt: skip
    schema_name = "sqlite_schema" if "sqlite_schema" in sizes else "sqlite_master"
    (entries,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    relations.append(Relation("sqlite_schema", sizes.get(schema_name, 0), int(entries)))
    notes.append(
        "--no-channels: dbstat read only the indexes and the small tables; "
        + " and ".join(shared)
        + " share the rest of the used pages by their stored lengths (not measured)"
    )
    return sorted(relations, key=lambda relation: tables.index(relation.name) if relation.name in tables else 99)


def _estimated_relations(
    connection: sqlite3.Connection, tables: list[str], files: SqliteFiles, notes: list[str]
) -> list[Relation]:
    """Without dbstat: the pages b-trees use, shared out by each table's summed column lengths (reads leaf
    pages only). Indexes and page overhead are in the shares: within a few percent of dbstat on large stores."""
    payload: dict[str, int] = {}
    rows: dict[str, int] = {}
    for table in tables:
        columns = [row[1] for row in connection.execute(f"SELECT * FROM pragma_table_info({_quote_literal(table)})")]
        lengths = " + ".join(f"coalesce(length({_quoted(c)}), 0)" for c in columns) or "0"
        count, total = connection.execute(f"SELECT count(*), sum({lengths}) FROM {_quoted(table)}").fetchone()
        rows[table], payload[table] = int(count), int(total or 0)
    used = (files.page_count - files.freelist_count - _lock_byte_pages(files)) * files.page_size
    whole = sum(payload.values()) or 1
    notes.append(
        "dbstat is not available in this SQLite: table sizes are the pages b-trees use, shared out by each "
        "table's summed column lengths (indexes and page overhead included in the shares), not measured"
    )
    return [Relation(table, used * payload[table] // whole, rows[table], exact=False) for table in tables]


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _lock_byte_pages(files: SqliteFiles) -> int:
    """1 when the file reaches the lock-byte page (page_count counts it; no b-tree holds it)."""
    return 1 if files.page_count * files.page_size > _LOCK_BYTE_OFFSET else 0


# --- threads, growth, the app table ---------------------------------------------------------------------------


def _span(connection: sqlite3.Connection, thread_id: str) -> tuple[int | None, int | None]:
    """The write times of a thread's first and last checkpoint ids (the primary key's index; no blob)."""
    first, last = connection.execute(
        "SELECT min(checkpoint_id), max(checkpoint_id) FROM checkpoints WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    return (
        write_time_ns(first) if type(first) is str else None,
        write_time_ns(last) if type(last) is str else None,
    )


def _thread_bytes(connection: sqlite3.Connection, thread_id: str, entry: list[int]) -> ThreadBytes:
    first, last = _span(connection, thread_id)
    return ThreadBytes(thread_id, entry[0], entry[1], first, last)


_TIMED_SQL = "length(checkpoint_id) = 36 AND substr(checkpoint_id, 15, 1) = '6'"


def _thread_growth(connection: sqlite3.Connection, thread_id: str) -> list[Bucket]:
    """One thread's buckets, in SQL over its rows only (found through the primary key's index)."""
    buckets: dict[str, list[int]] = {}
    checkpoints = (
        "SELECT substr(checkpoint_id, 1, 8), count(*), "
        "sum(coalesce(length(checkpoint), 0) + coalesce(length(metadata), 0)) "
        f"FROM checkpoints WHERE thread_id = ? AND {_TIMED_SQL} GROUP BY 1"
    )
    for prefix, count, size in connection.execute(checkpoints, (thread_id,)):
        buckets[prefix] = [count, size or 0]
    writes = (
        "SELECT substr(checkpoint_id, 1, 8), sum(coalesce(length(value), 0)) "
        f"FROM writes WHERE thread_id = ? AND {_TIMED_SQL} GROUP BY 1"
    )
    for prefix, size in connection.execute(writes, (thread_id,)):
        buckets.setdefault(prefix, [0, 0])[1] += size or 0
    return _buckets(buckets)


def _buckets(counts: dict[str, list[int]]) -> list[Bucket]:
    buckets = []
    for prefix, (checkpoints, size) in counts.items():
        start = bucket_start_ns(prefix)
        if start is not None:
            buckets.append(Bucket(start, checkpoints, size))
    return sorted(buckets, key=lambda bucket: bucket.start_ns)


def _app_threads(connection: sqlite3.Connection, threads: dict[str, list[int]]) -> AppThreads | None:
    """DeerFlow's threads_meta in the same file: the checkpoint threads it does not know, and its rows that
    have no checkpoints. None when the table (or its thread_id column) is not there."""
    found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (APP_TABLE,)).fetchone()
    if found is None:
        return None
    columns = {row[0] for row in connection.execute(f"SELECT name FROM pragma_table_info({_quote_literal(APP_TABLE)})")}
    if "thread_id" not in columns:
        return None
    app_ids = {_thread_key(row[0]) for row in connection.execute(f"SELECT thread_id FROM {APP_TABLE}")}
    orphan_ids = [thread_id for thread_id in threads if thread_id not in app_ids]
    orphans = sorted(
        (_thread_bytes(connection, thread_id, threads[thread_id]) for thread_id in orphan_ids),
        key=lambda thread: (-thread.bytes, thread.thread_id),
    )
    return AppThreads(
        table=APP_TABLE,
        known=len(threads) - len(orphans),
        orphans=tuple(orphans),
        orphan_bytes=sum(thread.bytes for thread in orphans),
        app_only=len(app_ids - threads.keys()),
    )


def _peek_writes(connection: sqlite3.Connection, request: StorageRequest, hits: _Hits) -> None:
    """The large writes' bytes, searched for base64 files (only rows of at least the threshold are read)."""
    query = "SELECT thread_id, checkpoint_ns, checkpoint_id, channel, value FROM writes WHERE length(value) >= ?"
    for thread_id, ns, checkpoint_id, channel, value in connection.execute(query, (request.large_value_bytes,)):
        data = value if type(value) is bytes else str(value).encode("utf-8", "surrogatepass")
        _peek(hits, data, StoredIn.WRITES, _thread_key(thread_id), ns or "", _thread_key(channel), str(checkpoint_id))


def _large_values(hits: _Hits) -> list[LargeValue]:
    values = [
        LargeValue(thread_id, ns, StoredIn(where), channel, looks_like, size, copies, first)
        for (where, thread_id, ns, channel, looks_like, _digest), (size, copies, first) in hits.items()
    ]
    return sorted(
        values, key=lambda value: (-value.bytes * value.copies, value.thread_id, value.channel, value.stored_in)
    )


# --- the read ---------------------------------------------------------------------------------------------------


def _row_ranges(connection: sqlite3.Connection, table: str, parts: int) -> list[RowRange] | None:
    """`parts` rowid ranges of about equal size (rowids run dense in a table that is only appended to and
    deleted from); None for a WITHOUT ROWID table."""
    try:
        low, high = connection.execute(f"SELECT min(rowid), max(rowid) FROM {table}").fetchone()
    except sqlite3.OperationalError:
        return None
    if low is None:
        return [None] + [(0, 0)] * (parts - 1)
    bounds = [low + (high + 1 - low) * part // parts for part in range(parts)] + [high + 1]
    return [(bounds[part], bounds[part + 1]) for part in range(parts)]


def _shares(target: SqliteTarget, jobs: int) -> list[tuple[RowRange, RowRange]]:
    """Each process's checkpoint and write rows; one share (everything) when jobs is 1 or a table has no rowid."""
    if jobs <= 1:
        return [(None, None)]
    connection = connect_readonly(target)
    try:
        checkpoints = _row_ranges(connection, "checkpoints", jobs)
        writes = _row_ranges(connection, "writes", jobs)
    except sqlite3.Error as exc:
        raise StoreError(f"reading {target.path} failed: {exc}") from exc
    finally:
        connection.close()
    if checkpoints is None or writes is None:
        return [(None, None)]
    return list(zip(checkpoints, writes, strict=True))


def _files(path: Path, connection: sqlite3.Connection, sizes: tuple[int, int | None, int | None]) -> SqliteFiles:
    shm = path.with_name(path.name + "-shm")
    wal_index = read_wal_index(shm) if sizes[2] else None
    return SqliteFiles(
        database_bytes=sizes[0],
        wal_bytes=sizes[1],
        shm_bytes=sizes[2],
        page_size=_pragma(connection, "page_size"),
        page_count=_pragma(connection, "page_count"),
        freelist_count=_pragma(connection, "freelist_count"),
        wal_frames=None if wal_index is None else wal_index[0],
        wal_backfilled=None if wal_index is None else wal_index[1],
        free_disk_bytes=_free_disk(path.parent),
        dbstat=_dbstat_sizes_available(connection),
    )


def _dbstat_sizes_available(connection: sqlite3.Connection) -> bool:
    try:
        connection.execute("SELECT 1 FROM dbstat LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        return False
    return True


def read_sqlite_storage(target: SqliteTarget, request: StorageRequest, jobs: int | None = None) -> StorageFacts:
    """Where the file's bytes are, in one read transaction (plus, for a large file, `jobs` worker processes
    reading the checkpoint pass by thread ranges). `jobs` None: DEFAULT_JOBS above SPLIT_BYTES, else 1.
    `legacy_files` is left for the caller."""
    path, _uri = readonly_uri(target)
    # Sizes before SQLite opens the file: opening a WAL database read-only creates empty -wal/-shm files.
    database_bytes = _size(path) or 0
    sizes = (database_bytes, _size(path.with_name(path.name + "-wal")), _size(path.with_name(path.name + "-shm")))
    if jobs is None:
        jobs = DEFAULT_JOBS if database_bytes >= SPLIT_BYTES else 1
    shares = _shares(target, jobs)
    facts = StorageFacts(database=target.describe(), backend="sqlite")
    if target.immutable:
        facts.notes.append("opened immutable: whatever the -wal file holds was not read")
    pool = None
    futures = []
    if len(shares) > 1:
        # Started before this process opens its connection: no worker inherits an open SQLite handle.
        pool = _pool(len(shares))
        futures = [pool.submit(_read_share, target, request, share) for share in shares]
        facts.notes.append(
            f"checkpoints and writes read by {len(shares)} processes, each in a read transaction of its own"
        )
    try:
        connection = connect_readonly(target)
    except BaseException:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        raise
    try:
        connection.execute("BEGIN")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the read snapshot starts here
        files = _files(path, connection, sizes)
        facts.sqlite = files
        if files.wal_bytes and files.wal_frames is None and not target.immutable:
            facts.notes.append("the -shm wal-index header could not be read consistently: WAL frames unknown")
        facts.relations = _relations(connection, files, facts.notes, request.channels)
        if futures:
            tally = _Tally()
            for future in futures:
                tally.merge(future.result())
        else:
            tally = _count_checkpoints(connection, None, request)
            _count_writes(connection, None, tally)
        facts.metadata_bytes = tally.metadata_bytes
        facts.untimed_checkpoints = tally.untimed
        if request.channels:
            _peek_writes(connection, request, tally.hits)
            facts.channels = _channel_list(StoredIn.CHECKPOINTS, tally.channels)
            facts.channels += _channel_list(StoredIn.WRITES, tally.write_channels)
            facts.checkpoint_rest_bytes = tally.checkpoint_bytes - tally.channel_bytes
            facts.large_values = _large_values(tally.hits)
            if tally.undecoded:
                facts.notes.append(
                    f"{tally.undecoded} checkpoint(s) are not msgpack checkpoint mappings: "
                    "their bytes count as the rest"
                )
        facts.growth = _buckets(tally.buckets)
        heaviest = sorted(tally.threads.items(), key=lambda item: (-item[1][1], item[0]))[: max(request.top, 0)]
        facts.heaviest = [_thread_bytes(connection, thread_id, entry) for thread_id, entry in heaviest]
        facts.heaviest_growth = {thread_id: _thread_growth(connection, thread_id) for thread_id, _ in heaviest}
        facts.app = _app_threads(connection, tally.threads)
        connection.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"reading {path} failed: {exc}") from exc
    finally:
        connection.close()
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return facts


def _channel_list(where: StoredIn, channels: dict[str, list[int]]) -> list[ChannelBytes]:
    """Heaviest first; on SQLite stored and raw bytes are the same (no compression)."""
    return [
        ChannelBytes(where, channel, values, size, size)
        for channel, (values, size) in sorted(channels.items(), key=lambda item: (-item[1][1], item[0]))
    ]


def _pool(workers: int) -> Any:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # fork where the platform forks (Linux): no re-import of the package per worker.
    method = "fork" if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method))
