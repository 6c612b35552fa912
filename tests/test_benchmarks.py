"""The benchmark scripts time the compiled path or say why not: run from a checkout whose extension is not built
(or with CKPT_NATIVE=0), bench_verify_shape refuses before it reads anything, unless --python-path asks for the
Python path. Nothing here times anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.bench_verify_shape import compiled_path_problem

REPO = Path(__file__).resolve().parents[1]


def _bench(*args: str, native: str | None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "CKPT_NATIVE"}
    if native is not None:
        env["CKPT_NATIVE"] = native
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_verify_shape", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_compiled_path_is_what_this_checkout_measures() -> None:
    assert compiled_path_problem("sqlite") is None
    assert compiled_path_problem("postgres") is None


def test_the_scan_benchmark_refuses_the_python_path(tmp_path: Path) -> None:
    # A store that is not there: the refusal comes before anything is read.
    refused = _bench("sqlite", str(tmp_path / "absent.db"), native="0")
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        "refusing to measure the Python path without --python-path: the compiled judge is not loaded ("
    )
    assert "deerflow_ckpt imported from " in refused.stderr and refused.stdout == ""
    assert not (tmp_path / "absent.db").exists()
