"""The SQLite side of `ckpt convert`: a consistent copy of the source, rewritten row by row, then swapped in.

The source is read once, by SQLite's online backup API on a read-only connection (a live writer is fine:
the copy is one consistent state of the database). Everything else happens on the copy, a temporary file
beside the output: the scan and the proof read it read-only (WAL, so their snapshot stays the copy as made
while rows are rewritten), each thread's rows are rewritten in a transaction of its own, which a refused
thread rolls back, and the finished copy is vacuumed (the freed pages go) and renamed onto the output.
Tables other than the saver's (DeerFlow's `threads_meta`, runs and the rest) are never touched.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.fileio import TEMPORARY_SUFFIX
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
