"""Where does a second process start to pay? verify-shape at --jobs 1 and 2 on stores of several sizes.

Run by hand, never from the tests:

    python -m benchmarks.bench_jobs bench-data/sub10.db bench-data/sub40.db bench-data/mid45k.db --repeat 7

Each round runs, per store, `ckpt verify-shape --db S --cadence 10 --format json -o /dev/null` at --jobs 1 and
at --jobs 2 in fresh processes, in turn, so a busy spell of a shared machine slows both alike. Printed per
store: median wall and CPU seconds (the process and its workers) of each, and what the second process cost
in CPU. From the CPU figures, which a busy machine disturbs much less than wall time, it derives the
crossover on an idle machine with two free cores: a second process saves half the scan's per-checkpoint CPU
on each checkpoint and costs its fixed CPU (fork, its own reads of the store's schema, the split, the merge)
once; so it pays from 2 x fixed / per-checkpoint checkpoints. commands/shares.CHECKPOINTS_PER_PROCESS is set
from it (docs/architecture.md has the measured figures).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(database: Path, jobs: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole verify-shape process, its workers included."""
    command = [sys.executable, "-m", "deerflow_ckpt", "verify-shape", "--db", str(database), "--cadence", "10"]
    command += ["--format", "json", "-o", os.devnull, "--jobs", str(jobs)]
    cpu, started = _children_cpu(), time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started, _children_cpu() - cpu


def _checkpoints(database: Path) -> int:
    import sqlite3

    connection = sqlite3.connect(database.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        (count,) = connection.execute("SELECT count(*) FROM checkpoints").fetchone()
    finally:
        connection.close()
    return int(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("databases", nargs="+", type=Path, help="SQLite stores, best of several sizes")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from benchmarks.bench_verify_shape import compiled_path_problem

    problem = compiled_path_problem("sqlite")
    if problem is not None:
        parser.exit(2, f"refusing to measure the Python path: {problem}\n")
    samples: dict[tuple[Path, int], list[tuple[float, float]]] = {(d, j): [] for d in args.databases for j in (1, 2)}
    for key in samples:  # warm the page cache and the bytecode
        _run(*key)
    for _ in range(args.repeat):
        for key in samples:
            samples[key].append(_run(*key))
    print(
        f"{'store':24} {'checkpoints':>11} {'wall 1':>7} {'wall 2':>7} {'2/1':>5} {'cpu 1':>6} {'cpu 2':>6} {'+cpu':>6}"
    )
    sizes, one_cpu, extra_cpu = [], [], []
    for database in args.databases:
        wall = {j: statistics.median(s[0] for s in samples[(database, j)]) for j in (1, 2)}
        cpu = {j: statistics.median(s[1] for s in samples[(database, j)]) for j in (1, 2)}
        checkpoints = _checkpoints(database)
        sizes.append(checkpoints)
        one_cpu.append(cpu[1])
        extra_cpu.append(cpu[2] - cpu[1])
        print(
            f"{database.name:24} {checkpoints:11d} {wall[1]:7.3f} {wall[2]:7.3f} {wall[2] / wall[1]:5.2f} "
            f"{cpu[1]:6.3f} {cpu[2]:6.3f} {cpu[2] - cpu[1]:6.3f}"
        )
    if len(sizes) >= 2:
        slope, intercept = statistics.linear_regression(sizes, one_cpu)
        fixed = statistics.median(extra_cpu)
        print(f"one process: {intercept:.3f} s CPU fixed + {slope * 1e6:.2f} us a checkpoint")
        print(f"a second process costs {fixed:.3f} s CPU (median over the stores)")
        if slope > 0:
            print(f"it pays, on two idle cores, from about {2 * fixed / slope:,.0f} checkpoints")


if __name__ == "__main__":
    main()
