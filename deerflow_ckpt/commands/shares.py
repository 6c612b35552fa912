"""Cutting a database's threads into shares and running one worker process per share.

A thread is always read whole by one worker, each in its own read-only transaction; what the workers return
is merged by the command's core. Used by verify-shape, inspect, plan retention and convert. Where processes
fork by default (Linux), each worker is forked straight from the main process and hands its pickled result
back through a pipe; elsewhere the shares run in commands/worker_pool.py, as inspect storage's passes do.

No worker outlives the run: SIGTERM or SIGINT to the main process, a failed share, or any other way out
before every share is done ends the workers still running (they may be waiting on the network, where
nothing else reaches them), then the run exits 128 + the signal. A worker whose main process is gone
(SIGKILL cannot be caught) sees the pipe only the main process held open close, and exits at once.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import mmap
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.errors import Interrupted, StoreError
from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.store.readers import LineageReader
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection

Result = TypeVar("Result")
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
# Shares are forked straight from this process on Linux; elsewhere they run in multiprocessing's pool under the
# platform's start method. The one other thread that may run at a fork is the spinner's (a text report on a
# terminal); a child never writes to the console, so no lock that thread held is taken again there.
FORKS_BY_DEFAULT = hasattr(os, "fork") and sys.platform.startswith("linux")
# What a share whose worker died without a word fails with.
WORKER_LOST = (
    "a worker process ended without a result (killed by a signal or for memory, or it could not start or hand back "
    "its share)"
)
# The signals that end a run: a service manager's stop, and Ctrl-C.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# How long an ended worker is given to go after SIGTERM before SIGKILL.
WORKER_GRACE_S = 2.0


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
    Interrupted here, and no way out leaves a worker behind. `start_method` other than fork (or a platform
    that does not fork by default) runs the shares in multiprocessing's pool (commands/worker_pool.py)."""
    if len(selections) == 1:
        with EndingSignals():
            return [work(selections[0], _running_total(progress))]
    if start_method not in (None, "fork") or not FORKS_BY_DEFAULT:
        from deerflow_ckpt.commands.worker_pool import pooled_shares

        return pooled_shares(work, selections, progress, start_method)
    import pickle  # noqa: F401  (imported once here, not in each child and again for the first result)

    counts = mmap.mmap(-1, 8 * len(selections))  # each child's running checkpoint count, shared with it
    opened: list[int] = []  # every descriptor of this run still open here
    children: dict[int, int] = {}  # result pipe -> child pid
    results: dict[int, Result] = {}
    reaped: set[int] = set()
    with EndingSignals() as ending:
        try:
            # Each step below records what it opened, forked or reaped before a signal can cut in.
            with signals_held():
                watch_read, watch_write = os.pipe()  # held open by this process alone: EOF once it is gone
                opened += (watch_read, watch_write)
            for index, selection in enumerate(selections):
                with signals_held():
                    result_read, result_write = os.pipe()
                    opened += (result_read, result_write)
                    pid = os.fork()
                    if pid == 0:  # the child: never returns
                        _run_child(work, selection, counts, index, (watch_read, watch_write, result_read, result_write))
                    children[result_read] = pid
                    opened.remove(result_write)
                    os.close(result_write)
            for fd, payload in _payloads(list(children), counts, progress):
                # The child closed its pipe on its way to os._exit: its status tells whether the payload is whole.
                # Waited for with signals free (a child that closed early still ends by Ctrl-C), reaped held.
                os.waitid(os.P_PID, children[fd], os.WEXITED | os.WNOWAIT)
                with signals_held():
                    status = os.waitpid(children[fd], 0)[1]
                    reaped.add(children[fd])
                results[fd] = _outcome(payload, os.waitstatus_to_exitcode(status))
        finally:
            try:
                ending.cleaning_up()  # from here a signal is only recorded
            finally:
                try:
                    for fd in opened:
                        os.close(fd)
                finally:
                    _end_children([pid for pid in children.values() if pid not in reaped])
    return [results[fd] for fd in children]


def _run_child(
    work: ShareWork[Any], selection: ThreadSelection, counts: mmap.mmap, index: int, pipes: tuple[int, int, int, int]
) -> None:
    """A forked child's whole life: its share's outcome pickled to the result pipe, then os._exit, so that nothing
    of the main process's (its exit handlers, its open databases' destructors) runs twice. `pipes`: the watch
    pipe's two ends and the result pipe's two ends, as the main process made them."""
    status = ExitCode.ERROR
    try:
        watch, watch_write, result_read, out = pipes
        os.close(watch_write)  # the main process's alone: its EOF is how the child learns it is gone
        os.close(result_read)
        start_worker(lambda: _exit_when_closed(watch))
        slot = slice(8 * index, 8 * index + 8)
        total = 0

        def add(seen: int) -> None:
            nonlocal total
            total += seen
            counts[slot] = total.to_bytes(8, "little")

        payload = _pickled_outcome(work, selection, add)
        with os.fdopen(out, "wb") as stream:
            stream.write(payload)
        status = ExitCode.CLEAN
    finally:
        os._exit(status)


def start_worker(watch: Callable[[], None]) -> None:
    """A worker's first act, however it was started: the ending signals to their default action and unblocked,
    and `watch` on a thread of its own, to exit the worker once its main process is gone."""
    # The main process's handlers came with fork: a worker ends at once on the signals, as any process does.
    for signum in ENDING_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    # Forked with them blocked (signals_held): one sent meanwhile (a Ctrl-C to the group) ends it here.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING_SIGNALS)
    threading.Thread(target=watch, name="ckpt-parent-watch", daemon=True).start()


def _pickled_outcome(work: ShareWork[Any], selection: ThreadSelection, progress: Progress) -> bytes:
    """(True, the share's result), or (False, its exception, the child's traceback), pickled."""
    import pickle
    import traceback

    try:
        return pickle.dumps((True, work(selection, progress)), pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        trace = "".join(traceback.format_exception(exc))
        try:
            payload = pickle.dumps((False, exc, trace), pickle.HIGHEST_PROTOCOL)
            pickle.loads(payload)  # one that pickles but cannot be made again (an __init__ of other arguments)
            return payload
        except Exception:  # an exception that does not travel still reaches the main process, as its text
            return pickle.dumps((False, StoreError(f"{type(exc).__name__}: {exc}"), trace), pickle.HIGHEST_PROTOCOL)


def _exit_when_closed(watch: int) -> None:
    """Exit the child as soon as the main process is gone, whatever the child is waiting on."""
    while os.read(watch, 1):
        pass
    # An orphan, on a watcher thread: nobody reads its result, so it ends at once.
    os._exit(ExitCode.ERROR)


def _payloads(pipes: list[int], counts: mmap.mmap, progress: Progress | None) -> Iterator[tuple[int, bytes]]:
    """Each of `pipes` with all that was written to it, as soon as it is closed; `progress` gets the children's
    running total meanwhile."""
    import selectors

    chunks: dict[int, list[bytes]] = {fd: [] for fd in pipes}
    with selectors.DefaultSelector() as selector:
        for fd in pipes:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select(timeout=0.2):
                chunk = os.read(key.fd, 1 << 20)
                if chunk:
                    chunks[key.fd].append(chunk)
                else:
                    selector.unregister(key.fd)
                    yield key.fd, b"".join(chunks.pop(key.fd))
            if progress is not None:
                progress(sum(int.from_bytes(counts[at : at + 8], "little") for at in range(0, len(counts), 8)))


class WorkerTraceback(Exception):
    """A worker's traceback, as text: the cause of the failure it handed back, which --debug prints."""

    def __str__(self) -> str:
        return f"\n{self.args[0]}"


def _outcome(payload: bytes, status: int) -> Any:
    """A child's result; its failure raised here; a child that ended without handing over one, a StoreError."""
    import pickle

    if status != ExitCode.CLEAN or not payload:
        raise StoreError(WORKER_LOST)
    try:
        outcome = pickle.loads(payload)
    except Exception as exc:
        raise StoreError(WORKER_LOST) from exc
    if outcome[0]:
        return outcome[1]
    raise outcome[1] from WorkerTraceback(outcome[2])


def _end_children(pids: list[int]) -> None:
    """Children of a run that ended early, ended and reaped: SIGTERM, and SIGKILL to one still there after the
    grace."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + WORKER_GRACE_S
    running = set(pids)
    while running:
        running = {pid for pid in running if _unreaped(pid)}
        if running and time.monotonic() >= deadline:
            for pid in running:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
            return
        if running:
            time.sleep(0.005)


def _unreaped(pid: int) -> bool:
    """The child is still running; one that has ended is reaped here."""
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:  # reaped already
        return False


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT kept pending in the block: a process forked here starts with them blocked."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # read first: a handler raising here blocks nothing
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, ENDING_SIGNALS)
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class EndingSignals:
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

    def __enter__(self) -> EndingSignals:
        if threading.current_thread() is threading.main_thread():
            self.previous = {signum: signal.signal(signum, self._handle) for signum in ENDING_SIGNALS}
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if kind is None and self.recorded is not None:
            raise Interrupted(self.recorded)


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
