"""CKPT_NATIVE=0 makes every caller take the Python path, with the same report; --verbose says which path ran.

Each setting runs ckpt in its own process: the switch is read once, when deerflow_ckpt.native is imported.
"""

from __future__ import annotations

import pytest

from tests.cli import CkptRun, run_ckpt
from tests.conftest import BuiltDatabase

COMPILED = "ckpt: rows read and judged by: compiled judge + compiled SQLite reader"
PYTHON = "ckpt: rows read and judged by: Python (CKPT_NATIVE=0)"


def run_with(native: str | None, *args: str) -> CkptRun:
    # A process of its own: the switch is read when deerflow_ckpt.native is first imported.
    return run_ckpt(*args, env={"CKPT_NATIVE": native}, process=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_both_paths_give_the_same_verify_shape_json(built_sqlite: BuiltDatabase, jobs: str) -> None:
    args = ("verify-shape", "--db", str(built_sqlite.path), "--format", "json", "--verbose", "--jobs", jobs)
    compiled, python = run_with(None, *args), run_with("0", *args)
    # The fixture database holds injected faults: both paths must find them, and exit 1.
    assert (compiled.exit_code, python.exit_code) == (1, 1), compiled.stderr + python.stderr
    assert COMPILED in compiled.stderr.splitlines()
    assert PYTHON in python.stderr.splitlines()
    assert '"findings"' in compiled.stdout
    assert python.stdout == compiled.stdout


@pytest.mark.slow
def test_inspect_says_which_path_ran_only_when_verbose(built_sqlite: BuiltDatabase) -> None:
    args = ("inspect", "thread", "clean-delta-k3", "--db", str(built_sqlite.path), "--format", "json")
    quiet, verbose = run_with("0", *args), run_with("0", *args, "-v")
    assert (quiet.exit_code, verbose.exit_code) == (0, 0), quiet.stderr + verbose.stderr
    assert "rows read and judged by" not in quiet.stderr
    assert PYTHON in verbose.stderr.splitlines()
    assert verbose.stdout == quiet.stdout == run_with(None, *args).stdout


@pytest.mark.slow
def test_only_zero_turns_the_compiled_path_off(built_sqlite: BuiltDatabase) -> None:
    result = run_with("1", "verify-shape", "--db", str(built_sqlite.path), "--format", "json", "-v")
    assert COMPILED in result.stderr.splitlines()
