"""What counting a Postgres store's rows costs `ckpt inspect storage`, against the statistics it read before.

Run by hand, never from the tests, on a database the bulk builder wrote with real graphs:

    python -m fixtures.dbbuilder --postgres DSN --schema bench --bulk-threads 300 --turns 50
    python -m benchmarks.bench_storage_counts --dsn DSN --schema bench

Times, interleaved in one run (median of `--repeat` rounds after a warm-up, each in its own READ ONLY
transaction on one connection): the catalog and statistics read `inspect storage` took rows from
before (the four tables' sizes and pg_stat_all_tables entries), the count(*) it runs now
(store/storage_postgres.py, `_Reader._row_counts`'s query), and the whole read in process, with and without
the per-channel passes.
Prints each and the ratios: count(*) against the statistics read, and count(*) as a share of each read.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def in_transaction(connection: Any, text: str) -> Callable[[], object]:
    def run() -> object:
        try:
            return connection.execute(text).fetchall()
        finally:
            connection.rollback()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True, help="the database (libpq DSN or URL)")
    parser.add_argument("--schema", default="public", help="the checkpoint tables' schema")
    parser.add_argument("--repeat", type=int, default=7, help="timed rounds per figure (after one warm-up)")
    args = parser.parse_args()

    from psycopg import sql

    from deerflow_ckpt.store.postgres import connect
    from deerflow_ckpt.store.source import postgres_target
    from deerflow_ckpt.store.storage import StorageRequest
    from deerflow_ckpt.store.storage_postgres import read_postgres_storage

    target = postgres_target(args.dsn, args.schema)
    connection = connect(target)
    names = [sql.Identifier(args.schema, table).as_string(connection) for table in TABLES]
    # The query inspect storage took rows (n_live_tup) and dead rows from before: sizes and statistics.
    oids = ", ".join(f"'{name}'::regclass" for name in names)
    statistics_sql = (
        "SELECT c.relname, pg_total_relation_size(c.oid), pg_indexes_size(c.oid), "
        "coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0), "
        "s.n_live_tup, s.n_dead_tup, s.last_vacuum, s.last_autovacuum, s.last_analyze, s.last_autoanalyze "
        f"FROM pg_class c LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid WHERE c.oid IN ({oids})"
    )
    count_sql = "SELECT " + ", ".join(f"(SELECT count(*) FROM {name})" for name in names)
    counts = in_transaction(connection, count_sql)()
    print(f"{target.describe()}: rows {dict(zip(TABLES, counts[0], strict=True))}")  # type: ignore[index]

    figures: dict[str, list[float]] = {"statistics read": [], "count(*)": [], "read --no-channels": [], "read": []}
    runs = {
        "statistics read": in_transaction(connection, statistics_sql),
        "count(*)": in_transaction(connection, count_sql),
        "read --no-channels": lambda: read_postgres_storage(target, StorageRequest(channels=False)),
        "read": lambda: read_postgres_storage(target, StorageRequest()),
    }
    for run in runs.values():  # a warm-up: the caches, and psycopg's first connection
        run()
    # Interleaved rounds: a busy moment on the shared machine falls on every figure alike.
    for _ in range(args.repeat):
        for name, run in runs.items():
            figures[name].append(timed(run))
    connection.close()
    medians = {name: statistics.median(times) for name, times in figures.items()}
    for name, median in medians.items():
        print(f"{name:20} {median * 1e3:10.2f} ms  (median of {len(figures[name])})")
    count = medians["count(*)"]
    print(f"count(*) / statistics read: {count / medians['statistics read']:.0f}x")
    print(f"count(*) / read --no-channels: {count / medians['read --no-channels']:.1%}")
    print(f"count(*) / read: {count / medians['read']:.1%}")


if __name__ == "__main__":
    main()
