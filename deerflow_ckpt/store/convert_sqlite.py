"""The SQLite side of `ckpt convert`: a consistent copy of the source, rewritten row by row, then swapped in.

The source is read once, by SQLite's online backup API on a read-only connection (a live writer is fine:
the copy is one consistent state of the database). Everything else happens on the copy, a temporary file
beside the output: the scan and the proof read it read-only (WAL, so their snapshot stays the copy as made
while rows are rewritten), each thread's rows are rewritten in a transaction of its own, which a refused
thread rolls back, and the finished copy is vacuumed (the freed pages go) and renamed onto the output.
Tables other than the saver's (DeerFlow's `threads_meta`, runs and the rest) are never touched.
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
from deerflow_ckpt.fileio import TEMPORARY_SUFFIX
from deerflow_ckpt.store.rewrite import (
    RowChange,
    RowNotRewritable,
    converted_metadata,
    has_messages_version,
    metadata_bytes,
    metadata_dict,
    split_checkpoint,
    with_messages,
)
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.sqlite import connect_readonly

_ROW = """
SELECT type, checkpoint, metadata FROM checkpoints
WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
"""
_UPDATE = """
UPDATE checkpoints SET checkpoint = ?, metadata = ?
WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
"""
# Pages copied per step of the backup: a live writer gets the lock between steps.
_BACKUP_PAGES = 4096


def temporary_beside(output: Path) -> Path:
    return output.with_name(f".{output.name}.{os.getpid()}{TEMPORARY_SUFFIX}")


def sidecars(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")]


def copy_database(source: SqliteTarget, copy: Path) -> bool:
    """Copy the source into `copy` with the backup API; True when the source is in WAL mode."""
    reading = connect_readonly(source)
    try:
        wal = bool(reading.execute("PRAGMA journal_mode").fetchone()[0] == "wal")
        writing = sqlite3.connect(copy, isolation_level=None)
        try:
            reading.backup(writing, pages=_BACKUP_PAGES)
            # The copy is read while it is rewritten: WAL keeps the readers' snapshot. It is a scratch file
            # until it is renamed, so a crash costs a re-run, not an fsync per thread.
            writing.execute("PRAGMA journal_mode = WAL")
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


def catch_up(copy: Path, previous: Path) -> tuple[list[str], int]:
    """Carry the previous output's rows of every thread the source has not changed since into the fresh copy;
    return the threads to convert (new or changed, text ids only) and how many were carried over."""
    connection = sqlite3.connect(copy.resolve().as_uri(), uri=True, isolation_level=None)
    try:
        connection.execute("ATTACH DATABASE ? AS previous", (previous.resolve().as_uri() + "?mode=ro",))
        fresh, before = _thread_rows(connection, "main"), _thread_rows(connection, "previous")
        unchanged = [t for t, rows in fresh.items() if type(t) is str and before.get(t) == rows]
        changed = sorted(t for t in fresh if type(t) is str and t not in set(unchanged))
        connection.execute("BEGIN IMMEDIATE")
        ids = json.dumps(unchanged)
        connection.execute("DELETE FROM main.checkpoints WHERE thread_id IN (SELECT value FROM json_each(?))", (ids,))
        connection.execute(
            "INSERT INTO main.checkpoints SELECT * FROM previous.checkpoints "
            "WHERE thread_id IN (SELECT value FROM json_each(?))",
            (ids,),
        )
        connection.execute("COMMIT")
        connection.execute("DETACH DATABASE previous")
    except sqlite3.Error as exc:
        raise StoreError(f"catching up {previous} failed: {exc}") from None
    finally:
        connection.close()
    return changed, len(unchanged)


class SqliteRowWriter:
    """Rewrites checkpoint rows of the copy, one thread per transaction."""

    def __init__(self, copy: Path) -> None:
        self.path = copy
        self._connection = sqlite3.connect(copy, isolation_level=None)
        self._connection.execute("PRAGMA synchronous = OFF")

    def row(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> tuple[Any, Any, Any] | None:
        """(type, checkpoint, metadata) as stored, or None when no row has that key as text."""
        found = self._connection.execute(_ROW, (thread_id, checkpoint_ns, checkpoint_id)).fetchone()
        return None if found is None else (found[0], found[1], found[2])

    def update(self, key: tuple[str, str, str], checkpoint: bytes, metadata: bytes | str) -> None:
        self._connection.execute(_UPDATE, (checkpoint, metadata, *key))

    def lineage(self, thread_id: str, checkpoint_ns: str, delta: bool) -> SqliteLineageRewrite:
        return SqliteLineageRewrite(self, thread_id, checkpoint_ns, delta)

    @contextmanager
    def thread(self) -> Iterator[None]:
        """One thread's rewrites: committed whole, or rolled back whole when the body raises."""
        self._connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._connection.execute("ROLLBACK")
            raise
        self._connection.execute("COMMIT")

    def finish(self, wal: bool) -> None:
        """Fold the WAL in, give the freed pages back, and leave the copy in the source's journal mode."""
        connection = self._connection
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.execute("VACUUM")
            if not wal:
                connection.execute("PRAGMA journal_mode = DELETE")
            connection.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise StoreError(f"finishing {self.path} failed: {exc}") from None
        finally:
            connection.close()

    def close(self) -> None:
        self._connection.close()


class SqliteLineageRewrite:
    """One lineage's checkpoints, rewritten one by one as the proof reaches them."""

    def __init__(self, writer: SqliteRowWriter, thread_id: str, checkpoint_ns: str, delta: bool) -> None:
        self._writer = writer
        self._key = (thread_id, checkpoint_ns)
        self._delta = delta
        self._row: tuple[str, dict[str, Any], bytes, bytes | str] | None = None

    def has_version(self, checkpoint_id: str) -> bool:
        row = self._writer.row(*self._key, checkpoint_id)
        if row is None:
            raise RowNotRewritable(f"checkpoint {checkpoint_id}'s key is not stored as text")
        kind, data, metadata = row
        if kind != "msgpack" or not isinstance(data, bytes) or not isinstance(metadata, bytes | str):
            raise RowNotRewritable(f"checkpoint {checkpoint_id} is not stored as msgpack")
        top = split_checkpoint(data)
        self._row = (checkpoint_id, top, data, metadata)
        return has_messages_version(top)

    def store(self, checkpoint_id: str, messages: bytes | None, counters: tuple[int, int] | None) -> RowChange:
        assert self._row is not None and self._row[0] == checkpoint_id
        _, top, data, metadata = self._row
        new_data = with_messages(top, messages)
        new_metadata = metadata_bytes(converted_metadata(metadata_dict(metadata), self._delta, counters), metadata)
        changed = new_data != data or new_metadata != metadata
        if changed:
            self._writer.update((*self._key, checkpoint_id), new_data, new_metadata)
        return RowChange(len(data) + _length(metadata), len(new_data) + _length(new_metadata), changed)

    def finish(self) -> tuple[int, int]:
        """Every row was written as it was decided; SQLite keeps no blobs apart."""
        return 0, 0


def _length(value: bytes | str) -> int:
    return len(value.encode()) if isinstance(value, str) else len(value)


def file_bytes(path: Path) -> int:
    """The database's bytes on disk, its -wal included."""
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def table_bytes(path: Path) -> dict[str, int]:
    """Stored column lengths per saver table (checkpoints, writes), read-only."""
    connection = connect_readonly(SqliteTarget(path))
    try:
        checkpoints = connection.execute(
            "SELECT coalesce(sum(length(CAST(checkpoint AS BLOB)) + length(CAST(metadata AS BLOB))), 0) "
            "FROM checkpoints"
        ).fetchone()[0]
        writes = connection.execute("SELECT coalesce(sum(length(CAST(value AS BLOB))), 0) FROM writes").fetchone()[0]
    finally:
        connection.close()
    return {"checkpoints": int(checkpoints), "writes": int(writes)}
