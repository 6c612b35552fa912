"""`inspect storage` on copies of the storage scenario damaged through targeted SQL, on both backends: forged
and malformed checkpoint ids, writes at the edge of an hour, BLOB and non-UTF-8 keys, blobs no checkpoint
names, threads with only writes, an app table in another schema, roles without privileges, a thread named
like a csv series, a large -wal without its -shm. Every expected figure comes from an independent query of
the damaged copy (sqlite3 or psycopg), or from LangGraph's serializer.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg import sql

from deerflow_ckpt.analysis.storage import autocheckpoint_bytes
from deerflow_ckpt.commands.worker_pool import worker_pool
from deerflow_ckpt.store.clock import HOUR_NS, boundary_id, from_datetime, prefix_hour_ns
from deerflow_ckpt.store.source import SqliteTarget, postgres_target
from deerflow_ckpt.store.storage import StorageFacts, StorageRequest, StoredIn
from deerflow_ckpt.store.storage_postgres import read_postgres_storage
from deerflow_ckpt.store.storage_sqlite import read_sqlite_storage
from tests.cli import run_ckpt
from tests.conftest import BuiltStorage, _admin_exec, drop_database, dsn_for
from tests.test_storage_sqlite import _hour_of

SERDE = JsonPlusSerializer()
BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
ALL = StorageRequest(top=100)
# A thread of the scenario whose first checkpoint is copied under forged ids (plain text, no blobs shared).
DONOR = "storage-plain-1"


class Copy:
    """A copy of the storage scenario as built: a file, or a database made from it as a template."""

    def __init__(self, backend: str, db: str) -> None:
        self.backend, self.db = backend, db
        self.writes = "writes" if backend == "sqlite" else "checkpoint_writes"

    def execute(self, statement: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
        if self.backend == "sqlite":
            with contextlib_closing(sqlite3.connect(self.db)) as connection:
                connection.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
                rows = connection.execute(statement, parameters).fetchall()
                connection.commit()
                return rows
        with psycopg.connect(self.db, autocommit=True) as connection:
            cursor = connection.execute(statement.replace("?", "%s"), parameters or None)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def read(self, request: StorageRequest = ALL, jobs: int | None = None) -> StorageFacts:
        if self.backend == "sqlite":
            return read_sqlite_storage(SqliteTarget(Path(self.db)), request, jobs=jobs, pool=worker_pool)
        return read_postgres_storage(postgres_target(self.db, ""), request)

    def row_bytes(self, checkpoint_id: str) -> int:
        size = (
            "length(checkpoint) + length(metadata)"
            if self.backend == "sqlite"
            else "pg_column_size(checkpoint) + pg_column_size(metadata)"
        )
        return int(self.execute(f"SELECT {size} FROM checkpoints WHERE checkpoint_id = ?", (checkpoint_id,))[0][0])

    def forge(self, thread_id: str, checkpoint_id: str) -> int:
        """A copy of DONOR's first checkpoint under `thread_id` and `checkpoint_id`; its stored bytes."""
        self.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,"
            " checkpoint, metadata) SELECT ?, checkpoint_ns, ?, NULL, type, checkpoint, metadata FROM checkpoints"
            " WHERE thread_id = ? AND checkpoint_id = (SELECT min(checkpoint_id) FROM checkpoints WHERE thread_id = ?)",
            (thread_id, checkpoint_id, DONOR, DONOR),
        )
        return self.row_bytes(checkpoint_id)

    def json(self, *args: str) -> dict[str, Any]:
        result = run_ckpt("inspect", "storage", "--db", self.db, "--format", "json", *args)
        assert result.exit_code == 0, result.output
        document: dict[str, Any] = json.loads(result.stdout)
        return document


def _times(facts: Any, thread_id: str) -> Any:
    """A heaviest thread's write times, by the id it is shown as."""
    times = facts.growth_of(thread_id)
    assert times is not None, thread_id
    return times


@contextmanager
def contextlib_closing(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture
def copy_of(built_storage: Callable[[str], BuiltStorage], tmp_path: Path) -> Iterator[Callable[[str], Copy]]:
    """``make(backend)``: a fresh copy of the storage scenario as built, dropped afterwards."""
    made: list[str] = []

    def make(backend: str) -> Copy:
        built = built_storage(backend)
        if backend == "sqlite":
            path = tmp_path / f"copy-{len(made)}.db"
            shutil.copyfile(built.db, path)
            made.append(str(path))
            return Copy(backend, str(path))
        name = f"ckpt_copy_{uuid.uuid4().hex[:12]}"
        source = psycopg.conninfo.conninfo_to_dict(built.db)["dbname"]
        _admin_exec(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(str(source))))
        made.append(name)
        return Copy(backend, dsn_for(name))

    yield make
    for name in made:
        if not name.endswith(".db"):
            drop_database(name)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _hours(facts: StorageFacts) -> dict[int, tuple[int, int]]:
    return {bucket.start_ns: (bucket.checkpoints, bucket.bytes) for bucket in facts.growth.hours}


# -- write times: forged, at an hour's edge, untimed -------------------------------------------------------

FORGED_LATE = "ffffffff-ffff-6fff-8000-000000000001"
FORGED_EARLY = "00000000-0000-6000-8000-000000000002"


@pytest.mark.slow
def test_forged_ids_are_out_of_range_and_the_series_stays_small(copy_of: Callable[[str], Copy], backend: str) -> None:
    copy = copy_of(backend)
    built_days = [bucket["start"][:10] for bucket in copy.json()["growth"]["buckets"]]
    late = copy.forge("forged-1", FORGED_LATE)
    early = copy.forge("forged-1", FORGED_EARLY)
    document = copy.json()
    growth = document["growth"]
    # The two ids span 3,600 years; the series is the same days as before, and they are counted apart.
    assert growth["unit"] == "day"
    assert [bucket["start"][:10] for bucket in growth["buckets"]] == built_days
    assert growth["out_of_range"] == {"checkpoints": 2, "bytes": late + early}
    assert growth["untimed"] == {"checkpoints": 0, "bytes": 0}
    text = run_ckpt("inspect", "storage", "--db", copy.db, env={"COLUMNS": "200"})
    assert text.exit_code == 0 and len(text.stdout.splitlines()) < 120
    assert "2 checkpoints" in text.stdout and "before 2015 or more than a day after now: not in growth" in text.stdout
    rows = list(csv.DictReader(io.StringIO(run_ckpt("inspect", "storage", "--db", copy.db, "--format", "csv").stdout)))
    assert [(r["checkpoints"], r["bytes"]) for r in rows if r["unit"] == "out of range" and r["series"] == "store"] == [
        ("2", str(late + early))
    ]


def _hour_straddled_by_a_prefix() -> int:
    """An hour whose hh:00:05 shares its 8-digit prefix with ids written before hh:00 (the old buckets put
    such a write in the hour before)."""
    start = from_datetime(datetime.now(UTC).replace(minute=0, second=0, microsecond=0)) - 2000 * HOUR_NS
    return next(
        hour
        for hour in range(start, start + 2000 * HOUR_NS, HOUR_NS)
        if prefix_hour_ns(boundary_id(hour + 5 * 10**9)[:8]) is None
    )


@pytest.mark.slow
def test_a_write_five_seconds_after_the_hour_is_in_that_hour(copy_of: Callable[[str], Copy], backend: str) -> None:
    copy = copy_of(backend)
    before = _hours(copy.read())
    hour = _hour_straddled_by_a_prefix()
    checkpoint_id = boundary_id(hour + 5 * 10**9)[:19] + "8000-0000000000ab"
    assert _hour_of(checkpoint_id) == hour
    size = copy.forge("edge-1", checkpoint_id)
    after = _hours(copy.read())
    assert {h: after[h] for h in after if after[h] != before.get(h)} == {hour: (1, size)}


@pytest.mark.slow
def test_every_checkpoint_is_in_growth_or_untimed(copy_of: Callable[[str], Copy], backend: str) -> None:
    copy = copy_of(backend)
    (existing,) = copy.execute("SELECT min(checkpoint_id) FROM checkpoints WHERE thread_id = ?", (DONOR,))[0]
    malformed = [
        existing.upper(),
        "not-a-uuid",
        existing[:10] + "g" + existing[11:],
        existing[:14] + "1" + existing[15:],
    ]
    sizes = [copy.forge("malformed-1", checkpoint_id) for checkpoint_id in malformed]
    facts = copy.read()
    (count,) = copy.execute("SELECT count(*) FROM checkpoints")[0]
    assert sum(bucket.checkpoints for bucket in facts.growth.hours) + facts.growth.untimed_checkpoints == count
    assert (facts.growth.untimed_checkpoints, facts.growth.untimed_bytes) == (len(malformed), sum(sizes))
    # The thread of untimed ids is still a heaviest thread with its figures, in json and csv.
    document = copy.json("--top", "100")
    thread = next(t for t in document["heaviest"] if t["thread_id"] == "malformed-1")
    assert thread["growth"]["buckets"] == [] and thread["growth"]["untimed"]["checkpoints"] == len(malformed)
    rows = list(csv.DictReader(io.StringIO(run_ckpt("inspect", "storage", "--db", copy.db, "--top", "100",
                                                    "--format", "csv").stdout)))  # fmt: skip
    assert [(r["unit"], r["checkpoints"]) for r in rows if r["thread_id"] == "malformed-1"] == [
        ("untimed", str(len(malformed)))
    ]


# -- keys ------------------------------------------------------------------------------------------------


def test_blob_thread_ids_and_channels_keep_their_counts(copy_of: Callable[[str], Copy]) -> None:
    copy = copy_of("sqlite")
    copy.execute(
        "INSERT INTO checkpoints SELECT X'626c6f622d31', checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,"
        " checkpoint, metadata FROM checkpoints WHERE thread_id = ?",
        (DONOR,),
    )
    copy.execute(
        "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value)"
        " SELECT thread_id, checkpoint_ns, checkpoint_id, 'task-blob', 0, X'626c6f622d6368', 'msgpack', X'a3616263'"
        " FROM checkpoints WHERE thread_id = X'626c6f622d31'"
    )
    for jobs in (1, 2):
        facts = copy.read(jobs=jobs)
        expected = copy.execute(
            "SELECT count(*), sum(length(checkpoint) + length(metadata)) FROM checkpoints"
            " WHERE thread_id = X'626c6f622d31'"
        )[0]
        writes = copy.execute("SELECT count(*), sum(length(value)) FROM writes WHERE channel = X'626c6f622d6368'")[0]
        thread = next(t for t in facts.heaviest if t.thread_id == "x'626c6f622d31'")
        assert (thread.checkpoints, thread.bytes) == (expected[0], expected[1] + writes[1])
        assert facts.channels is not None
        channel = next(c for c in facts.channels if c.stored_in is StoredIn.WRITES and c.channel == "x'626c6f622d6368'")
        assert (channel.values, channel.bytes) == writes
        # The text thread with the same letters is another thread.
        assert DONOR in {t.thread_id for t in facts.heaviest}
        assert facts.app is not None and "x'626c6f622d31'" in {o.thread_id for o in facts.app.orphans}
        timed = _times(facts, "x'626c6f622d31'")
        assert sum(b.checkpoints for b in timed.hours) == expected[0]


def test_a_text_thread_shown_like_a_blob_one_keeps_its_own_growth(copy_of: Callable[[str], Copy]) -> None:
    """A thread whose text id spells a BLOB key's shown form is another thread, with its own growth row."""
    copy = copy_of("sqlite")
    shown = "x'626c6f622d31'"
    for key in (b"blob-1", shown):
        copy.execute(
            "INSERT INTO checkpoints SELECT ?, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,"
            " checkpoint, metadata FROM checkpoints WHERE thread_id = ?",
            (key, DONOR),
        )
    facts = copy.read()
    places = [i for i, t in enumerate(facts.heaviest) if t.thread_id == shown]
    assert len(places) == 2
    first, second = (facts.heaviest_growth[i] for i in places)
    assert first is not second
    for place, times in zip(places, (first, second), strict=True):
        assert sum(b.checkpoints for b in times.hours) == facts.heaviest[place].checkpoints


EVIL = b"\x1b[31mevil\xff\x07"


@pytest.mark.slow
def test_a_thread_id_that_is_not_utf8_is_read_and_shown_escaped(copy_of: Callable[[str], Copy]) -> None:
    copy = copy_of("sqlite")
    copy.execute(
        "INSERT INTO checkpoints SELECT CAST(? AS TEXT), checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,"
        " checkpoint, metadata FROM checkpoints WHERE thread_id = ?",
        (EVIL, DONOR),
    )
    copy.execute(
        "INSERT INTO writes SELECT CAST(? AS TEXT), checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel,"
        " type, value FROM writes WHERE thread_id = ?",
        (EVIL, DONOR),
    )
    expected = copy.execute(
        "SELECT count(*), sum(length(checkpoint) + length(metadata)) FROM checkpoints"
        " WHERE thread_id = CAST(? AS TEXT)",
        (EVIL,),
    )[0]
    written = copy.execute("SELECT sum(length(value)) FROM writes WHERE thread_id = CAST(? AS TEXT)", (EVIL,))[0][0]
    key = EVIL.decode("utf-8", "surrogateescape")
    for jobs in (1, 2):
        facts = copy.read(jobs=jobs)
        thread = next(t for t in facts.heaviest if t.thread_id == key)
        assert (thread.checkpoints, thread.bytes) == (expected[0], expected[1] + (written or 0))
        assert sum(b.checkpoints for b in _times(facts, key).hours) == expected[0]
        assert any("not UTF-8" in note for note in facts.notes)
    text = run_ckpt("inspect", "storage", "--db", copy.db, "--top", "100", env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    assert "\x1b" not in text.stdout + text.stderr and "\x07" not in text.stdout and "\udcff" not in text.stdout
    assert "\\x1b[31mevil\\xff\\x07" in text.stdout
    document = copy.json("--top", "100")
    assert key in {t["thread_id"] for t in document["heaviest"]}
    result = run_ckpt("inspect", "storage", "--db", copy.db, "--top", "100", "--format", "csv")
    assert result.exit_code == 0 and "\x1b" not in result.stdout and "\\x1b[31mevil\\xff\\x07" in result.stdout


@pytest.mark.slow
def test_threads_with_only_writes_are_orphans_on_both_backends(copy_of: Callable[[str], Copy], backend: str) -> None:
    copy = copy_of(backend)
    columns = "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, " + (
        "value" if backend == "sqlite" else "blob"
    )
    copy.execute(
        f"INSERT INTO {copy.writes} ({columns}) SELECT 'writes-only-1', checkpoint_ns, checkpoint_id, task_id, idx,"
        f" channel, type, {columns.rsplit(', ', 1)[1]} FROM {copy.writes} WHERE thread_id = ?",
        (DONOR,),
    )
    facts = copy.read()
    assert facts.app is not None
    orphan = next(o for o in facts.app.orphans if o.thread_id == "writes-only-1")
    size = "length(value)" if backend == "sqlite" else "pg_column_size(blob)"
    (written,) = copy.execute(f"SELECT sum({size}) FROM {copy.writes} WHERE thread_id = 'writes-only-1'")[0]
    assert (orphan.checkpoints, orphan.bytes) == (0, written)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_thread_of_empty_writes_is_an_orphan_on_both_backends(copy_of: Callable[[str], Copy], backend: str) -> None:
    copy = copy_of(backend)
    value = "value" if backend == "sqlite" else "blob"
    columns = f"thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, {value}"
    empty = "X''" if backend == "sqlite" else "''::bytea"
    copy.execute(
        f"INSERT INTO {copy.writes} ({columns}) SELECT 'empty-writes-1', checkpoint_ns, checkpoint_id, task_id, idx,"
        f" channel, type, {empty} FROM {copy.writes} WHERE thread_id = ?",
        (DONOR,),
    )
    facts = copy.read()
    assert facts.app is not None
    assert "empty-writes-1" in {o.thread_id for o in facts.app.orphans}


# -- Postgres: blobs no checkpoint names, the app table elsewhere, privileges, tool outputs ---------------


@pytest.mark.slow
@pytest.mark.postgres
def test_blobs_no_checkpoint_names_are_counted_not_in_growth(copy_of: Callable[[str], Copy]) -> None:
    copy = copy_of("postgres")
    before = copy.read()
    copy.execute(
        "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)"
        " SELECT thread_id, checkpoint_ns, channel, 'unnamed-' || version, type, blob FROM checkpoint_blobs"
        " WHERE thread_id = 'storage-uri-1' AND channel = 'messages'"
    )
    rows, size = copy.execute(
        "SELECT count(*), sum(pg_column_size(blob)) FROM checkpoint_blobs WHERE version LIKE 'unnamed-%'"
    )[0]
    assert rows > 0
    facts = copy.read()
    assert (facts.growth.unnamed_blob_rows, facts.growth.unnamed_blob_bytes) == (rows, size)
    assert _hours(facts) == _hours(before)
    thread = _times(facts, "storage-uri-1")
    assert (thread.unnamed_blob_rows, thread.unnamed_blob_bytes) == (rows, size)
    document = copy.json()
    assert document["growth"]["unnamed_blobs"] == {"rows": rows, "bytes": size}
    result = run_ckpt("inspect", "storage", "--db", copy.db, "--format", "csv")
    store = [r for r in csv.DictReader(io.StringIO(result.stdout)) if r["unit"] == "unnamed blobs"]
    assert next((r["series"], r["blob_rows"], r["bytes"]) for r in store) == ("store", str(rows), str(size))
    text = run_ckpt("inspect", "storage", "--db", copy.db, env={"COLUMNS": "200"})
    assert f"{rows:,} blob rows" in text.stdout and "no checkpoint names: not in growth" in text.stdout


@pytest.mark.slow
@pytest.mark.postgres
def test_threads_meta_is_found_in_public_beside_another_checkpoint_schema(copy_of: Callable[[str], Copy]) -> None:
    copy = copy_of("postgres")
    before = copy.read().app
    copy.execute("CREATE SCHEMA lg")
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"):
        copy.execute(f"ALTER TABLE public.{table} SET SCHEMA lg")
    facts = read_postgres_storage(postgres_target(copy.db, "lg"), ALL)
    assert facts.app is not None and before is not None
    assert facts.app.table == "public.threads_meta" and before.table == "public.threads_meta"
    assert facts.app.orphans == before.orphans and facts.app.app_only == before.app_only
    # A threads_meta in the checkpoints' own schema comes first.
    copy.execute("CREATE TABLE lg.threads_meta (thread_id varchar(64) PRIMARY KEY)")
    shadowed = read_postgres_storage(postgres_target(copy.db, "lg"), ALL)
    assert shadowed.app is not None and shadowed.app.table == "lg.threads_meta" and shadowed.app.known == 0


def _role(copy: Copy, grants: list[str]) -> str:
    role = f"ckpt_wt_{uuid.uuid4().hex[:12]}"
    _admin_exec(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    dbname = psycopg.conninfo.conninfo_to_dict(copy.db)["dbname"]
    copy.execute(f'GRANT CONNECT ON DATABASE "{dbname}" TO {role}')
    for grant in grants:
        copy.execute(grant.format(role=role))
    return role


@pytest.mark.postgres
def test_without_select_the_text_says_not_read(copy_of: Callable[[str], Copy]) -> None:
    copy = copy_of("postgres")
    role = _role(copy, ["GRANT USAGE ON SCHEMA public TO {role}"])
    try:
        dsn = copy.db.replace("postgres@", f"{role}@", 1)
        text = run_ckpt("inspect", "storage", "--db", dsn, env={"COLUMNS": "200"})
        assert text.exit_code == 0, text.output
        assert "Bytes by channel: not read (no SELECT privilege on public.checkpoints" in text.stdout
        assert "Growth: not read (no SELECT privilege" in text.stdout
        assert "--no-channels" not in text.stdout and "write time" not in text.stdout
        # Without USAGE, found through the search path: the sizes and a note, not "not a checkpoint database".
        copy.execute(f"REVOKE USAGE ON SCHEMA public FROM {role}")
        copy.execute("REVOKE USAGE ON SCHEMA public FROM PUBLIC")
        result = run_ckpt("inspect", "storage", "--db", dsn, "--format", "json")
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert document["rows_unread"] == "no USAGE privilege on schema public"
        assert {relation["name"] for relation in document["relations"]} >= {"checkpoints", "checkpoint_blobs"}
    finally:
        copy.execute(f"DROP OWNED BY {role}")
        _admin_exec(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_an_empty_store_says_it_has_no_checkpoints(copy_of: Callable[[str], Copy], backend: str) -> None:
    copy = copy_of(backend)
    for table in ("checkpoints", copy.writes, *([] if backend == "sqlite" else ["checkpoint_blobs"])):
        copy.execute(f"DELETE FROM {table}")
    text = run_ckpt("inspect", "storage", "--db", copy.db)
    assert text.exit_code == 0, text.output
    assert "Growth: the store has no checkpoints" in text.stdout and "write time" not in text.stdout


def _tool_sizes(kind: str, data: bytes) -> list[int]:
    value = SERDE.loads_typed((kind, data))
    items = value if isinstance(value, list) else getattr(value, "value", [value])
    return [
        len(SERDE.dumps_typed(item)[1])
        for item in (items if isinstance(items, list) else [items])
        if type(item).__name__ == "ToolMessage"
    ]


@pytest.mark.postgres
def test_tool_outputs_on_postgres_match_the_serializer(built_storage: Callable[[str], BuiltStorage]) -> None:
    built = built_storage("postgres")
    facts = read_postgres_storage(postgres_target(built.db, ""), ALL)
    assert facts.channels is not None
    got = {(c.stored_in, c.label): (c.values, c.bytes, c.raw_bytes) for c in facts.channels}
    with psycopg.connect(built.db) as connection:
        for stored_in, table in ((StoredIn.BLOBS, "checkpoint_blobs"), (StoredIn.WRITES, "checkpoint_writes")):
            rows = connection.execute(
                f"SELECT type, blob, pg_column_size(blob), octet_length(blob) FROM {table} WHERE channel = 'messages'"
            ).fetchall()
            totals = connection.execute(
                f"SELECT count(*), sum(pg_column_size(blob)), sum(octet_length(blob)) FROM {table}"
                " WHERE channel = 'messages'"
            ).fetchone()
            assert totals is not None
            items = stored = raw = 0
            for kind, blob, stored_size, raw_size in rows:
                if kind in ("empty", "null") or blob is None:
                    continue
                sizes = _tool_sizes(kind, bytes(blob))
                items += len(sizes)
                raw += sum(sizes)
                stored += stored_size * sum(sizes) // raw_size
            assert items > 0, table
            assert got[(stored_in, "messages: tool outputs")] == (items, stored, raw)
            assert got[(stored_in, "messages")] == (totals[0], totals[1] - stored, totals[2] - raw)


# -- reports: csv series, sparklines, --no-channels, the WAL ----------------------------------------------


@pytest.mark.slow
def test_a_thread_named_store_does_not_collide_with_the_store_series(
    copy_of: Callable[[str], Copy], backend: str
) -> None:
    copy = copy_of(backend)
    tables = ["checkpoints", copy.writes, *([] if backend == "sqlite" else ["checkpoint_blobs"])]
    for table in tables:
        copy.execute(f"UPDATE {table} SET thread_id = 'store' WHERE thread_id = 'storage-uri-1'")
    document = copy.json("--top", "2")
    result = run_ckpt("inspect", "storage", "--db", copy.db, "--top", "2", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    store = [(r["start"], int(r["bytes"])) for r in rows if r["series"] == "store" and r["start"]]
    assert store == [(b["start"], b["bytes"]) for b in document["growth"]["buckets"]]
    thread = [(r["start"], int(r["bytes"])) for r in rows if r["series"] == "thread" and r["thread_id"] == "store"]
    named = next(t for t in document["heaviest"] if t["thread_id"] == "store")
    assert thread == [(b["start"], b["bytes"]) for b in named["growth"]["buckets"]] and thread != store


@pytest.mark.slow
def test_each_heaviest_thread_has_a_growth_row(built_storage: Callable[[str], BuiltStorage], backend: str) -> None:
    built = built_storage(backend)
    document = json.loads(run_ckpt("inspect", "storage", "--db", built.db, "--top", "3", "--format", "json").stdout)
    text = run_ckpt("inspect", "storage", "--db", built.db, "--top", "3", env={"COLUMNS": "200"}).stdout
    assert "Heaviest threads written per day" in text
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Heaviest threads written per day"))
    rows = lines[start + 2 : start + 5]
    for thread, row in zip(document["heaviest"], rows, strict=True):
        assert row.startswith(thread["thread_id"])
        # One character per day of the store's series, as tall as the day's share of the thread's busiest.
        spark = row[len(thread["thread_id"]) :].split()[0]
        days = [b["bytes"] for b in thread["growth"]["buckets"]]
        assert len(spark) <= len(document["growth"]["buckets"]) and set(spark) <= set("▁▂▃▄▅▆▇█")
        assert spark[days.index(max(days))] == "█"
    ascii_run = run_ckpt("inspect", "storage", "--db", built.db, "--top", "3", process=True,
                         env={"PYTHONIOENCODING": "ascii", "COLUMNS": "200"})  # fmt: skip
    out = ascii_run.stdout_bytes.decode("ascii")
    assert "Heaviest threads written per day" in out and "@" in out


def test_no_channels_says_why_sizes_are_estimated(built_storage: Callable[[str], BuiltStorage]) -> None:
    built = built_storage("sqlite")
    text = run_ckpt("inspect", "storage", "--db", built.db, "--no-channels", env={"COLUMNS": "200"}).stdout
    assert "--no-channels: dbstat did not read checkpoints and writes" in text
    assert "not compiled" not in text and "Bytes by channel: skipped (--no-channels)" in text
    assert "of it indexes" in text


@pytest.mark.slow
def test_a_large_wal_without_its_shm_is_named(copy_of: Callable[[str], Copy], tmp_path: Path) -> None:
    copy = copy_of("sqlite")
    writer = sqlite3.connect(copy.db, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        # About 24 MB of new pages, none checkpointed into the database.
        writer.execute("CREATE TABLE pad (x BLOB)")
        writer.execute("INSERT INTO pad SELECT randomblob(4000) FROM checkpoints a, checkpoints b LIMIT 6000")
        alone = tmp_path / "alone"
        alone.mkdir()
        shutil.copyfile(copy.db, alone / "store.db")
        shutil.copyfile(copy.db + "-wal", alone / "store.db-wal")
    finally:
        writer.close()
    wal_bytes = (alone / "store.db-wal").stat().st_size
    limit = autocheckpoint_bytes(4096)
    assert wal_bytes > 4 * limit
    for extra in ([], ["--immutable"]):
        document = json.loads(
            run_ckpt("inspect", "storage", "--db", str(alone / "store.db"), "--format", "json", *extra).stdout
        )
        assert document["sqlite"]["wal_bytes"] == wal_bytes and document["sqlite"]["wal_frames"] is None
        wal = [a for a in document["advice"] if a["subject"] == "WAL"]
        assert len(wal) == 1 and wal[0]["urgency"] == "watch" and f"{wal_bytes / limit:.0f}x" in wal[0]["message"]
        notes = " ".join(document["notes"])
        assert "could not be read consistently" not in notes
        assert ("no -shm file" in notes) == (not extra)
        (alone / "store.db-shm").unlink(missing_ok=True)
