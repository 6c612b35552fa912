"""The what-if against databases really written at each K.

The same conversation (same thread id, same seeded text, so the same message sizes) is written by the
real graph through the real saver at K = 1, 3 and 10 and in full mode, each into its own SQLite file
or Postgres schema. The what-if computed from any one of them must predict what the others store:
snapshot bytes, snapshot count and the worst replay depth at each K, and the full-mode list bytes.
Messages are 3,000 bytes and 16 turns, so lists pass 16 elements and snapshots pass 64 KiB: the
array-16 and ext-32 headers are exercised.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ormsgpack
import psycopg
import pytest
from psycopg import sql

from deerflow_ckpt.analysis.inspection import InspectSettings, LineageInspection, inspect_thread
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.what_if import WhatIfRow
from deerflow_ckpt.store.readers import open_reader
from deerflow_ckpt.store.records import Backend, Lineage
from deerflow_ckpt.store.selection import ThreadSelection
from deerflow_ckpt.store.source import target_from_argument
from fixtures.dbbuilder.bulk import build_bulk_postgres, build_bulk_sqlite
from tests.conftest import BuiltDatabase, create_database, drop_database, dsn_for, require_postgres

CADENCES = (1, 3, 10)
FULL = "full"
TURNS = 16
MESSAGE_BYTES = 3000
THREAD = "bulk-000000"
Written = int | str  # a cadence, or FULL


@dataclass(frozen=True)
class Conversation:
    """One database per way of writing the conversation."""

    backend: str
    dbs: dict[Written, tuple[str, str]]  # written -> (db, schema)


def _variants() -> Iterator[tuple[Written, str, int | None]]:
    for cadence in CADENCES:
        yield cadence, "delta", cadence
    yield FULL, "full", None


@pytest.fixture(scope="module")
def sqlite_conversation(tmp_path_factory: pytest.TempPathFactory) -> Conversation:
    root = tmp_path_factory.mktemp("what-if")
    dbs: dict[Written, tuple[str, str]] = {}
    for written, mode, cadence in _variants():
        path = root / f"{written}.db"
        build_bulk_sqlite(path, 1, TURNS, cadence, MESSAGE_BYTES, jobs=1, mode=mode)
        dbs[written] = (str(path), "")
    return Conversation("sqlite", dbs)


@pytest.fixture(scope="module")
def postgres_conversation() -> Iterator[Conversation]:
    require_postgres()
    name = create_database("ckpt_what_if")
    try:
        dsn = dsn_for(name)
        dbs: dict[Written, tuple[str, str]] = {}
        for written, mode, cadence in _variants():
            schema = f"written_{written}"
            build_bulk_postgres(dsn, 1, TURNS, cadence, MESSAGE_BYTES, schema=schema, jobs=1, mode=mode)
            dbs[written] = (dsn, schema)
        yield Conversation("postgres", dbs)
    finally:
        drop_database(name)


BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def conversation(request: pytest.FixtureRequest) -> Conversation:
    built: Conversation = request.getfixturevalue(f"{request.param}_conversation")
    return built


def _lineage(conversation: Conversation, written: Written) -> tuple[Lineage, Backend]:
    db, schema = conversation.dbs[written]
    reader, backend = open_reader(target_from_argument(db, schema))
    (lineage,) = reader.lineages(ThreadSelection(thread_id=THREAD))
    return lineage, backend


def inspected(conversation: Conversation, written: Written) -> LineageInspection:
    lineage, backend = _lineage(conversation, written)
    return inspect_thread([lineage], backend, InspectSettings(what_if=CADENCES)).shown


def row(inspection: LineageInspection, cadence: int | None) -> WhatIfRow:
    assert inspection.what_if is not None
    (found,) = [r for r in inspection.what_if.rows if r.cadence == cadence]
    return found


def worst_replay_bytes(conversation: Conversation, written: Written) -> int:
    """The most message-write bytes a read of any checkpoint replays, walked along the parents."""
    lineage, backend = _lineage(conversation, written)
    graph = LineageGraph(lineage, backend)
    worst = 0
    for record in graph.records:
        replayed, current = 0, record
        while not graph.stores_seed(current):
            parent = graph.parent(current)
            if parent is None:
                break
            replayed += parent.message_write_bytes if graph.wrote(current) else 0
            current = parent
        worst = max(worst, replayed)
    return worst


def full_mode_lists(conversation: Conversation) -> tuple[int, int]:
    """(lists stored, their bytes) in the full-mode database, measured without the store layer."""
    db, schema = conversation.dbs[FULL]
    if conversation.backend == "postgres":
        with psycopg.connect(db) as connection:
            query = sql.SQL(
                "SELECT count(*), coalesce(sum(octet_length(blob)), 0) FROM {} WHERE thread_id = %s AND channel = %s"
            ).format(sql.Identifier(schema, "checkpoint_blobs"))
            found = connection.execute(query, (THREAD, "messages")).fetchone()
        assert found is not None
        return int(found[0]), int(found[1])
    stored = size = 0
    with sqlite3.connect(Path(db).resolve().as_uri() + "?mode=ro", uri=True) as connection:
        for (data,) in connection.execute("SELECT checkpoint FROM checkpoints WHERE thread_id = ?", (THREAD,)):
            value = ormsgpack.unpackb(data, ext_hook=ormsgpack.Ext, option=ormsgpack.OPT_NON_STR_KEYS)
            messages = value["channel_values"].get("messages")
            if isinstance(messages, list):
                stored += 1
                size += len(ormsgpack.packb(messages))
    return stored, size


@pytest.mark.slow
@pytest.mark.parametrize("source", [*CADENCES, FULL])
def test_what_if_predicts_each_database_written_at_that_k(conversation: Conversation, source: Written) -> None:
    predicted = inspected(conversation, source)
    for cadence in CADENCES:
        measured = inspected(conversation, cadence)
        got = row(predicted, cadence)
        assert got.retained_bytes == measured.storage.snapshots, (source, cadence)
        assert got.stored_values == measured.snapshot_steps, (source, cadence)
        assert got.worst_replay_depth == measured.replay_depth_max, (source, cadence)
        assert got.worst_replay_bytes == worst_replay_bytes(conversation, cadence), (source, cadence)


@pytest.mark.parametrize("source", [*CADENCES, FULL])
def test_full_mode_row_matches_the_full_mode_database(conversation: Conversation, source: Written) -> None:
    stored, size = full_mode_lists(conversation)
    full = row(inspected(conversation, source), None)
    assert (full.stored_values, full.retained_bytes) == (stored, size)
    assert full.worst_replay_depth == 0


def test_the_model_check_is_exact_on_every_delta_database(conversation: Conversation) -> None:
    for cadence in CADENCES:
        what_if = inspected(conversation, cadence).what_if
        assert what_if is not None and what_if.append_only
        assert what_if.check is not None and what_if.check.exact, cadence
        assert what_if.check.snapshots == 2 * TURNS // cadence


def test_the_framing_reaches_the_larger_headers(conversation: Conversation) -> None:
    """Guard for the docstring's promise: more than 15 messages and snapshots above 64 KiB."""
    largest = inspected(conversation, 1)
    assert largest.message_writing_steps == 2 * TURNS > 15
    assert largest.storage.snapshots > 2 * TURNS * (1 << 16) // TURNS


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_what_if_on_the_fixture_threads(request: pytest.FixtureRequest, backend_name: str) -> None:
    """The clean fixture threads at K = 1, 2, 3, 10 (12 turns of 200 bytes) predict each other too."""
    built: BuiltDatabase = request.getfixturevalue(f"built_{backend_name}")
    reader, backend = open_reader(target_from_argument(built.db, built.schema or ""))
    shown: dict[int, LineageInspection] = {}
    for cadence in (1, 2, 3, 10):
        lineages = list(reader.lineages(ThreadSelection(thread_id=f"clean-delta-k{cadence}")))
        shown[cadence] = inspect_thread(lineages, backend, InspectSettings(what_if=(1, 2, 3, 10))).shown
    for source in shown.values():
        for cadence, measured in shown.items():
            assert row(source, cadence).retained_bytes == measured.storage.snapshots
