"""How many processes read a store when --jobs is not given: its size, the CPUs this process may use, the load.

The rule (commands/shares.auto_jobs) is checked on machines described as values; the split it leads to, on a
real store the fixture builder wrote, through the real reader; and this machine as the run reads it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from deerflow_ckpt.commands import shares
from deerflow_ckpt.commands.shares import CHECKPOINTS_PER_PROCESS, MAX_AUTO_JOBS, Machine, auto_jobs, share_selections
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.store.selection import ThreadSelection
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.sqlite import SqliteCheckpointReader
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase

BOTH_HALVES = [ThreadSelection(upper="m"), ThreadSelection(lower="m")]


@pytest.mark.parametrize(
    ("checkpoints", "machine", "jobs"),
    [
        (0, Machine(2, 0.0), 1),
        (2 * CHECKPOINTS_PER_PROCESS - 1, Machine(2, 0.0), 1),  # below the crossover: one process
        (2 * CHECKPOINTS_PER_PROCESS, Machine(2, 0.0), 2),
        (100 * CHECKPOINTS_PER_PROCESS, Machine(2, 0.0), 2),  # no more than the CPUs
        (100 * CHECKPOINTS_PER_PROCESS, Machine(16, 0.3), MAX_AUTO_JOBS),
        (3 * CHECKPOINTS_PER_PROCESS, Machine(16, 0.3), 3),
        (100 * CHECKPOINTS_PER_PROCESS, Machine(2, 1.0), 1),  # one CPU busy: one left idle
        (100 * CHECKPOINTS_PER_PROCESS, Machine(2, 0.4), 2),
        (100 * CHECKPOINTS_PER_PROCESS, Machine(2, 9.5), 1),  # a machine far past its cores
        (100 * CHECKPOINTS_PER_PROCESS, Machine(4, 1.7), 2),
        (100 * CHECKPOINTS_PER_PROCESS, Machine(2, None), 2),  # no load average (Windows): the CPUs
        (100 * CHECKPOINTS_PER_PROCESS, Machine(1, 0.0), 1),
        # The load of a run that just ended lags; nothing else runnable now: both CPUs.
        (100 * CHECKPOINTS_PER_PROCESS, Machine(2, 1.3, running=0), 2),
        # Busy now and over the last minute: one process.
        (100 * CHECKPOINTS_PER_PROCESS, Machine(2, 1.3, running=1), 1),
        # A burst now on an otherwise quiet minute: the load decides.
        (100 * CHECKPOINTS_PER_PROCESS, Machine(2, 0.2, running=3), 2),
        (100 * CHECKPOINTS_PER_PROCESS, Machine(2, None, running=2), 1),  # only the count now
    ],
)
def test_auto_jobs(checkpoints: int, machine: Machine, jobs: int) -> None:
    assert auto_jobs(checkpoints, machine) == jobs


def test_this_machine_counts_the_cpus_this_process_may_use() -> None:
    machine = shares.this_machine()
    if hasattr(os, "sched_getaffinity"):
        assert machine.cpus == len(os.sched_getaffinity(0))
    assert machine.load is None or machine.load >= 0
    if os.path.exists("/proc/loadavg"):
        # Linux: the tasks runnable now, this one not counted (a pytest run alone on the machine may see 0).
        assert machine.running is not None and machine.running >= 0
        assert f"{machine.running} other task" in machine.describe()


def _reader(built: BuiltDatabase) -> SqliteCheckpointReader:
    return SqliteCheckpointReader(SqliteTarget(built.path))


def test_a_store_past_the_crossover_is_split_on_an_idle_machine(
    built_sqlite: BuiltDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = sum(len(thread.checkpoints) for thread in built_sqlite.manifest.threads)
    # The fixture store is small: the crossover is moved so that it holds two processes' worth.
    monkeypatch.setattr(shares, "CHECKPOINTS_PER_PROCESS", stored // 2)
    split = share_selections(_reader(built_sqlite), None, machine=Machine(2, 0.1))
    assert len(split.selections) == 2
    assert split.why == f"automatic, 2 CPUs, load 0.10; {stored} checkpoints"
    # The same store on a busy machine: one process, and the store is not even counted.
    busy = share_selections(_reader(built_sqlite), None, machine=Machine(2, 1.9))
    assert len(busy.selections) == 1 and busy.why == "automatic, 2 CPUs, load 1.90"
    # Below the crossover: one process.
    monkeypatch.setattr(shares, "CHECKPOINTS_PER_PROCESS", stored)
    assert len(share_selections(_reader(built_sqlite), None, machine=Machine(2, 0.1)).selections) == 1


def test_given_jobs_are_taken_as_given(built_sqlite: BuiltDatabase) -> None:
    split = share_selections(_reader(built_sqlite), 3, machine=Machine(1, 50.0))
    assert len(split.selections) == 3 and split.why.startswith("--jobs 3; ")


@pytest.mark.slow
def test_verbose_says_how_many_processes_and_why(built_sqlite: BuiltDatabase) -> None:
    automatic = run_ckpt("verify-shape", "--db", built_sqlite.db, "--format", "json", "--verbose")
    (line,) = [line for line in automatic.stderr.splitlines() if "threads read by" in line]
    # The fixture store is far below the crossover: one process whatever the machine.
    assert line.startswith("ckpt: threads read by 1 process (automatic, ")
    given = run_ckpt("verify-shape", "--db", built_sqlite.db, "--format", "json", "--verbose", "--jobs", "2")
    assert "ckpt: threads read by 2 processes (--jobs 2; " in given.stderr


def _plans(database: str, nullable: bool) -> list[str]:
    """SQLite's plan for each of the scan's two queries for the first of two shares."""
    import sqlite3

    from deerflow_ckpt.store.selection import ThreadSelection
    from deerflow_ckpt.store.sqlite import _queries

    checkpoints, writes, parameters = _queries(ThreadSelection(upper="m"), nullable)
    with contextlib.closing(sqlite3.connect(database)) as connection:
        return [" ".join(row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {q}", parameters)) for q in (
            checkpoints, writes)]  # fmt: skip


def test_the_first_share_reads_only_its_range_on_the_savers_schema(built_sqlite: BuiltDatabase) -> None:
    """The savers declare thread_id NOT NULL: the first share's queries walk the index over its range only (with
    `OR thread_id IS NULL` SQLite scanned the whole index, and read the rows past the range)."""
    import sqlite3

    from deerflow_ckpt.store.sqlite import thread_ids_nullable

    with contextlib.closing(sqlite3.connect(built_sqlite.db)) as connection:
        assert thread_ids_nullable(connection) is False
    for plan in _plans(built_sqlite.db, nullable=False):
        assert plan.startswith("SEARCH ") and "(thread_id<?)" in plan, plan
    # What a schema that allows NULL thread ids still needs: the whole index.
    assert all(plan.startswith("SCAN ") for plan in _plans(built_sqlite.db, nullable=True))


@pytest.mark.slow
def test_a_null_thread_id_is_read_by_the_first_share_where_the_schema_allows_it(
    built_sqlite: BuiltDatabase, tmp_path: Path
) -> None:
    import json
    import sqlite3

    from deerflow_ckpt.store.sqlite import thread_ids_nullable

    loose = tmp_path / "loose.db"
    with contextlib.closing(sqlite3.connect(loose)) as connection, connection:
        # A hand-made schema without NOT NULL, and one thread whose id is NULL in both tables.
        connection.execute(f"ATTACH DATABASE '{built_sqlite.path}' AS source")
        for table in ("checkpoints", "writes"):
            connection.execute(f"CREATE TABLE {table} AS SELECT * FROM source.{table}")
            connection.execute(f"UPDATE {table} SET thread_id = NULL WHERE thread_id = 'fault-ck304-pruned-writes'")
        assert thread_ids_nullable(connection) is True
    counts = []
    for jobs in ("1", "2"):
        result = run_ckpt("verify-shape", "--db", str(loose), "--format", "json", "--jobs", jobs)
        assert result.exit_code == 1, result.stderr
        report = json.loads(result.stdout)
        counts.append((report["summary"]["checkpoints"], report["summary"]["threads"]))
        assert "NULL" in {finding["thread_id"] for finding in report["findings"]}
    assert counts[0] == counts[1]


def _killed_share(selection: object, progress: object) -> None:
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_is_one_clear_error() -> None:
    """A worker the system kills (out of memory, a signal) is a StoreError that says so, not an internal error
    about a broken process pool."""
    before = _children_of(os.getpid())
    with pytest.raises(StoreError, match="a worker process ended without a result"):
        shares.run_shares(_killed_share, BOTH_HALVES)
    assert _children_of(os.getpid()) <= before  # every worker reaped (a forkserver of another test may stay)


def test_a_killed_pool_worker_is_the_same_clear_error() -> None:
    with pytest.raises(StoreError, match="a worker process ended without a result"):
        shares.run_shares(_killed_share, BOTH_HALVES, start_method="forkserver")


# -- the workers forked straight from the main process (Linux) -------------------------------------------


def _signal_state(selection: ThreadSelection, progress: object) -> tuple[bool, bool]:
    import signal

    return signal.getsignal(signal.SIGINT) is signal.SIG_DFL, signal.SIGINT in signal.pthread_sigmask(
        signal.SIG_BLOCK, []
    )


def test_forked_workers_start_with_the_default_handlers_and_nothing_blocked() -> None:
    assert shares.FORKS_BY_DEFAULT, "this suite runs on Linux, where shares are forked straight from ckpt"
    assert shares.run_shares(_signal_state, BOTH_HALVES) == [(True, False), (True, False)]


def _counted(selection: ThreadSelection, progress: shares.Progress | None) -> str:
    assert progress is not None
    for seen in (3, 4):
        progress(seen)
    return f"{selection.lower}-{selection.upper}-{os.getpid()}"


def test_forked_workers_hand_back_their_results_in_order_and_their_counts() -> None:
    seen: list[int] = []
    results = shares.run_shares(_counted, BOTH_HALVES, seen.append)
    assert [result.rsplit("-", 1)[0] for result in results] == ["None-m", "m-None"]
    assert len({result.rsplit("-", 1)[1] for result in results} | {str(os.getpid())}) == 3  # two other processes
    assert seen and seen[-1] == 14


def _failing_or_slow(selection: ThreadSelection, progress: object) -> None:
    import time

    if selection.upper == "m":
        raise StoreError("reading share one failed")
    time.sleep(60)


def test_a_failed_share_is_raised_at_once_with_its_worker_traceback_and_ends_the_other() -> None:
    import time

    before = _children_of(os.getpid())
    started = time.monotonic()
    with pytest.raises(StoreError, match="reading share one failed") as raised:
        shares.run_shares(_failing_or_slow, BOTH_HALVES)
    assert time.monotonic() - started < 30  # the sleeping share was not waited for
    cause = raised.value.__cause__
    assert isinstance(cause, shares.WorkerTraceback) and "_failing_or_slow" in str(cause)
    assert _children_of(os.getpid()) <= before  # every worker reaped (a forkserver of another test may stay)


class _Unpicklable(Exception):
    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("no pickling")


def _unpicklable_failure(selection: ThreadSelection, progress: object) -> None:
    raise _Unpicklable("the share's own words")


def test_a_failure_that_does_not_pickle_arrives_as_its_text() -> None:
    with pytest.raises(StoreError, match="_Unpicklable: the share's own words"):
        shares.run_shares(_unpicklable_failure, BOTH_HALVES)


def _big_result(selection: ThreadSelection, progress: object) -> bytes:
    return bytes([ord(selection.lower or "a")]) * (3 << 20)  # far past a pipe's 64 KiB buffer


def test_results_larger_than_a_pipe_holds_come_back_whole() -> None:
    assert shares.run_shares(_big_result, BOTH_HALVES) == [b"a" * (3 << 20), b"m" * (3 << 20)]


class _Rebuilt(Exception):
    """Pickles, but cannot be made again from what it pickled (its __init__ takes two arguments)."""

    def __init__(self, what: str, where: str) -> None:
        super().__init__(f"{what} at {where}")


def _unrebuildable_failure(selection: ThreadSelection, progress: object) -> None:
    raise _Rebuilt("the share's own words", "its thread")


def test_a_failure_that_cannot_be_made_again_arrives_as_its_text() -> None:
    with pytest.raises(StoreError, match="_Rebuilt: the share's own words at its thread"):
        shares.run_shares(_unrebuildable_failure, BOTH_HALVES)


class _Unloadable:
    def __reduce__(self) -> tuple[object, ...]:
        return (_refuse, ())


def _refuse() -> None:
    raise TypeError("cannot be made here")


def _unloadable_result(selection: ThreadSelection, progress: object) -> _Unloadable:
    return _Unloadable()


def test_a_result_the_main_process_cannot_load_is_a_lost_worker() -> None:
    with pytest.raises(StoreError, match="a worker process ended without a result") as raised:
        shares.run_shares(_unloadable_result, BOTH_HALVES)
    assert isinstance(raised.value.__cause__, TypeError)


# A main process that runs four quick shares over and over until a signal ends it, then says what it left: its
# blocked signals, its children, the descriptors it opened since it began. Between runs the signals raise
# Interrupted too, so every run ends the same way wherever the signal lands.
_SIGNALLED_LOOP = """
import gc, os, signal
from deerflow_ckpt.commands import shares
from deerflow_ckpt.errors import Interrupted
from deerflow_ckpt.store.selection import ThreadSelection

def interrupt(signum, frame):
    raise Interrupted(signum)

def quick(selection, progress):
    return 1

def parent_of(entry):
    try:
        return open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1]
    except OSError:  # gone meanwhile
        return None

def children():
    return [entry for entry in os.listdir("/proc") if entry.isdigit() and parent_of(entry) == str(os.getpid())]

for signum in shares.ENDING_SIGNALS:
    signal.signal(signum, interrupt)
before = set(os.listdir("/proc/self/fd"))
print("ready", flush=True)
try:
    while True:
        shares.run_shares(quick, [ThreadSelection(upper=str(i)) for i in range(4)])
except Interrupted:
    pass
gc.collect()  # what the exception's traceback held (a selector it interrupted) is gone with it
blocked = int(next(line for line in open("/proc/self/status") if line.startswith("SigBlk")).split()[1], 16)
opened = sorted(set(os.listdir("/proc/self/fd")) - before)
print("ended", blocked, len(children()), opened, flush=True)
"""


@pytest.mark.slow
def test_a_signal_at_any_moment_of_forking_or_reaping_leaves_nothing_behind() -> None:
    """SIGINT or SIGTERM at random moments of a loop of runs: each ends in Interrupted with no child left, no
    descriptor left open and the signals unblocked (a signal between a step and its record once left them)."""
    import random
    import signal
    import subprocess
    import sys
    import time

    outcomes = []
    for _ in range(60):
        process = subprocess.Popen(
            [sys.executable, "-c", _SIGNALLED_LOOP], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        time.sleep(random.uniform(0.0, 0.05))
        process.send_signal(random.choice([signal.SIGINT, signal.SIGTERM]))
        out, err = process.communicate(timeout=30)
        outcomes.append((out.strip(), err.strip()[-300:]))
    assert {outcome for outcome in outcomes} == {("ended 0 0 []", "")}


def _masks_of_threads(skipping: set[str]) -> list[int]:
    """The signal masks of this process's threads but `skipping` (task ids under Linux's /proc/self/task)."""
    masks = []
    for task in Path("/proc/self/task").iterdir():
        if task.name not in skipping:
            status = (task / "status").read_text()
            masks.append(int(next(line for line in status.splitlines() if line.startswith("SigBlk")).split()[1], 16))
    return masks


def test_the_spinners_thread_leaves_the_ending_signals_to_the_main_thread() -> None:
    """The kernel gives a process's signal to any thread not blocking it: rich's refresh thread blocks SIGTERM
    and SIGINT, or one given to it would run its handler inside a block where the main thread holds them."""
    import signal

    from deerflow_ckpt.cli.console import counting_checkpoints

    before = {task.name for task in Path("/proc/self/task").iterdir()}  # this one, and other tests' threads
    masks = counting_checkpoints(lambda progress: _masks_of_threads(before), show=True, color=False, label="reading")
    wanted = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1))
    assert masks and all(mask & wanted == wanted for mask in masks)


# A share that closes its result pipe at once (as no share does), then goes on: Ctrl-C must still end the run.
_EARLY_CLOSE = """
import os, time
from deerflow_ckpt.commands import shares
from deerflow_ckpt.errors import Interrupted
from deerflow_ckpt.store.selection import ThreadSelection

def closes_early(selection, progress):
    os.closerange(3, 1024)
    time.sleep(60)

print("ready", flush=True)
try:
    shares.run_shares(closes_early, [ThreadSelection(upper="m"), ThreadSelection(lower="m")])
except Interrupted:
    print("interrupted", flush=True)
"""


def test_a_child_that_closed_its_pipe_early_does_not_hold_ctrl_c() -> None:
    import signal
    import subprocess
    import sys
    import time

    process = subprocess.Popen([sys.executable, "-c", _EARLY_CLOSE], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    time.sleep(1.0)  # both children forked, their pipes closed, the main process waiting on the first
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=30)
    assert out.strip() == "interrupted" and time.monotonic() - started < 10  # not after the share's 60 s


def _children_of(pid: int) -> set[int]:
    """Processes whose parent is `pid`, zombies included (a child not reaped is still a child)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.add(int(entry.name))
    return found


def test_the_first_share_reads_only_its_range_on_postgres(
    built_postgres: BuiltDatabase, pg_schema: tuple[str, str]
) -> None:
    """Postgres: the savers' primary keys make thread_id NOT NULL, so the first share's checkpoints query is an
    index scan bounded by its range; with `OR thread_id IS NULL` the bound becomes a filter over every row."""
    import psycopg
    from psycopg import sql

    from deerflow_ckpt.store.postgres import PostgresCheckpointReader, table_names, thread_ids_nullable
    from deerflow_ckpt.store.selection import ThreadSelection
    from deerflow_ckpt.store.source import target_from_argument

    reader = PostgresCheckpointReader(target_from_argument(built_postgres.db), sizes=False)  # type: ignore[arg-type]
    with psycopg.connect(built_postgres.db) as connection:
        assert thread_ids_nullable(connection, "") is False
        # The plan a store of real size gets (measured on 45,000 checkpoints), forced on the small fixture.
        connection.execute("SET enable_seqscan = off")
        connection.execute("SET enable_bitmapscan = off")
        tables = table_names(connection, "")
        conditions = {}
        for nullable in (False, True):
            # In byte order (no COLLATE clause), so the primary key serves whatever the server's collation.
            queries, parameters = reader.stream_queries(tables, ThreadSelection(upper="m"), True, nullable)
            plan = [row[0] for row in connection.execute(sql.SQL("EXPLAIN ") + queries[0], parameters)]
            conditions[nullable] = [line.strip() for line in plan if "thread_id" in line]
        assert any(line.startswith("Index Cond: (thread_id < ") for line in conditions[False]), conditions
        assert not any(line.startswith("Filter:") for line in conditions[False]), conditions
        assert any(line.startswith("Filter:") and "IS NULL" in line for line in conditions[True]), conditions
    # A schema of the same tables without NOT NULL still reads NULL thread ids in the first share.
    dsn, schema = pg_schema
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            connection.execute(sql.SQL("CREATE TABLE {} (thread_id text)").format(sql.Identifier(schema, table)))
        assert thread_ids_nullable(connection, schema) is True
        # NOT NULL everywhere, but one table has a child that dropped it: a NULL row reads through the parent.
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            connection.execute(
                sql.SQL("ALTER TABLE {} ALTER thread_id SET NOT NULL").format(sql.Identifier(schema, table))
            )
        assert thread_ids_nullable(connection, schema) is False
        child = sql.Identifier(schema, "child")
        connection.execute(
            sql.SQL("CREATE TABLE {} () INHERITS ({})").format(child, sql.Identifier(schema, "checkpoints"))
        )
        connection.execute(sql.SQL("ALTER TABLE {} ALTER thread_id DROP NOT NULL").format(child))
        assert thread_ids_nullable(connection, schema) is True
