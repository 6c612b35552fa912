"""The process exit codes of every `ckpt` command, and what each means for each command, in one place.

`ckpt --help`, each command's `--help` (cli/app.py) and the man pages' EXIT STATUS (manpages.py) are written
from `exit_statuses`; docs/commands.md's "Exit codes" tables say the same for readers of the repository, row for
row (tests/test_docs.py compares them).
"""

from enum import IntEnum


class ExitCode(IntEnum):
    """ruff/ESLint convention: findings never share a code with failures."""

    CLEAN = 0
    # Findings at or above --fail-on, or --check found a file that would change or needs a hand fix.
    FINDINGS = 1
    # Usage, configuration, I/O or internal error: the command could not do its job.
    ERROR = 2


def signalled(signum: int) -> int:
    """The code of a run a signal ended, as a shell reports it: 128 + the signal's number (143 for SIGTERM)."""
    return 128 + signum


# The commands that exit 1, with what 0 and 1 say for each; every other command does its job (0) or fails (2).
_FINDINGS_COMMANDS: dict[str, tuple[str, str]] = {
    "migrate-config": (
        "done: no file --check flags, no diagnostic at or above --fail-on",
        "--check found a file that would change or needs a hand fix, or a diagnostic at or above --fail-on",
    ),
    "lint-config": (
        "done: no findings at or above --fail-on",
        "findings at or above --fail-on (a file that is not valid YAML, or that DeerFlow would refuse, is a "
        "CK500 finding, not an error)",
    ),
    "verify-shape": (
        "done: no findings at or above --fail-on",
        "findings at or above --fail-on (with --baseline, new ones only)",
    ),
}
# The whole of ckpt, for `ckpt --help` and ckpt(1): what the rows above say, shortened.
_ALL_CLEAN = "done: no findings at or above --fail-on, no file --check flags"
_ALL_FINDINGS = "findings at or above --fail-on, or a file migrate-config --check flags"
_EXIT_ZERO = "; --exit-zero makes it 0"
_DONE = "done"
_ERROR_CAUSES = "usage, configuration, I/O or internal error"
_COULD_NOT = ": the command could not do its job"
_ERROR = f"{_ERROR_CAUSES}{_COULD_NOT}"
# Without --check, migrate-config fails on a file it must leave for a hand fix (under --check that is a 1).
_ERRORS: dict[str | None, str] = {
    None: f"{_ERROR_CAUSES}, or a file migrate-config without --check leaves for a hand fix{_COULD_NOT}",
    "migrate-config": f"{_ERROR_CAUSES}, or (without --check) a file that needs a hand fix, left untouched{_COULD_NOT}",
}
# commands/shares.py and fileio.py exit 128 + N themselves; elsewhere typer makes Ctrl-C 130, and SIGTERM ends
# the process, which a shell reports as 143.
_SIGNALLED = ("128+N", "ended by signal N, as a shell reports it: 130 for Ctrl-C (SIGINT), 143 for SIGTERM")


def exit_statuses(command: str | None = None) -> list[tuple[str, str]]:
    """(code, meaning) rows for `command`, a top-level command's name (`inspect` for `inspect thread`), or for
    `ckpt` as a whole when None."""
    if command is None:
        rows = [(str(int(ExitCode.CLEAN)), _ALL_CLEAN), (str(int(ExitCode.FINDINGS)), f"{_ALL_FINDINGS}{_EXIT_ZERO}")]
    elif command in _FINDINGS_COMMANDS:
        zero, one = _FINDINGS_COMMANDS[command]
        rows = [(str(int(ExitCode.CLEAN)), zero), (str(int(ExitCode.FINDINGS)), f"{one}{_EXIT_ZERO}")]
    else:
        rows = [(str(int(ExitCode.CLEAN)), _DONE)]
    return [*rows, (str(int(ExitCode.ERROR)), _ERRORS.get(command, _ERROR)), _SIGNALLED]
