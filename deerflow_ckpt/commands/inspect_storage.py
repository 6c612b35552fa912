"""`inspect storage`'s core: read where the chosen database's bytes are, then what that means: growth per
day or hour, the recent rate, and compaction advice."""

from __future__ import annotations

from dataclasses import dataclass
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
from deerflow_ckpt.store.source import DatabaseChoice, PostgresTarget, SqliteTarget
from deerflow_ckpt.store.storage import StorageFacts, StorageRequest


@dataclass(frozen=True)
class StorageInspection:
    database: str
    found_via: str
    facts: StorageFacts
    growth: Growth
    rate: Rate | None
    heaviest_growth: dict[str, Growth]
    advice: list[Advice]


def inspect_storage(
    choice: DatabaseChoice, request: StorageRequest, legacy_files: list[Path] | None = None
) -> StorageInspection:
    """The storage facts of `choice`'s database and what they mean; `legacy_files` are other checkpoint files
    DeerFlow's config names beside it (a legacy checkpointer's store.db), named with their sizes."""
    target = choice.target
    if isinstance(target, SqliteTarget):
        from deerflow_ckpt.store.storage_sqlite import read_sqlite_storage

        facts = read_sqlite_storage(target, request)
    else:
        assert isinstance(target, PostgresTarget)
        from deerflow_ckpt.store.storage_postgres import read_postgres_storage

        facts = read_postgres_storage(target, request)
    facts.legacy_files.extend((str(path), path.stat().st_size) for path in legacy_files or () if path.is_file())
    facts.large_values = merge_copies(facts.large_values)
    growth = fold(facts.growth)
    advice: list[Advice] = []
    if facts.sqlite is not None:
        advice = sqlite_advice(facts.sqlite)
    elif facts.postgres is not None:
        advice = postgres_advice(facts.postgres, facts.relations)
    heaviest = {thread: fold(buckets, growth.unit_ns) for thread, buckets in facts.heaviest_growth.items()}
    return StorageInspection(target.describe(), choice.found_via, facts, growth, recent_rate(growth), heaviest, advice)
