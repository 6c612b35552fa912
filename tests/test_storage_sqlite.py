"""store/storage_sqlite.py on the storage scenario (fixtures/dbbuilder/storage.py), written by real graphs.

Every figure is checked against an independent reading of the same file: PRAGMAs and dbstat through a
plain sqlite3 connection, per-channel bytes by decoding with LangGraph's own serializer (allowed in tests,
never in ckpt), large values from the manifest, orphans from the manifest, sums with plain SQL.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import shutil
import sqlite3
import struct
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from deerflow_ckpt.commands.worker_pool import worker_pool
from deerflow_ckpt.store import storage_sqlite
from deerflow_ckpt.store.base64_peek import find_base64_files
from deerflow_ckpt.store.clock import write_time_ns
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.storage import StorageFacts, StorageRequest, StoredIn
from deerflow_ckpt.store.storage_sqlite import read_sqlite_storage, read_wal_index
from fixtures.dbbuilder.storage import StorageManifest, pdf_bytes, png_bytes
from tests.conftest import BuiltStorage

SERDE = JsonPlusSerializer()
ALL_THREADS = StorageRequest(top=100)


@contextmanager
def _connect(path: str | Path) -> Iterator[sqlite3.Connection]:
    """An independent read-only connection, closed afterwards."""
    connection = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        yield connection
    finally:
        connection.close()


def _read(path: str | Path, request: StorageRequest = ALL_THREADS, jobs: int | None = None) -> StorageFacts:
    return read_sqlite_storage(SqliteTarget(Path(path)), request, jobs=jobs, pool=worker_pool)


@pytest.fixture(scope="module")
def storage(built_storage_sqlite: BuiltStorage) -> BuiltStorage:
    return built_storage_sqlite


@pytest.fixture(scope="module")
def facts(storage: BuiltStorage) -> StorageFacts:
    return _read(storage.db)


Variant = tuple[str, StorageManifest, StorageFacts]


@pytest.fixture(scope="module", params=["db", "after_deletes"])
def variant(request: pytest.FixtureRequest, storage: BuiltStorage) -> Variant:
    """(path, manifest, facts read from it): the store as built, and after DeerFlow deleted threads."""
    path = getattr(storage, request.param)
    manifest = storage.manifest if request.param == "db" else storage.after_deletes_manifest
    return path, manifest, _read(path)


def _scalar(connection: sqlite3.Connection, query: str, *parameters: Any) -> Any:
    return connection.execute(query, parameters).fetchone()[0]


def _thread_bytes(connection: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    """thread -> (checkpoints, checkpoint + metadata + write bytes), in plain SQL."""
    out: dict[str, list[int]] = {}
    query = "SELECT thread_id, count(*), sum(length(checkpoint) + length(metadata)) FROM checkpoints GROUP BY 1"
    for thread_id, count, size in connection.execute(query):
        out[thread_id] = [count, size]
    for thread_id, size in connection.execute("SELECT thread_id, sum(length(value)) FROM writes GROUP BY 1"):
        out.setdefault(thread_id, [0, 0])[1] += size or 0
    return {thread_id: (count, size) for thread_id, (count, size) in out.items()}


def test_files_and_pages_are_sqlites_own(variant: Variant) -> None:
    path, manifest, facts = variant
    files = facts.sqlite
    assert files is not None and facts.backend == "sqlite" and facts.postgres is None
    with _connect(path) as connection:
        assert files.page_size == _scalar(connection, "PRAGMA page_size")
        assert files.page_count == _scalar(connection, "PRAGMA page_count")
        assert files.freelist_count == _scalar(connection, "PRAGMA freelist_count")
    assert files.database_bytes == os.stat(path).st_size == files.page_count * files.page_size
    assert files.dbstat
    assert files.free_disk_bytes is not None and files.free_disk_bytes > 0
    if not manifest.deleted:
        assert files.freelist_count == 0
    else:
        # DeerFlow deleted the doomed threads through the saver: their pages wait on the freelist.
        assert files.freelist_count > 0
        assert files.freelist_bytes == files.freelist_count * files.page_size


def test_relations_are_dbstats_b_trees(variant: Variant) -> None:
    path, _, facts = variant
    with _connect(path) as connection:
        pages = dict(connection.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
        owners = dict(connection.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'").fetchall())
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = {table: _scalar(connection, f'SELECT count(*) FROM "{table}"') for table in tables}
        schema_rows = _scalar(connection, "SELECT count(*) FROM sqlite_master")
    by_name = {relation.name: relation for relation in facts.relations}
    assert set(by_name) == {*tables, "sqlite_schema"}
    assert {"checkpoints", "writes", "threads_meta"} <= set(tables)
    for table in tables:
        relation = by_name[table]
        assert relation.exact
        assert relation.bytes - relation.index_bytes == pages[table]
        assert relation.index_bytes == sum(size for index, size in pages.items() if owners.get(index) == table)
        assert relation.rows == rows[table]
    assert by_name["sqlite_schema"].bytes == pages.get("sqlite_schema", pages.get("sqlite_master"))
    assert by_name["sqlite_schema"].rows == schema_rows
    # Every page is a b-tree's or the freelist's (the fixture is far below the 1 GiB lock-byte page).
    files = facts.sqlite
    assert files is not None
    b_trees = sum(relation.bytes for relation in facts.relations)
    assert b_trees == files.used_bytes == sum(pages.values())
    assert b_trees + files.freelist_bytes == files.database_bytes


def test_with_auto_vacuum_every_b_tree_is_measured(storage: BuiltStorage, tmp_path: Path) -> None:
    """The checkpoints table is the used pages less the other b-trees only where every used page is a
    b-tree's: auto_vacuum adds pointer-map pages, so there dbstat measures it too."""
    copy = tmp_path / "auto-vacuum.db"
    shutil.copyfile(storage.after_deletes, copy)
    with _connect_rw(copy) as connection:
        connection.execute("PRAGMA auto_vacuum = FULL")
        connection.execute("VACUUM")
        assert _scalar(connection, "PRAGMA auto_vacuum") == 1
    facts = _read(copy)
    with _connect(copy) as connection:
        pages = dict(connection.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    by_name = {relation.name: relation for relation in facts.relations}
    assert by_name["checkpoints"].bytes - by_name["checkpoints"].index_bytes == pages["checkpoints"]
    files = facts.sqlite
    assert files is not None and sum(relation.bytes for relation in facts.relations) < files.used_bytes


@contextmanager
def _connect_rw(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def test_without_dbstat_relations_are_estimated_and_say_so(
    storage: BuiltStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage_sqlite, "_dbstat_sizes_available", lambda connection: False)
    facts = _read(storage.after_deletes)
    files = facts.sqlite
    assert files is not None and not files.dbstat
    assert facts.relations and all(not relation.exact for relation in facts.relations)
    assert any("dbstat" in note for note in facts.notes)
    # The pages b-trees use, shared out (rounding down each share).
    total = sum(relation.bytes for relation in facts.relations)
    assert files.used_bytes - len(facts.relations) <= total <= files.used_bytes
    with _connect(storage.after_deletes) as connection:
        for relation in facts.relations:
            assert relation.rows == _scalar(connection, f'SELECT count(*) FROM "{relation.name}"')
    by_name = {relation.name: relation for relation in facts.relations}
    assert by_name["checkpoints"].bytes > by_name["writes"].bytes > by_name["threads_meta"].bytes


def _is_tool_message(value: Any) -> bool:
    return type(value).__name__ == "ToolMessage" and type(value).__module__ == "langchain_core.messages.tool"


def _tool_items(value: Any) -> list[int]:
    """The serialized size of each ToolMessage item of a decoded messages value (a list, or one message)."""
    items = value if isinstance(value, list) else [value]
    return [len(SERDE.dumps_typed(item)[1]) for item in items if _is_tool_message(item)]


def _channel_sums_by_serializer(path: str) -> tuple[dict[str, tuple[int, int]], int]:
    """channel -> (values, bytes) by decoding every checkpoint with LangGraph's serializer and encoding each
    channel value again (None is msgpack nil, one byte, where dumps_typed gives no bytes), the messages'
    ToolMessage items apart ("messages: tool outputs"); and the total."""
    sums: dict[str, list[int]] = {}
    total = 0
    with _connect(path) as connection:
        for kind, data in connection.execute("SELECT type, checkpoint FROM checkpoints"):
            total += len(data)
            for channel, value in SERDE.loads_typed((kind, data))["channel_values"].items():
                entry = sums.setdefault(channel, [0, 0])
                entry[0] += 1
                entry[1] += 1 if value is None else len(SERDE.dumps_typed(value)[1])
                if channel == "messages":
                    tools = _tool_items(getattr(value, "value", value))
                    entry[1] -= sum(tools)
                    tool_entry = sums.setdefault("messages: tool outputs", [0, 0])
                    tool_entry[0] += len(tools)
                    tool_entry[1] += sum(tools)
    return {channel: (count, size) for channel, (count, size) in sums.items() if count}, total


def _write_sums_by_serializer(path: str) -> dict[str, tuple[int, int]]:
    """channel -> (writes, stored bytes) in plain SQL, the messages writes' ToolMessage items (found by
    decoding each with the serializer) apart."""
    with _connect(path) as connection:
        query = "SELECT channel, count(*), coalesce(sum(length(value)), 0) FROM writes GROUP BY channel"
        sums = {channel: [count, size] for channel, count, size in connection.execute(query)}
        tools = []
        for kind, data in connection.execute("SELECT type, value FROM writes WHERE channel = 'messages'"):
            if kind != "null":
                tools += _tool_items(SERDE.loads_typed((kind, data)))
    if tools:
        sums["messages"][1] -= sum(tools)
        sums["messages: tool outputs"] = [len(tools), sum(tools)]
    return {channel: (count, size) for channel, (count, size) in sums.items()}


def test_bytes_by_channel(variant: Variant) -> None:
    path, _, facts = variant
    assert facts.channels is not None
    expected, total = _channel_sums_by_serializer(path)
    in_checkpoints = {c.label: (c.values, c.bytes) for c in facts.channels if c.stored_in is StoredIn.CHECKPOINTS}
    assert in_checkpoints == expected
    assert {"messages", "viewed_images", "__start__", "messages: tool outputs"} <= set(in_checkpoints)
    assert all(c.bytes == c.raw_bytes for c in facts.channels)
    assert facts.checkpoint_rest_bytes == total - sum(size for _, size in expected.values())
    with _connect(path) as connection:
        assert facts.metadata_bytes == _scalar(connection, "SELECT sum(length(metadata)) FROM checkpoints")
    writes = _write_sums_by_serializer(path)
    assert "messages: tool outputs" in writes
    assert {c.label: (c.values, c.bytes) for c in facts.channels if c.stored_in is StoredIn.WRITES} == writes
    # Heaviest first within each table.
    for where in StoredIn:
        sizes = [c.bytes for c in facts.channels if c.stored_in is where]
        assert sizes == sorted(sizes, reverse=True)


def _holds(value: Any, text: str) -> bool:
    """The decoded value holds `text` somewhere (strings, lists, dicts, messages' content)."""
    if isinstance(value, str):
        return text in value
    if isinstance(value, dict):
        return any(_holds(item, text) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_holds(item, text) for item in value)
    content = getattr(value, "content", None)
    return content is not None and _holds(content, text)


def _expected_large_values(path: str, manifest: StorageManifest) -> set[tuple[str, str, str, str, int, int, str]]:
    """From the manifest, with copies and first checkpoints found by decoding every row with the serializer."""
    import base64

    texts = {
        "png": base64.b64encode(png_bytes(0)).decode(),
        "pdf": base64.b64encode(pdf_bytes(0)).decode(),
    }
    texts["data-uri image/png"] = "data:image/png;base64," + texts["png"]
    expected = set()
    with _connect(path) as connection:
        for record in manifest.large_values:
            if record.thread_id in manifest.deleted:
                continue
            text = texts[record.looks_like]
            assert record.base64_bytes == len(texts["png" if record.looks_like != "pdf" else "pdf"])
            query = "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id"
            holding = [
                checkpoint_id
                for checkpoint_id, kind, data in connection.execute(query, (record.thread_id,))
                if _holds(SERDE.loads_typed((kind, data))["channel_values"].get(record.channel), text)
            ]
            assert record.in_checkpoints == bool(holding)
            if holding:
                row = ("checkpoints", record.thread_id, record.channel, record.looks_like, record.base64_bytes)
                expected.add((*row, len(holding), holding[0]))
            query = "SELECT checkpoint_id, type, value FROM writes WHERE thread_id = ? AND channel = ?"
            written = [
                checkpoint_id
                for checkpoint_id, kind, data in connection.execute(query, (record.thread_id, record.channel))
                if kind != "null" and _holds(SERDE.loads_typed((kind, data)), text)
            ]
            assert record.in_writes == bool(written)
            for checkpoint_id in written:
                expected.add(
                    (
                        "writes",
                        record.thread_id,
                        record.channel,
                        record.looks_like,
                        record.base64_bytes,
                        1,
                        checkpoint_id,
                    )
                )
    return expected


def test_large_values_found_where_the_graphs_wrote_them(variant: Variant) -> None:
    path, manifest, facts = variant
    found = {
        (v.stored_in.value, v.thread_id, v.channel, v.looks_like, v.bytes, v.copies, v.checkpoint_id)
        for v in facts.large_values
    }
    assert found == _expected_large_values(path, manifest)
    assert all(value.checkpoint_ns == "" for value in facts.large_values)
    image = next(v for v in facts.large_values if v.channel == "viewed_images" and v.stored_in is StoredIn.CHECKPOINTS)
    # The SQLite saver copies the value into every checkpoint after the view: one per later checkpoint.
    assert image.copies > 10 and image.bytes == manifest.png_base64_bytes


def test_no_channels_reads_no_values(storage: BuiltStorage, facts: StorageFacts) -> None:
    lean = _read(storage.db, StorageRequest(top=100, channels=False))
    assert lean.channels is None and lean.checkpoint_rest_bytes is None and lean.large_values == []
    assert lean.growth == facts.growth and lean.heaviest == facts.heaviest and lean.app == facts.app
    assert lean.metadata_bytes == facts.metadata_bytes
    # dbstat reads only the b-trees without stored values: the value tables share out the rest, near dbstat.
    exact = {relation.name: relation for relation in facts.relations}
    for relation in lean.relations:
        if relation.name in ("checkpoints", "writes"):
            assert not relation.exact
            assert abs(relation.bytes - exact[relation.name].bytes) <= 0.1 * exact[relation.name].bytes
        else:
            assert relation.exact and relation.bytes == exact[relation.name].bytes
    assert lean.sqlite is not None
    used = sum(relation.bytes for relation in lean.relations)
    assert lean.sqlite.used_bytes - 2 * lean.sqlite.page_size <= used <= lean.sqlite.used_bytes
    assert any("--no-channels" in note for note in lean.notes)


def test_orphans_are_the_manifests(variant: Variant) -> None:
    path, manifest, facts = variant
    with _connect(path) as connection:
        threads = _thread_bytes(connection)
    app = facts.app
    assert app is not None and app.table == "threads_meta"
    assert sorted(thread.thread_id for thread in app.orphans) == sorted(manifest.orphans)
    for orphan in app.orphans:
        assert (orphan.checkpoints, orphan.bytes) == threads[orphan.thread_id]
    assert app.orphan_bytes == sum(threads[t][1] for t in manifest.orphans)
    assert [o.bytes for o in app.orphans] == sorted((o.bytes for o in app.orphans), reverse=True)
    assert app.app_only == len(manifest.app_only)
    assert app.known == len(manifest.live_threads) - len(manifest.orphans) == len(threads) - len(manifest.orphans)


def test_a_database_without_threads_meta_has_no_app(storage: BuiltStorage, tmp_path: Path) -> None:
    copy = tmp_path / "no-app.db"
    shutil.copyfile(storage.db, copy)
    with sqlite3.connect(copy) as connection:
        connection.execute("DROP TABLE threads_meta")
    connection.close()
    facts = _read(copy)
    assert facts.app is None
    assert "threads_meta" not in {relation.name for relation in facts.relations}


def _hour_of(checkpoint_id: str) -> int | None:
    """The UTC hour a UUIDv6 was minted in, read from its fields here (RFC 9562's layout), not by ckpt."""
    if checkpoint_id != checkpoint_id.lower() or len(checkpoint_id) != 36 or checkpoint_id[14] != "6":
        return None
    try:
        parsed = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if str(parsed) != checkpoint_id:
        return None
    # A UUIDv6's first field is the time's top 32 bits, then 16, then the version and the last 12.
    ticks = (parsed.fields[0] << 28) | (parsed.fields[1] << 12) | (parsed.fields[2] & 0x0FFF)
    moment = datetime(1582, 10, 15, tzinfo=UTC) + timedelta(microseconds=ticks // 10)
    hour = moment.replace(minute=0, second=0, microsecond=0)
    return round((hour - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 10**9


def _hours_in_sql(path: str | Path, thread_id: str | None = None) -> tuple[dict[int, tuple[int, int]], int, int]:
    """hour -> (checkpoints, bytes), and the untimed checkpoints and bytes, from each row's id and lengths."""
    hours: dict[int, list[int]] = {}
    untimed = untimed_bytes = 0
    where = "" if thread_id is None else " WHERE thread_id = ?"
    parameters = () if thread_id is None else (thread_id,)
    with _connect(path) as connection:
        connection.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
        rows = [
            (checkpoint_id, 1, size)
            for checkpoint_id, size in connection.execute(
                f"SELECT checkpoint_id, length(checkpoint) + length(metadata) FROM checkpoints{where}", parameters
            )
        ]
        rows += [
            (checkpoint_id, 0, size or 0)
            for checkpoint_id, size in connection.execute(
                f"SELECT checkpoint_id, length(value) FROM writes{where}", parameters
            )
        ]
    for checkpoint_id, counts, size in rows:
        hour = _hour_of(checkpoint_id) if type(checkpoint_id) is str else None
        if hour is None:
            untimed += counts
            untimed_bytes += size
            continue
        slot = hours.setdefault(hour, [0, 0])
        slot[0] += counts
        slot[1] += size
    return {hour: (count, size) for hour, (count, size) in hours.items() if count or size}, untimed, untimed_bytes


def test_growth_adds_up_and_spans_the_days(variant: Variant) -> None:
    path, manifest, facts = variant
    with _connect(path) as connection:
        checkpoints = _scalar(connection, "SELECT count(*) FROM checkpoints")
        size = _scalar(connection, "SELECT sum(length(checkpoint) + length(metadata)) FROM checkpoints")
        size += _scalar(connection, "SELECT coalesce(sum(length(value)), 0) FROM writes")
    assert facts.growth.untimed_checkpoints == 0
    hours = facts.growth.hours
    assert sum(bucket.checkpoints for bucket in hours) == checkpoints
    assert sum(bucket.bytes for bucket in hours) == size
    expected, untimed, untimed_bytes = _hours_in_sql(path)
    assert {bucket.start_ns: (bucket.checkpoints, bucket.bytes) for bucket in hours} == expected
    assert (untimed, untimed_bytes) == (0, 0)
    starts = [bucket.start_ns for bucket in hours]
    assert starts == sorted(set(starts))
    days = sorted({datetime.fromtimestamp(start / 1e9, UTC).strftime("%Y-%m-%d") for start in starts})
    assert days == manifest.days


def test_heaviest_threads_and_their_growth(storage: BuiltStorage) -> None:
    facts = _read(storage.db, StorageRequest(top=3))
    with _connect(storage.db) as connection:
        threads = _thread_bytes(connection)
        spans = {
            thread_id: (write_time_ns(first), write_time_ns(last))
            for thread_id, first, last in connection.execute(
                "SELECT thread_id, min(checkpoint_id), max(checkpoint_id) FROM checkpoints GROUP BY 1"
            )
        }
    ranked = sorted(threads, key=lambda t: (-threads[t][1], t))[:3]
    assert [thread.thread_id for thread in facts.heaviest] == ranked
    # The image threads carry the base64: they are the heaviest.
    assert set(ranked[:2]) == {"storage-image-1", "storage-uri-1"}
    for thread in facts.heaviest:
        assert (thread.checkpoints, thread.bytes) == threads[thread.thread_id]
        assert (thread.first_ns, thread.last_ns) == spans[thread.thread_id]
        times = facts.growth_of(thread.thread_id)
        assert times is not None
        expected, _, _ = _hours_in_sql(storage.db, thread.thread_id)
        assert {b.start_ns: (b.checkpoints, b.bytes) for b in times.hours} == expected
        assert sum(bucket.bytes for bucket in times.hours) == thread.bytes
        assert sum(bucket.checkpoints for bucket in times.hours) == thread.checkpoints
        assert {b.start_ns for b in times.hours} <= {b.start_ns for b in facts.growth.hours}
    assert len(facts.heaviest_growth) == len(ranked) == len(facts.heaviest)


def test_two_processes_read_the_same_facts(storage: BuiltStorage, facts: StorageFacts) -> None:
    split = _read(storage.db, jobs=2)
    assert any("2 processes" in note for note in split.notes)
    assert facts.sqlite is not None and split.sqlite is not None
    same = dataclasses.replace(split, notes=facts.notes, sqlite=facts.sqlite)
    assert same == facts
    # Lists compare in order; the channel and large-value orders are by size, ties by name.
    assert Counter(map(repr, split.large_values)) == Counter(map(repr, facts.large_values))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_read_changes_no_file(storage: BuiltStorage, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copyfile(storage.after_deletes, copy)
    before = (_digest(copy), os.stat(copy).st_mtime_ns)
    for jobs in (1, 2):
        _read(copy, jobs=jobs)
    assert (_digest(copy), os.stat(copy).st_mtime_ns) == before
    # Opening a WAL database read-only leaves an empty -wal beside it (SQLite's doing); nothing is in it.
    wal = copy.with_name(copy.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_wal_frames_of_a_live_writer(storage: BuiltStorage, tmp_path: Path) -> None:
    copy = tmp_path / "live.db"
    shutil.copyfile(storage.db, copy)
    writer = sqlite3.connect(copy, isolation_level=None)
    try:
        assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("UPDATE threads_meta SET status = 'busy'")
        writer.execute("DELETE FROM writes WHERE thread_id = 'storage-plain-1'")
        facts = _read(copy)
        files = facts.sqlite
        assert files is not None
        wal_bytes = copy.with_name(copy.name + "-wal").stat().st_size
        assert files.wal_bytes == wal_bytes > 0
        assert files.wal_frames is not None and files.wal_frames > 0
        # Each frame is a 24-byte header and a page, after the WAL's 32-byte header.
        assert wal_bytes == 32 + files.wal_frames * (files.page_size + 24)
        assert files.wal_backfilled == 0
        with _connect(copy) as reader:
            assert files.page_count == _scalar(reader, "PRAGMA page_count")
            assert files.freelist_count == _scalar(reader, "PRAGMA freelist_count")
            writes = _scalar(reader, "SELECT count(*) FROM writes")
        assert {r.name: r.rows for r in facts.relations}["writes"] == writes
    finally:
        writer.close()


def test_a_torn_wal_index_header_is_not_taken(tmp_path: Path) -> None:
    shm = tmp_path / "x.db-shm"
    header = struct.pack("=IIIBBHII", 3007000, 0, 1, 1, 0, 4096, 7, 10).ljust(48, b"\0")
    info = struct.pack("=I", 5).ljust(40, b"\0")
    shm.write_bytes(header + header + info)
    assert read_wal_index(shm) == (7, 5)
    torn = header[:16] + struct.pack("=I", 8) + header[20:]
    shm.write_bytes(header + torn + info)
    assert read_wal_index(shm) is None
    shm.write_bytes(b"\0" * 136)
    assert read_wal_index(shm) is None
    assert read_wal_index(tmp_path / "missing-shm") is None


def test_immutable_says_the_wal_was_not_read(storage: BuiltStorage) -> None:
    facts = read_sqlite_storage(SqliteTarget(Path(storage.db), immutable=True), ALL_THREADS)
    assert any("immutable" in note for note in facts.notes)


def test_signatures_need_a_string_header_or_a_data_uri() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(2000))
    header = b"\xda" + len(png).to_bytes(2, "big")
    assert find_base64_files(header + png) == [("png", 3, len(png))]
    # Without a msgpack str header right before it, a signature is ordinary text.
    assert find_base64_files(b"xx " + png) == []
    uri = b"data:image/jpeg;base64," + png
    assert find_base64_files(b"\xda\x00\x00" + uri) == [("data-uri image/jpeg", 26, len(png))]
    # A short run is not worth naming.
    assert find_base64_files(b"\xd9\x10" + png[:16]) == []


@pytest.mark.postgres
def test_the_postgres_storage_fixture_holds_the_manifests_threads(built_storage: Any) -> None:
    """The same scenario for the Postgres reader (store/storage_postgres.py tests use it)."""
    import psycopg

    built = built_storage("postgres")
    for dsn, manifest in ((built.db, built.manifest), (built.after_deletes, built.after_deletes_manifest)):
        with psycopg.connect(dsn) as connection:
            threads = {row[0] for row in connection.execute("SELECT DISTINCT thread_id FROM checkpoints")}
            app = {row[0] for row in connection.execute("SELECT thread_id FROM threads_meta")}
            channels = {row[0] for row in connection.execute("SELECT DISTINCT channel FROM checkpoint_blobs")}
        assert threads == set(manifest.live_threads)
        assert threads - app == set(manifest.orphans)
        assert app - threads == set(manifest.app_only)
        assert {"messages", "viewed_images", "__start__"} <= channels
    assert built.after_deletes_manifest.deleted == built.manifest.doomed
