"""How long `ckpt convert` takes and how much memory it holds, against `verify-shape --deep` on the same source.

Run by hand, never from the tests:

    python -m benchmarks.bench_convert bench-data/bulk.db --snapshot-frequency 100 --repeat 3 --jobs 2
    python -m benchmarks.bench_convert bench-data/full300k.db --snapshot-frequency 10 --repeat 3 --jobs 2

Build the sources first with the bulk builder (docs/architecture.md, "Development"): the 1.4 GB delta database
(2000 threads x 50 turns at K=10) and a full-mode one of the same checkpoint count (`--bulk-threads 2000
--turns 50 --cadence 0 --message-bytes 200`: 300,000 checkpoints, 6 GB). `--jobs` is given to both commands.

Each measurement is a whole `ckpt` process (the installed console script next to this interpreter), started
fresh; the rounds interleave the two workloads, and the ratio compares medians. Wall seconds and the peak RSS
of the measured process are printed, with the converted file's size against the source's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def _ckpt() -> str:
    return str(Path(sys.executable).with_name("ckpt"))


def _measure(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one fresh process running `command`."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "started = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
        "wall = time.perf_counter() - started\n"
        "if done.returncode not in (0, 1):\n"
        "    sys.exit(done.stderr[-2000:])\n"
        "print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, check=True)
    wall, rss = out.stdout.split()
    return float(wall), float(rss)


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
