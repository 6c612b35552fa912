"""Expected failures: each carries a one-line message an operator can act on (exit code 2)."""


class CkptError(Exception):
    """A failure the command line reports in one line, without a traceback."""


class ConfigError(CkptError):
    """config.yaml cannot be found, read or understood."""


class StoreError(CkptError):
    """A checkpoint database cannot be found, opened or read."""


class OutputError(CkptError):
    """A result cannot be written where it was asked to go."""


class Interrupted(BaseException):
    """SIGTERM or SIGINT ended the run once what it started was stopped; the command exits 128 + the signal.

    A BaseException, as KeyboardInterrupt is: no `except Exception` on its way up takes it for a failure.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def did_you_mean(word: str, candidates: list[str]) -> str:
    """' (did you mean X?)' for the closest candidate, or '' when none is close."""
    import difflib  # only on the way to an error

    close = difflib.get_close_matches(word, candidates, n=1)
    return f" (did you mean {close[0]}?)" if close else ""
