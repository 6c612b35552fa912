"""Fetch the batches of several server-side cursors in a background thread, while the scan works.

A server-side cursor computes its next batch only when asked, so a reader that asks, then classifies,
then asks again leaves the server idle while it works and itself idle while the server works. Here one
thread does all the asking (a connection serves one command at a time, so the cursors share it) and
keeps up to `depth` batches ready per cursor; the reader takes rows from them. The thread waits in
libpq with the GIL released, so the two overlap. Memory stays bounded: depth x cursors batches, and
a cursor whose rows carry their size in bytes (blobs, snapshots among them) gets batches sized to
`batch_bytes` by the largest row it has returned, growing at most twofold a batch: only a batch where
rows larger than any before first appear can exceed the budget (at most twice the last batch's rows).
The fetching thread's waits end with the connection's deadline (store/deadline.py): a silent server is
an error the reader gets, never a thread left behind.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

FIRST_SIZED_ROWS = 16


class Prefetcher:
    """Rows of `cursors` (each with fetchmany), fetched ahead by one thread; close() before the connection.

    `size_columns`: cursor index -> the column holding each row's size in bytes; that cursor's next batch
    is sized from the largest row it has returned to `batch_bytes` (at least one row, at most `batch_rows`,
    at most twice the last batch).
    """

    def __init__(
        self,
        cursors: list[Any],
        batch_rows: int,
        depth: int = 2,
        size_columns: dict[int, int] | None = None,
        batch_bytes: int = 8 << 20,
    ) -> None:
        self._cursors = cursors
        self._batch_rows = batch_rows
        self._size_columns = size_columns or {}
        # A sized cursor starts small: nothing is known of its rows yet, and a first batch may be all large.
        self._rows_next = [min(batch_rows, FIRST_SIZED_ROWS) if i in self._size_columns else batch_rows
                           for i in range(len(cursors))]  # fmt: skip
        self._batch_bytes = batch_bytes
        self._largest = [0] * len(cursors)  # the largest row each sized cursor has returned
        self._depth = depth
        self._ready: list[deque[list[Any]]] = [deque() for _ in cursors]
        self._exhausted = [False] * len(cursors)
        self._error: BaseException | None = None
        self._stopping = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._fetch_ahead, name="ckpt-prefetch", daemon=True)
        self._thread.start()

    def rows(self, index: int) -> Iterator[Any]:
        """Every row of cursor `index`, in order; an error of the fetching thread is raised here."""
        ready, changed = self._ready[index], self._changed
        while True:
            with changed:
                while not ready and not self._exhausted[index] and self._error is None:
                    changed.wait()
                if self._error is not None:
                    raise self._error
                if not ready:
                    return
                batch = ready.popleft()
                changed.notify_all()
            yield from batch

    def close(self) -> None:
        """Stop fetching and wait for the thread: after this the connection is the caller's again."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._thread.join()

    def _next_wanted(self) -> int | None:
        """The open cursor with the fewest batches ready (the reader may be waiting on it), or None."""
        wanted = [i for i, ready in enumerate(self._ready) if not self._exhausted[i] and len(ready) < self._depth]
        return min(wanted, key=lambda i: len(self._ready[i])) if wanted else None

    def _rows_for_budget(self, batch: list[Any], column: int, index: int) -> int:
        """Rows of the next batch: the largest row seen so far into the byte budget, at most twice the last.

        Doubling at most: small rows (another channel's blobs) often come just before large ones.
        """
        largest = max(self._largest[index], max(row[column] or 0 for row in batch))
        self._largest[index] = largest
        fitting = self._batch_bytes // largest if largest > 0 else self._batch_rows
        return max(1, min(self._batch_rows, 2 * len(batch), fitting))

    def _fetch_ahead(self) -> None:
        changed = self._changed
        try:
            while True:
                with changed:
                    index = self._next_wanted()
                    while not self._stopping and index is None and not all(self._exhausted):
                        changed.wait()
                        index = self._next_wanted()
                    if self._stopping or index is None:
                        return
                batch = self._cursors[index].fetchmany(self._rows_next[index])
                column = self._size_columns.get(index)
                if column is not None and batch:
                    self._rows_next[index] = self._rows_for_budget(batch, column, index)
                with changed:
                    if batch:
                        self._ready[index].append(batch)
                    else:
                        self._exhausted[index] = True
                    changed.notify_all()
        except BaseException as exc:  # handed to the reader, which raises it in its own thread
            with changed:
                self._error = exc
                changed.notify_all()
