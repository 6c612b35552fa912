"""Consoles for payload (stdout) and messages (stderr), created when a command runs, never at import."""

from __future__ import annotations

import sys

from rich.console import Console


def stdout_console(color: bool | None = None) -> Console:
    return Console(file=sys.stdout, highlight=False, soft_wrap=True, force_terminal=color, no_color=color is False)


def stderr_console(color: bool | None = None) -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True, force_terminal=color, no_color=color is False)


def message(line: str) -> None:
    """One plain line on stderr."""
    sys.stderr.write(line + "\n")
