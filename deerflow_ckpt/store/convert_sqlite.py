"""The SQLite side of `ckpt convert`: a consistent copy of the source, converted rows kept apart, an output
written fresh.

The source is read once, by SQLite's online backup API on a read-only connection (a live writer is fine:
the copy is one consistent state of the database). Everything else reads the copy, a temporary file beside
the output that nothing writes: the scan and the proof, and the rewrite's row lookups. Each converting
process keeps its converted rows in a scratch database of its own, each thread in a savepoint that a refused
thread rolls back. The output is then
written once, as VACUUM INTO would write the copy, with the converted rows in place of the copy's: the
replaced rows (a full-mode store's lists, most of its bytes) are neither read again nor written. Tables
other than the saver's (DeerFlow's `threads_meta`, runs and the rest) are carried over as stored.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.fileio import TEMPORARY_SUFFIX, resolved
from deerflow_ckpt.store.rewrite import (
    RowChange,
    RowNotRewritable,
    converted_metadata_bytes,
    split_checkpoint,
    with_messages,
)
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.sqlite import connect_readonly


def temporary_beside(output: Path) -> Path:
    return output.with_name(f".{output.name}.{os.getpid()}{TEMPORARY_SUFFIX}")


def sidecars(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")]


def record_path(output: Path) -> Path:
    """Where a conversion records what it wrote (mode, K, source, refused threads), for --catch-up."""
    return output.with_name(output.name + ".ckpt-convert.json")


def read_record(output: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(record_path(output).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def write_record(output: Path, record: dict[str, Any]) -> None:
    from deerflow_ckpt.fileio import write_atomically

    write_atomically(record_path(output), json.dumps(record, indent=2, ensure_ascii=False).encode() + b"\n")


def copy_database(source: SqliteTarget, copy: Path) -> bool:
    """Copy the source into `copy` with the backup API; True when the source is in WAL mode."""
    reading = connect_readonly(source)
    try:
        wal = bool(reading.execute("PRAGMA journal_mode").fetchone()[0] == "wal")
        writing = sqlite3.connect(copy, isolation_level=None)
        try:
            # In one step, one read transaction: a stepped backup starts again whenever a writer commits, so
            # beside a busy writer it may never finish. In WAL mode the writer is not blocked meanwhile.
            reading.backup(writing)
        finally:
            writing.close()
    except sqlite3.Error as exc:
        raise StoreError(f"copying {source.describe()} failed: {exc}") from None
    finally:
        reading.close()
    return wal


# Per thread: what tells a thread that gained (or lost) rows from one that did not. LangGraph only appends
# checkpoints and writes, under ids that grow with time, so a count and the id range are enough.
_THREAD_ROWS = """
SELECT c.thread_id, c.n, c.lo, c.hi, coalesce(w.n, 0), w.lo, w.hi FROM
  (SELECT thread_id, count(*) AS n, min(checkpoint_id) AS lo, max(checkpoint_id) AS hi
   FROM {db}.checkpoints GROUP BY thread_id) AS c
LEFT JOIN
  (SELECT thread_id, count(*) AS n, min(checkpoint_id) AS lo, max(checkpoint_id) AS hi
   FROM {db}.writes GROUP BY thread_id) AS w
ON w.thread_id = c.thread_id
"""


def _thread_rows(connection: sqlite3.Connection, db: str) -> dict[Any, tuple[Any, ...]]:
    return {row[0]: row[1:] for row in connection.execute(_THREAD_ROWS.format(db=db))}


def catch_up(copy: Path, previous: Path) -> tuple[list[str], list[str]]:
    """The threads to convert again (new or changed since the previous output was written, text ids only) and
    those whose converted rows the previous output already holds (carried over when the output is written)."""
    connection = sqlite3.connect(_readonly_uri(copy), uri=True, isolation_level=None)
    try:
        connection.execute("ATTACH DATABASE ? AS previous", (_readonly_uri(previous),))
        fresh, before = _thread_rows(connection, "main"), _thread_rows(connection, "previous")
    except sqlite3.Error as exc:
        raise StoreError(f"catching up {previous} failed: {exc}") from None
    finally:
        connection.close()
    unchanged = [t for t, rows in fresh.items() if type(t) is str and before.get(t) == rows]
    changed = sorted(t for t in fresh if type(t) is str and t not in set(unchanged))
    return changed, unchanged


def _readonly_uri(path: Path) -> str:
    return resolved(path, StoreError).as_uri() + "?mode=ro"


# The copy is read by the rewrite's row lookups through memory mapping: a full-mode row's metadata follows its
# list in the record, and walking that overflow chain page by page through read() costs four times as much.
# Safe here, as it is not on the source: nobody else writes or truncates the scratch copy.
_MMAP_BYTES = 1 << 40
# Converted rows, kept in a scratch database until the output is written: only what changed (a NULL column
# is a value kept as the copy stores it; a converted value is never NULL).
_CONVERTED_TABLE = """
CREATE TABLE converted (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT, checkpoint BLOB, metadata BLOB,
                        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))
"""
_CONVERTED_ROW = "INSERT INTO converted VALUES (?, ?, ?, ?, ?)"
_ROW = "SELECT type, metadata FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
_ROW_WITH_DATA = """
SELECT type, metadata, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
"""


class SqliteRowWriter:
    """Keeps the converted rows of the copy's threads apart (each thread in a savepoint: a refused one is
    rolled back alone), then writes the output fresh from the copy and them (write_output)."""

    def __init__(self, copy: Path, converted: Path) -> None:
        self.path = copy
        self.converted = converted
        self._rows = sqlite3.connect(_readonly_uri(copy), uri=True, isolation_level=None)
        self._connection = sqlite3.connect(converted, isolation_level=None)
        try:
            self._rows.execute(f"PRAGMA mmap_size = {_MMAP_BYTES}")
            # A scratch file: a crash costs a re-run, so no journal on disk and no fsync.
            self._connection.execute("PRAGMA journal_mode = MEMORY")
            self._connection.execute("PRAGMA synchronous = OFF")
            self._connection.execute(_CONVERTED_TABLE)
        except sqlite3.Error as exc:
            self.close()
            raise StoreError(f"preparing {converted} failed: {exc}") from None

    def read(self, query: str, parameters: tuple[Any, ...]) -> tuple[Any, ...] | None:
        try:
            found: tuple[Any, ...] | None = self._rows.execute(query, parameters).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self.path} failed: {exc}") from None
        return found

    def keep(self, row: tuple[Any, ...]) -> None:
        try:
            self._connection.execute(_CONVERTED_ROW, row)
        except sqlite3.Error as exc:
            raise StoreError(f"writing {self.converted} failed: {exc}") from None

    def lineage(self, thread_id: str, checkpoint_ns: str, delta: bool) -> SqliteLineageRewrite:
        return SqliteLineageRewrite(self, thread_id, checkpoint_ns, delta)

    @contextmanager
    def thread(self) -> Iterator[None]:
        """One thread's rewrites: kept whole, or rolled back whole when the body raises."""
        self._connection.execute("SAVEPOINT thread")
        try:
            yield
        except BaseException:
            self._connection.execute("ROLLBACK TO thread")
            self._connection.execute("RELEASE thread")
            raise
        self._connection.execute("RELEASE thread")

    def close(self) -> None:
        self._rows.close()
        self._connection.close()


class SqliteLineageRewrite:
    """One lineage's checkpoints, rewritten one by one as the proof reaches them: each row's type and metadata
    are read by key, its checkpoint bytes only where the messages value it stores changes."""

    def __init__(self, writer: SqliteRowWriter, thread_id: str, checkpoint_ns: str, delta: bool) -> None:
        self._writer = writer
        self._key = (thread_id, checkpoint_ns)
        self._delta = delta

    def store(
        self,
        checkpoint_id: str,
        messages: bytes | None,
        counters: tuple[int, int] | None,
        stores_now: bool,
        fold_identity: object = None,
    ) -> RowChange:
        """`stores_now`: the row holds a messages value today (the scan's record says so); each SQLite row stores
        its own value, so `fold_identity` (Postgres's one-value-per-version check) is not needed here."""
        key = (*self._key, checkpoint_id)
        reads_data = stores_now or messages is not None
        row = self._writer.read(_ROW_WITH_DATA if reads_data else _ROW, key)
        if row is None:
            raise RowNotRewritable(f"checkpoint {checkpoint_id}'s key is not stored as text")
        kind, metadata = row[0], row[1]
        if kind != "msgpack" or not isinstance(metadata, bytes | str):
            raise RowNotRewritable(f"checkpoint {checkpoint_id} is not stored as msgpack")
        new_metadata = converted_metadata_bytes(metadata, self._delta, counters)
        before, after = _length(metadata), _length(new_metadata)
        metadata_changed = new_metadata != metadata
        new_data: bytes | None = None
        if reads_data:
            data = row[2]
            if not isinstance(data, bytes):
                raise RowNotRewritable(f"checkpoint {checkpoint_id} is not stored as msgpack bytes")
            rewritten = with_messages(split_checkpoint(data), messages)
            before, after = before + len(data), after + len(rewritten)
            new_data = rewritten if rewritten != data else None
        changed = metadata_changed or new_data is not None
        if changed:
            self._writer.keep((*key, new_data, new_metadata if metadata_changed else None))
        return RowChange(before, after, changed)

    def finish(self) -> tuple[int, int]:
        """SQLite keeps no blobs apart: nothing more to write."""
        return 0, 0


# Converting processes, each with its scratch database of converted rows: all are attached to write the output,
# beside the copy and a catch-up's previous output, within SQLite's default limit of 10 attached databases.
MAX_CONVERTED_PARTS = 8


def write_output(
    output: Path, copy: Path, parts: list[Path], wal: bool, carried: tuple[Path, list[str]] | None = None
) -> None:
    """Write `output` as VACUUM INTO would write the copy, with the converted rows of `parts` in place of the
    copy's own (and with `carried`, a catch-up: the previous output's rows of the threads it names). Nothing
    is written twice and the copy's replaced rows are never read: a full-mode store's lists are most of its
    bytes."""
    settings = sqlite3.connect(_readonly_uri(copy), uri=True, isolation_level=None)
    try:
        encoding, page_size, auto_vacuum, user_version, application_id = (
            settings.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("encoding", "page_size", "auto_vacuum", "user_version", "application_id")
        )
    except sqlite3.Error as exc:
        raise StoreError(f"reading {copy} failed: {exc}") from None
    finally:
        settings.close()
    connection = sqlite3.connect(output, isolation_level=None)
    try:
        # What must be set before the first table, as VACUUM sets it; the database is written once, unjournaled.
        connection.execute(f"PRAGMA encoding = '{encoding}'")
        connection.execute(f"PRAGMA page_size = {int(page_size)}")
        connection.execute(f"PRAGMA auto_vacuum = {int(auto_vacuum)}")
        connection.execute("PRAGMA main.journal_mode = OFF")
        connection.execute("PRAGMA main.synchronous = OFF")
        connection.execute("ATTACH DATABASE ? AS copy", (_readonly_uri(copy),))
        for number, part in enumerate(parts):
            connection.execute(f"ATTACH DATABASE ? AS converted{number}", (_readonly_uri(part),))
        if carried is not None:
            connection.execute("ATTACH DATABASE ? AS previous", (_readonly_uri(carried[0]),))
        connection.execute("BEGIN")
        _copy_schema_and_rows(connection, len(parts), carried)
        connection.execute(f"PRAGMA user_version = {int(user_version)}")
        connection.execute(f"PRAGMA application_id = {int(application_id)}")
        connection.execute("COMMIT")
        if wal:
            connection.execute("PRAGMA main.journal_mode = WAL")
    except sqlite3.Error as exc:
        raise StoreError(f"writing {output} failed: {exc}") from None
    finally:
        connection.close()


# The schema in VACUUM's order: tables (sqlite_sequence comes with the first AUTOINCREMENT table), their rows,
# then indexes, then views, triggers and virtual tables, whose definitions are copied as they are stored.
_TABLES = """
SELECT name, sql FROM copy.sqlite_schema
WHERE type = 'table' AND name <> 'sqlite_sequence' AND coalesce(rootpage, 1) > 0 ORDER BY rowid
"""
_INDEXES = "SELECT sql FROM copy.sqlite_schema WHERE type = 'index' AND sql IS NOT NULL ORDER BY rowid"
_DEFINITIONS = """
SELECT type, name, tbl_name, sql FROM copy.sqlite_schema
WHERE type IN ('view', 'trigger') OR (type = 'table' AND rootpage = 0) ORDER BY rowid
"""
# The statistics tables cannot be created by name; ANALYZE of the schema table alone creates them empty.
_STATISTICS = ("sqlite_stat1", "sqlite_stat4")


def _copy_schema_and_rows(connection: sqlite3.Connection, parts: int, carried: tuple[Path, list[str]] | None) -> None:
    tables = connection.execute(_TABLES).fetchall()
    statistics = [name for name, _ in tables if name in _STATISTICS]
    for name, sql in tables:
        if name not in _STATISTICS:
            connection.execute(sql)
    if statistics:
        connection.execute("ANALYZE main.sqlite_schema")
    names = [name for name, _ in tables]
    if connection.execute("SELECT 1 FROM copy.sqlite_schema WHERE name = 'sqlite_sequence'").fetchone():
        names.append("sqlite_sequence")
    for name in names:
        quoted = _quote(name)
        if name == "checkpoints":
            _copy_checkpoints(connection, parts, carried)
        elif name in _STATISTICS or name == "sqlite_sequence":
            connection.execute(f"DELETE FROM main.{quoted}")
            connection.execute(f"INSERT INTO main.{quoted} SELECT * FROM copy.{quoted}")
        else:
            connection.execute(_rows_with_rowids(connection, name))
    for (sql,) in connection.execute(_INDEXES).fetchall():
        connection.execute(sql)
    definitions = connection.execute(_DEFINITIONS).fetchall()
    if definitions:
        connection.execute("PRAGMA writable_schema = ON")
        for kind, name, table, sql in definitions:
            connection.execute(
                "INSERT INTO main.sqlite_schema (type, name, tbl_name, rootpage, sql) VALUES (?, ?, ?, 0, ?)",
                (kind, name, table, sql),
            )
        connection.execute("PRAGMA writable_schema = OFF")


def _rows_with_rowids(connection: sqlite3.Connection, name: str) -> str:
    """The INSERT that copies a table's rows, their rowids kept where the table has them (a plain INSERT ...
    SELECT * numbers them afresh, and an app may keep them)."""
    quoted = _quote(name)
    columns = [row[1] for row in connection.execute("SELECT * FROM pragma_table_info(?, 'copy')", (name,))]
    if not _has_rowids(connection, quoted) or "rowid" in (column.lower() for column in columns):
        return f"INSERT INTO main.{quoted} SELECT * FROM copy.{quoted}"
    listed = ", ".join(_quote(column) for column in columns)
    return f"INSERT INTO main.{quoted} (rowid, {listed}) SELECT rowid, {listed} FROM copy.{quoted} ORDER BY rowid"


def _has_rowids(connection: sqlite3.Connection, quoted: str) -> bool:
    """False for a WITHOUT ROWID table (asked this way, it works on every SQLite version)."""
    try:
        connection.execute(f"SELECT rowid FROM copy.{quoted} LIMIT 0")
    except sqlite3.OperationalError:
        return False
    return True


def _copy_checkpoints(connection: sqlite3.Connection, parts: int, carried: tuple[Path, list[str]] | None) -> None:
    """The copy's checkpoint rows in their order, rowids kept, each converted column from the part that
    converted its thread (coalesce reads the copy's value only where none was); a catch-up's carried threads
    from the previous output instead."""
    columns = [row[1] for row in connection.execute("SELECT * FROM pragma_table_info('checkpoints', 'copy')")]
    converted = ("checkpoint", "metadata")
    chosen = [
        f"coalesce({', '.join(f'k{n}.{_quote(c)}' for n in range(parts))}, c.{_quote(c)})"
        if c in converted and parts
        else f"c.{_quote(c)}"
        for c in columns
    ]
    joins = "".join(
        f" LEFT JOIN converted{n}.converted AS k{n} ON k{n}.thread_id = c.thread_id"
        f" AND k{n}.checkpoint_ns = c.checkpoint_ns AND k{n}.checkpoint_id = c.checkpoint_id"
        for n in range(parts)
    )
    listed = ", ".join(_quote(c) for c in columns)
    carried_ids = json.dumps(carried[1] if carried is not None else [])
    connection.execute(
        f"INSERT INTO main.checkpoints (rowid, {listed}) SELECT c.rowid, {', '.join(chosen)} "
        f"FROM copy.checkpoints AS c{joins} "
        "WHERE c.thread_id NOT IN (SELECT value FROM json_each(?)) ORDER BY c.rowid",
        (carried_ids,),
    )
    if carried is not None:
        connection.execute(
            f"INSERT INTO main.checkpoints ({listed}) SELECT {listed} FROM previous.checkpoints "
            "WHERE thread_id IN (SELECT value FROM json_each(?))",
            (carried_ids,),
        )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _length(value: bytes | str) -> int:
    return len(value.encode()) if isinstance(value, str) else len(value)


def _stored_length(column: str) -> str:
    """A column's stored bytes: a BLOB's length is read from the record header, without loading the value."""
    return f"CASE typeof({column}) WHEN 'blob' THEN length({column}) ELSE length(CAST({column} AS BLOB)) END"


def file_bytes(path: Path) -> int:
    """The database's bytes on disk, its -wal included."""
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def table_bytes(path: Path) -> dict[str, int]:
    """Stored column lengths per saver table (checkpoints, writes), read-only."""
    connection = connect_readonly(SqliteTarget(path))
    try:
        checkpoints = connection.execute(
            f"SELECT coalesce(sum({_stored_length('checkpoint')} + {_stored_length('metadata')}), 0) FROM checkpoints"
        ).fetchone()[0]
        writes = connection.execute(f"SELECT coalesce(sum({_stored_length('value')}), 0) FROM writes").fetchone()[0]
    finally:
        connection.close()
    return {"checkpoints": int(checkpoints), "writes": int(writes)}
