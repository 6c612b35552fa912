"""Does inspecting one thread cost the same however large the database around it is?

Run by hand, never from the tests:

    python -m benchmarks.bench_inspect --background 200 --workdir bench-data/inspect

Builds, with the bulk builder and real graphs, one target thread (`--target-turns` turns) and two
SQLite databases that hold it: one among N other threads, one among 10N (`--background`, each of
`--turns` turns). Then times `ckpt inspect thread <target>` on both, in fresh processes after a warm-up
(what an operator waits for) and in-process as the median of several runs (the read and the analysis
alone), and prints both figures and their ratio. Target: within 1.5x.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TARGET_PREFIX = "target"
TARGET_THREAD = f"{TARGET_PREFIX}-000000"
RATIO_TARGET = 1.5


def build(workdir: Path, background: int, turns: int, target_turns: int, cadence: int, jobs: int) -> list[Path]:
    """The target thread merged into a database of `background` and one of 10x `background` threads."""
    from fixtures.dbbuilder.bulk import _merge, build_bulk_sqlite

    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / "target.db"
    if not target.exists():
        build_bulk_sqlite(target, 1, target_turns, cadence, jobs=1, prefix=TARGET_PREFIX)
    databases = []
    for threads in (background, 10 * background):
        path = workdir / f"around-{threads}.db"
        if not path.exists():
            started = time.perf_counter()
            partial = path.with_name(path.name + ".partial")
            for suffix in ("", "-wal", "-shm"):
                Path(f"{partial}{suffix}").unlink(missing_ok=True)
            build_bulk_sqlite(partial, threads, turns, cadence, jobs=jobs)
            _merge(partial, [target])  # checkpoints the WAL into the main file before returning
            partial.rename(path)
            for suffix in ("-wal", "-shm"):
                Path(f"{partial}{suffix}").unlink(missing_ok=True)
            print(f"built {path} ({threads} threads + the target) in {time.perf_counter() - started:.0f} s")
        databases.append(path)
    return databases


def cli_seconds(database: Path, repeat: int) -> float:
    """Median wall time of `ckpt inspect thread` in a fresh process, interpreter start-up included."""
    command = [sys.executable, "-m", "deerflow_ckpt", "inspect", "thread", TARGET_THREAD, "--db", str(database)]
    times = []
    for attempt in range(repeat + 1):
        started = time.perf_counter()
        subprocess.run([*command, "--format", "json"], check=True, capture_output=True)
        if attempt:  # the first run warms the page cache
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def in_process_seconds(database: Path, repeat: int) -> tuple[float, int]:
    """Median time to read the thread's rows and analyse them, and the checkpoints it covered."""
    from deerflow_ckpt.analysis.inspection import InspectSettings, inspect_thread
    from deerflow_ckpt.store.readers import open_reader
    from deerflow_ckpt.store.selection import ThreadSelection
    from deerflow_ckpt.store.source import target_from_argument

    reader, backend = open_reader(target_from_argument(str(database)))
    times, checkpoints = [], 0
    for attempt in range(repeat + 1):
        started = time.perf_counter()
        lineages = list(reader.lineages(ThreadSelection(thread_id=TARGET_THREAD)))
        inspected = inspect_thread(lineages, backend, InspectSettings())
        if attempt:
            times.append(time.perf_counter() - started)
        checkpoints = inspected.checkpoints
    return statistics.median(times), checkpoints


def database_rows(database: Path) -> int:
    import sqlite3

    connection = sqlite3.connect(database.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        (count,) = connection.execute("SELECT count(*) FROM checkpoints").fetchone()
        return int(count)
    finally:
        connection.close()


@dataclass(frozen=True)
class Figure:
    database: Path
    database_checkpoints: int
    size: int
    thread_checkpoints: int
    in_process: float
    cli: float

    @classmethod
    def measure(cls, database: Path, repeat: int) -> Figure:
        in_process, checkpoints = in_process_seconds(database, repeat)
        cli = cli_seconds(database, repeat)
        return cls(database, database_rows(database), database.stat().st_size, checkpoints, in_process, cli)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--background", type=int, default=200, help="N: other threads in the smaller database")
    parser.add_argument("--turns", type=int, default=20, help="turns of each other thread")
    parser.add_argument("--target-turns", type=int, default=200, help="turns of the inspected thread")
    parser.add_argument("--cadence", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4), help="builder processes")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per figure (after one warm-up)")
    parser.add_argument("--workdir", type=Path, default=Path("bench-data/inspect"))
    parser.add_argument("--rebuild", action="store_true", help="build the databases again")
    args = parser.parse_args()
    if args.rebuild and args.workdir.exists():
        shutil.rmtree(args.workdir)

    small, large = build(args.workdir, args.background, args.turns, args.target_turns, args.cadence, args.jobs)
    figures = [Figure.measure(database, args.repeat) for database in (small, large)]
    turns = f"{args.target_turns} turns, K={args.cadence}"
    print(f"inspected thread {TARGET_THREAD}: {figures[0].thread_checkpoints} checkpoints ({turns})")
    print(f"{'database':24} {'checkpoints':>12} {'size MB':>8} {'in-process ms':>14} {'ckpt CLI ms':>12}")
    for figure in figures:
        print(
            f"{figure.database.name:24} {figure.database_checkpoints:12d} {figure.size / 1e6:8.1f} "
            f"{figure.in_process * 1e3:14.1f} {figure.cli * 1e3:12.1f}"
        )
    in_ratio = figures[1].in_process / figures[0].in_process
    cli_ratio = figures[1].cli / figures[0].cli
    verdict = "within" if max(in_ratio, cli_ratio) <= RATIO_TARGET else "NOT within"
    print(f"ratio 10N / N: in-process {in_ratio:.2f}x, CLI {cli_ratio:.2f}x ({verdict} the {RATIO_TARGET}x target)")


if __name__ == "__main__":
    main()
