"""The process exit codes of every `ckpt` command, in one place."""

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
