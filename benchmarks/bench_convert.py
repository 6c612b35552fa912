"""How long `ckpt convert` takes and how much memory it holds, against `verify-shape --deep` on the same source.

Run by hand, never from the tests:

    python -m benchmarks.bench_convert bench-data/bulk.db --snapshot-frequency 100 --repeat 3 --jobs 2
    python -m benchmarks.bench_convert bench-data/full300k.db --snapshot-frequency 10 --repeat 3 --jobs 2

Build the sources first with the bulk builder (docs/architecture.md, "Development"): the 1.4 GB delta database
(2000 threads x 50 turns at K=10) and a full-mode one of the same checkpoint count (`--bulk-threads 2000
--turns 50 --cadence 0 --message-bytes 200`: 300,000 checkpoints, 6 GB). `--jobs` is given to both commands.

Each measurement is a whole `ckpt` process (the installed console script next to this interpreter), started
fresh; the rounds interleave the two workloads, and the ratio compares medians. Wall seconds and the peak
resident memory of the process and its workers together (sampled every 0.1 s; the sampling costs the
measured wall time a little) are printed, with the converted file's size against the source's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _ckpt() -> str:
    return str(Path(sys.executable).with_name("ckpt"))


def _tree_rss_kib(root: int) -> int:
    """Resident KiB of `root` and every process under it now (Linux /proc): a --jobs run's workers included."""
    parents: dict[int, int] = {}
    resident: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        resident[int(entry.name)] = next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
        )
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(resident.get(pid, 0) for pid in tree)


def _measure(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MiB of the process and its workers together, sampled every 0.1 s) of one
    fresh process running `command`."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_rss_kib(process.pid))
        time.sleep(0.1)
    wall = time.perf_counter() - started
    stderr = process.stderr.read() if process.stderr is not None else ""
    if process.returncode not in (0, 1):
        sys.exit(stderr[-2000:])
    return wall, peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="SQLite database to convert")
    parser.add_argument("--to", default="delta", choices=("delta", "full"))
    parser.add_argument("--snapshot-frequency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1, help="processes, for both commands (their --jobs)")
    args = parser.parse_args()

    source = str(Path(args.source).resolve())
    scratch = Path(tempfile.mkdtemp(prefix="bench-convert-", dir=Path(source).parent))
    output = scratch / "converted.db"
    convert = [_ckpt(), "convert", "--db", source, "--to", args.to, "-o", str(output), "-q", "--jobs", str(args.jobs)]
    if args.to == "delta":
        convert += ["--snapshot-frequency", str(args.snapshot_frequency)]
    deep = [_ckpt(), "verify-shape", "--deep", "--jobs", str(args.jobs), "--db", source, "-q", "--format", "json"]
    timings: dict[str, list[tuple[float, float]]] = {"verify-shape --deep": [], "convert": []}
    _measure(deep)  # warm the page cache
    for _ in range(args.repeat):
        timings["verify-shape --deep"].append(_measure(deep))
        for leftover in scratch.iterdir():
            leftover.unlink()
        timings["convert"].append(_measure(convert))
    for name, runs in timings.items():
        walls = [wall for wall, _ in runs]
        print(
            f"{name}: median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), "
            f"peak RSS {max(rss for _, rss in runs):.0f} MiB"
        )
    ratio = statistics.median(w for w, _ in timings["convert"]) / statistics.median(
        w for w, _ in timings["verify-shape --deep"]
    )
    print(f"convert / verify-shape --deep (--jobs {args.jobs}): {ratio:.2f}x")
    print(f"size: {os.path.getsize(source):,} -> {os.path.getsize(output):,} bytes")
    shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
