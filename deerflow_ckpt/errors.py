"""Expected failures: each carries a one-line message an operator can act on (exit code 2)."""


class CkptError(Exception):
    """A failure the command line reports in one line, without a traceback."""


class ConfigError(CkptError):
    """config.yaml cannot be found, read or understood."""


class StoreError(CkptError):
    """A checkpoint database cannot be found, opened or read."""


class OutputError(CkptError):
    """A result cannot be written where it was asked to go."""
