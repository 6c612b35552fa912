"""How fast verify-shape reads, against a bare SELECT and against classifying through the savers.

Run by hand, never from the tests:

    python -m benchmarks.bench_verify_shape sqlite bench-data/bulk.db
    python -m benchmarks.bench_verify_shape postgres postgresql://postgres@127.0.0.1:5432/bench

Build a database first with the bulk builder, e.g. (1.4 GB, about 7 minutes on 2 cores):

    python -m fixtures.dbbuilder --sqlite bench-data/bulk.db --bulk-threads 2000 --turns 50 \
        --cadence 10 --message-bytes 500 --jobs 2

Every measurement runs in a fresh process, after one warm-up read, and reports wall seconds, the
checkpoints it covered and the peak RSS of that process and its children. On a shared machine, pass
`--repeat 3` (or more): the rounds interleave the workloads. `x bare` is the ratio of the medians, `paired` the
median of each round's ratio to the bare SELECT run just before it (steadier where the machine's speed drifts).

`--since-share 0.01` adds `verify-shape --since T` where T is chosen so that that share of the threads
(the ones whose newest checkpoint is latest) was written at or after T, and compares it with the full scan.

`--floor` (Postgres) adds what any client pays that reads each row once through libpq, at --jobs processes
over the scan's thread ranges: ckpt's three queries through cursors with every value judged and nothing
else done, and the same queries by COPY BINARY with rows not even parsed.

`--plan` adds `plan retention --keep-newest 10` rendered as its SQL script and as its json at --jobs processes,
and prints each one's ratio to the scan at the same process count (the target: at most 2x, under 200 MB peak
RSS, on the 1.4 GB database above).

`--deep` adds `verify-shape --deep` at 1 and --jobs processes and prints its ratio to the plain scan at the
same process count (the target: at most 3x, under 200 MB peak RSS, on the 1.4 GB database above).

`--whole-process` times every workload from outside its process, interpreter start-up and imports included,
and runs ckpt as an operator does: `ckpt verify-shape --db T --cadence 10 --format json -o FILE`, with the
automatic --jobs as well as 1 and --jobs processes. The bare SELECT and the saver run in a process that
imports only what they use. This is the figure the fixed cost shows in (about 0.1 s of a small store's scan).

The scan is timed on the compiled path (deerflow_ckpt/native) or not at all: run from a checkout whose
extension is not built (or with CKPT_NATIVE=0), the script refuses, unless --python-path says that the
Python path is what is to be measured.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

DELTA_SNAPSHOT_TYPE = "_DeltaSnapshot"


def _cpu_seconds() -> float:
    """User and system time of this process and its children: time a busy host steals is not in it."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _peak_rss_mib() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, children) / 1024, 1)


# -- the measured workloads (each runs in its own process) ------------------------------------------


def bare_select_sqlite(target: str) -> int:
    import sqlite3
    from pathlib import Path

    connection = sqlite3.connect(Path(target).resolve().as_uri() + "?mode=ro", uri=True)
    rows = 0
    for _ in connection.execute("SELECT checkpoint, metadata FROM checkpoints"):
        rows += 1
    return rows


def bare_select_postgres(target: str) -> int:
    import psycopg

    rows = 0
    with psycopg.connect(target) as connection, connection.cursor(name="bare") as cursor:
        cursor.itersize = 2000
        cursor.execute("SELECT checkpoint, metadata FROM checkpoints")
        for _ in cursor:
            rows += 1
    return rows


def ckpt_scan(target: str, jobs: int, since: str | None = None, deep: bool = False) -> int:
    from deerflow_ckpt.analysis.shape import ShapeSettings
    from deerflow_ckpt.commands.verify_shape import ScanRequest, scan
    from deerflow_ckpt.store.source import DatabaseChoice, target_from_argument

    choice = DatabaseChoice(target_from_argument(target), "benchmark")
    settings = ShapeSettings(expected_cadence=10, since=since, deep=deep)
    report = scan(ScanRequest(choice, settings, "benchmark"), jobs=jobs)
    return report.checkpoints


def ckpt_plan(target: str, jobs: int, output_format: str) -> int:
    """`plan retention --keep-newest 10` rendered as the script (or the plan's json), written to /dev/null."""
    from deerflow_ckpt.analysis.retention import RetentionPolicy
    from deerflow_ckpt.commands.plan_retention import RetentionRequest, plan_retention
    from deerflow_ckpt.report.retention_json import plan_to_json
    from deerflow_ckpt.report.retention_sql import plan_to_sql
    from deerflow_ckpt.store.source import DatabaseChoice, target_from_argument

    request = RetentionRequest(
        DatabaseChoice(target_from_argument(target), "benchmark"), RetentionPolicy(keep_newest=10)
    )
    plan = plan_retention(request, jobs=jobs)
    with open("/dev/null", "w") as sink:
        for chunk in plan_to_sql(plan) if output_format == "sql" else plan_to_json(plan):
            sink.write(chunk)
    return plan.checkpoints


def since_for_share(backend: str, target: str, share: float) -> tuple[str, int]:
    """The checkpoint id T such that `share` of the threads have a checkpoint at or after it, and that count."""
    query = "SELECT max(checkpoint_id) FROM checkpoints GROUP BY thread_id"
    if backend == "sqlite":
        import sqlite3
        from pathlib import Path

        connection = sqlite3.connect(Path(target).resolve().as_uri() + "?mode=ro", uri=True)
        newest = sorted((row[0] for row in connection.execute(query)), reverse=True)
    else:
        import psycopg

        with psycopg.connect(target) as connection:
            newest = sorted((row[0] for row in connection.execute(query)), reverse=True)
    count = max(1, round(len(newest) * share))
    return newest[count - 1], count


def _classify_with_saver(saver: Any, threads: list[str]) -> int:
    """What a scan through the saver does: every checkpoint, its messages shape and its counters."""
    seen = 0
    for thread_id in threads:
        for item in saver.list({"configurable": {"thread_id": thread_id}}):
            value = item.checkpoint["channel_values"].get("messages")
            _ = type(value).__name__ == DELTA_SNAPSHOT_TYPE or isinstance(value, list)
            _ = (item.metadata.get("counters_since_delta_snapshot") or {}).get("messages")
            seen += 1
    return seen


def _read_only_sqlite(target: str) -> Any:
    """A mode=ro connection for the saver: on a database the saver wrote (WAL mode, its tables there) setup()
    finds everything in place and writes nothing; on any other it fails rather than write."""
    import sqlite3
    from pathlib import Path

    return sqlite3.connect(Path(target).resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)


def saver_list_sqlite(target: str) -> int:

    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = _read_only_sqlite(target)
    threads = [row[0] for row in connection.execute("SELECT DISTINCT thread_id FROM checkpoints")]
    return _classify_with_saver(SqliteSaver(connection), threads)


def saver_list_all_sqlite(target: str) -> int:
    """The saver's own whole-database listing: list(None) walks every thread in id order."""

    from langgraph.checkpoint.sqlite import SqliteSaver

    saver = SqliteSaver(_read_only_sqlite(target))
    seen = 0
    for item in saver.list(None):
        value = item.checkpoint["channel_values"].get("messages")
        _ = type(value).__name__ == DELTA_SNAPSHOT_TYPE or isinstance(value, list)
        seen += 1
    return seen


def saver_list_postgres(target: str) -> int:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.connect(target) as connection:
        threads = [row[0] for row in connection.execute("SELECT DISTINCT thread_id FROM checkpoints")]
    with PostgresSaver.from_conn_string(target) as saver:
        return _classify_with_saver(saver, threads)


def _postgres_shares(target: str, jobs: int) -> tuple[Any, list[Any]]:
    """ckpt's Postgres reader for `target` and the thread ranges a scan at `jobs` processes reads."""
    from deerflow_ckpt.store.postgres import PostgresCheckpointReader
    from deerflow_ckpt.store.selection import ThreadSelection
    from deerflow_ckpt.store.source import target_from_argument

    reader = PostgresCheckpointReader(target_from_argument(target), sizes=False)  # type: ignore[arg-type]
    points = reader.split_points(lambda _: jobs)
    bounds = zip([None, *points], [*points, None], strict=True)
    return reader, [ThreadSelection(lower=lower, upper=upper) for lower, upper in bounds]


def _floor_share(target: str, jobs: int, index: int, copy: bool) -> int:
    """One share of ckpt's three queries and nothing else, its checkpoint rows counted: through cursors as ckpt
    fetches them, every stored value judged by the compiled judge; or by COPY BINARY, each query on its own
    connection, rows neither parsed nor judged (the server's side of a client that parses COPY itself)."""
    from deerflow_ckpt.native import value_summary
    from deerflow_ckpt.store.postgres import byte_ordered, connect, table_names, thread_ids_nullable

    reader, shares = _postgres_shares(target, jobs)
    judge = value_summary
    assert judge is not None, "the compiled judge is not built"
    connections = [connect(reader.target) for _ in range(3 if copy else 1)]
    tables = table_names(connections[0], reader.target.schema)
    nullable = thread_ids_nullable(connections[0], reader.target.schema)
    queries, parameters = reader.stream_queries(tables, shares[index], byte_ordered(connections[0]), nullable)
    rows = 0
    if copy:
        from psycopg import sql

        for connection, query in zip(connections, queries, strict=True):
            statement = sql.SQL("COPY ({}) TO STDOUT (FORMAT BINARY)").format(query)
            with connection.cursor() as cursor:
                with cursor.copy(statement, parameters) as stream:
                    while stream.read():
                        pass
                rows += cursor.rowcount if query is queries[0] else 0  # the server's count, from COPY's tag
        return rows
    connection = connections[0]
    for name, query in zip(("c", "w", "b"), queries, strict=True):
        with connection.cursor(name=name, binary=True) as cursor:
            cursor.execute(query, parameters)
            while batch := cursor.fetchmany(2000):
                if name == "c":
                    rows += len(batch)
                else:
                    for row in batch:
                        if row[-1] is not None:
                            judge(row[-1])
    connection.rollback()
    return rows


def postgres_floor(target: str, jobs: int, copy: bool) -> int:
    """_floor_share over `jobs` processes at once, as a scan at `jobs` processes splits the threads."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        return sum(pool.map(_floor_share, [target] * jobs, [jobs] * jobs, range(jobs), [copy] * jobs))


def ckpt_cli(target: str, jobs: int, since: str | None = None, deep: bool = False) -> int:
    """`ckpt verify-shape` as an operator runs it, in this process (timed whole from outside); jobs 0: automatic."""
    import os
    import tempfile

    from deerflow_ckpt.cli.launch import main

    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "report.json")
        argv = ["ckpt", "verify-shape", "--db", target, "--cadence", "10", "--format", "json", "-o", report]
        argv += ["--jobs", str(jobs)] if jobs else []
        argv += ["--since", since] if since else []
        argv += ["--deep"] if deep else []
        sys.argv = argv
        try:
            main()
        except SystemExit as exit:
            if exit.code not in (0, 1):
                raise
        with open(report) as written:
            checkpoints: int = json.load(written)["summary"]["checkpoints"]
    return checkpoints


WORKLOADS: dict[str, Callable[..., int]] = {
    "bare-sqlite": bare_select_sqlite,
    "bare-postgres": bare_select_postgres,
    "ckpt": ckpt_scan,
    "ckpt-deep": lambda target, jobs, since=None: ckpt_scan(target, jobs, since, deep=True),
    "ckpt-cli": ckpt_cli,
    "ckpt-cli-deep": lambda target, jobs, since=None: ckpt_cli(target, jobs, since, deep=True),
    "ckpt-plan-sql": lambda target, jobs, since=None: ckpt_plan(target, jobs, "sql"),
    "ckpt-plan-json": lambda target, jobs, since=None: ckpt_plan(target, jobs, "json"),
    "saver-sqlite": saver_list_sqlite,
    "saver-postgres": saver_list_postgres,
    "saver-all-sqlite": saver_list_all_sqlite,
    "floor-cursor": lambda target, jobs, since=None: postgres_floor(target, jobs, copy=False),
    "floor-copy": lambda target, jobs, since=None: postgres_floor(target, jobs, copy=True),
}


def compiled_path_problem(backend: str) -> str | None:
    """Why this interpreter's deerflow_ckpt would not scan on the compiled path, or None."""
    import deerflow_ckpt
    from deerflow_ckpt import native

    where = f"deerflow_ckpt imported from {deerflow_ckpt.__file__}"
    if not native.AVAILABLE:
        return f"the compiled judge is not loaded ({native.PYTHON_ONLY_BECAUSE}; {where})"
    if backend == "sqlite" and native.open_lineages is None:
        return f"the compiled SQLite reader is not built ({where})"
    return None


def _measure(workload: str, target: str, jobs: int, since: str | None = None) -> None:
    function = WORKLOADS[workload]
    if workload.startswith("ckpt-cli"):
        pass  # timed whole, start-up included
    elif workload.startswith(("ckpt", "floor")):
        # Start-up (interpreter and imports, the same for every run) is left out: the scan itself is timed.
        import deerflow_ckpt.commands.plan_retention
        import deerflow_ckpt.commands.verify_shape
        import deerflow_ckpt.report.retention_sql
        import deerflow_ckpt.store.postgres
        import deerflow_ckpt.store.sqlite  # noqa: F401
    started = time.perf_counter()
    rows = function(target, jobs, since) if workload.startswith(("ckpt", "floor")) else function(target)
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {"seconds": round(seconds, 3), "cpu_seconds": round(_cpu_seconds(), 3), "checkpoints": rows,
             "peak_rss_mib": _peak_rss_mib()}
        )
    )  # fmt: skip


def run(workload: str, target: str, jobs: int = 1, since: str | None = None) -> dict[str, Any]:
    """One measurement in a fresh process: its own figures, and `process_seconds`, its wall time from outside."""
    import subprocess

    command = [sys.executable, "-m", "benchmarks.bench_verify_shape", "_measure", workload, target, str(jobs)]
    command += [since] if since is not None else []
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    process_seconds = time.perf_counter() - started
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = round(process_seconds, 3)
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_measure":
        _measure(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None)
        return
    import argparse
    import statistics

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("backend", choices=("sqlite", "postgres"))
    parser.add_argument("target", help="SQLite file or Postgres DSN")
    parser.add_argument("--jobs", type=int, default=2, help="processes for the parallel ckpt run")
    parser.add_argument("--skip-saver", action="store_true", help="leave out the slow saver comparison")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of every workload, interleaved; medians are compared"
    )
    parser.add_argument("--since-share", type=float, help="also time --since T with this share of threads after T")
    parser.add_argument("--deep", action="store_true", help="also time verify-shape --deep (1 and --jobs processes)")
    parser.add_argument(
        "--floor", action="store_true", help="postgres: also time the fetch-and-judge floors at --jobs processes"
    )
    parser.add_argument(
        "--plan", action="store_true", help="also time plan retention --keep-newest 10 (sql and json) at --jobs"
    )
    parser.add_argument(
        "--whole-process",
        action="store_true",
        help="time each workload's whole process from outside, start-up included; ckpt through its CLI",
    )
    parser.add_argument(
        "--python-path", action="store_true", help="measure the scan although the compiled path is not loaded"
    )
    args = parser.parse_args()

    problem = compiled_path_problem(args.backend)
    if problem is not None and not args.python_path:
        parser.exit(2, f"refusing to measure the Python path without --python-path: {problem}\n")
    if problem is not None:
        print(f"WARNING: THE SCAN IS MEASURED ON THE PYTHON PATH: {problem}")
    run(f"bare-{args.backend}", args.target)  # warm the page cache / shared buffers
    scan = "ckpt-cli" if args.whole_process else "ckpt"
    workloads: list[tuple[str, str, int]] = [
        ("bare SELECT checkpoint, metadata", f"bare-{args.backend}", 1),
        ("ckpt scan, 1 process", scan, 1),
        (f"ckpt scan, {args.jobs} processes", scan, args.jobs),
    ]
    if args.whole_process:
        workloads.append(("ckpt scan, automatic --jobs", "ckpt-cli", 0))
    scan_rows = list(workloads[1:])
    since: str | None = None
    since_label = ""
    if args.since_share:
        since, count = since_for_share(args.backend, args.target, args.since_share)
        since_label = f"ckpt --since ({count} threads), {args.jobs} proc."
        print(f"--since {since}: {count} threads have a checkpoint written at or after it")
    saver_labels: list[str] = []
    if not args.skip_saver:
        name = "SqliteSaver" if args.backend == "sqlite" else "PostgresSaver"
        workloads.append((f"{name}.list(thread) classify", f"saver-{args.backend}", 1))
        if args.backend == "sqlite":
            workloads.append((f"{name}.list(None) classify", "saver-all-sqlite", 1))
        saver_labels = [label for label, workload, _ in workloads if workload.startswith("saver")]
    if since_label:
        workloads.append((since_label, "ckpt-since", args.jobs))
    deep_labels = [(f"ckpt --deep, {jobs} process{'es' if jobs > 1 else ''}", jobs) for jobs in (1, args.jobs)]
    if args.deep:
        workloads += [(label, f"{scan}-deep", jobs) for label, jobs in deep_labels]
    plan_labels = [(f"plan retention --format {f}, {args.jobs} proc.", f"ckpt-plan-{f}") for f in ("sql", "json")]
    if args.plan:
        workloads += [(label, workload, args.jobs) for label, workload in plan_labels]
    if args.floor and args.backend == "postgres":
        workloads += [
            (f"floor: cursors, judge only, {args.jobs} proc.", "floor-cursor", args.jobs),
            (f"floor: COPY BINARY, no parse, {args.jobs} proc.", "floor-copy", args.jobs),
        ]
    # Rounds interleave the workloads, so a slow spell of a shared machine hits all of them alike.
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in workloads}
    for _ in range(args.repeat):
        for label, workload, jobs in workloads:
            if workload == "ckpt-since":
                results[label].append(run(scan, args.target, jobs, since))
            else:
                results[label].append(run(workload, args.target, jobs))
    timed = "process_seconds" if args.whole_process else "seconds"
    print("whole processes, start-up included" if args.whole_process else "in process, start-up left out")
    medians = {label: statistics.median(r[timed] for r in rounds) for label, rounds in results.items()}
    cpu = {label: statistics.median(r["cpu_seconds"] for r in rounds) for label, rounds in results.items()}
    bare = medians[workloads[0][0]]
    # Each round's own ratio to the bare SELECT run just before it: a machine whose speed drifts between rounds
    # moves both alike, so the median of these is steadier than the ratio of the medians.
    bare_rounds = [r[timed] for r in results[workloads[0][0]]]
    paired = {
        label: statistics.median(r[timed] / b for r, b in zip(rounds, bare_rounds, strict=True) if b)
        for label, rounds in results.items()
    }
    print(f"{'workload':38} {'median s':>8} {'min s':>7} {'max s':>7} {'cpu s':>7} {'checkpoints':>12} "
          f"{'per second':>11} {'peak RSS':>9} {'x bare':>7} {'paired':>7}")  # fmt: skip
    for label, rounds in results.items():
        seconds = [r[timed] for r in rounds]
        checkpoints = rounds[0]["checkpoints"]
        per_second = checkpoints / medians[label] if medians[label] else float("inf")
        rss = max(r["peak_rss_mib"] for r in rounds)
        print(
            f"{label:38} {medians[label]:8.2f} {min(seconds):7.2f} {max(seconds):7.2f} {cpu[label]:7.2f} "
            f"{checkpoints:12d} {per_second:11.0f} {rss:7.1f}MB {medians[label] / bare:7.2f} {paired[label]:7.2f}"
        )
    if since_label:
        full = f"ckpt scan, {args.jobs} processes"
        print(f"{since_label}: {medians[since_label] / medians[full]:.1%} of the full scan's median wall seconds")
    if args.plan:
        plain = f"ckpt scan, {args.jobs} processes"
        for label, _ in plan_labels:
            print(f"{label}: {medians[label] / medians[plain]:.2f}x the wall seconds of '{plain}'")
    if args.deep:
        for (label, _), (plain, _, _) in zip(deep_labels, workloads[1:3], strict=True):
            print(f"{label}: {medians[label] / medians[plain]:.2f}x the wall seconds of '{plain}'")
    for saver_label in saver_labels:
        for label, _, _ in scan_rows:
            print(
                f"{label}: {medians[saver_label] / medians[label]:.1f}x faster than {saver_label} (median wall "
                f"seconds; {cpu[saver_label] / cpu[label]:.1f}x less CPU time)"
            )


if __name__ == "__main__":
    main()
