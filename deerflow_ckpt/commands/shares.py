"""Cutting a database's threads into shares and running one worker process per share.

A thread is always read whole by one worker, each in its own read-only transaction; what the workers return
is merged by the command's core. Used by verify-shape and plan retention.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, TypeVar

from deerflow_ckpt.store.readers import LineageReader
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection

Result = TypeVar("Result")
# What a share's work is told after each thread: how many checkpoints it had.
Progress = Callable[[int], None]
# A share's work: a picklable callable (a module-level function, or a functools.partial of one).
ShareWork = Callable[[ThreadSelection, Progress | None], Result]

# A --since scan spreads its threads over processes only when each gets at least this many.
THREADS_PER_SHARE = 50

# A pool worker's share of the progress count: handed over by the pool initializer, the one way a
# multiprocessing Value reaches a worker under every start method (it cannot travel as a task argument).
_worker_counter: Any = None


def _init_worker(counter: Any) -> None:
    global _worker_counter
    _worker_counter = counter


def _add_to_worker_counter(seen: int) -> None:
    with _worker_counter.get_lock():
        _worker_counter.value += seen


def _in_worker(work: ShareWork[Result], selection: ThreadSelection) -> Result:
    return work(selection, _add_to_worker_counter)


def share_selections(
    reader: LineageReader,
    jobs: int,
    thread_ids: tuple[str, ...] | None = None,
    since: str | None = None,
) -> list[ThreadSelection]:
    """The shares to read: named threads, the threads written since `since` (a checkpoint id), or `jobs`
    ranges of thread ids with about equal checkpoint counts."""
    if thread_ids is not None:
        if len(thread_ids) == 1:
            return [ThreadSelection(thread_id=thread_ids[0])]
        return [ThreadSelection(thread_ids=thread_ids)]
    if since is not None:
        # Only threads written since then are read (whole, for their counters); ids sort by write time.
        threads = reader.threads_since(since)
        parts = max(1, min(jobs, len(threads) // THREADS_PER_SHARE))
        return [ThreadSelection(thread_ids=tuple(threads[part::parts])) for part in range(parts)]
    if jobs <= 1:
        return [ALL_THREADS]
    points = reader.split_points(jobs)
    bounds: list[str | None] = [None, *points, None]
    return [ThreadSelection(lower=lower, upper=upper) for lower, upper in itertools.pairwise(bounds)]


def run_shares(
    work: ShareWork[Result],
    selections: list[ThreadSelection],
    progress: Progress | None = None,
    start_method: str | None = None,
) -> list[Result]:
    """`work` on every share, one worker process each (in this process when there is one share);
    `progress` gets the running checkpoint count."""
    if len(selections) == 1:
        return [work(selections[0], _running_total(progress))]
    import multiprocessing
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

    # The platform's own start method (fork on Linux, spawn on macOS and Windows) unless one is asked for.
    context = multiprocessing.get_context(start_method)
    shared = context.Value("q", 0)
    with ProcessPoolExecutor(len(selections), mp_context=context, initializer=_init_worker, initargs=(shared,)) as pool:
        futures = [pool.submit(_in_worker, work, selection) for selection in selections]
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
            if progress is not None:
                progress(int(shared.value))
            for future in futures:
                if future.done() and future.exception() is not None:
                    raise future.exception()  # type: ignore[misc]
        return [future.result() for future in futures]


def _running_total(progress: Progress | None) -> Progress | None:
    """Per-thread counts turned into the running total `progress` shows."""
    if progress is None:
        return None
    total = 0

    def add(seen: int) -> None:
        nonlocal total
        total += seen
        progress(total)

    return add
