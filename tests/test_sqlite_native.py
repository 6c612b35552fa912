"""The compiled SQLite reader (native/_inert_sqlite.c) must give exactly the records the Python reader gives.

Both readers run over the builder's database (every scenario and injected fault), over thread selections
and ranges, and over copies damaged by Hypothesis through targeted SQL: flipped and cut blobs, other
serializer types, NULL payloads, broken metadata JSON, orphaned and moved writes, deleted checkpoints.
Every field of every record is compared with its type (an enum member and its string, or True and 1,
would otherwise pass as equal). Where the Python reader fails, the compiled one must fail the same way.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deerflow_ckpt import native
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.store import sqlite as sqlite_store
from deerflow_ckpt.store.records import CheckpointRecord, Lineage
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.sqlite import SqliteCheckpointReader, connect_readonly, keys_are_text
from tests.conftest import BuiltDatabase

FIELDS = [field.name for field in dataclasses.fields(CheckpointRecord) if field.name != "parent_record"]


def test_the_compiled_reader_is_built() -> None:
    """CI must test the compiled reader: without libsqlite3's header every scan would take the slow path."""
    assert native.open_lineages is not None, "the SQLite reader was not built into _inert (libsqlite3-dev?)"
    # It calls CheckpointRecord with its leading fields, positionally: they must stay those, in that order.
    assert sqlite_store.RECORD_FITS


def _typed(value: Any) -> Any:
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, value)


def _facts(lineages: Iterator[Lineage]) -> list[Any]:
    return [
        (
            _typed(lineage.thread_id),
            _typed(lineage.checkpoint_ns),
            [[_typed(getattr(record, name)) for name in FIELDS] for record in lineage.records],
        )
        for lineage in lineages
    ]


def _read(path: Path, compiled: bool, selection: ThreadSelection = ALL_THREADS) -> list[Any] | str:
    """Every lineage's facts, or the StoreError's text when the read fails."""
    try:
        return _facts(SqliteCheckpointReader(SqliteTarget(path), compiled=compiled).lineages(selection))
    except StoreError as exc:
        return f"StoreError: {str(exc).split(': ', 1)[0]}"


@pytest.fixture
def compiled_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each call of the real compiled reader, so a test knows it was not silently bypassed."""
    assert native.open_lineages is not None
    real = native.open_lineages
    calls: list[str] = []

    def counting(uri: str, *args: Any) -> Any:
        calls.append(uri)
        return real(uri, *args)

    monkeypatch.setattr(sqlite_store, "open_lineages", counting)
    return calls


def _assert_same(path: Path, compiled_calls: list[str], selection: ThreadSelection = ALL_THREADS) -> list[Any] | str:
    python = _read(path, compiled=False, selection=selection)
    before = len(compiled_calls)
    compiled = _read(path, compiled=True, selection=selection)
    assert len(compiled_calls) == before + 1, "the compiled reader was not used"
    assert compiled == python
    return python


def test_the_builders_database_reads_the_same(built_sqlite: BuiltDatabase, compiled_calls: list[str]) -> None:
    facts = _assert_same(built_sqlite.path, compiled_calls)
    assert isinstance(facts, list) and len(facts) >= 30
    records = [record for _, _, records in facts for record in records]
    # The comparison covers both of the compiled reader's outputs: rows it judged, and rows it handed to
    # record_from_row (the fixture's CK104/CK105 faults), with problems found in checkpoints and in writes.
    problems = [record[FIELDS.index("problems")] for record in records]
    assert any(problem for problem in problems) and any(not problem for problem in problems)
    assert any(record[FIELDS.index("overwrite_written")] == ("bool", True) for record in records)
    assert any(record[FIELDS.index("removal_written")] == ("bool", True) for record in records)


def test_selections_read_the_same(built_sqlite: BuiltDatabase, compiled_calls: list[str]) -> None:
    reader = SqliteCheckpointReader(SqliteTarget(built_sqlite.path))
    points = reader.split_points(lambda _: 3)
    assert len(points) == 2
    bounds: list[str | None] = [None, *points, None]
    shares = [ThreadSelection(lower=lower, upper=upper) for lower, upper in itertools.pairwise(bounds)]
    for selection in [*shares, ThreadSelection(thread_id=points[0]), ThreadSelection(thread_id="no-such-thread")]:
        _assert_same(built_sqlite.path, compiled_calls, selection)


# -- damage --------------------------------------------------------------------------------------------

CHECKPOINT_TYPES = ["msgpack", "pickle", "json", "bytes", "null", "msgpack ", None]
WRITE_TYPES = ["msgpack", "pickle", "json", "null", "bytes", "weird"]


def _row_ids(connection: sqlite3.Connection, table: str) -> list[int]:
    return [row[0] for row in connection.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]


def _pick(ids: list[int], choice: int) -> int:
    return ids[choice % len(ids)]


def _stored(connection: sqlite3.Connection, query: str, row: int) -> Any:
    """One column of one row, None when an earlier damage deleted the row."""
    found = connection.execute(query, (row,)).fetchone()
    return None if found is None else found[0]


Damage = Callable[[sqlite3.Connection, int, int], None]


def _flip_checkpoint(connection: sqlite3.Connection, row: int, at: int) -> None:
    data = _stored(connection, "SELECT checkpoint FROM checkpoints WHERE rowid = ?", row)
    if data:
        data = bytearray(data)
        data[at % len(data)] ^= 0x41
        connection.execute("UPDATE checkpoints SET checkpoint = ? WHERE rowid = ?", (bytes(data), row))


def _cut_checkpoint(connection: sqlite3.Connection, row: int, at: int) -> None:
    connection.execute("UPDATE checkpoints SET checkpoint = substr(checkpoint, 1, ?) WHERE rowid = ?", (at % 64, row))


def _checkpoint_type(connection: sqlite3.Connection, row: int, at: int) -> None:
    kind = CHECKPOINT_TYPES[at % len(CHECKPOINT_TYPES)]
    connection.execute("UPDATE checkpoints SET type = ? WHERE rowid = ?", (kind, row))


def _null_payload(connection: sqlite3.Connection, row: int, at: int) -> None:
    column = "checkpoint" if at % 2 else "metadata"
    connection.execute(f"UPDATE checkpoints SET {column} = NULL WHERE rowid = ?", (row,))


def _break_metadata(connection: sqlite3.Connection, row: int, at: int) -> None:
    text = _stored(connection, "SELECT CAST(metadata AS BLOB) FROM checkpoints WHERE rowid = ?", row)
    if not text:
        return
    data = bytearray(text)
    edits = [b'"', b"}", b"\xc3", b"\\", b" ", b"1", b"\xff"]
    data[at % len(data)] = edits[at % len(edits)][0]
    # Stored as a BLOB, as a reader of a damaged file would find it: TEXT would fail Python's own decoding.
    connection.execute("UPDATE checkpoints SET metadata = ? WHERE rowid = ?", (bytes(data), row))


def _metadata_counters(connection: sqlite3.Connection, row: int, at: int) -> None:
    values = ['"x"', "1.5", "true", "-3", "12345678901234567890", "null", "[1]"]
    counters = f'{{"messages": [{values[at % len(values)]}, {values[(at // 7) % len(values)]}]}}'
    connection.execute(
        "UPDATE checkpoints SET metadata = json_set(metadata, '$.counters_since_delta_snapshot', json(?)) "
        "WHERE rowid = ? AND json_valid(metadata)",
        (counters, row),
    )


def _flip_write(connection: sqlite3.Connection, row: int, at: int) -> None:
    data = _stored(connection, "SELECT value FROM writes WHERE rowid = ?", row)
    if data:
        data = bytearray(data)
        data[at % len(data)] ^= 0x22
        connection.execute("UPDATE writes SET value = ? WHERE rowid = ?", (bytes(data), row))


def _write_type(connection: sqlite3.Connection, row: int, at: int) -> None:
    connection.execute("UPDATE writes SET type = ? WHERE rowid = ?", (WRITE_TYPES[at % len(WRITE_TYPES)], row))


def _write_channel(connection: sqlite3.Connection, row: int, at: int) -> None:
    channel = ["messages", "other", "messages ", "__start__"][at % 4]
    connection.execute("UPDATE OR IGNORE writes SET channel = ? WHERE rowid = ?", (channel, row))


def _write_task(connection: sqlite3.Connection, row: int, at: int) -> None:
    connection.execute("UPDATE OR IGNORE writes SET task_id = ? WHERE rowid = ?", (f"task-{at % 3}", row))


def _orphan_write(connection: sqlite3.Connection, row: int, at: int) -> None:
    """Point a write at no checkpoint: an id before, between or after the lineage's, or a thread with none.

    A thread id cut short sorts just before its own thread, so the write's checkpoint id is one the next
    lineage read has: it must still be dropped, not folded into that lineage."""
    ids = ["0", "1f", "zzzz", ""]
    threads = ["thread_id || '-gone'", "substr(thread_id, 1, length(thread_id) - 1)"]
    if at % 6 >= 4:
        connection.execute(f"UPDATE OR IGNORE writes SET thread_id = {threads[at % 6 - 4]} WHERE rowid = ?", (row,))
    else:
        connection.execute("UPDATE OR IGNORE writes SET checkpoint_id = ? WHERE rowid = ?", (ids[at % 4], row))


def _share_task(connection: sqlite3.Connection, row: int, at: int) -> None:
    """One task id for every write of a thread: each checkpoint's writes must still count as a new task."""
    connection.execute(
        "UPDATE OR IGNORE writes SET task_id = 'shared' "
        "WHERE thread_id = (SELECT thread_id FROM writes WHERE rowid = ?)",
        (row,),
    )


def _move_write(connection: sqlite3.Connection, row: int, at: int) -> None:
    """Give a write another checkpoint of its lineage."""
    target = connection.execute(
        "SELECT c.checkpoint_id FROM checkpoints c JOIN writes w USING (thread_id, checkpoint_ns) "
        "WHERE w.rowid = ? ORDER BY c.checkpoint_id LIMIT 1 OFFSET ?",
        (row, at % 5),
    ).fetchone()
    if target is not None:
        connection.execute("UPDATE OR IGNORE writes SET checkpoint_id = ? WHERE rowid = ?", (target[0], row))


def _delete_checkpoint(connection: sqlite3.Connection, row: int, at: int) -> None:
    connection.execute("DELETE FROM checkpoints WHERE rowid = ?", (row,))


def _undecodable_key(connection: sqlite3.Connection, row: int, at: int) -> None:
    """A key column's text made invalid UTF-8 (a byte of its own, or a cut sequence): read losslessly."""
    column = ["thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type"][at % 5]
    tail = ["X'FF'", "X'C3'", "X'80'", "X'EDB3BF'"][(at // 5) % 4]
    connection.execute(
        f"UPDATE OR IGNORE checkpoints SET {column} = coalesce({column}, '') || CAST({tail} AS TEXT) WHERE rowid = ?",
        (row,),
    )


def _undecodable_write_key(connection: sqlite3.Connection, row: int, at: int) -> None:
    column = ["thread_id", "checkpoint_id", "task_id", "channel", "type"][at % 5]
    connection.execute(
        f"UPDATE OR IGNORE writes SET {column} = coalesce({column}, '') || CAST(X'FF80' AS TEXT) WHERE rowid = ?",
        (row,),
    )


def _blob_namespace(connection: sqlite3.Connection, row: int, at: int) -> None:
    """An empty BLOB namespace: Python reads it as b"" and keys it as "", but SQLite sorts it after text."""
    connection.execute("UPDATE OR IGNORE checkpoints SET checkpoint_ns = X'' WHERE rowid = ?", (row,))


CHECKPOINT_DAMAGE: list[Damage] = [
    _flip_checkpoint,
    _cut_checkpoint,
    _checkpoint_type,
    _null_payload,
    _break_metadata,
    _metadata_counters,
    _delete_checkpoint,
    _blob_namespace,
    _undecodable_key,
]
WRITE_DAMAGE: list[Damage] = [
    _flip_write,
    _write_type,
    _write_channel,
    _write_task,
    _orphan_write,
    _move_write,
    _share_task,
    _undecodable_write_key,
]


def _damage(path: Path, operations: list[tuple[int, int, int]]) -> None:
    connection = sqlite3.connect(path)
    try:
        checkpoint_ids, write_ids = _row_ids(connection, "checkpoints"), _row_ids(connection, "writes")
        damages = CHECKPOINT_DAMAGE + WRITE_DAMAGE
        for which, row, at in operations:
            damage = damages[which % len(damages)]
            ids = checkpoint_ids if damage in CHECKPOINT_DAMAGE else write_ids
            damage(connection, _pick(ids, row), at)
        connection.commit()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def pristine(built_sqlite: BuiltDatabase, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The builder's database, checkpointed into one file so a copy is complete."""
    copy = tmp_path_factory.mktemp("pristine") / "checkpoints.db"
    source = sqlite3.connect(built_sqlite.path)
    target = sqlite3.connect(copy)
    source.backup(target)
    source.close()
    target.execute("PRAGMA journal_mode = DELETE")
    target.close()
    return copy


OPERATIONS = st.lists(
    st.tuples(st.integers(0, 16), st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1, max_size=12
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_damaged_databases_read_the_same(
    pristine: Path, tmp_path: Path, compiled_calls: list[str], operations: list[tuple[int, int, int]]
) -> None:
    path = tmp_path / "damaged.db"
    shutil.copyfile(pristine, path)
    _damage(path, operations)
    _assert_same(path, compiled_calls)


@pytest.mark.parametrize(
    ("table", "column"),
    [
        ("checkpoints", "thread_id"),
        ("checkpoints", "checkpoint_id"),
        ("checkpoints", "parent_checkpoint_id"),
        ("checkpoints", "type"),
        ("writes", "checkpoint_id"),
        ("writes", "task_id"),
        ("writes", "channel"),
        ("writes", "type"),
    ],
)
@pytest.mark.slow
def test_text_that_is_not_utf8_reads_the_same_in_both_readers(
    pristine: Path, tmp_path: Path, compiled_calls: list[str], table: str, column: str
) -> None:
    """Both readers read such text losslessly (store/sqlite_text.py), wherever it is, into the same records."""
    path = tmp_path / "bad-text.db"
    shutil.copyfile(pristine, path)
    connection = sqlite3.connect(path)
    # The middle row: not the first one read, so the failure comes mid-stream.
    (row,) = connection.execute(f"SELECT rowid FROM {table} WHERE type IS NOT 'null' ORDER BY rowid").fetchall()[
        len(_row_ids(connection, table)) // 3
    ]
    connection.execute(f"UPDATE {table} SET {column} = {column} || CAST(X'C328' AS TEXT) WHERE rowid = ?", (row,))
    connection.commit()
    connection.close()
    facts = _assert_same(path, compiled_calls)
    assert isinstance(facts, list) and len(facts) >= 30
    if table == "checkpoints" and column != "type":
        # The key itself, its bytes kept: C3 28 is no UTF-8, so it reads as C3's escape and the "(".
        assert "\\udcc3(" in repr(facts)


def test_other_key_affinity_takes_the_python_reader(tmp_path: Path) -> None:
    """A key column that could hold numbers, whose order the compiled reader does not mirror, reads in Python."""
    path = tmp_path / "numeric-keys.db"
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE checkpoints (thread_id INTEGER, checkpoint_ns TEXT, checkpoint_id TEXT, "
        "parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB)"
    )
    connection.execute(
        "CREATE TABLE writes (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT, task_id TEXT, "
        "idx INTEGER, channel TEXT, type TEXT, value BLOB)"
    )
    connection.execute("INSERT INTO checkpoints VALUES (7, '', 'c1', NULL, 'msgpack', X'80', '{}')")
    connection.commit()
    assert not keys_are_text(connection)
    connection.close()
    [lineage] = SqliteCheckpointReader(SqliteTarget(path)).lineages()
    # An integer key arrives as its text (records.key_text), the form every report can show.
    assert lineage.thread_id == "7" and [record.checkpoint_id for record in lineage.records] == ["c1"]


# -- the read-ahead layer (native/_readahead.c) ---------------------------------------------------------
# It changes how pages reach SQLite, never what they hold: the compiled reader opens its file through it and
# the Python reader through SQLite's default VFS, over page sizes from the smallest to the largest, files cut
# short mid-page and mid-table, and a writer that commits and checkpoints halfway through a scan. Its
# counters show that windows were read and that SQLite took its pages from them in place.


def _counts() -> tuple[int, int, int]:
    assert native.readahead_counts is not None, "the read-ahead layer was not built with the compiled reader"
    return native.readahead_counts()


def test_the_reader_takes_its_pages_from_windows(pristine: Path, compiled_calls: list[str]) -> None:
    before = _counts()
    facts = _assert_same(pristine, compiled_calls)
    assert isinstance(facts, list) and len(facts) >= 30
    refills, served, lent = (after - earlier for after, earlier in zip(_counts(), before, strict=True))
    pages = pristine.stat().st_size // sqlite3.connect(pristine).execute("PRAGMA page_size").fetchone()[0]
    # Most pages came from a window (a file read ahead in far fewer calls than pages), handed over in place.
    assert 0 < refills < pages // 4 < served
    assert lent > served // 2


@pytest.mark.parametrize("page_size", [512, 1024, 65536])
def test_every_page_size_reads_the_same(
    pristine: Path, tmp_path: Path, compiled_calls: list[str], page_size: int
) -> None:
    """512-byte pages fill a window with 256 of them; a 64 KiB page is half a window."""
    path = tmp_path / f"pages-{page_size}.db"
    shutil.copyfile(pristine, path)
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA page_size = {page_size}")
    connection.execute("VACUUM")
    assert connection.execute("PRAGMA page_size").fetchone()[0] == page_size
    connection.close()
    before = _counts()
    facts = _assert_same(path, compiled_calls)
    assert isinstance(facts, list) and len(facts) >= 30
    assert _counts()[0] > before[0]


@pytest.mark.parametrize("keep", [0.5, 0.97, -1000])
def test_a_file_cut_short_fails_as_it_does_without_the_layer(
    pristine: Path, tmp_path: Path, compiled_calls: list[str], keep: float
) -> None:
    """Cut mid-file and near its end at a page boundary, the header's page count cut to match (so the file
    opens, and the scan fails where a page is missing), and cut mid-page: short reads and errors are SQLite's."""
    path = tmp_path / "cut.db"
    shutil.copyfile(pristine, path)
    size = path.stat().st_size
    if keep > 0:
        page_size = int.from_bytes(path.read_bytes()[16:18], "big")
        pages = int(size * keep) // page_size
        os.truncate(path, pages * page_size)
        with path.open("r+b") as file:
            file.seek(28)  # the header's database size in pages
            file.write(pages.to_bytes(4, "big"))
    else:
        os.truncate(path, size + int(keep))
    outcome = _assert_same(path, compiled_calls)
    assert isinstance(outcome, str) and outcome.startswith("StoreError"), outcome


def test_a_writer_mid_scan_changes_nothing_the_scan_reads(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """A WAL database written to while the compiled reader is halfway, and as much of its WAL copied back as the
    reader allows: the scan still reads the snapshot it began with, page for page."""
    path = tmp_path / "live.db"
    source, target = sqlite3.connect(built_sqlite.path), sqlite3.connect(path)
    source.backup(target)
    source.close()
    target.execute("PRAGMA journal_mode = WAL")
    target.close()
    before = _read(path, compiled=False)
    assert isinstance(before, list) and len(before) >= 30

    lineages = SqliteCheckpointReader(SqliteTarget(path), compiled=True).lineages()
    first_half = _facts(next(lineages) for _ in range(len(before) // 2))
    writer = sqlite3.connect(path)
    # Every stored blob and every metadata value rewritten, each thread copied to sort before and after all.
    writer.execute("UPDATE checkpoints SET checkpoint = zeroblob(length(checkpoint)), metadata = '{}'")
    writer.execute("UPDATE writes SET value = zeroblob(length(value))")
    for prefix in (" ", "~"):
        writer.execute(
            "INSERT INTO checkpoints SELECT ? || thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
            "checkpoint, metadata FROM checkpoints WHERE thread_id NOT LIKE ' %'",
            (prefix,),
        )
    writer.commit()
    writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
    rest = _facts(lineages)
    writer.close()
    assert first_half + rest == before
    # The writer's changes are there for the next reader.
    assert _read(path, compiled=True) != before


def _copy_with(built: BuiltDatabase, path: Path, page_size: int, journal: str) -> None:
    source, target = sqlite3.connect(built.path), sqlite3.connect(path)
    source.backup(target)
    source.close()
    target.execute("PRAGMA journal_mode = DELETE")
    target.execute(f"PRAGMA page_size = {page_size}")
    target.execute("VACUUM")
    target.execute(f"PRAGMA journal_mode = {journal}")
    target.close()


def _overwrite(path: Path, journal: str, *more: str) -> None:
    """Every blob and metadata value rewritten (and `more` done) in one commit; in WAL mode all copied back."""
    writer = sqlite3.connect(path)
    writer.execute("UPDATE checkpoints SET checkpoint = zeroblob(length(checkpoint)), metadata = '{}'")
    writer.execute("UPDATE writes SET value = zeroblob(length(value))")
    for statement in more:
        writer.execute(statement)
    writer.commit()
    if journal == "WAL":
        assert writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    writer.close()


@pytest.mark.parametrize("journal", ["WAL", "DELETE"])
@pytest.mark.parametrize("page_size", [512, 1024, 4096])
def test_windows_read_before_a_write_are_not_served_after_it(
    built_sqlite: BuiltDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page_size: int, journal: str
) -> None:
    """The compiled reader reads the schema when it opens (small pages fill windows then) and its rows in a
    later transaction: a writer commits between the two (and, in WAL mode, copies everything back into the
    file), and the rows read must be the new ones. (With pages lent, SQLite also lets go of the windows itself
    when it sees the change: test_no_window_outlives_its_transaction holds the layer's own drop.)"""
    path = tmp_path / "written.db"
    _copy_with(built_sqlite, path, page_size, journal)
    opened = sqlite_store.open_lineages
    assert opened is not None
    windows_at_open: list[int] = []

    def open_then_write(uri: str, *args: Any) -> Any:
        before = _counts()[0]
        stream = opened(uri, *args)
        windows_at_open.append(_counts()[0] - before)
        _overwrite(path, journal, "DELETE FROM checkpoints WHERE rowid % 3 = 0")
        return stream

    monkeypatch.setattr(sqlite_store, "open_lineages", open_then_write)
    compiled = _read(path, compiled=True)
    monkeypatch.setattr(sqlite_store, "open_lineages", opened)
    # With small pages the schema alone fills a window: the one a stale read would come from.
    assert len(windows_at_open) == 1 and (windows_at_open[0] > 0 or page_size >= 4096)
    after = _read(path, compiled=False)
    assert isinstance(after, list) and compiled == after


def test_a_python_connection_reads_the_same_through_the_layer(pristine: Path) -> None:
    """--deep's history reader opens Python's sqlite3 through the layer: every row as the default VFS gives it."""
    target = SqliteTarget(pristine)
    plain, layered = connect_readonly(target), connect_readonly(target, read_ahead=True)
    before = _counts()
    for table in ("checkpoints", "writes"):
        query = f"SELECT * FROM {table} ORDER BY rowid"
        rows = layered.execute(query).fetchall()
        assert rows == plain.execute(query).fetchall() and len(rows) >= 30
    refills, served, lent = (after - earlier for after, earlier in zip(_counts(), before, strict=True))
    assert refills > 0 and lent > served // 2
    plain.close()
    layered.close()


@pytest.mark.parametrize("lend_pages", [False, True])
@pytest.mark.parametrize("journal", ["WAL", "DELETE"])
@pytest.mark.parametrize("page_size", [512, 4096])
def test_no_window_outlives_its_transaction(
    built_sqlite: BuiltDatabase, tmp_path: Path, page_size: int, journal: str, lend_pages: bool
) -> None:
    """One transaction reads every row, a writer commits (in WAL mode everything is copied back into the file),
    and the next transaction reads the rows the first read last, which the windows still hold: the layer's own
    drop at each lock change must keep them from being served. With pages lent, SQLite also lets go of them
    itself when it sees the change; without, nothing but the layer's drop stands in the way."""
    path = tmp_path / "tail.db"
    _copy_with(built_sqlite, path, page_size, journal)
    vfs = native.readahead_vfs() if native.readahead_vfs is not None else None
    assert vfs is not None
    reader = sqlite3.connect(f"{path.as_uri()}?mode=ro&vfs={vfs}", uri=True, isolation_level=None)
    reader.execute(f"PRAGMA mmap_size = {sqlite_store.LEND_PAGES if lend_pages else 0}")
    before = _counts()
    reader.execute("SELECT * FROM checkpoints ORDER BY rowid").fetchall()
    reader.execute("SELECT * FROM writes ORDER BY rowid").fetchall()
    refills, served, lent = (after - earlier for after, earlier in zip(_counts(), before, strict=True))
    assert refills > 0 and served > refills and (lent > 0) is lend_pages
    _overwrite(path, journal)
    tail = "SELECT * FROM writes ORDER BY rowid DESC LIMIT 20"
    read_again = reader.execute(tail).fetchall()
    reader.close()
    plain = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    assert read_again == plain.execute(tail).fetchall()
    plain.close()


def test_without_the_layer_a_python_connection_maps_nothing(pristine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where Python's sqlite3 cannot see the layer (its own SQLite), read_ahead reads through the default VFS,
    with SQLite's memory map off whatever its build default."""
    sqlite_store._python_read_ahead.cache_clear()
    monkeypatch.setattr(sqlite_store, "readahead_vfs", lambda: "deerflow-ckpt-no-such-vfs")
    try:
        connection = connect_readonly(SqliteTarget(pristine), read_ahead=True)
        assert connection.execute("PRAGMA mmap_size").fetchone()[0] == 0
        assert connection.execute("SELECT count(*) FROM checkpoints").fetchone()[0] >= 30
        connection.close()
    finally:
        sqlite_store._python_read_ahead.cache_clear()
