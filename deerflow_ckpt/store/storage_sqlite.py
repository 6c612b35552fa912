"""Where a SQLite checkpoint store's bytes are (`ckpt inspect storage`), read without writing.

One `mode=ro` connection (store/sqlite.py) and one read transaction for the PRAGMAs, dbstat, the app
table and the passes, so the figures describe one snapshot even while DeerFlow writes. dbstat walks every
b-tree but the checkpoints table, which is the used pages less the others (exact without auto_vacuum). Nothing here
writes: no PRAGMA that sets anything, no wal_checkpoint. Sizes come from `length()`, which SQLite takes
from the record header without reading overflow pages (never `CAST(... AS BLOB)` in a size query). Only
the per-channel pass (`StorageRequest.channels`) reads the `checkpoint` values: msgspec splits each into
its channels' raw msgpack (store/lean.py's approach), so a channel's bytes are exact and nothing is decoded
with LangGraph's serializer; the `messages` values (and writes) that name ToolMessage have their items'
types read (store/messages.py, tool_outputs), and values of at least `large_value_bytes` are searched for
base64 images and documents by their signatures. A large file's passes are cut into rowid ranges read by
two processes; each reads in its own read transaction.

Keys are counted as SQLite stores them (a BLOB thread id stays bytes, so it never merges with a text one)
and made text only for the report (records.key_text). Text that is not UTF-8 is read losslessly
(surrogateescape): a pass that meets some starts again with that decoding, so the common case pays nothing.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import msgspec

from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.native import holds
from deerflow_ckpt.store.base64_peek import content_digest, find_base64_files
from deerflow_ckpt.store.clock import (
    PREFIX_DIGITS,
    TIMED_ID,
    hour_start_ns,
    prefix_hour_ns,
    write_time_ns,
)
from deerflow_ckpt.store.messages import TOOL_MESSAGE_MARKER, tool_outputs
from deerflow_ckpt.store.records import key_text
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.sqlite import connect_readonly, readonly_uri
from deerflow_ckpt.store.sqlite_text import lossless_text, text_parameter
from deerflow_ckpt.store.storage import (
    TOOL_OUTPUTS,
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
    WriteTimes,
)

# Below this size one process reads everything in one transaction; above it the passes are split.
SPLIT_BYTES = 256 * 1024 * 1024
# Starts `n` worker processes for the block it opens (process management stays out of store/).
WorkerPool = Callable[[int], contextlib.AbstractContextManager[Executor]]
DEFAULT_JOBS = 2
APP_TABLE = "threads_meta"
MESSAGES = "messages"
# SQLite's lock-byte page sits at byte offset 1 GiB and belongs to no b-tree.
_LOCK_BYTE_OFFSET = 1 << 30
# The wal-index header in -shm (native byte order): two copies of WalIndexHdr (48 bytes), then WalCkptInfo.
_SHM_HEADER_BYTES = 136
_WAL_INDEX_COPY = 48
_WAL_INDEX_VERSION = 3007000
_SHM_READ_ATTEMPTS = 5
_CANONICAL_LENGTH = 36


class _Channels(msgspec.Struct):
    """Only a checkpoint's channel values, each left as raw msgpack; the other keys are skipped unbuilt."""

    channel_values: dict[str, msgspec.Raw] = {}


_channels_decoder = msgspec.msgpack.Decoder(_Channels)

# (stored_in, thread, ns, channel, looks_like, digest of the base64) -> [bytes, copies, first checkpoint id]
_HitKey = tuple[str, str, str, str, str, bytes]
_Hits = dict[_HitKey, list[Any]]


def _peek(hits: _Hits, data: bytes, where: StoredIn, thread_id: str, ns: str, channel: str, checkpoint_id: str) -> None:
    for looks_like, start, length in find_base64_files(data):
        key = (where.value, thread_id, ns, channel, looks_like, content_digest(data, start, length))
        hit = hits.get(key)
        if hit is None:
            hits[key] = [length, 1, checkpoint_id]
        else:
            hit[1] += 1
            if checkpoint_id < hit[2]:
                hit[2] = checkpoint_id


def _undecodable(exc: sqlite3.Error) -> bool:
    """The error sqlite3 raises when a text value is not UTF-8 (under the default text factory)."""
    return "Could not decode to UTF-8" in str(exc)


def _hour(checkpoint_id: str, prefixes: dict[str, int]) -> int:
    """The hour a timed id was written in: its prefix's, cached, unless those 26.8 s cross an hour."""
    prefix = checkpoint_id[:PREFIX_DIGITS]
    hour = prefix_hour_ns(prefix)
    if hour is not None:
        prefixes[prefix] = hour
        return hour
    written = write_time_ns(checkpoint_id)
    assert written is not None  # the caller matched TIMED_ID
    return hour_start_ns(written)


@dataclass
class _Tally:
    """What the row passes over one share of rows add up (merged across processes). Thread keys are the
    stored values (str, or bytes for a BLOB)."""

    checkpoints: int = 0
    checkpoint_bytes: int = 0
    metadata_bytes: int = 0
    untimed: int = 0
    untimed_bytes: int = 0
    # thread -> [checkpoints, checkpoint + metadata + write bytes]
    threads: dict[Any, list[int]] = field(default_factory=dict)
    # hour start (ns) -> [checkpoints, bytes]
    hours: dict[int, list[int]] = field(default_factory=dict)
    # channel -> [values, bytes], from the checkpoint values (only with request.channels).
    channels: dict[str, list[int]] = field(default_factory=dict)
    channel_bytes: int = 0
    # The ToolMessage items of the checkpoints' and the writes' messages values: [items, bytes].
    tools: list[int] = field(default_factory=lambda: [0, 0])
    write_tools: list[int] = field(default_factory=lambda: [0, 0])
    # channel -> [writes, bytes]
    write_channels: dict[Any, list[int]] = field(default_factory=dict)
    undecoded: int = 0
    hits: _Hits = field(default_factory=dict)
    # Some text was not UTF-8 (read losslessly).
    lossless: bool = False

    def merge(self, other: _Tally) -> None:
        self.checkpoints += other.checkpoints
        self.checkpoint_bytes += other.checkpoint_bytes
        self.metadata_bytes += other.metadata_bytes
        self.untimed += other.untimed
        self.untimed_bytes += other.untimed_bytes
        self.channel_bytes += other.channel_bytes
        self.undecoded += other.undecoded
        self.lossless = self.lossless or other.lossless
        for mine_pair, theirs_pair in ((self.tools, other.tools), (self.write_tools, other.write_tools)):
            mine_pair[0] += theirs_pair[0]
            mine_pair[1] += theirs_pair[1]
        pairs: tuple[tuple[dict[Any, list[int]], dict[Any, list[int]]], ...] = (
            (self.threads, other.threads),
            (self.hours, other.hours),
            (self.channels, other.channels),
            (self.write_channels, other.write_channels),
        )
        for mine, theirs in pairs:
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


def _count_checkpoints(connection: sqlite3.Connection, rows: RowRange, request: StorageRequest) -> _Tally:
    """One pass over the share's checkpoints: sizes per thread and hour, and with request.channels each
    value's channels, the ToolMessage items of its messages and the large-value peek."""
    tally = _Tally()
    where, parameters = _where(rows)
    threads, hours, channels, hits, tools = tally.threads, tally.hours, tally.channels, tally.hits, tally.tools
    threshold = request.large_value_bytes
    decode = _channels_decoder.decode
    timed = TIMED_ID.match
    prefixes: dict[str, int] = {}
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
    checkpoint_bytes = metadata_bytes = channel_bytes = seen = untimed = untimed_bytes = 0
    for thread_id, ns, checkpoint_id, kind, data, metadata_size in connection.execute(query, parameters):
        seen += 1
        if type(data) is int:
            size = data
        elif data is None:
            size = 0
        else:
            size = len(data) if type(data) is bytes else len(str(data).encode("utf-8", "surrogateescape"))
        metadata_size = metadata_size or 0
        checkpoint_bytes += size
        metadata_bytes += metadata_size
        thread = threads.get(thread_id)
        if thread is None:
            thread = threads[thread_id] = [0, 0]
        thread[0] += 1
        thread[1] += size + metadata_size
        if type(checkpoint_id) is str and len(checkpoint_id) == _CANONICAL_LENGTH and timed(checkpoint_id):
            hour = prefixes.get(checkpoint_id[:PREFIX_DIGITS])
            if hour is None:
                hour = _hour(checkpoint_id, prefixes)
            bucket = hours.get(hour)
            if bucket is None:
                bucket = hours[hour] = [0, 0]
            bucket[0] += 1
            bucket[1] += size + metadata_size
        else:
            untimed += 1
            untimed_bytes += size + metadata_size
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
                    key_text(thread_id),
                    key_text(ns or ""),
                    channel,
                    key_text(checkpoint_id),
                )
        messages = values.get(MESSAGES)
        if messages is not None and holds(messages, TOOL_MESSAGE_MARKER):
            count, tool_bytes = tool_outputs(messages)
            tools[0] += count
            tools[1] += tool_bytes
    tally.checkpoints = seen
    tally.checkpoint_bytes, tally.metadata_bytes, tally.channel_bytes = checkpoint_bytes, metadata_bytes, channel_bytes
    tally.untimed, tally.untimed_bytes = untimed, untimed_bytes
    return tally


def _count_writes(connection: sqlite3.Connection, rows: RowRange, tally: _Tally, request: StorageRequest) -> None:
    """The share's write bytes (stored lengths), per channel, per thread and per hour of the checkpoint
    they belong to; with request.channels the ToolMessage items of the messages writes."""
    where, parameters = _where(rows)
    threads, hours, channels, tools = tally.threads, tally.hours, tally.write_channels, tally.write_tools
    timed = TIMED_ID.match
    prefixes: dict[str, int] = {}
    # Only messages writes are read, and only to find their ToolMessage items.
    value = f"CASE WHEN channel = '{MESSAGES}' THEN value END" if request.channels else "NULL"
    query = f"SELECT thread_id, checkpoint_id, channel, length(value), {value} FROM writes {where}"
    # A checkpoint's writes are stored together: the last id's hour serves the rows that repeat it.
    last_id: Any = None
    last_hour: int | None = None
    for thread_id, checkpoint_id, channel, size, data in connection.execute(query, parameters):
        entry = channels.get(channel)
        if entry is None:
            entry = channels[channel] = [0, 0]
        entry[0] += 1
        # The thread is known by its rows, empty ones included (an orphan on both backends alike).
        thread = threads.get(thread_id)
        if thread is None:
            thread = threads[thread_id] = [0, 0]
        if not size:
            continue
        entry[1] += size
        thread[1] += size
        if checkpoint_id != last_id:
            last_id, last_hour = checkpoint_id, None
            if type(checkpoint_id) is str and len(checkpoint_id) == _CANONICAL_LENGTH and timed(checkpoint_id):
                last_hour = prefixes.get(checkpoint_id[:PREFIX_DIGITS])
                if last_hour is None:
                    last_hour = _hour(checkpoint_id, prefixes)
        if last_hour is None:
            tally.untimed_bytes += size
        else:
            bucket = hours.get(last_hour)
            if bucket is None:
                bucket = hours[last_hour] = [0, 0]
            bucket[1] += size
        if type(data) is bytes and holds(data, TOOL_MESSAGE_MARKER):
            count, tool_bytes = tool_outputs(data)
            tools[0] += count
            tools[1] += tool_bytes


def _count_rows(connection: sqlite3.Connection, share: tuple[RowRange, RowRange], request: StorageRequest) -> _Tally:
    """Both passes over a share; again, reading text losslessly, when some is not UTF-8."""
    # Python's own decoding first (connect_readonly reads losslessly): the common case pays nothing for it.
    connection.text_factory = str
    try:
        tally = _count_checkpoints(connection, share[0], request)
        _count_writes(connection, share[1], tally, request)
        return tally
    except sqlite3.OperationalError as exc:
        if not _undecodable(exc):
            raise
    connection.text_factory = lossless_text
    tally = _count_checkpoints(connection, share[0], request)
    _count_writes(connection, share[1], tally, request)
    tally.lossless = True
    return tally


def _read_share(target: SqliteTarget, request: StorageRequest, share: tuple[RowRange, RowRange]) -> _Tally:
    """A worker's share: a range of checkpoint rows and one of write rows, in a read transaction of its own."""
    connection = connect_readonly(target)
    try:
        connection.execute("BEGIN")
        tally = _count_rows(connection, share, request)
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


# The b-tree dbstat need not read when it reads all the others: every used page but the lock-byte page is
# one b-tree's (in a database without auto_vacuum, which adds pointer-map pages), so the biggest table is
# the used pages less the rest, exactly, without dbstat walking its overflow pages.
_RESIDUAL_TABLE = "checkpoints"


def _relations(
    connection: sqlite3.Connection, files: SqliteFiles, notes: list[str], read_values: bool = True
) -> list[Relation]:
    """Each table with its indexes. Without `read_values` (--no-channels) dbstat reads only the b-trees
    that hold no stored values, and the value tables share out the rest of the used pages."""
    tables, indexes = _schema(connection)
    b_trees = [*tables, *indexes, "sqlite_schema", "sqlite_master"]
    residual = read_values and _RESIDUAL_TABLE in tables and _pragma(connection, "auto_vacuum") == 0
    only = None
    if not read_values:
        only = [name for name in b_trees if name not in _VALUE_TABLES]
    elif residual:
        only = [name for name in b_trees if name != _RESIDUAL_TABLE]
    sizes = _dbstat_sizes(connection, only) if files.dbstat else None
    if sizes is None:
        return _estimated_relations(connection, tables, files, notes)
    if not read_values:
        return _measured_and_shared(connection, tables, indexes, sizes, files, notes)
    if residual:
        used = (files.page_count - files.freelist_count - _lock_byte_pages(files)) * files.page_size
        sizes[_RESIDUAL_TABLE] = used - sum(sizes.values())
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


def _key_condition(column: str, key: Any) -> tuple[str, tuple[Any, ...]]:
    """`column` equal to a stored key as the passes read it: text that was not UTF-8 is matched as the
    same bytes cast to TEXT (binding the str would fail), a BLOB as a BLOB."""
    if key is None:
        return f"{column} IS NULL", ()
    bound, value = text_parameter("?", key)
    return f"{column} = {bound}", (value,)


def _thread_rows(connection: sqlite3.Connection, key: Any) -> tuple[WriteTimes, int | None, int | None]:
    """One thread's hours and untimed checkpoints, and the write times of its first and last checkpoint
    ids, from its rows only (found through the primary key's index; sizes by length(), no value read)."""
    condition, parameters = _key_condition("thread_id", key)
    times = WriteTimes()
    hours: dict[int, list[int]] = {}
    prefixes: dict[str, int] = {}
    first = last = None
    checkpoints = (
        "SELECT checkpoint_id, coalesce(length(checkpoint), 0) + coalesce(length(metadata), 0) "
        f"FROM checkpoints WHERE {condition}"
    )
    writes = f"SELECT checkpoint_id, coalesce(length(value), 0) FROM writes WHERE {condition}"
    for query, counts in ((checkpoints, 1), (writes, 0)):
        for checkpoint_id, size in connection.execute(query, parameters):
            if type(checkpoint_id) is str and len(checkpoint_id) == _CANONICAL_LENGTH and TIMED_ID.match(checkpoint_id):
                hour = prefixes.get(checkpoint_id[:PREFIX_DIGITS])
                if hour is None:
                    hour = _hour(checkpoint_id, prefixes)
                slot = hours.setdefault(hour, [0, 0])
                slot[0] += counts
                slot[1] += size
                if counts:
                    first = checkpoint_id if first is None or checkpoint_id < first else first
                    last = checkpoint_id if last is None or checkpoint_id > last else last
            else:
                times.untimed_checkpoints += counts
                times.untimed_bytes += size
    times.hours = _buckets(hours)
    return times, None if first is None else write_time_ns(first), None if last is None else write_time_ns(last)


def _buckets(counts: dict[int, list[int]]) -> list[Bucket]:
    return [Bucket(start, checkpoints, size) for start, (checkpoints, size) in sorted(counts.items())]


def _app_threads(
    connection: sqlite3.Connection, threads: dict[Any, list[int]], spans: dict[Any, ThreadBytes]
) -> AppThreads | None:
    """DeerFlow's threads_meta in the same file: the threads with stored rows (checkpoints or writes) that
    it does not know, and its rows that have none. None when the table (or its thread_id column) is not
    there. `spans` holds the threads already read (the heaviest)."""
    found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (APP_TABLE,)).fetchone()
    if found is None:
        return None
    columns = {row[0] for row in connection.execute(f"SELECT name FROM pragma_table_info({_quote_literal(APP_TABLE)})")}
    if "thread_id" not in columns:
        return None
    app_ids = {row[0] for row in connection.execute(f"SELECT thread_id FROM {APP_TABLE}")}
    orphan_keys = [key for key in threads if key not in app_ids]
    orphans = sorted(
        (spans.get(key) or _thread_bytes(connection, key, threads[key]) for key in orphan_keys),
        key=lambda thread: (-thread.bytes, thread.thread_id),
    )
    return AppThreads(
        table=APP_TABLE,
        known=len(threads) - len(orphans),
        orphans=tuple(orphans),
        orphan_bytes=sum(thread.bytes for thread in orphans),
        app_only=len(app_ids - threads.keys()),
    )


def _thread_bytes(connection: sqlite3.Connection, key: Any, entry: list[int]) -> ThreadBytes:
    condition, parameters = _key_condition("thread_id", key)
    first, last = connection.execute(
        f"SELECT min(checkpoint_id), max(checkpoint_id) FROM checkpoints WHERE {condition}", parameters
    ).fetchone()
    return ThreadBytes(
        key_text(key),
        entry[0],
        entry[1],
        write_time_ns(first) if type(first) is str else None,
        write_time_ns(last) if type(last) is str else None,
    )


def _peek_writes(connection: sqlite3.Connection, request: StorageRequest, hits: _Hits) -> None:
    """The large writes' bytes, searched for base64 files (only rows of at least the threshold are read)."""
    query = "SELECT thread_id, checkpoint_ns, checkpoint_id, channel, value FROM writes WHERE length(value) >= ?"
    for thread_id, ns, checkpoint_id, channel, value in connection.execute(query, (request.large_value_bytes,)):
        data = value if type(value) is bytes else str(value).encode("utf-8", "surrogateescape")
        _peek(hits, data, StoredIn.WRITES, key_text(thread_id), key_text(ns or ""), key_text(channel),
              key_text(checkpoint_id))  # fmt: skip


def _large_values(hits: _Hits) -> list[LargeValue]:
    values = [
        LargeValue(thread_id, ns, StoredIn(where), channel, looks_like, size, copies, first, digest.hex())
        for (where, thread_id, ns, channel, looks_like, digest), (size, copies, first) in hits.items()
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


def _wal_note(files: SqliteFiles, immutable: bool) -> str | None:
    """Why the WAL's frames are unknown, when there is a -wal file holding anything."""
    if not files.wal_bytes or files.wal_frames is not None or immutable:
        return None
    if files.shm_bytes is None:
        return "no -shm file beside the -wal: the WAL's frames are unknown (its size is what the advice reads)"
    return "the -shm wal-index header could not be read consistently: the WAL's frames are unknown"


def _dbstat_sizes_available(connection: sqlite3.Connection) -> bool:
    try:
        connection.execute("SELECT 1 FROM dbstat LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        return False
    return True


def read_sqlite_storage(
    target: SqliteTarget, request: StorageRequest, jobs: int | None = None, pool: WorkerPool | None = None
) -> StorageFacts:
    """Where the file's bytes are, in one read transaction (plus, for a large file, `jobs` worker processes
    reading the passes by rowid ranges). `jobs` None: DEFAULT_JOBS above SPLIT_BYTES, else 1. The workers
    come from `pool` (commands/worker_pool.worker_pool, which ends them with the main process); without one,
    everything is read in this process.
    `legacy_files` is left for the caller."""
    path, _uri = readonly_uri(target)
    # Sizes before SQLite opens the file: opening a WAL database read-only creates empty -wal/-shm files.
    database_bytes = _size(path) or 0
    sizes = (database_bytes, _size(path.with_name(path.name + "-wal")), _size(path.with_name(path.name + "-shm")))
    if jobs is None:
        jobs = DEFAULT_JOBS if database_bytes >= SPLIT_BYTES else 1
    if pool is None:
        jobs = 1
    shares = _shares(target, jobs)
    facts = StorageFacts(database=target.describe(), backend="sqlite")
    if target.immutable:
        facts.notes.append("opened immutable: whatever the -wal file holds was not read")
    with contextlib.ExitStack() as workers:
        futures = []
        if len(shares) > 1 and pool is not None:
            # Started before this process opens its connection: no worker inherits an open SQLite handle.
            executor = workers.enter_context(pool(len(shares)))
            futures = [executor.submit(_read_share, target, request, share) for share in shares]
            facts.notes.append(
                f"checkpoints and writes read by {len(shares)} processes, each in a read transaction of its own"
            )
        connection = connect_readonly(target)
        # The few rows read besides the passes (names, spans, the app table) are read losslessly (connect_readonly).
        try:
            connection.execute("BEGIN")
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the read snapshot starts here
            files = _files(path, connection, sizes)
            facts.sqlite = files
            wal_note = _wal_note(files, target.immutable)
            if wal_note is not None:
                facts.notes.append(wal_note)
            facts.relations = _relations(connection, files, facts.notes, request.channels)
            if futures:
                tally = _Tally()
                for future in futures:
                    tally.merge(future.result())
            else:
                tally = _count_rows(connection, (None, None), request)
                connection.text_factory = lossless_text
            if tally.lossless:
                facts.notes.append("some keys are not UTF-8 text: their invalid bytes are shown escaped")
            facts.metadata_bytes = tally.metadata_bytes
            if request.channels:
                _peek_writes(connection, request, tally.hits)
                facts.channels = _channel_list(StoredIn.CHECKPOINTS, tally.channels, tally.tools)
                facts.channels += _channel_list(StoredIn.WRITES, tally.write_channels, tally.write_tools)
                facts.checkpoint_rest_bytes = tally.checkpoint_bytes - tally.channel_bytes
                facts.large_values = _large_values(tally.hits)
                if tally.undecoded:
                    facts.notes.append(
                        f"{tally.undecoded} checkpoint(s) are not msgpack checkpoint mappings: "
                        "their bytes count as the rest"
                    )
            facts.growth = WriteTimes(_buckets(tally.hours), tally.untimed, tally.untimed_bytes)
            ranked = sorted(tally.threads.items(), key=lambda item: (-item[1][1], key_text(item[0])))
            spans: dict[Any, ThreadBytes] = {}
            for key, (checkpoints, size) in ranked[: max(request.top, 0)]:
                times, first, last = _thread_rows(connection, key)
                spans[key] = thread = ThreadBytes(key_text(key), checkpoints, size, first, last)
                facts.heaviest.append(thread)
                facts.heaviest_growth[len(facts.heaviest) - 1] = times
            facts.app = _app_threads(connection, tally.threads, spans)
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"reading {path} failed: {exc}") from exc
        finally:
            connection.close()
    return facts


def _channel_list(where: StoredIn, channels: dict[Any, list[int]], tools: list[int]) -> list[ChannelBytes]:
    """Heaviest first; on SQLite stored and raw bytes are the same (no compression). The messages channel's
    ToolMessage items are a row of their own, and not in the messages row."""
    rows = []
    for channel, (values, size) in channels.items():
        name = key_text(channel)
        if name == MESSAGES and tools[0]:
            size -= tools[1]
            rows.append(ChannelBytes(where, MESSAGES, tools[0], tools[1], tools[1], part=TOOL_OUTPUTS))
        rows.append(ChannelBytes(where, name, values, size, size))
    return sorted(rows, key=lambda row: (-row.bytes, row.label))
