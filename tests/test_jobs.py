"""How many processes read a store when --jobs is not given: its size, the CPUs this process may use, the load.

The rule (commands/shares.auto_jobs) is checked on machines described as values; the split it leads to, on a
real store the fixture builder wrote, through the real reader; and this machine as the run reads it.
"""

from __future__ import annotations

import os

import pytest

from deerflow_ckpt.commands import shares
from deerflow_ckpt.commands.shares import CHECKPOINTS_PER_PROCESS, MAX_AUTO_JOBS, Machine, auto_jobs, share_selections
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.sqlite import SqliteCheckpointReader
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase


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
