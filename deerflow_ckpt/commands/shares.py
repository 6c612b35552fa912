"""Cutting a database's threads into shares and running one worker process per share.

A thread is always read whole by one worker, each in its own read-only transaction; what the workers return
is merged by the command's core. Used by verify-shape and plan retention; inspect storage's own passes run
in worker_pool.

No worker outlives the run: SIGTERM or SIGINT to the main process, a failed share, or any other way out
before every share is done ends the workers still running (they may be waiting on the network, where
nothing else reaches them), then the run exits 128 + the signal. A worker whose main process is gone
(SIGKILL cannot be caught) sees its parent's sentinel close and exits at once.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from deerflow_ckpt.errors import Interrupted, StoreError
from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.store.readers import LineageReader
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.context import BaseContext
    from multiprocessing.process import BaseProcess

Result = TypeVar("Result")
P = ParamSpec("P")
T = TypeVar("T")
# What a share's work is told after each thread: how many checkpoints it had.
Progress = Callable[[int], None]
# A share's work: a picklable callable (a module-level function, or a functools.partial of one).
ShareWork = Callable[[ThreadSelection, Progress | None], Result]

# A --since scan spreads its threads over processes only when each gets at least this many.
THREADS_PER_SHARE = 50
# Without --jobs: a process per this many stored checkpoints. A second process costs about 75 ms of CPU
# (fork, its own read transaction, the split, the merge) and saves half of about 11 us a checkpoint, so it
# pays from about 13,000 checkpoints on two idle cores (benchmarks/bench_jobs.py, docs/architecture.md);
# two processes start at twice this, where the saving is at least the cost again ...
CHECKPOINTS_PER_PROCESS = 15_000
# ... and never more processes than this, than the CPUs this process may run on, or than those CPUs the
# machine's load leaves idle (a second worker on a busy core took as long as one and cost more CPU).
MAX_AUTO_JOBS = 4
# The signals that end a run: a service manager's stop, and Ctrl-C.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# How long an ended worker is given to go after SIGTERM before SIGKILL.
_WORKER_GRACE_S = 2.0

# A pool worker's share of the progress count: handed over by the pool initializer, the one way a
# multiprocessing Value reaches a worker under every start method (it cannot travel as a task argument).
_worker_counter: Any = None


def _init_worker(counter: Any) -> None:
    global _worker_counter
    _worker_counter = counter
    # The main process's handlers came with fork: a worker ends at once on the signals, as any process does.
    for signum in ENDING_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    # Forked with them blocked (_signals_held): one sent meanwhile (a Ctrl-C to the group) ends it here.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING_SIGNALS)
    threading.Thread(target=_exit_with_parent, name="ckpt-parent-watch", daemon=True).start()


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


@dataclass(frozen=True)
class Machine:
    """What the automatic --jobs reads of the machine: the CPUs this process may use, the 1-minute load, and
    (Linux) how many other tasks are runnable right now."""

    cpus: int
    load: float | None
    running: int | None = None

    @property
    def busy(self) -> float | None:
        """The CPUs other work holds: the lesser of the 1-minute load and the tasks runnable now. The load
        lags by a minute (a run just finished, ckpt's own included, still counts as busy); the count now
        alone would take a moment's burst on a quiet machine for lasting work. (A job asleep on I/O at the
        moment of reading counts as idle either way.)"""
        if self.load is None:
            return None if self.running is None else float(self.running)
        return self.load if self.running is None else min(self.load, float(self.running))

    @property
    def idle_cpus(self) -> int:
        """The CPUs the other work leaves idle (at least one: this process runs anyway)."""
        busy = self.busy
        if busy is None:
            return self.cpus
        return max(1, min(self.cpus, int(self.cpus - busy + 0.5)))

    def describe(self) -> str:
        load = "" if self.load is None else f", load {self.load:.2f}"
        running = (
            "" if self.running is None else f", {self.running} other task{'s' if self.running != 1 else ''} running"
        )
        return f"{self.cpus} CPU{'s' if self.cpus != 1 else ''}{load}{running}"


def _running_now() -> int | None:
    """Tasks runnable now besides this process (Linux's /proc/loadavg, whose count includes the reader)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as file:
            running = int(file.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - 1)


def this_machine() -> Machine:
    """The CPUs this process may run on (its affinity, a container's cpuset), not the machine's count."""
    counter = getattr(os, "process_cpu_count", None)  # Python 3.13
    if counter is not None:
        cpus = counter() or 1
    elif hasattr(os, "sched_getaffinity"):
        cpus = len(os.sched_getaffinity(0)) or 1
    else:  # macOS, Windows before 3.13
        cpus = os.cpu_count() or 1
    try:
        load: float | None = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows
        load = None
    return Machine(cpus, load, _running_now())


def auto_jobs(checkpoints: int, machine: Machine) -> int:
    """The processes a store of `checkpoints` is read with when --jobs is not given."""
    return max(1, min(MAX_AUTO_JOBS, machine.idle_cpus, checkpoints // CHECKPOINTS_PER_PROCESS))


@dataclass(frozen=True)
class ShareSplit:
    """The shares to read, one process each, and why that many (for --verbose)."""

    selections: list[ThreadSelection]
    why: str


def share_selections(
    reader: LineageReader,
    jobs: int | None,
    thread_ids: tuple[str, ...] | None = None,
    since: str | None = None,
    machine: Machine | None = None,
) -> ShareSplit:
    """The shares to read: named threads, the threads written since `since` (a checkpoint id), or ranges of
    thread ids with about equal checkpoint counts, `jobs` of them (None: as many as auto_jobs says for the
    store on `machine`, by default this one)."""
    if thread_ids is not None:
        if len(thread_ids) == 1:
            return ShareSplit([ThreadSelection(thread_id=thread_ids[0])], "one named thread")
        return ShareSplit([ThreadSelection(thread_ids=thread_ids)], "named threads")
    given, automatic = f"--jobs {jobs}", None
    if jobs is None:
        automatic = machine or this_machine()
        jobs, given = min(MAX_AUTO_JOBS, automatic.idle_cpus), f"automatic, {automatic.describe()}"
    if since is not None:
        # Only threads written since then are read (whole, for their counters); ids sort by write time.
        threads = reader.threads_since(since)
        parts = max(1, min(jobs, len(threads) // THREADS_PER_SHARE))
        selections = [ThreadSelection(thread_ids=tuple(threads[part::parts])) for part in range(parts)]
        return ShareSplit(selections, f"{given}; {len(threads)} threads written since then")
    if jobs <= 1:
        return ShareSplit([ALL_THREADS], given)
    stored = 0

    def parts_for(checkpoints: int) -> int:
        nonlocal stored
        stored = checkpoints
        return jobs if automatic is None else auto_jobs(checkpoints, automatic)

    points = reader.split_points(parts_for)
    bounds: list[str | None] = [None, *points, None]
    selections = [ThreadSelection(lower=lower, upper=upper) for lower, upper in itertools.pairwise(bounds)]
    return ShareSplit(selections, f"{given}; {stored} checkpoints")


def run_shares(
    work: ShareWork[Result],
    selections: list[ThreadSelection],
    progress: Progress | None = None,
    start_method: str | None = None,
) -> list[Result]:
    """`work` on every share, one worker process each (in this process when there is one share);
    `progress` gets the running checkpoint count. Until every share is done, SIGTERM and SIGINT raise
    Interrupted here, and no way out leaves a worker behind."""
    if len(selections) == 1:
        with _EndingSignals():
            return [work(selections[0], _running_total(progress))]
    import multiprocessing
    from concurrent.futures import FIRST_EXCEPTION, wait

    # The platform's own start method (fork on Linux, spawn on macOS and Windows) unless one is asked for.
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
        raise StoreError(
            "a worker process ended without a result (killed by a signal or for memory, or it could not start or "
            "hand back its share)"
        ) from error
    raise error


class _WorkerPool(Executor):
    """A process pool whose workers are forked with SIGTERM and SIGINT blocked (the main process's handlers
    come with fork; _init_worker sets the defaults before unblocking them), and that knows whether every
    task it was given is done. It wraps the ProcessPoolExecutor rather than extending it, so that a run in
    one process never imports multiprocessing's pool machinery."""

    def __init__(self, workers: int, context: BaseContext, counter: Any) -> None:
        from concurrent.futures import ProcessPoolExecutor

        self._pool: ProcessPoolExecutor = ProcessPoolExecutor(
            workers, mp_context=context, initializer=_init_worker, initargs=(counter,)
        )
        self.submitted: list[Future[Any]] = []

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        # Workers are started here (at the first submit under fork, at each under spawn).
        with _signals_held():
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
    with _EndingSignals() as ending:
        others = set(multiprocessing.active_children())
        pool = _WorkerPool(workers, context, counter)
        try:
            yield pool
        finally:
            ending.cleaning_up()
            if not all(future.done() for future in pool.submitted):
                _end_workers([child for child in multiprocessing.active_children() if child not in others])
            pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT kept pending in the block: a process forked here starts with them blocked."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, ENDING_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _EndingSignals:
    """SIGTERM and SIGINT raise Interrupted in the block (main thread only: elsewhere nothing changes). Once
    one was raised, or cleaning_up() was called, they are only recorded: a second Ctrl-C cannot cut the
    cleanup short (the SIGKILL of a worker, the pool's shutdown). A block that ends normally after a signal
    raises Interrupted then: one during the cleanup, or one whose Interrupted Python swallowed (a handler that
    runs inside a __del__ or a callback only prints "Exception ignored")."""

    def __init__(self) -> None:
        self.raising = True
        self.recorded: int | None = None
        self.previous: dict[int, Any] = {}

    def cleaning_up(self) -> None:
        self.raising = False

    def _handle(self, signum: int, frame: object) -> None:
        if self.recorded is None:
            self.recorded = signum
        if self.raising:
            self.raising = False
            raise Interrupted(signum)

    def __enter__(self) -> _EndingSignals:
        if threading.current_thread() is threading.main_thread():
            self.previous = {signum: signal.signal(signum, self._handle) for signum in ENDING_SIGNALS}
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if kind is None and self.recorded is not None:
            raise Interrupted(self.recorded)


def _end_workers(workers: list[BaseProcess]) -> None:
    """SIGTERM to each worker, and SIGKILL to one still there after the grace. The pool sees them gone and
    winds down; its shutdown must then wait for that (shutting down without waiting first leaves its thread
    racing the interpreter's exit over a closed pipe)."""
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(_WORKER_GRACE_S)
        if worker.is_alive():
            worker.kill()
            worker.join()


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


@contextlib.contextmanager
def without_cycle_collector() -> Iterator[None]:
    """Pause the cyclic GC: a scan allocates millions of acyclic containers that reference counting
    frees at once, and the collector's passes over them cost a quarter of the scan time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
