"""One deadline for every wait on a Postgres connection: --network-timeout of silence ends the read.

psycopg runs every exchange with the server (execute, DECLARE, FETCH, CLOSE, COPY, commit, rollback) as a
generator that `Connection.wait` drives, polling the socket; while nothing arrives it resumes the
generator every `_CHECK_EVERY` seconds with "nothing ready". The connection class here counts those
empty polls: when neither data nor room to send came for the network timeout, it cancels the statement
(if the server can still be reached within a second), closes the connection and raises NetworkTimeout.
Every reader connects through store/postgres.py `connect`, so every query of every thread and worker
process gets the deadline. Measured against a proxy that stops forwarding after the DECLARE: this returns
at the deadline; TCP keepalives do not (the proxy answers them), nor does a cancel sent from another thread
(its answer is stalled too).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator
from typing import Any, TypeVar

import psycopg
from psycopg import capabilities

from deerflow_ckpt.errors import StoreError

Result = TypeVar("Result")
# How often psycopg hands control back while nothing arrives (its own default), so the deadline is checked.
_CHECK_EVERY = 0.1
# A statement cancelled on the way out: long enough for a server that answers, short for one that does not.
_CANCEL_WITHIN = 1.0


class NetworkTimeout(StoreError):
    """The server sent nothing for --network-timeout: the network, a proxy or the server stopped answering."""


class _Silence(Exception):
    """Raised inside psycopg's wait when the deadline passes; turned into NetworkTimeout outside it."""


class DeadlineConnection(psycopg.Connection[Any]):
    """A psycopg connection whose every wait ends after `network_timeout` seconds without progress.

    `description` names the database in the error (it never holds a password).
    """

    network_timeout: float = 120.0
    description: str = "the database"

    def wait(
        self, gen: Generator[Any, Any, Result], interval: float = _CHECK_EVERY, timeout: float | None = None
    ) -> Result:
        # psycopg's own timeout (3.3 on) only where a caller asks for one; the interval is ours, never "forever".
        asked = {} if timeout is None else {"timeout": timeout}
        try:
            return super().wait(self._within_deadline(gen), _CHECK_EVERY, **asked)
        except _Silence:
            self._give_up()
            raise NetworkTimeout(
                f"reading {self.description} stopped: no data from the server for {self.network_timeout:g} s "
                "(--network-timeout)"
            ) from None

    def _within_deadline(self, gen: Generator[Any, Any, Result]) -> Generator[Any, Any, Result]:
        """`gen`, driven as psycopg drives it, raising _Silence once nothing was ready for the timeout."""
        deadline = time.monotonic() + self.network_timeout
        try:
            waiting_for = next(gen)
            while True:
                ready = yield waiting_for
                if ready:
                    deadline = time.monotonic() + self.network_timeout
                elif time.monotonic() >= deadline:
                    gen.close()
                    raise _Silence
                waiting_for = gen.send(ready)
        except StopIteration as done:
            result: Result = done.value
            return result

    def _give_up(self) -> None:
        """Cancel the statement where the server can be reached quickly, then close: nothing stays open."""
        # Before libpq 17 a cancel blocks without a timeout: then closing is all that is done.
        if capabilities.has_cancel_safe():
            # Unreachable too: closing the socket is what is left.
            with contextlib.suppress(psycopg.Error):
                self.cancel_safe(timeout=_CANCEL_WITHIN)
        self.close()
