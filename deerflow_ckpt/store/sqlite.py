"""Read a LangGraph SQLite checkpoint database read-only, one thread at a time.

Never through SqliteSaver: its first call runs setup(), which switches the journal to WAL and creates
tables. The connection is a `mode=ro` URI built from the resolved path, inside one read transaction. Text is
read losslessly (store/sqlite_text.py): a key that is not UTF-8 is one more key, not a failed scan.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.fileio import resolved
from deerflow_ckpt.native import (
    MESSAGES_LIST,
    MESSAGES_OTHER,
    MESSAGES_SNAPSHOT,
    PYTHON_ONLY_BECAUSE,
    CheckpointSummary,
    ReadError,
    checkpoint_summary,
    metadata_summary,
    open_lineages,
    readahead_vfs,
)
from deerflow_ckpt.rules import RuleCode
from deerflow_ckpt.store.metadata import lean_decoders, metadata_in_python
from deerflow_ckpt.store.peek import (
    EXT_DELTA_SNAPSHOT,
    ExtValue,
    InertDecoder,
    UndecodableError,
)
from deerflow_ckpt.store.records import (
    CheckpointRecord,
    Lineage,
    MessagesRows,
    Problem,
    Shape,
    key_text,
    text_lineage,
)
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.sqlite_text import lossless_text, stored_bytes
from deerflow_ckpt.store.writes import MESSAGES_CHANNEL, WriteFolder, check_typed_bytes, fold_contents

if TYPE_CHECKING:
    import msgspec

    from deerflow_ckpt.store.lean import CheckpointFields

SQLITE_HEADER = b"SQLite format 3\x00"
_WAL_VERSION_BYTES = slice(18, 20)  # file format read/write versions: 2 means WAL

# Metadata is parsed in Python: a typed decode of four keys is cheaper than json_extract calls.
# Payload columns are CAST to BLOB: a value stored as invalid TEXT must not fail the whole query.
_CHECKPOINTS_SQL = """
SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,
       CAST(checkpoint AS BLOB), CAST(metadata AS BLOB)
FROM checkpoints {where}
ORDER BY thread_id, checkpoint_ns, checkpoint_id
"""
# Writes of None (branch markers and the like) carry no bytes and no type to check: left out. The compiled reader
# handing each lineage's messages rows to the deep proof (store/history.py) reads what the proof reads of a write
# as well (`handed`: its task_path and idx), and the messages writes of None, which only the proof reads (it
# cannot prove them).
_WRITES_SQL = """
SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, channel, type, CAST(value AS BLOB){handed}
FROM writes WHERE (type IS NOT 'null'{or_messages}) {and_where}
ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx
"""


def _is_wal(path: Path) -> bool:
    with path.open("rb") as stream:
        header = stream.read(100)
    if not header.startswith(SQLITE_HEADER):
        raise StoreError(f"{path} is not a SQLite database")
    return header[_WAL_VERSION_BYTES] == b"\x02\x02"


def _check_openable(path: Path, immutable: bool) -> None:
    """Fail early, with the way out, where SQLite itself would only say "readonly database"."""
    if not path.is_file():
        # The wording every command uses for a path it cannot read: "PATH: no such file".
        if not path.exists():
            raise StoreError(f"{path}: no such file")
        kind = "a directory" if path.is_dir() else "not a regular file (a device, FIFO or socket)"
        raise StoreError(f"{path}: is {kind}, not a SQLite database")
    try:
        wal = _is_wal(path)
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror}") from exc
    shm = path.with_name(path.name + "-shm")
    if wal and not immutable and not shm.exists() and not os.access(path.parent, os.W_OK):
        raise StoreError(
            f"{path} is a WAL database without its -shm file, in a directory you cannot write: SQLite cannot "
            "open it read-only there. Copy the database together with its -wal and -shm files and scan the "
            "copy, or pass --immutable for a copy that nobody writes to"
        )


def readonly_uri(target: SqliteTarget) -> tuple[Path, str]:
    """The resolved path and its `mode=ro` URI (or the explicit immutable opt-in), checked openable."""
    path = resolved(target.path.expanduser(), StoreError)
    _check_openable(path, target.immutable)
    # as_uri() percent-encodes '?' and '#', which a hand-built "file:" string would misread.
    return path, path.as_uri() + ("?immutable=1" if target.immutable else "?mode=ro")


# PRAGMA mmap_size on the read-ahead layer: any size above 0 only lets it lend its pages in place (it answers
# the setting itself; nothing is mapped). The compiled reader sets the same value (_inert_sqlite.c).
LEND_PAGES = 1 << 40


def connect_readonly(target: SqliteTarget, *, read_ahead: bool = False) -> sqlite3.Connection:
    """A read-only connection on readonly_uri(target), checked to hold LangGraph's two tables; `read_ahead` opens
    it through the read-ahead layer (native/_readahead.c) where Python's sqlite3 can use it."""
    path, uri = readonly_uri(target)
    vfs = _python_read_ahead() if read_ahead else None
    return _connect(path, uri) if vfs is None else _connect(path, f"{uri}&vfs={vfs}", lend_pages=True)


@functools.cache
def _python_read_ahead() -> str | None:
    """The layer's VFS name when Python's sqlite3 sees it: it does when both link the same libsqlite3, not when
    Python carries its own SQLite. Named in a URI the layer is used or the open fails, so the mmap_size set on
    such a connection never reaches the default VFS."""
    vfs = readahead_vfs() if readahead_vfs is not None else None
    if vfs is None:
        return None
    try:
        sqlite3.connect(f"file::memory:?vfs={vfs}", uri=True).close()
    except sqlite3.Error:
        return None
    return vfs


def _connect(path: Path, uri: str, *, lend_pages: bool = False) -> sqlite3.Connection:
    """connect_readonly for a path and URI that readonly_uri already resolved and checked; `lend_pages` for a
    URI on the read-ahead layer."""
    try:
        connection = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        connection.text_factory = lossless_text
        connection.execute("PRAGMA query_only = 1")
        # Never a memory map of the file, whatever SQLite's build default: the layer only lends its own copies.
        connection.execute(f"PRAGMA mmap_size = {LEND_PAGES if lend_pages else 0}")
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path} read-only: {exc}") from exc
    missing = {"checkpoints", "writes"} - tables
    if missing:
        connection.close()
        raise StoreError(f"{path} is not a LangGraph checkpoint database (no {', '.join(sorted(missing))} table)")
    return connection


# Columns the compiled reader keys and compares as stored bytes: with TEXT affinity they can hold only
# NULL, TEXT or BLOB, whose SQLite order and equality it mirrors.
_TEXT_COLUMNS = {
    "checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id", "type"),
    "writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "channel", "type"),
}


def _has_text_affinity(declared: str) -> bool:
    """SQLite's column affinity rules: a type naming INT is numeric, else CHAR, CLOB or TEXT make it text."""
    declared = declared.upper()
    return "INT" not in declared and any(word in declared for word in ("CHAR", "CLOB", "TEXT"))


def keys_are_text(connection: sqlite3.Connection) -> bool:
    """True when both tables are ordinary tables whose key columns have TEXT affinity (the savers' schema)."""
    for table, columns in _TEXT_COLUMNS.items():
        query = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?"
        (sql,) = connection.execute(query, (table,)).fetchone()
        if not isinstance(sql, str) or sql.upper().startswith("CREATE VIRTUAL"):
            return False
        declared = {row[1]: row[2] for row in connection.execute(f"PRAGMA table_info({table})")}
        if not all(_has_text_affinity(declared.get(column) or "") for column in columns):
            return False
    return True


def thread_ids_nullable(connection: sqlite3.Connection) -> bool:
    """False when both tables are ordinary tables that declare thread_id NOT NULL (the savers' schema): a share's
    range then needs no `OR thread_id IS NULL`, which keeps SQLite from bounding its index walk to the range.
    (A virtual table's declared NOT NULL is not enforced.)"""
    for table in ("checkpoints", "writes"):
        query = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?"
        row = connection.execute(query, (table,)).fetchone()
        if row is None or not isinstance(row[0], str) or row[0].upper().startswith("CREATE VIRTUAL"):
            return True
        declared = {row[1]: row[3] for row in connection.execute(f"PRAGMA table_info({table})")}
        if not declared.get("thread_id"):
            return True
    return False


def _decode_clean(raw: msgspec.Raw, decoder: InertDecoder) -> tuple[bool, Any]:
    """(True, value) when `raw` decodes inertly and names only trusted types; (False, None) otherwise."""
    try:
        value = decoder.decode(memoryview(raw))
    except UndecodableError:
        return False, None
    return not decoder.untrusted, value


def _classify_lean(record: CheckpointRecord, fields: CheckpointFields, decoder: InertDecoder) -> bool:
    """Classify from the lean decode; False sends the row to the full decode, which reports problems."""
    lean = lean_decoders()
    messages = fields.channel_values.get(MESSAGES_CHANNEL)
    for raw in fields.channel_values.values():
        # A one-byte value (nil, a small int, true/false) cannot name a type; anything longer is decoded.
        if raw is not messages and len(raw) > 1 and not _decode_clean(raw, decoder)[0]:
            return False
    if messages is None:
        record.messages = Shape.ABSENT
    else:
        size = lean.snapshot_payload_size(messages)
        if size is not None:
            if not _decode_clean(messages, decoder)[0]:
                return False  # the full decode reports what the snapshot's payload names or breaks
            record.messages = Shape.SNAPSHOT
            record.seed_empty = lean.snapshot_is_empty(messages, size)
            record.snapshot_bytes = size
        else:
            clean, value = _decode_clean(messages, decoder)
            if not clean:
                return False
            _classify_messages(record, value)
    version = fields.channel_versions.get(MESSAGES_CHANNEL)
    record.messages_version = None if version is None else str(version)
    return True


def _classify_summary(record: CheckpointRecord, summary: CheckpointSummary) -> None:
    """Classify from the compiled judge's summary of a clean checkpoint."""
    kind, count, empty, record.messages_version = summary
    if kind == MESSAGES_LIST:
        record.messages = Shape.LIST
        record.seed_empty = count == 0
    elif kind == MESSAGES_SNAPSHOT:
        record.messages = Shape.SNAPSHOT
        record.seed_empty = empty
        record.snapshot_bytes = count
    elif kind == MESSAGES_OTHER:
        record.messages = Shape.OTHER


def _classify_decoded(record: CheckpointRecord, value: Any) -> None:
    channel_values = value.get("channel_values", {}) if type(value) is dict else None
    if type(channel_values) is not dict:
        record.messages = Shape.UNDECODABLE
        if value is not None:
            record.problems.append(Problem(RuleCode.CK104, "checkpoint is not a LangGraph checkpoint mapping"))
        return
    assert type(value) is dict
    versions = value.get("channel_versions")
    version = versions.get(MESSAGES_CHANNEL) if type(versions) is dict else None
    record.messages_version = None if version is None else str(version)
    _classify_messages(record, channel_values.get(MESSAGES_CHANNEL, _ABSENT))


def _classify_messages(record: CheckpointRecord, messages: Any) -> None:
    if messages is _ABSENT:
        record.messages = Shape.ABSENT
    elif type(messages) is ExtValue and messages.code == EXT_DELTA_SNAPSHOT:
        record.messages = Shape.SNAPSHOT
        record.seed_empty = messages.empty
        record.snapshot_bytes = messages.size
    elif type(messages) is list:
        record.messages = Shape.LIST
        record.seed_empty = not messages
    else:
        record.messages = Shape.OTHER


_ABSENT = object()
_NO_ROW = object()


def record_from_row(
    row: tuple[Any, ...], decoder: InertDecoder, lean: bool = True, native: bool = True
) -> CheckpointRecord:
    """One checkpoint row as a record; tests compare the paths: `native=False` skips the compiled judge,
    `lean=False` forces the full inert decode."""
    thread_id, ns, checkpoint_id, parent_id, kind, data, raw_metadata = row
    if type(checkpoint_id) is not str or (parent_id is not None and type(parent_id) is not str):
        checkpoint_id = key_text(checkpoint_id)
        parent_id = None if parent_id is None else key_text(parent_id)
    native = native and lean
    facts = metadata_summary(raw_metadata) if native and metadata_summary and raw_metadata is not None else None
    problems: list[Problem] = []
    if facts is None:
        facts = metadata_in_python(raw_metadata, lean, problems)
    step, source, mode, updates, supersteps = facts
    record = CheckpointRecord(
        thread_id, ns or "", checkpoint_id, parent_id, step, source, mode, updates, supersteps, Shape.ABSENT, None
    )
    record.checkpoint_bytes = len(data) if data is not None else 0
    record.metadata_bytes = len(raw_metadata) if raw_metadata is not None else 0
    if problems:
        record.problems = problems
        record.metadata_ok = False
    if lean and kind == "msgpack" and data is not None and not decoder.deep:
        summary = checkpoint_summary(data) if native and checkpoint_summary else None
        if summary is not None:
            _classify_summary(record, summary)
            return record
        checkpoint = lean_decoders().read_checkpoint(data)
        if checkpoint is not None and _classify_lean(record, checkpoint, decoder):
            return record
    _classify_decoded(record, check_typed_bytes(kind, data, "checkpoint", record.problems, decoder))
    return record


class SqliteCheckpointReader:
    """Streams lineages from one SQLite file; memory holds one thread at a time."""

    def __init__(
        self, target: SqliteTarget, deep: bool = False, compiled: bool = True, messages_rows: bool = False
    ) -> None:
        self.target = target
        self.decoder = InertDecoder(deep=deep)
        # The compiled reader where it was built and fits; `compiled=False` reads through Python (tests compare).
        self.compiled = compiled
        # The compiled reader also hands each lineage's messages rows to the deep proof (Lineage.messages_rows),
        # which then need not read them again; the Python reader hands none.
        self.messages_rows = messages_rows

    def lineages(self, selection: ThreadSelection = ALL_THREADS) -> Iterator[Lineage]:
        path, uri = readonly_uri(self.target)
        connection = _connect(path, uri)
        try:
            nullable = thread_ids_nullable(connection)
            if self._fits_compiled() and keys_are_text(connection):
                task_path = self.messages_rows and has_task_path(connection)
                connection.close()
                yield from self._stream_compiled(path, uri, selection, nullable, task_path)
                return
            # One read transaction: a consistent snapshot while a live writer carries on.
            connection.execute("BEGIN")
            yield from self._stream(connection, selection, nullable)
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self.target.path} failed: {exc}") from exc
        finally:
            connection.close()

    def threads_since(self, boundary: str) -> list[str]:
        """Threads with a checkpoint whose id sorts at or after `boundary` (written then or later), in order.

        Answered from the primary key's index (thread_id, checkpoint_ns, checkpoint_id): no blob is read.
        A thread whose ids are all no UUIDv6 is found only where they sort above the boundary (see --since).
        """
        connection = connect_readonly(self.target)
        try:
            query = "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_id >= ? ORDER BY thread_id"
            return [row[0] for row in connection.execute(query, (boundary,))]
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self.target.path} failed: {exc}") from exc
        finally:
            connection.close()

    def split_points(self, parts_for: Callable[[int], int]) -> list[str]:
        """Thread ids that cut the checkpoints into shares of about equal size, as many as `parts_for` says
        for the number of checkpoints stored."""
        connection = connect_readonly(self.target)
        try:
            (total,) = connection.execute("SELECT count(*) FROM checkpoints").fetchone()
            parts = parts_for(total)
            points: list[str] = []
            for part in range(1, parts):
                row = connection.execute(
                    "SELECT thread_id FROM checkpoints ORDER BY thread_id LIMIT 1 OFFSET ?", (total * part // parts,)
                ).fetchone()
                # In SQLite's order: a key that is not text, or not UTF-8, compares as SQLite sorts it.
                if row is not None and (not points or sqlite_order(row[0]) > sqlite_order(points[-1])):
                    points.append(row[0])
            return points
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self.target.path} failed: {exc}") from exc
        finally:
            connection.close()

    def _fits_compiled(self) -> bool:
        """The compiled reader is built, wanted, and reads what this reader must (deep decoding keeps payloads)."""
        return self._unfit_for_compiled() is None

    def _unfit_for_compiled(self) -> str | None:
        if open_lineages is None:
            return PYTHON_ONLY_BECAUSE or "the compiled SQLite reader is not built"
        if not self.compiled:
            return "the caller asked for the Python reader"
        if not RECORD_FITS:
            return "CheckpointRecord's leading fields are not the ones the compiled reader fills"
        if self.decoder.deep:
            return "deep decoding keeps snapshot payloads"
        return None

    def python_reader_because(self) -> str | None:
        """None when lineages() reads through the compiled reader, else why it reads through Python."""
        unfit = self._unfit_for_compiled()
        if unfit is not None:
            return unfit
        path, uri = readonly_uri(self.target)
        connection = _connect(path, uri)
        try:
            return None if keys_are_text(connection) else "the tables' key columns do not have TEXT affinity"
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self.target.path} failed: {exc}") from exc
        finally:
            connection.close()

    def _stream_compiled(
        self, path: Path, uri: str, selection: ThreadSelection, nullable: bool, task_path: bool
    ) -> Iterator[Lineage]:
        """The same lineages as _stream, from the compiled reader: rows judged where SQLite holds them."""
        assert open_lineages is not None
        limits: tuple[int, ...] = ()
        if self.messages_rows:
            from deerflow_ckpt.store import history  # the proof's module, loaded for --deep only

            if history.HANDOVER_BUDGET > 0:
                limits = (history.VALUE_LIMIT, history.HANDOVER_BUDGET, history.HANDED_ROW_COST)
        handed_task_path = ("task_path" if task_path else "''") if limits else None
        checkpoints_sql, writes_sql, parameters = _queries(selection, nullable, handed_task_path)
        decoder = self.decoder
        try:
            stream = open_lineages(
                uri, checkpoints_sql, writes_sql, tuple(parameters), _SHAPES_BY_KIND, CheckpointRecord, *limits
            )
        except ReadError as exc:
            raise StoreError(f"cannot open {path} read-only: {exc}") from exc
        try:
            for thread_id, ns, rows, deferred, handover in stream:
                # Finished records, and (row, write counts) where a judge abstained.
                records = [_counted_record(row, decoder) if type(row) is tuple else row for row in rows]
                _fold_deferred(records, deferred, decoder)
                messages_rows = MessagesRows(*handover) if handover is not None else None
                del rows, deferred, handover  # raw rows' bytes handed over go as the proof reads them, not later
                yield text_lineage(thread_id, ns, records, messages_rows)
        except ReadError as exc:
            raise StoreError(f"reading {path} failed: {exc}") from exc
        finally:
            stream.close()

    def _stream(self, connection: sqlite3.Connection, selection: ThreadSelection, nullable: bool) -> Iterator[Lineage]:
        checkpoints_sql, writes_sql, parameters = _queries(selection, nullable)
        checkpoints = connection.execute(checkpoints_sql, parameters)
        writes = connection.execute(writes_sql, parameters)
        pending_write: tuple[Any, ...] | None = next(writes, None)
        current_key: tuple[str, str] | None = None
        # The raw columns of the previous row; a sentinel first, as a NULL column must still start a lineage.
        thread_id: object = _NO_ROW
        ns: object = _NO_ROW
        records: list[CheckpointRecord] = []
        decoder = self.decoder
        for row in checkpoints:
            # Compared column by column: building a key tuple per row costs more than the rare new lineage.
            if row[0] != thread_id or row[1] != ns:
                key = (row[0], row[1] or "")
                if key != current_key:
                    if current_key is not None:
                        pending_write = _attach_writes(records, current_key, writes, pending_write, decoder)
                        yield text_lineage(current_key[0], current_key[1], records)
                    current_key, records = key, []
                thread_id, ns = row[0], row[1]
            records.append(record_from_row(row, decoder))
        if current_key is not None:
            _attach_writes(records, current_key, writes, pending_write, decoder)
            yield text_lineage(current_key[0], current_key[1], records)


# The compiled reader's messages kinds (native.MESSAGES_*), as shapes.
_SHAPES_BY_KIND = (Shape.ABSENT, Shape.LIST, Shape.SNAPSHOT, Shape.OTHER)
# The CheckpointRecord fields the compiled reader fills, in the order of its R_* constants (_inert_sqlite.c): it
# calls the class with them as positional arguments, so they must be its leading fields, in this order. Filling the
# slots from C instead saved 3.5%, within the runs' spread (docs/architecture.md, Development).
COMPILED_RECORD_FIELDS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_id",
    "step",
    "source",
    "mode_marker",
    "updates",
    "supersteps",
    "messages",
    "messages_version",
    "seed_empty",
    "message_write_rows",
    "message_write_tasks",
    "message_write_bytes",
    "message_write_items",
    "message_item_bytes",
    "other_write_rows",
    "other_write_bytes",
    "overwrite_written",
    "removal_written",
    "checkpoint_bytes",
    "metadata_bytes",
    "snapshot_bytes",
)
RECORD_FITS = tuple(field.name for field in dataclasses.fields(CheckpointRecord))[: len(COMPILED_RECORD_FIELDS)] == (
    COMPILED_RECORD_FIELDS
)


def _queries(
    selection: ThreadSelection, nullable: bool, handed_task_path: str | None = None
) -> tuple[str, str, list[str]]:
    """The checkpoint and write queries limited to `selection`, and their parameters (the same for both);
    `handed_task_path` (the column, or '' where the table has none): the writes query of a handover."""
    clauses, parameters = selection.conditions("thread_id", "?", sqlite=True, nullable=nullable)
    where = "WHERE " + " AND ".join(clauses) if clauses else ""
    and_where = "AND " + " AND ".join(clauses) if clauses else ""
    handed, or_messages = (
        ("", "") if handed_task_path is None else (f", {handed_task_path}, idx", " OR channel = 'messages'")
    )
    writes = _WRITES_SQL.format(handed=handed, or_messages=or_messages, and_where=and_where)
    return _CHECKPOINTS_SQL.format(where=where), writes, parameters


def has_task_path(connection: sqlite3.Connection) -> bool:
    """The writes table has LangGraph's task_path column (savers before it do not)."""
    return any(row[1] == "task_path" for row in connection.execute("PRAGMA table_info(writes)"))


def _fold_deferred(records: list[CheckpointRecord], deferred: list[Any], decoder: InertDecoder) -> None:
    """The writes the compiled value judge left to Python, each added to its record's counts."""
    for index, task_id, channel, kind, data in deferred:
        fold_contents(records[index], task_id, channel, kind, data, decoder)


def _counted_record(entry: tuple[Any, ...], decoder: InertDecoder) -> CheckpointRecord:
    """A row the compiled reader left to record_from_row, with the write counts it made."""
    row, counts = entry
    record = record_from_row(row, decoder)
    (
        record.message_write_rows,
        record.message_write_tasks,
        record.message_write_bytes,
        record.message_write_items,
        record.message_item_bytes,
        record.other_write_rows,
        record.other_write_bytes,
        record.overwrite_written,
        record.removal_written,
    ) = counts
    return record


def sqlite_order(value: object) -> tuple[int, Any]:
    """Where SQLite's ORDER BY puts a key value (BINARY collation): NULL, numbers, text, then BLOBs.
    Python cannot compare a str with bytes or None; the writes stream still has to be merged in order."""
    if value is None:
        return (0, 0)
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, stored_bytes(value))
    return (3, bytes(value))  # type: ignore[call-overload]


def _attach_writes(
    records: list[CheckpointRecord],
    key: tuple[str, str],
    writes: Iterator[tuple[Any, ...]],
    pending: tuple[Any, ...] | None,
    decoder: InertDecoder,
) -> tuple[Any, ...] | None:
    """Consume the write rows of lineage `key` (both streams share one order) into its records."""
    folder = WriteFolder(records, decoder)
    lineage_order = (sqlite_order(key[0]), sqlite_order(key[1]))
    while pending is not None:
        thread_id, ns, checkpoint_id, task_id, channel, kind, value = pending
        if thread_id != key[0] or (ns or "") != key[1]:
            if (sqlite_order(thread_id), sqlite_order(ns or "")) > lineage_order:
                break
        else:
            folder.add(checkpoint_id, task_id, channel, kind, value)
        pending = next(writes, None)
    return pending
