"""ckpt convert on SQLite databases written by real graphs: every checkpoint reads the same in the target mode.

Every namespace is read: the conversation and the subgraphs' own.

The oracle is LangGraph itself: each checkpoint of the source is read through the real saver and the graph of
its last writer's mode, each checkpoint of the output through the same graph compiled in the target mode, and
the states (values, next, tasks, pending writes) must be equal. Threads then continue one more turn on both
and must stay equal. The source must be byte-identical afterwards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from deerflow_ckpt.analysis.conversion import ConversionSettings, TargetMode
from deerflow_ckpt.analysis.shape import ShapeSettings
from deerflow_ckpt.commands.convert import ConversionReport, ConvertRequest, convert
from deerflow_ckpt.commands.verify_shape import ScanRequest, scan
from deerflow_ckpt.errors import OutputError
from deerflow_ckpt.store.source import DatabaseChoice, SqliteTarget
from fixtures.dbbuilder.backends import PostgresBackend, SqliteBackend
from fixtures.dbbuilder.content import TextPool
from fixtures.dbbuilder.graphs import GraphFactory, GraphSpec, run_config
from fixtures.dbbuilder.manifest import Manifest, ThreadRecord, Writer
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase

pytestmark = pytest.mark.slow


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _convert(source: Path, output: Path, mode: TargetMode, cadence: int = 3) -> ConversionReport:
    request = ConvertRequest(DatabaseChoice(SqliteTarget(source), "test"), ConversionSettings(mode, cadence), output)
    return convert(request)


@pytest.fixture(scope="module")
def converted(built_sqlite: BuiltDatabase, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fixture database converted to delta at K=3, to full, and back to delta from that full copy."""
    directory = tmp_path_factory.mktemp("convert")
    source = directory / "source.db"
    shutil.copy(built_sqlite.db, source)
    before = _digest(source)
    reports = {
        "delta": _convert(source, directory / "delta.db", TargetMode.DELTA),
        "full": _convert(source, directory / "full.db", TargetMode.FULL),
    }
    reports["full-delta"] = _convert(directory / "full.db", directory / "full-delta.db", TargetMode.DELTA, 10)
    reports["full-delta-full"] = _convert(directory / "full-delta.db", directory / "round.db", TargetMode.FULL)
    return {"source": source, "before": before, "dir": directory, "reports": reports, "manifest": built_sqlite.manifest}


# -- reading through the real saver -------------------------------------------------------------------------


class _Reader:
    """A saver on one database (a SQLite file, or a Postgres DSN and schema), and the fixture graphs on it in
    one mode (or the writer's own)."""

    def __init__(self, where: Path | tuple[str, str | None], manifest: Manifest) -> None:
        self.backend: Any = (
            SqliteBackend(str(where), None) if isinstance(where, Path) else PostgresBackend(where[0], where[1], None)
        )
        self.factory = GraphFactory(self.backend.plain, TextPool(manifest.seed, manifest.message_bytes))

    def graph(self, thread: ThreadRecord, mode: str | None, cadence: int | None) -> Any:
        writer = thread.writers[-1]
        mode = mode or writer.mode
        cadence = (cadence or writer.cadence or 10) if mode == "delta" else None
        return self.factory.get(GraphSpec(writer.graph, mode, cadence, writer.ticks_per_turn))

    def state(
        self, thread: ThreadRecord, checkpoint_id: str | None, mode: str | None, cadence: int | None, ns: str = ""
    ) -> Any:
        graph = self.graph(thread, mode, cadence)
        config = run_config(thread.thread_id, mode or thread.writers[-1].mode, checkpoint_id)
        if ns:
            # A subgraph's namespace: LangGraph finds the subgraph by it and reads its own checkpoint.
            config["configurable"]["checkpoint_ns"] = ns
        snapshot = graph.get_state(config)
        pending = self.backend.plain.get_tuple(config)
        return {
            "values": snapshot.values,
            "next": snapshot.next,
            "tasks": [(t.id, t.name, t.path, t.error, t.interrupts) for t in snapshot.tasks],
            "pending": None if pending is None else pending.pending_writes,
        }

    def close(self) -> None:
        self.backend.close()


def _checkpoint_ids(path: Path, thread_id: str) -> list[str]:
    return [checkpoint_id for ns, checkpoint_id in _checkpoint_keys(path, thread_id) if ns == ""]


def _checkpoint_keys(path: Path, thread_id: str) -> list[tuple[str, str]]:
    """(namespace, id) of every checkpoint of the thread, subgraph namespaces included."""
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY 1, 2", (thread_id,)
        ).fetchall()
    return [(row[0], row[1]) for row in rows]


def _readable(manifest: Manifest, report: ConversionReport) -> Iterator[ThreadRecord]:
    """Converted threads LangGraph can read without running what they hold."""
    converted = {thread.thread_id for thread in report.converted}
    for thread in manifest.threads:
        if thread.thread_id in converted and thread.read_back not in ("unsafe", "raises"):
            yield thread


@pytest.mark.usefixtures("strict_msgpack")
@pytest.mark.parametrize(
    ("output", "mode", "cadence"),
    [("delta.db", "delta", 3), ("full.db", "full", None), ("round.db", "full", None)],
    ids=["to-delta", "to-full", "full-delta-full"],
)
def test_every_checkpoint_reads_the_same(
    converted: dict[str, Any], output: str, mode: str, cadence: int | None
) -> None:
    manifest: Manifest = converted["manifest"]
    report = converted["reports"]["delta" if output == "delta.db" else "full"]
    source, target = _Reader(converted["source"], manifest), _Reader(converted["dir"] / output, manifest)
    compared = threads = subgraph = 0
    try:
        for thread in _readable(manifest, report):
            threads += 1
            for ns, checkpoint_id in _checkpoint_keys(converted["source"], thread.thread_id):
                was = source.state(thread, checkpoint_id, None, None, ns)
                now = target.state(thread, checkpoint_id, mode, cadence, ns)
                assert now == was, (thread.thread_id, ns, checkpoint_id)
                compared += 1
                subgraph += ns != ""
    finally:
        source.close()
        target.close()
    assert threads >= 20 and compared >= 600 and subgraph >= 30


def _metadata_rows(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as connection:
        return [json.loads(row[0]) for row in connection.execute("SELECT CAST(metadata AS TEXT) FROM checkpoints")]


def test_deerflow_gate_accepts_every_converted_thread(converted: dict[str, Any]) -> None:
    """DeerFlow's full-mode gate (checkpoint_metadata_uses_delta) refuses a checkpoint with the delta marker
    or a messages counter: after --to full no converted checkpoint has either; after --to delta every one
    carries the marker."""
    refused = {t.thread_id for t in converted["reports"]["full"].refused}
    with sqlite3.connect(converted["dir"] / "full.db") as connection:
        rows = connection.execute("SELECT thread_id, CAST(metadata AS BLOB) FROM checkpoints").fetchall()
    checked = 0
    for thread_id, raw in rows:
        if thread_id in refused:
            continue
        metadata = json.loads(raw)
        assert metadata.get("deerflow_checkpoint_channel_mode") != "delta", thread_id
        assert "messages" not in (metadata.get("counters_since_delta_snapshot") or {}), thread_id
        checked += 1
    assert checked >= 600
    refused_delta = {t.thread_id for t in converted["reports"]["delta"].refused}
    with sqlite3.connect(converted["dir"] / "delta.db") as connection:
        rows = connection.execute("SELECT thread_id, CAST(metadata AS BLOB) FROM checkpoints").fetchall()
    assert all(
        json.loads(raw)["deerflow_checkpoint_channel_mode"] == "delta" for tid, raw in rows if tid not in refused_delta
    )


def test_the_source_is_untouched_and_refused_threads_are_copied_unchanged(converted: dict[str, Any]) -> None:
    assert _digest(converted["source"]) == converted["before"]
    report: ConversionReport = converted["reports"]["delta"]
    refused = [t.thread_id for t in report.refused]
    assert {"fault-ck105-pickle", "fault-ck302-missing-parent", "fault-ck304-pruned-writes"} <= set(refused)
    query = (
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
        "FROM checkpoints WHERE thread_id IN (SELECT value FROM json_each(?)) ORDER BY 1, 2, 3"
    )
    with sqlite3.connect(converted["source"]) as a, sqlite3.connect(converted["dir"] / "delta.db") as b:
        assert (
            a.execute(query, (json.dumps(refused),)).fetchall() == b.execute(query, (json.dumps(refused),)).fetchall()
        )
        writes = "SELECT * FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
        assert a.execute(writes).fetchall() == b.execute(writes).fetchall()


def _findings(path: Path) -> set[tuple[str, str, str | None]]:
    report = scan(ScanRequest(DatabaseChoice(SqliteTarget(path), "test"), ShapeSettings(deep=True), "test"))
    return {(str(f.rule), f.thread_id or "", f.checkpoint_id) for f in report.findings if f.severity.rank >= 1}


def test_verify_shape_deep_finds_nothing_new(converted: dict[str, Any]) -> None:
    """Nothing new anywhere; and converting to delta at one K repairs what mixed cadences and raw writers left
    in the threads it converts: stuffed lists (CK101), cadence errors (CK201, CK202)."""
    before = _findings(converted["source"])
    for name in ("delta.db", "full.db", "round.db"):
        after = _findings(converted["dir"] / name)
        assert after <= before, (name, after - before)
    repaired = {t.thread_id for t in converted["reports"]["delta"].converted}
    was = {(rule, thread) for rule, thread, _ in before if thread in repaired}
    assert {("CK101", "fault-ck101-stuffed-list"), ("CK202", "mixed-writers-k10-k1000-k10")} <= was
    now = {(rule, thread) for rule, thread, _ in _findings(converted["dir"] / "delta.db") if thread in repaired}
    assert not {finding for finding in now if finding[0] in ("CK101", "CK201", "CK202")}, now


@pytest.mark.usefixtures("strict_msgpack")
def test_rewritten_rows_are_what_the_serializer_writes(converted: dict[str, Any]) -> None:
    """Every row of a converted thread, decoded by LangGraph's serializer and encoded again, gives its bytes
    back: ckpt's byte-level rewrite writes exactly what dumps_typed would."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()
    for name, report_name in (("delta.db", "delta"), ("full.db", "full")):
        converted_ids = json.dumps([t.thread_id for t in converted["reports"][report_name].converted])
        with sqlite3.connect(converted["dir"] / name) as connection:
            rows = connection.execute(
                "SELECT type, checkpoint, metadata FROM checkpoints "
                "WHERE thread_id IN (SELECT value FROM json_each(?))",
                (converted_ids,),
            ).fetchall()
        assert len(rows) >= 600
        for kind, data, metadata in rows:
            assert serde.dumps_typed(serde.loads_typed((kind, data))) == (kind, data)
            text = metadata if isinstance(metadata, str) else metadata.decode()
            assert json.dumps(json.loads(text), ensure_ascii=False) == text


def _stored_messages(path: Path, thread_id: str) -> list[tuple[str, bytes | None, dict[str, Any]]]:
    """(checkpoint id, the messages value's first bytes or None, metadata) of a thread's conversation."""
    import msgspec

    rows = []
    with sqlite3.connect(path) as connection:
        for checkpoint_id, data, metadata in connection.execute(
            "SELECT checkpoint_id, checkpoint, CAST(metadata AS TEXT) FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id",
            (thread_id,),
        ):
            values = msgspec.msgpack.decode(data, type=dict[str, msgspec.Raw])
            channel = msgspec.msgpack.decode(values["channel_values"], type=dict[str, msgspec.Raw])
            raw = channel.get("messages")
            rows.append((checkpoint_id, None if raw is None else bytes(raw)[:3], json.loads(metadata)))
    return rows


def test_stored_shapes_are_the_target_modes(converted: dict[str, Any]) -> None:
    """The reads alone cannot tell (a reader replays what is not stored): to full, a plain list in every
    checkpoint once there are messages; to delta at K=3, the clean full thread stores exactly what the K=3
    thread written by a delta graph stores, checkpoint by checkpoint."""
    full = _stored_messages(converted["dir"] / "full.db", "clean-full")
    assert all(head is not None and (0x90 <= head[0] <= 0x9F or head[0] in (0xDC, 0xDD)) for _, head, _ in full[1:])
    delta_from_full = _stored_messages(converted["dir"] / "delta.db", "clean-full")
    written_at_k3 = _stored_messages(converted["source"], "clean-delta-k3")
    assert len(delta_from_full) == len(written_at_k3)
    for (_, head, metadata), (_, expected_head, expected_metadata) in zip(delta_from_full, written_at_k3, strict=True):
        assert (head is None) == (expected_head is None)
        assert metadata.get("counters_since_delta_snapshot") == expected_metadata.get("counters_since_delta_snapshot")
        assert metadata["deerflow_checkpoint_channel_mode"] == "delta"


def test_a_thread_already_at_the_cadence_is_copied_unchanged(converted: dict[str, Any]) -> None:
    report: ConversionReport = converted["reports"]["delta"]
    by_id = {t.thread_id: t for t in report.threads}
    for thread_id in ("clean-delta-k3", "clean-delta-post-k3", "fork-update-k3", "interrupt-regenerate-k3"):
        assert by_id[thread_id].refused is None and by_id[thread_id].rewritten == 0, thread_id
    assert by_id["clean-delta-k10"].rewritten > 0 and by_id["clean-full"].rewritten == by_id["clean-full"].checkpoints


@pytest.mark.usefixtures("strict_msgpack")
@pytest.mark.parametrize(("output", "mode"), [("delta.db", "delta"), ("full.db", "full")], ids=["to-delta", "to-full"])
def test_every_thread_continues_the_same(converted: dict[str, Any], tmp_path: Path, output: str, mode: str) -> None:
    """One more turn on the source (in its writer's mode) and on the output (in the target mode) leaves the
    same state: the next turn reads its history whole in the converted store."""
    manifest: Manifest = converted["manifest"]
    shutil.copy(converted["source"], tmp_path / "source.db")
    shutil.copy(converted["dir"] / output, tmp_path / "output.db")
    source, target = _Reader(tmp_path / "source.db", manifest), _Reader(tmp_path / "output.db", manifest)
    continued = 0
    try:
        for thread in _readable(manifest, converted["reports"][mode]):
            config = run_config(thread.thread_id, thread.writers[-1].mode)
            if source.graph(thread, None, None).get_state(config).next:
                continue  # an interrupted head waits for a resume, not for new input
            turn = {"messages": [HumanMessage(content="one more turn", id="h-one-more")]}
            was = source.graph(thread, None, None).invoke(turn, config)
            now = target.graph(thread, mode, 3).invoke(turn, run_config(thread.thread_id, mode))
            assert now == was, thread.thread_id
            continued += 1
    finally:
        source.close()
        target.close()
    assert continued >= 18


def test_app_tables_are_copied_and_a_hostile_snapshot_is_refused(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """DeerFlow keeps its own tables in the same file: they are copied row for row. A snapshot that names
    os.system refuses its thread alone (CK105) and is copied as it is; every other thread converts."""
    source = tmp_path / "deerflow.db"
    shutil.copy(built_sqlite.db, source)
    with sqlite3.connect(source) as connection:
        connection.execute("CREATE TABLE threads_meta (thread_id TEXT PRIMARY KEY, title TEXT, data BLOB)")
        connection.executemany(
            "INSERT INTO threads_meta VALUES (?, ?, ?)", [(f"t{i}", f"title {i}", bytes([i])) for i in range(50)]
        )
        # A snapshot whose list holds an ext naming os.system, in place of clean-delta-k3's first snapshot.
        hostile = _hostile_snapshot_checkpoint(connection, "clean-delta-k3")
    before = _digest(source)
    report = _convert(source, tmp_path / "out.db", TargetMode.DELTA, 10)
    assert _digest(source) == before
    by_id = {t.thread_id: t for t in report.threads}
    assert by_id["clean-delta-k3"].refused is not None and "CK105" in by_id["clean-delta-k3"].refused
    assert by_id["clean-delta-k1"].refused is None and by_id["clean-full"].refused is None
    with sqlite3.connect(source) as a, sqlite3.connect(tmp_path / "out.db") as b:
        rows = "SELECT * FROM threads_meta ORDER BY thread_id"
        assert a.execute(rows).fetchall() == b.execute(rows).fetchall()
        stored = "SELECT checkpoint FROM checkpoints WHERE checkpoint_id = ?"
        assert a.execute(stored, (hostile,)).fetchone() == b.execute(stored, (hostile,)).fetchone()


def test_the_output_keeps_every_schema_object_and_setting_of_the_source(
    built_sqlite: BuiltDatabase, tmp_path: Path
) -> None:
    """The output is written fresh, not vacuumed: it must still hold what VACUUM INTO would carry over, every
    table (AUTOINCREMENT and its sequence, WITHOUT ROWID, a virtual table and its shadow tables, the planner's
    statistics), index, view and trigger as defined, every app row with its rowid, and the header settings."""
    source = tmp_path / "deerflow.db"
    shutil.copy(built_sqlite.db, source)
    with sqlite3.connect(source) as connection:
        connection.executescript(
            """
            PRAGMA user_version = 7;
            PRAGMA application_id = 424242;
            CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, thread_id TEXT, status TEXT);
            CREATE INDEX runs_by_thread ON runs (thread_id);
            CREATE TABLE feedback (run_id INTEGER, note TEXT, PRIMARY KEY (run_id, note)) WITHOUT ROWID;
            CREATE TABLE events (payload TEXT);
            CREATE VIEW open_runs AS SELECT id FROM runs WHERE status = 'open';
            CREATE TRIGGER runs_done AFTER UPDATE ON runs BEGIN INSERT INTO feedback VALUES (new.id, 'done'); END;
            CREATE VIRTUAL TABLE notes USING fts5(body);
            """
        )
        connection.executemany(
            "INSERT INTO runs (thread_id, status) VALUES (?, ?)", [(f"t{i}", "open") for i in range(9)]
        )
        connection.execute("DELETE FROM runs WHERE id IN (2, 5)")  # gaps the rowids must keep
        connection.executemany("INSERT INTO events VALUES (?)", [(f"e{i}",) for i in range(5)])
        connection.execute("DELETE FROM events WHERE payload = 'e1'")
        connection.executemany("INSERT INTO feedback VALUES (?, ?)", [(1, "fine"), (3, "slow")])
        connection.executemany("INSERT INTO notes VALUES (?)", [("a first note",), ("another note",)])
        connection.execute("ANALYZE")
    before = _digest(source)
    _convert(source, tmp_path / "out.db", TargetMode.DELTA, 10)
    assert _digest(source) == before
    schema = "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name"
    tables = ("runs", "feedback", "events", "sqlite_sequence", "sqlite_stat1", "notes_data", "notes_idx", "threads")
    with sqlite3.connect(source) as a, sqlite3.connect(tmp_path / "out.db") as b:
        assert a.execute(schema).fetchall() == b.execute(schema).fetchall()
        for pragma in ("user_version", "application_id", "page_size", "encoding", "auto_vacuum", "journal_mode"):
            assert a.execute(f"PRAGMA {pragma}").fetchone() == b.execute(f"PRAGMA {pragma}").fetchone(), pragma
        for table in tables:
            if a.execute("SELECT 1 FROM sqlite_schema WHERE name = ?", (table,)).fetchone() is None:
                continue
            keyed = table not in ("feedback", "notes_idx")  # WITHOUT ROWID: their keys order them
            rows = f"SELECT {'rowid, ' if keyed else ''}* FROM {table} ORDER BY 1, 2"
            assert a.execute(rows).fetchall() == b.execute(rows).fetchall(), table
        assert b.execute("SELECT rowid FROM notes WHERE notes MATCH 'another'").fetchall() == [(2,)]
        assert b.execute("SELECT * FROM open_runs").fetchall() == a.execute("SELECT * FROM open_runs").fetchall()
        assert b.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        b.execute("UPDATE runs SET status = 'done' WHERE id = 3")  # the trigger is live in the output
        assert b.execute("SELECT note FROM feedback WHERE run_id = 3 ORDER BY note").fetchall() == [
            ("done",),
            ("slow",),
        ]
        b.execute("INSERT INTO runs (thread_id, status) VALUES ('new', 'open')")
        assert b.execute("SELECT max(id) FROM runs").fetchone() == (10,)  # the sequence, not max(rowid) + 1
        assert (
            a.execute("SELECT count(*) FROM checkpoints").fetchone()
            == b.execute("SELECT count(*) FROM checkpoints").fetchone()
        )


def test_converting_in_parallel_writes_what_one_process_writes(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """Thread ranges converted by three processes, each keeping its rows apart, make the same output and report
    as one process, a refused thread included."""
    source = tmp_path / "deerflow.db"
    shutil.copy(built_sqlite.db, source)
    with sqlite3.connect(source) as connection:
        _hostile_snapshot_checkpoint(connection, "clean-delta-k3")
    reports = {}
    for jobs in (1, 3):
        choice = DatabaseChoice(SqliteTarget(source), "test")
        request = ConvertRequest(
            choice, ConversionSettings(TargetMode.DELTA, 10), tmp_path / f"out{jobs}.db", jobs=jobs
        )
        reports[jobs] = convert(request)
    assert [dataclasses.asdict(t) for t in reports[1].threads] == [dataclasses.asdict(t) for t in reports[3].threads]
    assert reports[3].refused
    rows = "SELECT rowid, * FROM checkpoints ORDER BY rowid"
    with sqlite3.connect(tmp_path / "out1.db") as one, sqlite3.connect(tmp_path / "out3.db") as three:
        assert one.execute(rows).fetchall() == three.execute(rows).fetchall()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch database is left


def _hostile_snapshot_checkpoint(connection: sqlite3.Connection, thread_id: str) -> str:
    import msgspec

    from deerflow_ckpt.analysis.conversion import ext_value, snapshot_value

    checkpoint_id, data = connection.execute(
        "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
        "AND instr(checkpoint, X'c70107') = 0 ORDER BY checkpoint_id",
        (thread_id,),
    ).fetchall()[5]
    values = msgspec.msgpack.decode(data, type=dict[str, msgspec.Raw])
    channel = msgspec.msgpack.decode(values["channel_values"], type=dict[str, msgspec.Raw])
    call = ext_value(0, msgspec.msgpack.encode(["os", "system", "echo pwned"]))
    channel["messages"] = msgspec.Raw(snapshot_value(b"\x91" + call))
    values["channel_values"] = msgspec.Raw(msgspec.msgpack.encode(channel))
    connection.execute(
        "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
        (msgspec.msgpack.encode(values), thread_id, checkpoint_id),
    )
    return str(checkpoint_id)


def test_cli_refuses_to_write_where_it_reads(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    source = tmp_path / "deerflow.db"
    shutil.copy(built_sqlite.db, source)
    onto = run_ckpt("convert", "--db", str(source), "--to", "full", "-o", str(source))
    assert onto.exit_code == 2 and "is the source database" in onto.stderr
    (tmp_path / "taken.db").write_bytes(b"keep me")
    taken = run_ckpt("convert", "--db", str(source), "--to", "full", "-o", str(tmp_path / "taken.db"))
    assert taken.exit_code == 2 and "exists" in taken.stderr
    assert (tmp_path / "taken.db").read_bytes() == b"keep me"
    done = run_ckpt(
        "convert", "--db", str(source), "--to", "delta", "--snapshot-frequency", "10", "-o", str(tmp_path / "new.db")
    )
    assert done.exit_code == 0, done.stderr
    assert "delta mode at K=10" in done.stdout and "refused: thread fault-ck105-pickle" in done.stdout
    as_json = run_ckpt(
        "convert", "--db", str(source), "--to", "full", "-o", str(tmp_path / "full.db"), "--format", "json"
    )
    document = json.loads(as_json.stdout)
    assert document["schema_version"] == 1 and document["mode"] == "full"
    assert (
        document["totals"]["converted_threads"] + document["totals"]["refused_threads"] == document["totals"]["threads"]
    )
    assert not list(tmp_path.glob(".*ckpt-tmp*"))


def _invoke_turns(path: Path, manifest: Manifest, thread_id: str, graph: str, turns: int, prefix: str) -> None:
    backend = SqliteBackend(str(path), None)
    try:
        factory = GraphFactory(backend.plain, TextPool(manifest.seed, manifest.message_bytes))
        compiled = factory.get(GraphSpec(graph, "delta", 3))
        for turn in range(turns):
            human = HumanMessage(content=f"{prefix} {turn}", id=f"h-{prefix}-{turn}")
            compiled.invoke({"messages": [human]}, run_config(thread_id, "delta"))
    finally:
        backend.close()


@pytest.mark.usefixtures("strict_msgpack")
def test_catch_up_converts_only_what_the_source_gained(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """A second run converts the threads that gained checkpoints and the new ones, carries the rest over, and
    copies the app tables afresh; the caught-up output reads every checkpoint of the changed threads the same."""
    manifest = built_sqlite.manifest
    source, output = tmp_path / "deerflow.db", tmp_path / "converted.db"
    shutil.copy(built_sqlite.db, source)
    with sqlite3.connect(source) as connection:
        connection.execute("CREATE TABLE threads_meta (thread_id TEXT PRIMARY KEY, title TEXT)")
    first = _convert(source, output, TargetMode.DELTA, 3)
    _invoke_turns(source, manifest, "clean-delta-k1", "respond", 2, "later")
    _invoke_turns(source, manifest, "brand-new-thread", "respond", 3, "new")
    with sqlite3.connect(source) as connection:
        connection.execute("INSERT INTO threads_meta VALUES ('brand-new-thread', 'made after the first run')")
    request = ConvertRequest(
        DatabaseChoice(SqliteTarget(source), "test"), ConversionSettings(TargetMode.DELTA, 3), output, catch_up=True
    )
    caught = convert(request)
    assert sorted(t.thread_id for t in caught.threads) == ["brand-new-thread", "clean-delta-k1"]
    assert caught.carried_over == len(first.threads) - 1
    with sqlite3.connect(output) as connection:
        assert connection.execute("SELECT title FROM threads_meta").fetchall() == [("made after the first run",)]
    reader_source, reader_output = _Reader(source, manifest), _Reader(output, manifest)
    try:
        for thread_id in ("clean-delta-k1", "brand-new-thread"):
            thread = ThreadRecord(thread_id, "test", "sqlite", [Writer("delta", 3, "respond")], 0)
            ids = _checkpoint_ids(source, thread_id)
            assert len(ids) >= 9
            for checkpoint_id in ids:
                was = reader_source.state(thread, checkpoint_id, None, None)
                assert reader_output.state(thread, checkpoint_id, "delta", 3) == was, (thread_id, checkpoint_id)
    finally:
        reader_source.close()
        reader_output.close()
    assert _findings(output) <= _findings(source)


def test_a_live_writer_gets_a_consistent_copy(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """Turns written while convert copies the source: the output holds a consistent state (a prefix of the
    writer's turns, nothing torn), and the source stays a sound database written only by its writer."""
    import threading

    manifest = built_sqlite.manifest
    source = tmp_path / "deerflow.db"
    shutil.copy(built_sqlite.db, source)
    stop = threading.Event()

    def write() -> None:
        turn = 0
        while not stop.is_set() and turn < 200:
            _invoke_turns(source, manifest, "live-thread", "respond", 1, f"live{turn}")
            turn += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        outputs = []
        for round_ in range(3):
            outputs.append(tmp_path / f"out{round_}.db")
            result = run_ckpt(
                "convert", "--db", str(source), "--to", "delta", "--snapshot-frequency", "3", "-o", str(outputs[-1]),
                process=True, timeout=300,
            )  # fmt: skip
            assert result.exit_code == 0, result.stderr
    finally:
        stop.set()
        writer.join()
    with sqlite3.connect(source) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    live = 0
    for output in outputs:
        assert _findings(output) <= _findings(source)
        with sqlite3.connect(output) as connection:
            live += connection.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 'live-thread'").fetchone()[0]
    assert live > 0, "no output holds a turn the live writer wrote"


# DeerFlow's history cache keys, restated from bytedance/deer-flow f1f4af99b,
# backend/packages/harness/deerflow/runtime/checkpoint_cache/provider.py lines 25-61 (the credential-free
# Postgres identity, the sha256 of the database identity, the ckpt-hist:v1: prefix) and base.py lines 43-45
# (a thread's keys all start <prefix>:<thread_id>:).
def _deerflow_prefix(identity: str) -> str:
    return "ckpt-hist:v1:" + hashlib.sha256(identity.encode()).hexdigest()[:12]


@pytest.mark.parametrize(
    ("url", "identity"),
    [
        ("postgresql://deer:s3cret@db.internal:6543/flow", "db.internal:6543/flow"),
        ("postgresql+psycopg://deer:s3cret@db.internal/flow?sslmode=require", "db.internal:5432/flow"),
        ("postgresql://deer@/flow", "localhost:5432/flow"),
        ("postgresql://deer:pw@[::1]:5433/flow", "::1:5433/flow"),
    ],
)
def test_history_cache_prefix_is_derived_as_deerflow_derives_it(url: str, identity: str) -> None:
    from deerflow_ckpt.config.history_cache import history_cache

    found = history_cache({"type": "redis"}, "postgres", url, "app", None)
    assert found is not None and found.key_prefix == _deerflow_prefix(f"postgres:{identity}:app")
    assert history_cache({"type": "memory"}, "postgres", url, "app", None) is None
    assert history_cache({"type": "redis", "max_entries": 0}, "postgres", url, "app", None) is None
    explicit = history_cache({"type": "redis", "key_prefix": "mine"}, "postgres", url, "app", None)
    assert explicit is not None and explicit.key_prefix == "mine"


def test_the_report_names_the_history_cache_to_purge(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(built_sqlite.db, data / "deerflow.db")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"database:\n  backend: sqlite\n  sqlite_dir: {data}\n  checkpoint_channel_mode: delta\n"
        "  checkpoint_delta:\n    snapshot_frequency: 3\n  checkpoint_cache:\n    type: redis\n"
    )
    result = run_ckpt("convert", "--config", str(config), "--to", "full", "-o", str(tmp_path / "full.db"))
    assert result.exit_code == 0, result.stderr
    prefix = _deerflow_prefix(f"sqlite:{(data / 'deerflow.db').resolve()}")
    assert f"key prefix {prefix}" in result.stdout and f"'{prefix}:*'" in result.stdout
    plain = run_ckpt("convert", "--db", str(data / "deerflow.db"), "--to", "full", "-o", str(tmp_path / "f2.db"))
    assert plain.exit_code == 0 and "history cache" not in plain.stdout


@pytest.mark.usefixtures("strict_msgpack")
def test_odd_thread_ids_convert_and_read_the_same(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """Thread ids with quotes, a newline, ESC and non-ASCII convert like any other and keep their rows."""
    manifest = built_sqlite.manifest
    source = tmp_path / "deerflow.db"
    shutil.copy(built_sqlite.db, source)
    odd = 'it\'s "odd"\n\x1b[31m ü 🦌'
    with sqlite3.connect(source) as connection:
        for table in ("checkpoints", "writes"):
            connection.execute(f"UPDATE {table} SET thread_id = ? WHERE thread_id = 'clean-full'", (odd,))
    report = _convert(source, tmp_path / "out.db", TargetMode.DELTA, 3)
    (converted,) = [t for t in report.threads if t.thread_id == odd]
    assert converted.refused is None and converted.rewritten == converted.checkpoints
    thread = next(t for t in manifest.threads if t.thread_id == "clean-full")
    thread = ThreadRecord(odd, thread.scenario, "sqlite", thread.writers, thread.turns)
    was, now = _Reader(source, manifest), _Reader(tmp_path / "out.db", manifest)
    try:
        for checkpoint_id in _checkpoint_ids(source, odd):
            assert now.state(thread, checkpoint_id, "delta", 3) == was.state(thread, checkpoint_id, None, None)
    finally:
        was.close()
        now.close()
    text = run_ckpt("convert", "--db", str(source), "--to", "full", "-o", str(tmp_path / "f.db"))
    assert text.exit_code == 0 and "\x1b" not in text.stdout + text.stderr


def test_sizes_land_on_the_what_if(tmp_path: Path) -> None:
    """Full-mode threads written by real graphs, converted to delta at K=10: the snapshots stored measure what
    the what-if predicted for them, within 5% (exactly, for these append-only threads)."""
    from fixtures.dbbuilder.bulk import build_bulk_sqlite

    source = tmp_path / "full.db"
    build_bulk_sqlite(source, threads=12, turns=30, cadence=None, message_bytes=300, jobs=1, mode="full")
    report = _convert(source, tmp_path / "delta.db", TargetMode.DELTA, 10)
    assert len(report.converted) == 12 and all(t.modelled_exactly for t in report.converted)
    stored = sum(t.stored_value_bytes for t in report.converted)
    predicted = sum(t.predicted_value_bytes for t in report.converted)
    assert abs(stored - predicted) <= 0.05 * predicted
    assert report.tables_after["checkpoints"] < report.tables_before["checkpoints"] / 3


def test_spliced_metadata_is_what_json_writes(built_sqlite: BuiltDatabase) -> None:
    """The fast path that splices the counters and the marker gives the bytes the JSON path gives, on every
    metadata value of the fixture database, in both modes, for every kind of counters."""
    from deerflow_ckpt.store.rewrite import converted_metadata, converted_metadata_bytes, metadata_bytes, metadata_dict

    with sqlite3.connect(built_sqlite.db) as connection:
        rows = [row[0] for row in connection.execute("SELECT metadata FROM checkpoints")]
    spliced = 0
    for raw in rows:
        try:
            value = metadata_dict(raw)
        except Exception:
            continue  # the CK104 fault rows: a conversion refuses their threads
        for delta in (True, False):
            for counters in (None, (0, 1), (13, 500)):
                expected = metadata_bytes(converted_metadata(value, delta, counters), raw)
                assert converted_metadata_bytes(raw, delta, counters) == expected, (raw, delta, counters)
                spliced += 1
    assert spliced >= 6000


@pytest.mark.usefixtures("strict_msgpack")
def test_a_branch_from_before_the_first_message_is_refused_for_delta(tmp_path: Path) -> None:
    """A new input run from a thread's first checkpoint (before any message) is a branch LangGraph snapshots by
    giving the channel a new version; a conversion keeps versions, so --to delta refuses it (a delta read there
    would replay the other branch's first message), while --to full converts it and reads the same."""
    from fixtures.dbbuilder.manifest import Manifest as BuiltManifest

    source = tmp_path / "full.db"
    backend = SqliteBackend(str(source), None)
    try:
        graph = GraphFactory(backend.plain, TextPool(0, 64)).get(GraphSpec("respond", "full", None))
        graph.invoke({"messages": [HumanMessage(content="first", id="h1")]}, run_config("edited", "full"))
        first = [
            s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(run_config("edited", "full"))
        ]
        config = run_config("edited", "full", first[-1])
        graph.invoke({"messages": [HumanMessage(content="edited", id="h1b")]}, config)
    finally:
        backend.close()
    delta = _convert(source, tmp_path / "delta.db", TargetMode.DELTA, 10)
    (thread,) = delta.threads
    assert thread.refused is not None and "before the messages channel has a version" in thread.refused
    full = _convert(source, tmp_path / "full-again.db", TargetMode.FULL)
    assert full.threads[0].refused is None
    manifest = BuiltManifest.__new__(BuiltManifest)
    manifest.seed, manifest.message_bytes = 0, 64
    record = ThreadRecord("edited", "test", "sqlite", [Writer("full", None, "respond")], 2)
    was, now = _Reader(source, manifest), _Reader(tmp_path / "full-again.db", manifest)
    try:
        for checkpoint_id in _checkpoint_ids(source, "edited"):
            assert now.state(record, checkpoint_id, "full", None) == was.state(record, checkpoint_id, None, None)
    finally:
        was.close()
        now.close()


def test_a_key_nested_in_user_metadata_is_left_to_json() -> None:
    """The splice touches only the keys where the savers put them: the same names nested in user metadata, or
    the marker not last, go through JSON and come out as JSON writes them."""
    from deerflow_ckpt.store.rewrite import converted_metadata, converted_metadata_bytes, metadata_bytes, metadata_dict

    nested = [
        b'{"source": "loop", "step": 1, "parents": {}, "run": {"deerflow_checkpoint_channel_mode": "delta"}}',
        b'{"source": "loop", "parents": {}, "user": {"counters_since_delta_snapshot": {"messages": [1, 2]}}, '
        b'"deerflow_checkpoint_channel_mode": "delta"}',
        b'{"deerflow_checkpoint_channel_mode": "delta", "source": "loop", "parents": {}, '
        b'"counters_since_delta_snapshot": {"messages": [1, 2]}}',
        b'{"source": "loop", "parents": {"": "1f0"}, "counters_since_delta_snapshot": {"messages": [1, 2]}, '
        b'"x": "\\u00e9 \\"parents\\": {", "deerflow_checkpoint_channel_mode": "delta"}',
    ]
    for raw in nested:
        for delta in (True, False):
            for counters in (None, (3, 4)):
                expected = metadata_bytes(converted_metadata(metadata_dict(raw), delta, counters), raw)
                assert converted_metadata_bytes(raw, delta, counters) == expected, (raw, delta, counters)


def test_catch_up_checks_what_it_continues(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """--catch-up continues only a conversion ckpt recorded, at the same mode and K; a thread deleted from the
    source is gone from the caught-up output; writes made to the output since make it refuse; a new output
    refuses companion files SQLite would apply to it."""
    source, output = tmp_path / "deerflow.db", tmp_path / "converted.db"
    shutil.copy(built_sqlite.db, source)
    _convert(source, output, TargetMode.DELTA, 3)
    request = ConvertRequest(
        DatabaseChoice(SqliteTarget(source), "test"), ConversionSettings(TargetMode.DELTA, 10), output, catch_up=True
    )
    with pytest.raises(OutputError, match="at K=3"):
        convert(request)
    with sqlite3.connect(source) as connection:
        for table in ("checkpoints", "writes"):
            connection.execute(f"DELETE FROM {table} WHERE thread_id = 'clean-delta-k1'")
    caught = convert(dataclasses.replace(request, settings=ConversionSettings(TargetMode.DELTA, 3)))
    assert caught.threads == [] and "fault-ck105-pickle" in caught.still_refused
    with sqlite3.connect(output) as connection:
        assert not connection.execute("SELECT 1 FROM checkpoints WHERE thread_id = 'clean-delta-k1'").fetchall()
    (tmp_path / "converted.db-wal").write_bytes(b"written since")
    with pytest.raises(OutputError, match="no longer the previous run's output"):
        convert(dataclasses.replace(request, settings=ConversionSettings(TargetMode.DELTA, 3)))
    (tmp_path / "converted.db-wal").unlink()
    record = tmp_path / "converted.db.ckpt-convert.json"
    record.unlink()
    with pytest.raises(OutputError, match="no record of a ckpt conversion"):
        convert(dataclasses.replace(request, settings=ConversionSettings(TargetMode.DELTA, 3)))
    (tmp_path / "new.db-wal").write_bytes(b"")
    with pytest.raises(OutputError, match="SQLite would apply it"):
        _convert(source, tmp_path / "new.db", TargetMode.FULL)


def test_sigterm_leaves_no_output_and_no_scratch(tmp_path: Path) -> None:
    """SIGTERM mid-conversion: exit 143, no output file, no scratch copy left beside it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from fixtures.dbbuilder.bulk import build_bulk_sqlite

    source = tmp_path / "full.db"
    build_bulk_sqlite(source, threads=60, turns=30, cadence=None, message_bytes=400, jobs=1, mode="full")
    out = tmp_path / "out" / "converted.db"
    out.parent.mkdir()
    command = [sys.executable, "-m", "deerflow_ckpt", "convert", "--db", str(source), "--to", "delta", "-o", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(out.parent.iterdir()):
        time.sleep(0.02)
    time.sleep(0.2)
    os.kill(process.pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert list(out.parent.iterdir()) == []
