"""The one way tests run `ckpt`: in process by default, as a real process where the test is about the process.

The environment a run sees is the test's (tests/conftest.py clears everything that changes ckpt's
behaviour before each test) plus the ``env`` given here; a ``None`` value unsets a variable for the run.
Neither way lets a traceback reach the operator unless the run asked for one (``--debug``, ``$CKPT_DEBUG``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from typer.testing import CliRunner

from deerflow_ckpt.cli.app import app

REPO = Path(__file__).resolve().parents[1]
# Root ignores permission bits through these capabilities; without them a read-only file binds as it does an operator.
_DROPPED_CAPABILITIES = "-dac_override,-dac_read_search"


class CkptRun(NamedTuple):
    """What a run left: ``code, out, err = run_ckpt(...)``."""

    exit_code: int
    # Decoded losslessly (surrogateescape): stdout_bytes gives back exactly the bytes written.
    stdout: str
    stderr: str

    @property
    def stdout_bytes(self) -> bytes:
        return self.stdout.encode("utf-8", "surrogateescape")

    @property
    def output(self) -> str:
        """Both streams, for an assertion's message."""
        return self.stdout + self.stderr

    @classmethod
    def of(cls, exit_code: int, stdout: bytes, stderr: bytes) -> CkptRun:
        return cls(exit_code, stdout.decode("utf-8", "surrogateescape"), stderr.decode("utf-8", "surrogateescape"))


def run_ckpt(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str | None] | None = None,
    input: bytes | str | None = None,
    process: bool = False,
    unprivileged: bool = False,
    timeout: float = 120,
) -> CkptRun:
    """Run ``ckpt *args`` from ``cwd`` (default: where the test already is).

    ``process=True`` spawns ``python -m deerflow_ckpt``; ``unprivileged=True`` (implies it) drops root's
    file capabilities with setpriv so permission bits bind even when the tests run as root (CI).
    """
    if process or unprivileged:
        ran = _spawn(args, cwd, env or {}, input, unprivileged, timeout)
    else:
        ran = _in_process(args, cwd, env or {}, input)
    debugging = "--debug" in args or (env or {}).get("CKPT_DEBUG") or os.environ.get("CKPT_DEBUG")
    if not debugging:
        assert "Traceback" not in ran.stderr, ran.stderr
    return ran


def _in_process(
    args: tuple[str, ...], cwd: Path | None, env: Mapping[str, str | None], input: bytes | str | None
) -> CkptRun:
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        # An exception that escapes the app fails the test with its traceback instead of becoming exit 1.
        result = CliRunner().invoke(app, list(args), input=input, env=env, catch_exceptions=False, prog_name="ckpt")
    return CkptRun.of(result.exit_code, result.stdout_bytes, result.stderr_bytes)


def _spawn(
    args: tuple[str, ...],
    cwd: Path | None,
    env: Mapping[str, str | None],
    input: bytes | str | None,
    unprivileged: bool,
    timeout: float,
) -> CkptRun:
    command = [sys.executable, "-m", "deerflow_ckpt", *args]
    if unprivileged and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "setpriv (util-linux) is needed to drop root's file capabilities"
        command = [setpriv, f"--bounding-set={_DROPPED_CAPABILITIES}", f"--inh-caps={_DROPPED_CAPABILITIES}", *command]
    environment = dict(os.environ)
    for name, value in env.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    stdin = input.encode() if isinstance(input, str) else input
    # Without input, an empty stdin as in process: never the terminal pytest was started from.
    done = subprocess.run(
        command, input=stdin or b"", capture_output=True, env=environment, cwd=cwd, check=False, timeout=timeout
    )
    return CkptRun.of(done.returncode, done.stdout, done.stderr)
