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

_UPDATE = """
UPDATE checkpoints SET checkpoint = ?, metadata = ?
WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
"""


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


def catch_up(copy: Path, previous: Path) -> tuple[list[str], list[str]]:
    """Carry the previous output's rows of every thread the source has not changed since into the fresh copy;
    return the threads to convert (new or changed, text ids only) and those carried over."""
    connection = sqlite3.connect(resolved(copy, StoreError).as_uri(), uri=True, isolation_level=None)
    try:
        previous_uri = resolved(previous, StoreError).as_uri() + "?mode=ro"
        connection.execute("ATTACH DATABASE ? AS previous", (previous_uri,))
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
    return changed, unchanged


# Threads rewritten per transaction: each thread is a savepoint (a refused one is rolled back alone), and
# committing seldom keeps the WAL's page writes few.
_THREADS_PER_COMMIT = 256
_LINEAGE_ROWS = """
SELECT checkpoint_id, type, metadata FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?
"""
_CHECKPOINT = "SELECT checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
_UPDATE_METADATA = """
UPDATE checkpoints SET metadata = ? WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
"""


class SqliteRowWriter:
    """Rewrites checkpoint rows of the copy: each thread in a savepoint, many threads per transaction."""

    def __init__(self, copy: Path) -> None:
        self.path = copy
        self._connection = sqlite3.connect(copy, isolation_level=None)
        self._connection.execute("PRAGMA synchronous = OFF")
        # The readers keep their snapshot of the copy until the end, so the WAL cannot be folded in meanwhile:
        # trying every 1000 pages only costs. Pages the rewrite touches are kept in memory (64 MiB at most).
        self._connection.execute("PRAGMA wal_autocheckpoint = 0")
        self._connection.execute("PRAGMA cache_size = -65536")
        self._open = 0

    def execute(self, query: str, parameters: tuple[Any, ...]) -> sqlite3.Cursor:
        try:
            return self._connection.execute(query, parameters)
        except sqlite3.Error as exc:
            raise StoreError(f"rewriting {self.path} failed: {exc}") from None

    def execute_many(self, query: str, rows: list[tuple[Any, ...]]) -> None:
        try:
            self._connection.executemany(query, rows)
        except sqlite3.Error as exc:
            raise StoreError(f"rewriting {self.path} failed: {exc}") from None

    def lineage(self, thread_id: str, checkpoint_ns: str, delta: bool) -> SqliteLineageRewrite:
        return SqliteLineageRewrite(self, thread_id, checkpoint_ns, delta)

    @contextmanager
    def thread(self) -> Iterator[None]:
        """One thread's rewrites: kept whole, or rolled back whole when the body raises."""
        if self._open == 0:
            self._connection.execute("BEGIN IMMEDIATE")
        self._connection.execute("SAVEPOINT thread")
        try:
            yield
        except BaseException:
            self._connection.execute("ROLLBACK TO thread")
            self._connection.execute("RELEASE thread")
            raise
        self._connection.execute("RELEASE thread")
        self._open += 1
        if self._open >= _THREADS_PER_COMMIT:
            self._commit()

    def _commit(self) -> None:
        if self._connection.in_transaction:
            self._connection.execute("COMMIT")
        self._open = 0

    def finish(self, output: Path, wal: bool) -> None:
        """Write the rewritten copy to `output` without the pages the rewrites freed (VACUUM INTO), in the
        source's journal mode."""
        connection = self._connection
        try:
            self._commit()
            connection.execute("VACUUM INTO ?", (str(output),))
        except sqlite3.Error as exc:
            raise StoreError(f"writing {output} failed: {exc}") from None
        finally:
            connection.close()
        if wal:
            try:
                finished = sqlite3.connect(output, isolation_level=None)
                finished.execute("PRAGMA journal_mode = WAL")
                finished.close()
            except sqlite3.Error as exc:
                raise StoreError(f"writing {output} failed: {exc}") from None

    def close(self) -> None:
        self._connection.close()


class SqliteLineageRewrite:
    """One lineage's checkpoints, rewritten one by one as the proof reaches them. Each row's type and metadata
    are read up front (small); a checkpoint's bytes only where the messages value it stores changes."""

    def __init__(self, writer: SqliteRowWriter, thread_id: str, checkpoint_ns: str, delta: bool) -> None:
        self._writer = writer
        self._key = (thread_id, checkpoint_ns)
        self._delta = delta
        self._rows = {row[0]: (row[1], row[2]) for row in writer.execute(_LINEAGE_ROWS, self._key)}
        # Rows whose metadata alone changes, written together by finish().
        self._metadata: list[tuple[bytes | str, str, str, str]] = []

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
        row = self._rows.get(checkpoint_id)
        if row is None:
            raise RowNotRewritable(f"checkpoint {checkpoint_id}'s key is not stored as text")
        kind, metadata = row
        if kind != "msgpack" or not isinstance(metadata, bytes | str):
            raise RowNotRewritable(f"checkpoint {checkpoint_id} is not stored as msgpack")
        key = (*self._key, checkpoint_id)
        new_metadata = converted_metadata_bytes(metadata, self._delta, counters)
        before = after = _length(metadata)
        after = _length(new_metadata)
        changed = new_metadata != metadata
        if stores_now or messages is not None:
            found = self._writer.execute(_CHECKPOINT, key).fetchone()
            data = found[0] if found is not None else None
            if not isinstance(data, bytes):
                raise RowNotRewritable(f"checkpoint {checkpoint_id} is not stored as msgpack bytes")
            new_data = with_messages(split_checkpoint(data), messages)
            before, after = before + len(data), after + len(new_data)
            if new_data != data:
                self._writer.execute(_UPDATE, (new_data, new_metadata, *key))
                return RowChange(before, after, True)
        if changed:
            self._metadata.append((new_metadata, *key))
        return RowChange(before, after, changed)

    def finish(self) -> tuple[int, int]:
        """Write the rows whose metadata alone changed; SQLite keeps no blobs apart."""
        self._writer.execute_many(_UPDATE_METADATA, self._metadata)
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
