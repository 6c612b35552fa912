"""A multiprocessing pool whose workers do not outlive the run: inspect storage's passes, and the shares of
run_shares where processes are not forked straight from the main process (a start method asked for, or a
platform whose default is not fork: macOS, Windows).

SIGTERM or SIGINT to the main process, a failed task, or any other way out before every task is done ends the
workers still running, then the run exits 128 + the signal. A worker whose main process is gone (SIGKILL cannot
be caught) sees its parent's sentinel close and exits at once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from deerflow_ckpt.commands.shares import (
    WORKER_GRACE_S,
    WORKER_LOST,
    EndingSignals,
    Progress,
    ShareWork,
    signals_held,
    start_worker,
)
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.store.selection import ThreadSelection

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.context import BaseContext
    from multiprocessing.process import BaseProcess

Result = TypeVar("Result")
P = ParamSpec("P")
T = TypeVar("T")

# A pool worker's share of the progress count: handed over by the pool initializer, the one way a
# multiprocessing Value reaches a worker under every start method (it cannot travel as a task argument).
_worker_counter: Any = None


def _init_worker(counter: Any) -> None:
    global _worker_counter
    _worker_counter = counter
    start_worker(_exit_with_parent)


def _exit_with_parent() -> None:
    """Exit the worker as soon as the main process is gone, whatever the worker is waiting on."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is not None:
        parent.join()  # returns when the parent's sentinel closes: it exited or was killed
        # A worker of an orphaned pool, on a watcher thread: nobody reads its result, so it ends at once.
        os._exit(ExitCode.ERROR)


def _add_to_worker_counter(seen: int) -> None:
    with _worker_counter.get_lock():
        _worker_counter.value += seen


def _in_worker(work: ShareWork[Result], selection: ThreadSelection) -> Result:
    return work(selection, _add_to_worker_counter)


def pooled_shares(
    work: ShareWork[Result], selections: list[ThreadSelection], progress: Progress | None, start_method: str | None
) -> list[Result]:
    """run_shares in the pool: one worker per share, under `start_method` (None: the platform's)."""
    import multiprocessing
    from concurrent.futures import FIRST_EXCEPTION, wait

    shared = multiprocessing.get_context(start_method).Value("q", 0)
    with worker_pool(len(selections), start_method, shared) as pool:
        futures = [pool.submit(_in_worker, work, selection) for selection in selections]
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
            if progress is not None:
                progress(int(shared.value))
            for future in futures:
                error = future.exception() if future.done() else None
                if error is not None:
                    _raise_worker_failure(error)
        return [future.result() for future in futures]


def _raise_worker_failure(error: BaseException) -> None:
    """A failed share's own error (with the worker's traceback for --debug), or a StoreError for a worker that
    died without one, rather than an internal error about the pool."""
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(error, BrokenProcessPool):
        raise StoreError(WORKER_LOST) from error
    raise error


class _WorkerPool(Executor):
    """A process pool whose workers are forked with SIGTERM and SIGINT blocked (the main process's handlers
    come with fork; _init_worker sets the defaults before unblocking them), and that knows whether every
    task it was given is done."""

    def __init__(self, workers: int, context: BaseContext, counter: Any) -> None:
        from concurrent.futures import ProcessPoolExecutor

        self._pool: ProcessPoolExecutor = ProcessPoolExecutor(
            workers, mp_context=context, initializer=_init_worker, initargs=(counter,)
        )
        self.submitted: list[Future[Any]] = []

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        # Workers are started here (at the first submit under fork, at each under spawn).
        with signals_held():
            future = self._pool.submit(fn, *args, **kwargs)
        self.submitted.append(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)


@contextlib.contextmanager
def worker_pool(workers: int, start_method: str | None = None, counter: Any = None) -> Iterator[Executor]:
    """A pool of `workers` processes that do not outlive the block: SIGTERM and SIGINT raise Interrupted in
    it, and leaving it with a task unfinished ends the workers still running (SIGTERM, then SIGKILL)."""
    import multiprocessing

    context = multiprocessing.get_context(start_method)
    with EndingSignals() as ending:
        others = set(multiprocessing.active_children())
        pool = _WorkerPool(workers, context, counter)
        try:
            yield pool
        finally:
            ending.cleaning_up()
            if not all(future.done() for future in pool.submitted):
                _end_workers([child for child in multiprocessing.active_children() if child not in others])
            pool.shutdown(wait=True, cancel_futures=True)


def _end_workers(workers: list[BaseProcess]) -> None:
    """SIGTERM to each worker, and SIGKILL to one still there after the grace. The pool sees them gone and
    winds down; its shutdown must then wait for that (shutting down without waiting first leaves its thread
    racing the interpreter's exit over a closed pipe)."""
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(WORKER_GRACE_S)
        if worker.is_alive():
            worker.kill()
            worker.join()
