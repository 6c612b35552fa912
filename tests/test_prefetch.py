"""The Postgres reader's prefetching thread, on real server-side cursors of the real server.

Rows must come out exactly as the cursors hold them whatever order the reader takes them in, a server
error must reach the reader, and stopping early must hand the connection back usable.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from deerflow_ckpt.store.prefetch import FIRST_SIZED_ROWS, Prefetcher


@pytest.fixture
def connection(pg_database: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_database, autocommit=False) as connection:
        yield connection


def _cursor(connection: psycopg.Connection, name: str, query: str) -> psycopg.ServerCursor:
    cursor = connection.cursor(name=name)
    cursor.execute(query)  # type: ignore[arg-type]
    return cursor


def test_rows_come_out_whole_and_in_order_at_any_pace(connection: psycopg.Connection) -> None:
    sizes = [2500, 7, 0]
    cursors = [_cursor(connection, f"c{i}", f"SELECT n, md5(n::text) FROM generate_series(1, {n}) n") for i, n in
               enumerate(sizes)]  # fmt: skip
    prefetcher = Prefetcher(cursors, batch_rows=100, depth=2)
    try:
        streams = [prefetcher.rows(i) for i in range(3)]
        taken: list[list[tuple[int, str]]] = [[], [], []]
        # Uneven pace: a row of the first stream, then drain the second, then the rest of the first.
        taken[0].append(next(streams[0]))
        taken[1].extend(streams[1])
        taken[0].extend(streams[0])
        taken[2].extend(streams[2])
    finally:
        prefetcher.close()
    expected = [connection.execute(f"SELECT n, md5(n::text) FROM generate_series(1, {n}) n").fetchall() for n in sizes]
    assert taken == expected


def test_a_server_error_reaches_the_reader(connection: psycopg.Connection) -> None:
    # Row 1500 divides by zero: the server fails on a later batch, in the fetching thread.
    failing = _cursor(connection, "failing", "SELECT 1 / (1500 - n) FROM generate_series(1, 3000) n")
    prefetcher = Prefetcher([failing], batch_rows=100)
    try:
        with pytest.raises(psycopg.errors.DivisionByZero):
            for _ in prefetcher.rows(0):
                pass
    finally:
        prefetcher.close()


def test_stopping_early_hands_the_connection_back(connection: psycopg.Connection) -> None:
    cursor = _cursor(connection, "long", "SELECT n FROM generate_series(1, 100000) n")
    prefetcher = Prefetcher([cursor], batch_rows=50, depth=3)
    assert next(prefetcher.rows(0)) == (1,)
    prefetcher.close()
    assert not prefetcher._thread.is_alive()
    connection.rollback()
    assert connection.execute("SELECT 42").fetchone() == (42,)


class _Recording:
    """A real server-side cursor whose fetchmany sizes are kept, to see how batches were sized."""

    def __init__(self, cursor: psycopg.ServerCursor) -> None:
        self.cursor = cursor
        self.asked: list[int] = []

    def fetchmany(self, size: int) -> list[tuple[int, int]]:
        self.asked.append(size)
        return self.cursor.fetchmany(size)


def test_batches_of_large_rows_are_sized_to_the_byte_budget(connection: psycopg.Connection) -> None:
    # Rows 1-500 say they are 1 kB, 501-1000 100 kB (a thread's snapshots), the rest 1 kB again (the next
    # thread's small blobs, before its snapshots): 1 MB budget, 400 rows most.
    query = "SELECT n, CASE WHEN n BETWEEN 501 AND 1000 THEN 100000 ELSE 1000 END FROM generate_series(1, 2000) n"
    cursor = _Recording(_cursor(connection, "sized", query))
    prefetcher = Prefetcher([cursor], batch_rows=400, depth=2, size_columns={0: 1}, batch_bytes=1_000_000)
    try:
        rows = list(prefetcher.rows(0))
    finally:
        prefetcher.close()
    assert rows == connection.execute(query).fetchall()
    # 16 rows first, doubling while the largest row is 1 kB (to 400 at most); once a 100 kB row has been
    # seen, 10 rows (1 MB) at a time, the small rows after it included.
    small = [16, 32, 64, 128, 256]  # 496 rows, all 1 kB
    assert FIRST_SIZED_ROWS == 16 and cursor.asked[:6] == [*small, 400]
    assert set(cursor.asked[6:-1]) == {10}  # the last ask, after a short batch, finds the cursor empty
