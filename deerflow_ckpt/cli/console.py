"""Consoles for payload (stdout) and messages (stderr), created when a command runs, never at import."""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console


def _console(file: TextIO, color: bool | None) -> Console:
    # no_color=None (not False) so that rich still reads NO_COLOR when colour is left to it.
    return Console(
        file=file, highlight=False, soft_wrap=True, force_terminal=color, no_color=True if color is False else None
    )


def stdout_console(color: bool | None = None) -> Console:
    return _console(sys.stdout, color)


def stderr_console(color: bool | None = None) -> Console:
    return _console(sys.stderr, color)


def message(line: str) -> None:
    """One plain line on stderr."""
    sys.stderr.write(line + "\n")
