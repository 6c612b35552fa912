"""`inspect storage`'s core: read where the chosen database's bytes are, then what that means: growth per
hour, day, week or month, the rate of the week up to now, and compaction advice."""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

from deerflow_ckpt.analysis.storage import (
    Advice,
    Growth,
    Rate,
    fold,
    merge_copies,
    postgres_advice,
    recent_rate,
    sqlite_advice,
)
from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.store.source import DatabaseChoice, PostgresTarget, SqliteTarget
from deerflow_ckpt.store.storage import LegacyFile, StorageFacts, StorageRequest


@dataclass(frozen=True)
class StorageInspection:
    database: str
    found_via: str
    facts: StorageFacts
    growth: Growth
    rate: Rate | None
    # Each heaviest thread's growth, in the store's unit.
    heaviest_growth: dict[int, Growth]
    advice: list[Advice]
    # The clock the growth's plausible range and the rate's window end at (ns since the epoch).
    now_ns: int


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def legacy_file(path: Path) -> LegacyFile | None:
    """A legacy checkpointer file with its -wal and -shm, None when it is not a file."""
    if not path.is_file():
        return None
    return LegacyFile(
        str(path),
        _size(path) or 0,
        _size(path.with_name(path.name + "-wal")),
        _size(path.with_name(path.name + "-shm")),
    )


def inspect_storage(
    choice: DatabaseChoice,
    request: StorageRequest,
    legacy_files: list[Path] | None = None,
    now_ns: int | None = None,
) -> StorageInspection:
    """The storage facts of `choice`'s database and what they mean; `legacy_files` are other checkpoint files
    a legacy `checkpointer:` section writes (config/discovery.py legacy_checkpointer_files), named with their
    sizes. `now_ns` (the clock by default) bounds plausible write times and ends the rate's window."""
    if now_ns is None:
        now_ns = time.time_ns()
    target = choice.target
    if isinstance(target, SqliteTarget):
        from deerflow_ckpt.commands.worker_pool import worker_pool
        from deerflow_ckpt.store.storage_sqlite import read_sqlite_storage

        # fork where the platform forks (Linux): no re-import of the package per worker.
        method = "fork" if sys.platform.startswith("linux") else None
        facts = read_sqlite_storage(target, request, pool=functools.partial(worker_pool, start_method=method))
    else:
        assert isinstance(target, PostgresTarget)
        from deerflow_ckpt.store.storage_postgres import read_postgres_storage

        facts = read_postgres_storage(target, request)
    facts.legacy_files.extend(found for path in legacy_files or () if (found := legacy_file(path)) is not None)
    facts.large_values = merge_copies(facts.large_values)
    growth = fold(facts.growth, now_ns)
    advice: list[Advice] = []
    if facts.sqlite is not None:
        advice = sqlite_advice(facts.sqlite)
    elif facts.postgres is not None:
        advice = postgres_advice(facts.postgres, facts.relations)
    heaviest = {place: fold(times, now_ns, growth.unit) for place, times in facts.heaviest_growth.items()}
    rate = recent_rate(facts.growth, now_ns)
    return StorageInspection(target.describe(), choice.found_via, facts, growth, rate, heaviest, advice, now_ns)
