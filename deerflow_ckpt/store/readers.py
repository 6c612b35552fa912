"""Opening a checkpoint database for reading lineages: the one entry every command's core goes through."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from deerflow_ckpt.store.records import Backend, Lineage
from deerflow_ckpt.store.selection import ThreadSelection
from deerflow_ckpt.store.source import DatabaseTarget, SqliteTarget


class LineageReader(Protocol):
    def lineages(self, selection: ThreadSelection = ...) -> Iterator[Lineage]: ...

    def split_points(self, parts_for: Callable[[int], int]) -> list[str]: ...

    def threads_since(self, boundary: str) -> list[str]: ...


def open_reader(
    target: DatabaseTarget, sizes: bool = True, messages_rows: bool = False
) -> tuple[LineageReader, Backend]:
    """The read-only reader for a target; drivers are imported only here.

    `sizes=False` lets a reader skip stored sizes that cost extra to read (verify-shape reports none).
    `messages_rows` asks the reader to hand each lineage's rows to the deep proof where it can (SQLite's compiled
    reader: Lineage.messages_rows).
    """
    if isinstance(target, SqliteTarget):
        from deerflow_ckpt.store.sqlite import SqliteCheckpointReader

        return SqliteCheckpointReader(target, messages_rows=messages_rows), Backend.SQLITE
    from deerflow_ckpt.store.postgres import PostgresCheckpointReader

    return PostgresCheckpointReader(target, sizes=sizes), Backend.POSTGRES


def reading_path(target: DatabaseTarget) -> str:
    """Which code reads and judges the rows of `target`, compiled or Python, and why (for --verbose)."""
    from deerflow_ckpt import native

    if not native.AVAILABLE:
        return f"Python ({native.PYTHON_ONLY_BECAUSE})"
    if not isinstance(target, SqliteTarget):
        return "compiled judge (psycopg reads the Postgres rows)"
    from deerflow_ckpt.store.sqlite import SqliteCheckpointReader

    python_reader_because = SqliteCheckpointReader(target).python_reader_because()
    if python_reader_because is None:
        return "compiled judge + compiled SQLite reader"
    return f"compiled judge (Python reads the SQLite rows: {python_reader_because})"
