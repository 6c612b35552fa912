"""The process exit codes of every `ckpt` command, in one place."""

from enum import IntEnum


class ExitCode(IntEnum):
    """ruff/ESLint convention: findings never share a code with failures."""

    CLEAN = 0
    # Findings at or above --fail-on, or --check found a file that would change or needs a hand fix.
    FINDINGS = 1
    # Usage, configuration, I/O or internal error: the command could not do its job.
    ERROR = 2
