"""Run ckpt in a subprocess that file permissions bind, even when the tests run as root (CI).

Root ignores permission bits through CAP_DAC_OVERRIDE; dropping it (and CAP_DAC_READ_SEARCH) with
setpriv makes a read-only directory or an unreadable file behave as it does for an operator.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_DROPPED = "-dac_override,-dac_read_search"


def run_ckpt(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "deerflow_ckpt", *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "setpriv (util-linux) is needed to drop root's file capabilities"
        command = [setpriv, f"--bounding-set={_DROPPED}", f"--inh-caps={_DROPPED}", *command]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, check=False)
