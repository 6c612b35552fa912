"""How long does a short `ckpt` command take from exec to exit, against what any typer CLI pays?

Run by hand, never from the tests:

    python -m benchmarks.bench_startup --rounds 21 [--config FILE ...] [--db FILE] [--importtime]

Each round runs every command once in a fresh process, in turn, so a busy machine slows all of them
alike; the medians and their ratios to `python -c "import typer"` (the start-up baseline) and to a
two-command typer app (the floor any typer CLI pays: typer builds its parameter converters on first
parse) are printed. `--config` adds `migrate-config --check FILE` runs (a large real config, say);
`--db` adds `verify-shape` and `inspect summary` on that SQLite store with json output (a small store shows
their fixed cost: imports, opening, the process pool where one is started); `--importtime` prints the
slowest imports of `migrate-config --check` (and of verify-shape with `--db`) from `python -X importtime`.
Bytecode is written and used as in an installed package, whatever PYTHONDONTWRITEBYTECODE says.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMALL_CONFIG = (
    "database:\n  backend: sqlite\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: 10\n"
)
TYPER_APP = """\
import typer

app = typer.Typer()


@app.command()
def first(path: str, check: bool = typer.Option(False, "--check")) -> None:
    print(path, check)


@app.command()
def second() -> None:
    pass


app()
"""


def _ckpt() -> list[str]:
    script = Path(sys.executable).parent / "ckpt"
    return [str(script)] if script.exists() else [sys.executable, "-m", "deerflow_ckpt"]


def _commands(scratch: Path, configs: list[Path], db: Path | None = None) -> dict[str, list[str]]:
    small = scratch / "config.yaml"
    small.write_text(SMALL_CONFIG)
    typer_app = scratch / "typer_app.py"
    typer_app.write_text(TYPER_APP)
    ckpt = _ckpt()
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import typer"': [sys.executable, "-c", "import typer"],
        "two-command typer app": [sys.executable, str(typer_app), "first", "x", "--check"],
        "ckpt --version": [*ckpt, "--version"],
        "ckpt --help": [*ckpt, "--help"],
        "ckpt migrate-config --check (small)": [*ckpt, "migrate-config", "--check", str(small)],
        "ckpt lint-config (small)": [*ckpt, "lint-config", "--assume-set=*", str(small)],
    }
    for config in configs:
        commands[f"ckpt migrate-config --check {config.name}"] = [*ckpt, "migrate-config", "--check", str(config)]
    if db is not None:
        json_to = ["--format", "json", "-o", os.devnull]
        commands[f"ckpt verify-shape {db.name}"] = [*ckpt, "verify-shape", "--db", str(db), "--cadence", "10", *json_to]
        commands[f"ckpt inspect summary {db.name}"] = [*ckpt, "inspect", "summary", "--db", str(db), "--format", "json"]
    return commands


# An installed package has its bytecode compiled (pip does it); the warm-up run writes it for a checkout too.
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _time(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=CHILD_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def _importtime(argv: list[str], cwd: Path, top: int) -> None:
    probe = "import sys; from deerflow_ckpt.cli.launch import main; sys.argv = ['ckpt', *sys.argv[1:]]; main()"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", probe, *argv],
        cwd=cwd,
        env=CHILD_ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, own, cumulative, name = (part.strip() for part in line.replace("import time:", "|").split("|"))
            rows.append((int(cumulative), int(own), name))
    print(f"\nslowest imports of `ckpt {' '.join(argv[:2])} ...` (us, cumulative / own):")
    for cumulative, own, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cumulative:>8} {own:>8}  {name}")
    print(f"  total imported modules: {len(rows)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--config", type=Path, action="append", default=[], help="also time migrate-config on it")
    parser.add_argument("--db", type=Path, help="also time verify-shape and inspect summary on this SQLite store")
    parser.add_argument("--importtime", action="store_true", help="print the slowest imports of migrate-config")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        scratch = Path(name)
        commands = _commands(scratch, [path.resolve() for path in args.config], args.db and args.db.resolve())
        samples: dict[str, list[float]] = {label: [] for label in commands}
        for argv in commands.values():  # warm the page cache and the bytecode caches
            _time(argv, scratch)
        for _ in range(args.rounds):
            for label, argv in commands.items():
                samples[label].append(_time(argv, scratch))
        typer_import = statistics.median(samples['python -c "import typer"'])
        typer_floor = statistics.median(samples["two-command typer app"])
        print(f"{'command':<48} {'median s':>9} {'min s':>7} {'max s':>7} {'/import':>8} {'/app':>6}")
        for label, times in samples.items():
            median = statistics.median(times)
            print(
                f"{label:<48} {median:9.3f} {min(times):7.3f} {max(times):7.3f} "
                f"{median / typer_import:8.2f} {median / typer_floor:6.2f}"
            )
        if args.importtime:
            _importtime(["migrate-config", "--check", str(scratch / "config.yaml")], scratch, 25)
            if args.db is not None:
                _importtime(["verify-shape", "--db", str(args.db.resolve()), "--format", "json"], scratch, 25)


if __name__ == "__main__":
    main()
