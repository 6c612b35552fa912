"""store/storage_postgres.py against real Postgres databases written by real graphs through PostgresSaver.

Every figure is checked against an independent query (pg_total_relation_size, pg_stat_all_tables, the
blobs' bytes read back and measured here), the orphans against the threads_meta rows written, the large
values against the PNG put in, and the read against the database's counters and a checksum of its rows.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import operator
import random
import struct
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from psycopg import sql

from deerflow_ckpt.store.base64_peek import MIN_RUN_BYTES, find_base64_files
from deerflow_ckpt.store.clock import write_time_ns
from deerflow_ckpt.store.source import PostgresTarget, postgres_target
from deerflow_ckpt.store.storage import StorageFacts, StorageRequest, StoredIn
from deerflow_ckpt.store.storage_postgres import read_postgres_storage
from tests.conftest import BuiltDatabase
from tests.test_storage_sqlite import _hour_of

pytestmark = pytest.mark.postgres

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
# threads_meta as DeerFlow's alembic 0001_baseline creates it.
THREADS_META_DDL = """
CREATE TABLE threads_meta (
    thread_id varchar(64) PRIMARY KEY,
    assistant_id varchar(128),
    user_id varchar(64),
    display_name varchar(256),
    status varchar(20) NOT NULL,
    metadata_json json NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
)
"""
KNOWN = ("img-1", "uri-1", "plain-1", "plain-2")
ORPHANS = ("orphan-1", "orphan-2")
APP_ONLY = "app-only-1"
DELETED = "doomed-1"


def real_png(width: int = 250, height: int = 300, seed: int = 7) -> bytes:
    """A valid PNG of noise (so neither zlib nor TOAST's pglz shrinks it): about 225 KB."""
    rng = random.Random(seed)
    rows = b"".join(b"\0" + rng.randbytes(width * 3) for _ in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


PNG_B64 = base64.b64encode(real_png()).decode()


def merge_images(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    return {**(left or {}), **(right or {})}


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    # DeerFlow before #4140: {image_path: {"base64": <raw base64>, "mime_type": ...}}.
    viewed_images: Annotated[dict[str, Any], merge_images]
    title: str
    turns: Annotated[int, operator.add]


def respond(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    update: dict[str, Any] = {"messages": [AIMessage(content=f"reply {len(state['messages'])}")], "turns": 1}
    if isinstance(last.content, str) and last.content.startswith("view "):
        update["viewed_images"] = {last.content[5:]: {"base64": PNG_B64, "mime_type": "image/png"}}
    if not state.get("title"):
        update["title"] = "a thread"
    return update


def graph(saver: PostgresSaver) -> Any:
    builder = StateGraph(State)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder.compile(checkpointer=saver)


@dataclass(frozen=True)
class ImageStore:
    dsn: str  # the admin DSN of the database
    schema: str

    def target(self, dsn: str | None = None, by_search_path: bool = False) -> PostgresTarget:
        if by_search_path:
            conninfo = psycopg.conninfo.make_conninfo(dsn or self.dsn, options=f"-c search_path={self.schema}")
            return postgres_target(conninfo, "")
        return postgres_target(dsn or self.dsn, self.schema)

    def connect(self) -> psycopg.Connection[Any]:
        conninfo = psycopg.conninfo.make_conninfo(self.dsn, options=f"-c search_path={self.schema}")
        return psycopg.connect(conninfo, autocommit=True)


def build_image_store(dsn: str, schema: str) -> ImageStore:
    """Threads written by a real graph through PostgresSaver in `schema`, threads_meta beside them with two
    checkpoint threads missing and one app-only row, and one thread deleted through the saver."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    store = ImageStore(dsn, schema)
    conninfo = psycopg.conninfo.make_conninfo(dsn, options=f"-c search_path={schema}")
    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.setup()
        app = graph(saver)

        def turn(thread_id: str, message: HumanMessage) -> None:
            app.invoke({"messages": [message]}, {"configurable": {"thread_id": thread_id}})

        turn("img-1", HumanMessage(content="hello"))
        turn("img-1", HumanMessage(content="view /mnt/user-data/uploads/chart.png"))
        turn("img-1", HumanMessage(content="thanks"))
        uri = f"data:image/png;base64,{PNG_B64}"
        blocks = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": uri}}]
        turn("uri-1", HumanMessage(content=blocks))  # type: ignore[arg-type]
        for thread_id in ("plain-1", "plain-2", *ORPHANS, DELETED):
            for index in range(3):
                turn(thread_id, HumanMessage(content=f"{thread_id} says {index} " + "x" * 300))
        saver.delete_thread(DELETED)
    with store.connect() as conn:
        conn.execute(THREADS_META_DDL)
        for thread_id in (*KNOWN, APP_ONLY):
            conn.execute(
                "INSERT INTO threads_meta (thread_id, assistant_id, status, metadata_json, created_at, updated_at)"
                " VALUES (%s, 'lead_agent', 'idle', '{}', now(), now())",
                (thread_id,),
            )
    return store


@pytest.fixture(scope="module")
def image_store(_pg_scratch_database: str) -> Iterator[ImageStore]:
    schema = f"img_{random.Random().getrandbits(48):012x}"
    try:
        yield build_image_store(_pg_scratch_database, schema)
    finally:
        with psycopg.connect(_pg_scratch_database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def query(store: ImageStore, text: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
    with store.connect() as conn:
        return conn.execute(text, parameters or None).fetchall()  # type: ignore[arg-type]


def scalar(store: ImageStore, text: str, parameters: tuple[Any, ...] = ()) -> Any:
    return query(store, text, parameters)[0][0]


@pytest.fixture(scope="module")
def facts(image_store: ImageStore) -> StorageFacts:
    return read_postgres_storage(image_store.target(), StorageRequest(top=3))


# -- sizes and statistics --------------------------------------------------------------------------------


@pytest.mark.slow
def test_relations_match_the_catalog_and_statistics(image_store: ImageStore, facts: StorageFacts) -> None:
    assert [relation.name for relation in facts.relations] == list(TABLES)
    for relation in facts.relations:
        name = f"{image_store.schema}.{relation.name}"
        total, indexes, toast = query(
            image_store,
            "SELECT pg_total_relation_size(c.oid), pg_indexes_size(c.oid),"
            " CASE WHEN c.reltoastrelid = 0 THEN 0 ELSE pg_total_relation_size(c.reltoastrelid) END"
            " FROM pg_class c WHERE c.oid = %s::regclass",
            (name,),
        )[0]
        live, dead = query(
            image_store, "SELECT n_live_tup, n_dead_tup FROM pg_stat_all_tables WHERE relid = %s::regclass", (name,)
        )[0]
        assert (relation.bytes, relation.index_bytes, relation.toast_bytes) == (total, indexes, toast), name
        count = scalar(image_store, f"SELECT count(*) FROM {name}")
        # Rows counted; the statistics saw every write of this fresh store, so its dead rows are theirs.
        assert (relation.rows, relation.statistics_rows, relation.dead_rows) == (count, live, dead), name
        assert relation.exact and relation.rows_exact and relation.dead_rows_source == "statistics"
    by_name = {relation.name: relation for relation in facts.relations}
    # The deleted thread left dead tuples behind; the PNG lives in TOAST.
    assert by_name["checkpoints"].dead_rows and by_name["checkpoint_writes"].dead_rows
    assert by_name["checkpoint_blobs"].toast_bytes > len(PNG_B64)
    assert by_name["checkpoints"].rows == scalar(image_store, "SELECT count(*) FROM checkpoints")


def test_database_settings_and_size(image_store: ImageStore, facts: StorageFacts) -> None:
    database = facts.postgres
    assert database is not None
    assert database.database_bytes == scalar(image_store, "SELECT pg_database_size(current_database())")
    settings = dict(query(image_store, "SELECT name, setting FROM pg_settings WHERE name LIKE 'autovacuum%'"))
    assert database.autovacuum == (settings["autovacuum"] == "on")
    assert database.vacuum_threshold == int(settings["autovacuum_vacuum_threshold"])
    assert database.vacuum_scale_factor == float(settings["autovacuum_vacuum_scale_factor"])
    assert database.oldest_xmin_age is not None and database.oldest_xmin_age >= 0
    assert facts.backend == "postgres" and image_store.schema in facts.database


def test_a_held_snapshot_shows_as_the_oldest_xmin(image_store: ImageStore) -> None:
    with image_store.connect() as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM checkpoints")
        # Transactions after it age its xmin.
        with image_store.connect() as other:
            for _ in range(3):
                other.execute("SELECT txid_current()")
        database = read_postgres_storage(image_store.target(), StorageRequest(channels=False)).postgres
        holder.execute("ROLLBACK")
    assert database is not None and database.oldest_xmin_age is not None and database.oldest_xmin_age >= 3


# -- bytes by channel -------------------------------------------------------------------------------------


def inline_shares(store: ImageStore) -> dict[str, list[int]]:
    """channel -> [values, stored bytes, text bytes] of the values inline in the checkpoint JSONB: a value's
    stored bytes are its share, by text length, of its checkpoint's stored size (floored per value). The
    text lengths are json.dumps's here, with jsonb's separators; the stored sizes are pg_column_size."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    rows = query(
        store, "SELECT pg_column_size(checkpoint), octet_length(checkpoint::text), checkpoint FROM checkpoints"
    )
    for stored, text, checkpoint in rows:
        assert text == len(json.dumps(checkpoint, ensure_ascii=False).encode())
        for channel, value in checkpoint["channel_values"].items():
            size = len(json.dumps(value, ensure_ascii=False).encode())
            entry = sums[channel]
            entry[0] += 1
            entry[1] += stored * size // text
            entry[2] += size
    return sums


def test_channels_match_the_bytes_read_back(image_store: ImageStore, facts: StorageFacts) -> None:
    assert facts.channels is not None
    got = {(c.stored_in, c.label): (c.values, c.bytes, c.raw_bytes) for c in facts.channels}
    expected: dict[tuple[StoredIn, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for stored_in, table in ((StoredIn.BLOBS, "checkpoint_blobs"), (StoredIn.WRITES, "checkpoint_writes")):
        for channel, blob, stored in query(image_store, f"SELECT channel, blob, pg_column_size(blob) FROM {table}"):
            entry = expected[(stored_in, channel)]
            entry[0] += 1
            entry[1] += stored or 0
            entry[2] += len(blob) if blob is not None else 0
    for channel, entry in inline_shares(image_store).items():
        expected[(StoredIn.CHECKPOINTS, channel)] = entry
    assert got == {key: tuple(value) for key, value in expected.items()}
    # The PNG's base64 does not compress: stored and raw agree on its blob.
    images = got[(StoredIn.BLOBS, "viewed_images")]
    assert images[0] == 1 and images[1] >= len(PNG_B64) and images[2] >= len(PNG_B64)
    assert (StoredIn.CHECKPOINTS, "title") in got


def copy_store(store: ImageStore, dsn: str, schema: str) -> ImageStore:
    """The store's four tables copied into `schema` of the same database, to damage without harm."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        for table in TABLES:
            conn.execute(
                sql.SQL("CREATE TABLE {}.{} AS SELECT * FROM {}.{}").format(
                    sql.Identifier(schema), sql.Identifier(table), sql.Identifier(store.schema), sql.Identifier(table)
                )
            )
    return ImageStore(dsn, schema)


@pytest.mark.slow
def test_a_large_inline_value_is_counted_at_its_compressed_share(
    image_store: ImageStore, pg_schema: tuple[str, str]
) -> None:
    """A 900 KB string put into every checkpoint's JSONB (jsonb_set): stored compressed with the column, so
    its stored bytes are far below its text, the rest of the checkpoint stays positive, and the figures are
    the column's stored size apportioned by text length."""
    copy = copy_store(image_store, *pg_schema)
    with copy.connect() as conn:
        # Compressible text: the column is compressed as a whole (pglz), so the value is far smaller stored.
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values,notes}',"
            " to_jsonb(repeat('the same notes again ', 45000)))"
        )
    facts = read_postgres_storage(copy.target(), StorageRequest(top=3))
    assert facts.channels is not None and facts.checkpoint_rest_bytes is not None
    notes = next(c for c in facts.channels if c.stored_in is StoredIn.CHECKPOINTS and c.channel == "notes")
    expected = inline_shares(copy)
    assert (notes.values, notes.bytes, notes.raw_bytes) == tuple(expected["notes"])
    checkpoints = scalar(copy, "SELECT count(*) FROM checkpoints")
    assert notes.values == checkpoints and notes.raw_bytes == checkpoints * (len("the same notes again ") * 45000 + 2)
    assert notes.bytes < notes.raw_bytes / 10
    stored, metadata = query(
        copy, "SELECT sum(pg_column_size(checkpoint)), sum(pg_column_size(metadata)) FROM checkpoints"
    )[0]
    inline = sum(c.bytes for c in facts.channels if c.stored_in is StoredIn.CHECKPOINTS)
    assert facts.checkpoint_rest_bytes + inline == stored and facts.checkpoint_rest_bytes > 0
    assert facts.metadata_bytes == metadata


def test_the_rest_of_the_checkpoints_adds_up(image_store: ImageStore, facts: StorageFacts) -> None:
    checkpoint, metadata = query(
        image_store, "SELECT sum(pg_column_size(checkpoint)), sum(pg_column_size(metadata)) FROM checkpoints"
    )[0]
    assert facts.channels is not None and facts.checkpoint_rest_bytes is not None
    inline = sum(c.bytes for c in facts.channels if c.stored_in is StoredIn.CHECKPOINTS)
    assert facts.metadata_bytes == metadata
    assert facts.checkpoint_rest_bytes + inline == checkpoint


# -- large values -----------------------------------------------------------------------------------------


def test_large_values_are_found_with_channel_thread_and_kind(image_store: ImageStore, facts: StorageFacts) -> None:
    found = {(v.stored_in, v.thread_id, v.channel, v.looks_like) for v in facts.large_values}
    assert (StoredIn.BLOBS, "img-1", "viewed_images", "png") in found
    assert (StoredIn.WRITES, "img-1", "viewed_images", "png") in found
    assert (StoredIn.BLOBS, "uri-1", "messages", "data-uri image/png") in found
    assert (StoredIn.WRITES, "uri-1", "messages", "data-uri image/png") in found
    assert {thread for _, thread, _, _ in found} == {"img-1", "uri-1"}
    assert {v.bytes for v in facts.large_values} == {len(PNG_B64)}
    for value in facts.large_values:
        assert value.checkpoint_id is not None and value.checkpoint_ns == ""
    # A blob's checkpoint is the first that names its version.
    blob = next(v for v in facts.large_values if v.stored_in is StoredIn.BLOBS and v.channel == "viewed_images")
    version = scalar(image_store, "SELECT version FROM checkpoint_blobs WHERE channel = 'viewed_images'")
    first = scalar(
        image_store,
        "SELECT min(checkpoint_id) FROM checkpoints WHERE checkpoint->'channel_versions'->>'viewed_images' = %s",
        (version,),
    )
    assert blob.checkpoint_id == first


def test_a_threshold_above_every_value_finds_nothing(image_store: ImageStore) -> None:
    facts = read_postgres_storage(image_store.target(), StorageRequest(large_value_bytes=10 * len(PNG_B64)))
    assert facts.large_values == []


def test_a_large_inline_string_is_found_once_with_its_copies(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    conninfo = psycopg.conninfo.make_conninfo(dsn, options=f"-c search_path={schema}")
    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.setup()
        app = graph(saver)
        config = {"configurable": {"thread_id": "titled"}}
        app.invoke({"messages": [HumanMessage(content="hi")], "title": PNG_B64}, config)  # type: ignore[arg-type]
        app.invoke({"messages": [HumanMessage(content="again")]}, config)  # type: ignore[arg-type]
    facts = read_postgres_storage(postgres_target(dsn, schema), StorageRequest())
    inline = [v for v in facts.large_values if v.stored_in is StoredIn.CHECKPOINTS]
    assert [(v.thread_id, v.channel, v.looks_like, v.bytes) for v in inline] == [
        ("titled", "title", "png", len(PNG_B64))
    ]
    with psycopg.connect(conninfo) as conn:
        copies = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE checkpoint->'channel_values'->>'title' = %s", (PNG_B64,)
        )
        assert inline[0].copies == copies.fetchone()[0] > 1  # type: ignore[index]


def _sized(data: bytes, msgpack: bool) -> list[tuple[str, int]]:
    return [(kind, size) for kind, _, size in find_base64_files(data, msgpack)]


def test_signatures_need_a_string_start_and_a_real_run() -> None:
    png = PNG_B64.encode()
    packed = b"\x81\xa6base64\xdb" + len(png).to_bytes(4, "big") + png
    assert _sized(packed, msgpack=True) == [("png", len(png))]
    # The same characters inside ordinary text, with no str header before them: nothing.
    assert _sized(b"\xda\x10\x00 some text " + png, msgpack=True) == []
    assert _sized(png, msgpack=False) == [("png", len(png))]
    assert _sized(b"x" + png, msgpack=False) == []
    # RIFF is WAV as well as WEBP: only WEBP counts.
    webp = base64.b64encode(b"RIFF\0\0\0\0WEBPVP8 " + bytes(2000))
    wav = base64.b64encode(b"RIFF\0\0\0\0WAVEfmt " + bytes(2000))
    assert _sized(webp, msgpack=False) == [("webp", len(webp))]
    assert _sized(wav, msgpack=False) == []
    # A data URI counts wherever it is, and is not found twice; a short one is left out.
    pdf = base64.b64encode(b"%PDF-1.7" + bytes(4000))
    uri = b'{"url": "data:application/pdf;base64,' + pdf + b'"}'
    assert _sized(uri, msgpack=True) == [("data-uri application/pdf", len(pdf))]
    assert _sized(b"data:image/png;base64," + png[: MIN_RUN_BYTES - 4], msgpack=False) == []


# -- growth and heaviest threads --------------------------------------------------------------------------


def thread_totals(store: ImageStore) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for table, column in (("checkpoints", "pg_column_size(checkpoint) + pg_column_size(metadata)"),
                          ("checkpoint_blobs", "coalesce(pg_column_size(blob), 0)"),
                          ("checkpoint_writes", "coalesce(pg_column_size(blob), 0)")):  # fmt: skip
        for thread_id, size in query(store, f"SELECT thread_id, {column} FROM {table}"):
            totals[thread_id] += size
    return dict(totals)


def hours_by_query(store: ImageStore, thread_id: str | None = None) -> dict[int, tuple[int, int]]:
    """hour -> (checkpoints, bytes): checkpoints and writes by their own id's hour, blobs by the hour of
    the first checkpoint naming their version (_hour_of reads each id here, not through ckpt)."""
    where = "" if thread_id is None else " WHERE thread_id = %s"
    parameters = () if thread_id is None else (thread_id,)
    hours: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for checkpoint_id, size in query(
        store, f"SELECT checkpoint_id, pg_column_size(checkpoint) + pg_column_size(metadata) FROM checkpoints{where}",
        parameters,
    ):  # fmt: skip
        hour = _hour_of(checkpoint_id)
        assert hour is not None
        hours[hour][0] += 1
        hours[hour][1] += size
    for checkpoint_id, size in query(
        store, f"SELECT checkpoint_id, coalesce(pg_column_size(blob), 0) FROM checkpoint_writes{where}", parameters
    ):
        hours[_hour_of(checkpoint_id) or 0][1] += size
    blobs = (
        "SELECT (SELECT min(c.checkpoint_id) FROM checkpoints c WHERE c.thread_id = b.thread_id"
        " AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint->'channel_versions'->>b.channel = b.version),"
        f" coalesce(pg_column_size(b.blob), 0) FROM checkpoint_blobs b{where.replace('thread_id', 'b.thread_id')}"
    )
    for first, size in query(store, blobs, parameters):
        assert first is not None
        hours[_hour_of(first) or 0][1] += size
    return {hour: (count, size) for hour, (count, size) in hours.items()}


def test_growth_is_by_the_hour_of_each_id(image_store: ImageStore, facts: StorageFacts) -> None:
    totals = thread_totals(image_store)
    hours = facts.growth.hours
    assert sum(bucket.bytes for bucket in hours) == sum(totals.values())
    assert {bucket.start_ns: (bucket.checkpoints, bucket.bytes) for bucket in hours} == hours_by_query(image_store)
    assert facts.growth.untimed_checkpoints == 0 and facts.growth.unnamed_blob_rows == 0
    starts = [bucket.start_ns for bucket in hours]
    assert starts == sorted(starts)


def test_heaviest_threads_and_their_growth(image_store: ImageStore, facts: StorageFacts) -> None:
    totals = thread_totals(image_store)
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:3]
    assert [(t.thread_id, t.bytes) for t in facts.heaviest] == ranked
    assert facts.heaviest[0].thread_id in ("img-1", "uri-1")
    for thread in facts.heaviest:
        times = facts.growth_of(thread.thread_id)
        assert times is not None
        assert {b.start_ns: (b.checkpoints, b.bytes) for b in times.hours} == hours_by_query(
            image_store, thread.thread_id
        )
        assert sum(b.bytes for b in times.hours) == thread.bytes
        ids = [
            r[0]
            for r in query(
                image_store, "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s", (thread.thread_id,)
            )
        ]
        assert sum(b.checkpoints for b in times.hours) == thread.checkpoints == len(ids)
        assert (thread.first_ns, thread.last_ns) == (write_time_ns(min(ids)), write_time_ns(max(ids)))


# -- the app's threads ------------------------------------------------------------------------------------


def test_orphans_are_exact(image_store: ImageStore, facts: StorageFacts) -> None:
    app = facts.app
    assert app is not None
    totals = thread_totals(image_store)
    assert app.table == f"{image_store.schema}.threads_meta"
    assert app.known == len(KNOWN)
    assert sorted((o.thread_id, o.bytes) for o in app.orphans) == sorted((t, totals[t]) for t in ORPHANS)
    assert app.orphan_bytes == sum(totals[t] for t in ORPHANS)
    assert app.app_only == 1
    assert DELETED not in totals


# -- schemas, privileges, read-only -----------------------------------------------------------------------


def comparable(facts: StorageFacts) -> tuple[Any, ...]:
    return (facts.relations, facts.channels, facts.growth, facts.heaviest, facts.large_values, facts.app)


def test_the_search_path_finds_the_same_tables(image_store: ImageStore, facts: StorageFacts) -> None:
    by_path = read_postgres_storage(image_store.target(by_search_path=True), StorageRequest(top=3))
    assert comparable(by_path) == comparable(facts)


def test_without_channels_no_value_is_peeked(image_store: ImageStore, facts: StorageFacts) -> None:
    lean = read_postgres_storage(image_store.target(), StorageRequest(top=3, channels=False))
    assert lean.channels is None and lean.checkpoint_rest_bytes is None and lean.large_values == []
    assert (lean.relations, lean.growth, lean.heaviest, lean.app) == (
        facts.relations, facts.growth, facts.heaviest, facts.app,
    )  # fmt: skip


def test_a_select_only_role_gets_the_sizes_and_a_note(
    image_store: ImageStore, facts: StorageFacts, pg_readonly_role: Callable[..., str]
) -> None:
    dsn = pg_readonly_role(image_store.dsn, image_store.schema)
    limited = read_postgres_storage(image_store.target(dsn), StorageRequest(top=3))
    assert comparable(limited)[:5] == comparable(facts)[:5]
    assert limited.app is None
    assert any("threads_meta" in note and "privilege" in note for note in limited.notes)
    by_path = read_postgres_storage(image_store.target(dsn, by_search_path=True), StorageRequest(top=3))
    assert by_path.relations == facts.relations and by_path.app is None


def test_a_role_without_usage_on_the_schema_gets_the_sizes_and_a_note(
    image_store: ImageStore, facts: StorageFacts, pg_readonly_role: Callable[..., str]
) -> None:
    dsn = pg_readonly_role(image_store.dsn, image_store.schema)
    role = psycopg.conninfo.conninfo_to_dict(dsn)["user"]
    with image_store.connect() as conn:
        conn.execute(
            sql.SQL("REVOKE USAGE ON SCHEMA {} FROM {}").format(
                sql.Identifier(image_store.schema), sql.Identifier(str(role))
            )
        )
    limited = read_postgres_storage(image_store.target(dsn), StorageRequest(top=3))
    # Without USAGE no table can be counted: rows are the statistics' estimate, and say so.
    assert [(r.rows, r.rows_exact) for r in limited.relations] == [(r.statistics_rows, False) for r in facts.relations]
    assert [dataclasses.replace(r, rows=0, rows_exact=True) for r in limited.relations] == [
        dataclasses.replace(r, rows=0) for r in facts.relations
    ]
    assert limited.postgres is not None and facts.postgres is not None
    assert limited.channels is None and limited.heaviest == [] and limited.app is None
    assert any("USAGE" in note for note in limited.notes)


def fingerprint(store: ImageStore) -> tuple[Any, ...]:
    counters = query(
        store,
        "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd FROM pg_stat_all_tables"
        " WHERE schemaname = %s ORDER BY relname",
        (store.schema,),
    )
    sums = tuple(
        scalar(store, f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {table} t")
        for table in (*TABLES, "threads_meta")
    )
    return tuple(counters), sums


def test_the_read_changes_nothing(image_store: ImageStore) -> None:
    before = fingerprint(image_store)
    read_postgres_storage(image_store.target(), StorageRequest(top=3))
    assert fingerprint(image_store) == before


# -- the scenario fixtures ------------------------------------------------------------------------------


def test_the_scenario_database_adds_up(built_postgres: BuiltDatabase) -> None:
    facts = read_postgres_storage(postgres_target(built_postgres.db, ""), StorageRequest(top=5))
    with psycopg.connect(built_postgres.db) as conn:
        sizes = dict(
            conn.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
                " WHERE c.relname = ANY(%s) AND c.relnamespace = 'public'::regnamespace",
                (list(TABLES),),
            ).fetchall()
        )
        count = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]  # type: ignore[index]
        raw = dict(conn.execute("SELECT channel, sum(octet_length(blob)) FROM checkpoint_writes GROUP BY 1").fetchall())
    assert {relation.name: relation.bytes for relation in facts.relations} == sizes
    growth = facts.growth
    assert sum(bucket.checkpoints for bucket in growth.hours) + growth.untimed_checkpoints == count
    assert facts.channels is not None
    assert {c.channel: c.raw_bytes for c in facts.channels if c.stored_in is StoredIn.WRITES} == {
        channel: int(size or 0) for channel, size in raw.items()
    }
    assert len(facts.heaviest) == 5 and facts.app is None and facts.notes == []
