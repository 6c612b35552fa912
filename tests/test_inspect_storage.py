"""Storage by kind adds up to what DeerFlow's benchmark counts: the lengths of the stored columns.

SQLite: length(checkpoint) + length(metadata) per checkpoint and length(value) per write (DeerFlow's
`logical_checkpoint_bytes` and `logical_write_bytes`). Postgres (not measured by DeerFlow yet): the
text length of both JSONB columns, plus octet_length of every blob and every write. Summed here with
plain SQL, per thread, over every namespace.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from deerflow_ckpt.analysis.inspection import InspectSettings, ThreadInspection, inspect_thread
from deerflow_ckpt.store.readers import open_reader
from deerflow_ckpt.store.selection import ThreadSelection
from deerflow_ckpt.store.source import target_from_argument
from tests.conftest import BuiltDatabase

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
# Faults that leave blob bytes no readable checkpoint owns: a marker whose blob is gone or is no
# snapshot, and a Postgres checkpoint whose JSONB is not a checkpoint (its snapshot blob is not joined).
UNOWNED = {"fault-ck102", "fault-ck104"}

SQLITE_SQL = {
    "checkpoints": "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints "
    "WHERE thread_id = ?",
    "message_writes": "SELECT coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ? AND channel = 'messages'",
    "other_writes": "SELECT coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ? AND channel != 'messages'",
}
POSTGRES_SQL = {
    "checkpoints": "SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)), 0) "
    "FROM checkpoints WHERE thread_id = %s",
    "blobs": "SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs WHERE thread_id = %s",
    "message_writes": "SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes "
    "WHERE thread_id = %s AND channel = 'messages'",
    "other_writes": "SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes "
    "WHERE thread_id = %s AND channel != 'messages'",
}


@pytest.fixture(params=BACKENDS)
def built(request: pytest.FixtureRequest) -> BuiltDatabase:
    database: BuiltDatabase = request.getfixturevalue(f"built_{request.param}")
    return database


def measured(built: BuiltDatabase, thread_id: str) -> dict[str, int]:
    if built.backend == "sqlite":
        with sqlite3.connect(Path(built.db).resolve().as_uri() + "?mode=ro", uri=True) as connection:
            return {key: connection.execute(query, (thread_id,)).fetchone()[0] for key, query in SQLITE_SQL.items()}
    with psycopg.connect(built.db) as connection:
        found = {}
        for key, query in POSTGRES_SQL.items():
            row = connection.execute(query, (thread_id,)).fetchone()
            assert row is not None
            found[key] = int(row[0])
        return found


def inspected(built: BuiltDatabase, thread_id: str) -> ThreadInspection:
    reader, backend = open_reader(target_from_argument(built.db, built.schema or ""))
    lineages = list(reader.lineages(ThreadSelection(thread_id=thread_id)))
    return inspect_thread(lineages, backend, InspectSettings(what_if=()), lineages[0].checkpoint_ns)


@pytest.mark.slow
def test_storage_by_kind_adds_up_to_the_stored_columns(built: BuiltDatabase) -> None:
    checked = 0
    for thread in built.manifest.threads:
        if thread.scenario in UNOWNED:
            continue
        storage = inspected(built, thread.thread_id).storage
        columns = measured(built, thread.thread_id)
        assert storage.message_writes == columns["message_writes"], thread.thread_id
        assert storage.other_writes == columns["other_writes"], thread.thread_id
        if built.backend == "sqlite":
            # The snapshot payloads are inside the checkpoint column.
            assert storage.snapshots + storage.checkpoints == columns["checkpoints"], thread.thread_id
            assert storage.other_blobs == 0
        else:
            assert storage.checkpoints == columns["checkpoints"], thread.thread_id
            assert storage.snapshots + storage.other_blobs == columns["blobs"], thread.thread_id
        checked += 1
    assert checked >= 30


def test_snapshot_bytes_are_counted_once_per_stored_snapshot(built: BuiltDatabase) -> None:
    """A Postgres checkpoint that inherits a snapshot's version stores nothing new; K=1 and K=2 threads
    have an inherited version after every turn, so counting them would add the snapshots again."""
    for cadence in (1, 2):
        shown = inspected(built, f"clean-delta-k{cadence}").shown
        assert shown.what_if is None
        blobs = measured(built, shown.thread_id).get("blobs")
        if blobs is not None:
            assert shown.storage.snapshots + shown.storage.other_blobs == blobs
        assert shown.snapshot_steps == 2 * built.manifest.turns // cadence
