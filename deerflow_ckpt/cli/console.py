"""Consoles for payload (stdout) and messages (stderr), created when a command runs, never at import."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO, TypeVar

if TYPE_CHECKING:
    from rich.console import Console


def _console(file: TextIO, color: bool | None) -> Console:
    # rich is imported here, not at module import: migrate-config never draws with it.
    from rich.console import Console

    # None leaves the choice to rich (TTY, FORCE_COLOR, TERM=dumb); an explicit --color wins over them.
    plain = color is False or (color is None and os.environ.get("NO_COLOR", "") != "")
    # rich's own no_color keeps bold and underline; NO_COLOR and --color never mean no escape codes at all.
    # Paths, thread ids and config values are printed as they are: `[...]` is text, not rich markup.
    return Console(
        file=file,
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=True,
        force_terminal=color,
        no_color=plain,
        color_system=None if plain else "auto",
    )


def stdout_console(color: bool | None = None) -> Console:
    return _console(sys.stdout, color)


# The fewest columns of text that goes to a file or a pipe, where nobody's terminal limits the line (at least
# the 120 the conventions promise; inspect's tables and charts were laid out for 160). The one place it is decided.
PIPED_WIDTH = 160


def _at_least_piped_width(console: Console) -> Console:
    # rich measures the terminal on stdin or stderr when stdout is piped (80 when there is none): a wider one wins.
    console.width = max(console.width, PIPED_WIDTH)
    return console


def _is_a_terminal(file: TextIO) -> bool:
    # The file itself, not rich's is_terminal, which --color always (force_terminal) makes true for a pipe.
    try:
        return file.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def text_console(color: bool | None) -> Console:
    """stdout's console for a text report; piped or redirected, never narrower than PIPED_WIDTH or the
    terminal, so table rows stay whole lines."""
    console = stdout_console(color)
    return console if _is_a_terminal(sys.stdout) else _at_least_piped_width(console)


def file_console() -> Console:
    """A console without colour for a text report captured into --output's file, as wide as a piped one."""
    return _at_least_piped_width(stdout_console(color=False))


def stderr_console(color: bool | None = None) -> Console:
    return _console(sys.stderr, color)


Result = TypeVar("Result")


def counting_checkpoints(
    work: Callable[[Callable[[int], None] | None], Result], show: bool, color: bool | None, label: str
) -> Result:
    """`work(progress)` with a spinner on stderr counting the checkpoints read, when `show` (someone watches)."""
    if not show:
        return work(None)
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from deerflow_ckpt.commands.shares import signals_held

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    progress = Progress(*columns, console=stderr_console(color), transient=True)
    # Its refresh thread starts with SIGTERM and SIGINT blocked, so they always reach the main thread: one the
    # kernel gave that thread instead would run its handler inside a block the main thread holds them in.
    with signals_held():
        progress.start()
    with progress:
        task = progress.add_task(label, total=None)
        return work(lambda n: progress.update(task, description=f"{n} checkpoints"))


def message(line: str) -> None:
    """One line on stderr, the one way ckpt writes there: a newline, CR, control character or '::' that a
    path, a file name or a database brought in is a visible escape (report/printable.py), so no terminal
    acts on it and no CI log reads a line of it as a workflow command."""
    from deerflow_ckpt.report.printable import printable

    sys.stderr.write(printable(line) + "\n")


# -q/--quiet, set by the option's callback when a command parses its arguments (and reset by the app
# around every invocation, so one run's -q never carries into the next in the same process).
_quiet = False


def set_quiet(value: bool) -> None:
    global _quiet
    _quiet = value


def is_quiet() -> bool:
    return _quiet


def info(line: str) -> None:
    """An informational line on stderr (what was chosen and why): -q/--quiet leaves it out."""
    if not _quiet:
        message(line)
