"""What attacking ckpt's readers found (Hardening II): a crafted row or value, each tested the way the attack
was made (docs/security.md, "Security model and limits").

3: one thread id stored as TEXT that is not UTF-8 (`CAST(x'..' AS TEXT)`, or any sqlite3 client's bind) made
verify-shape, inspect summary, inspect thread and plan retention exit 2, every other thread's findings unseen.
SQLite only: a Postgres text value is always valid UTF-8 (there such a name, from argv, names no thread).
11: a value of many data URIs made inspect storage's base64 peek quadratic (each signature hit checked against
every URI before it).
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deerflow_ckpt.store.base64_peek import (
    _BASE64_RUN,
    _DATA_URI,
    MIN_RUN_BYTES,
    SIGNATURES,
    Base64File,
    _confirms,
    _string_length,
    find_base64_files,
)
from deerflow_ckpt.store.history import SqliteHistoryReader
from deerflow_ckpt.store.records import key_text
from deerflow_ckpt.store.row_keys import lineage_rows
from deerflow_ckpt.store.selection import ThreadSelection
from deerflow_ckpt.store.source import SqliteTarget
from deerflow_ckpt.store.sqlite import SqliteCheckpointReader
from tests.cli import CkptRun, run_ckpt
from tests.conftest import BuiltDatabase

# -- 11: inspect storage's base64 peek is n log n in the data URIs of a value ---------------------------------


def _quadratic_reference(data: bytes, msgpack: bool = True) -> list[Base64File]:
    """find_base64_files as it was before the fix (every hit against every data URI's span): the reference."""
    found: list[Base64File] = []
    covered: list[tuple[int, int]] = []
    for match in _DATA_URI.finditer(data):
        covered.append((match.start(2), match.end(2)))
        if len(match.group(2)) >= MIN_RUN_BYTES:
            found.append((f"data-uri {match.group(1).decode()}", match.start(2), len(match.group(2))))
    for signature, kind in SIGNATURES:
        start = data.find(signature)
        while start >= 0:
            if not any(low <= start < high for low, high in covered):
                length = _string_length(data, start) if msgpack else (len(data) if start == 0 else None)
                if length is not None:
                    matched = _BASE64_RUN.match(data, start, start + length)
                    size = 0 if matched is None else matched.end() - start
                    if size >= MIN_RUN_BYTES and size == length and _confirms(data[start : start + 24], kind):
                        found.append((kind, start, size))
            start = data.find(signature, start + 1)
    return found


def _msgpack_str(text: bytes) -> bytes:
    """`text` behind the msgpack str header the saver writes for its length."""
    if len(text) < 256:
        return b"\xd9" + bytes([len(text)]) + text
    return (
        b"\xda" + len(text).to_bytes(2, "big") if len(text) < 65536 else b"\xdb" + len(text).to_bytes(4, "big")
    ) + text


_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
# Pieces a stored value is made of: data URIs (short, long, empty, cut), bare base64 strings behind their msgpack
# header, signatures in plain text, and the noise between them.
_PIECES = st.sampled_from(
    [
        b"data:image/png;base64," + _PNG,
        b"data:image/png;base64," + _PNG[:40],
        b"data:image/jpeg;base64,",
        b"data:text/plain;base64," + _PNG[:1500] + b"==",
        _msgpack_str(_PNG),
        _msgpack_str(_PNG[:900]),
        _msgpack_str(b"/9j/" + _PNG[4:]),
        _msgpack_str(b"UklGR" + _PNG[5:]),
        b"iVBORw0KGgo",
        b"JVBERi0 in text",
        b" ",
        b"data:",
    ]
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.one_of(_PIECES, st.binary(max_size=8)), max_size=30), msgpack=st.booleans())
def test_the_peek_finds_what_the_quadratic_peek_found(pieces: list[bytes], msgpack: bool) -> None:
    data = b"".join(pieces)
    assert find_base64_files(data, msgpack) == _quadratic_reference(data, msgpack)


def _add_data_uri_write(path: Path, count: int) -> int:
    """One messages write through the real SqliteSaver whose message holds `count` PNG data URIs, every
    100th long enough to be reported: how many of them the peek must report."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver

    images = []
    for number in range(count):
        # A PNG's magic, then bytes of its own: each image has its own digest.
        image = b"\x89PNG\r\n\x1a\n" + number.to_bytes(4, "big") * (200 if number % 100 == 0 else 10)
        images.append(f"![image {number}](data:image/png;base64,{base64.b64encode(image).decode()})")
    connection = sqlite3.connect(path, check_same_thread=False)
    try:
        (thread_id, checkpoint_id) = connection.execute(
            "SELECT thread_id, max(checkpoint_id) FROM checkpoints WHERE thread_id = 'clean-delta-k1'"
        ).fetchone()
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
        saver = SqliteSaver(connection)
        saver.put_writes(config, [("messages", [HumanMessage(content=" ".join(images))])], "task-data-uris")  # type: ignore[arg-type]
        connection.commit()
    finally:
        connection.close()
    return len(range(0, count, 100))


def test_many_data_uris_in_one_value_are_peeked_in_time(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """40,000 data URIs in one write took 35 s (200,000: killed at 300 s); now well under a second of peeking."""
    path = tmp_path / "data-uris.db"
    shutil.copyfile(built_sqlite.path, path)
    reported = _add_data_uri_write(path, 40_000)
    started = time.monotonic()
    result = run_ckpt("inspect", "storage", "--db", str(path), "--format", "json")
    elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.stderr
    assert elapsed < 20, f"inspect storage took {elapsed:.1f} s"
    large = [value for value in json.loads(result.stdout)["large_values"] if value["thread_id"] == "clean-delta-k1"]
    # Every long URI, each once (its own digest), in the write it was put in; the short ones are not reported.
    assert len(large) == reported == len({value["digest"] for value in large})
    assert {(v["looks_like"], v["stored_in"], v["channel"], v["copies"]) for v in large} == {
        ("data-uri image/png", "writes", "messages", 1)
    }


# -- 3: thread ids that are not UTF-8 are read, kept apart, judged and named (SQLite) ---------------------------

# The attack's ids as ckpt reads them (surrogateescape), and as its reports show them.
NOT_UTF8 = "f\udcff\udc80"  # CAST(x'66ff80' AS TEXT), a clean thread
NOT_UTF8_SHOWN = "f\\xff\\x80"
LONE_FF = "\udcff"  # CAST(x'ff' AS TEXT), a thread with its own CK105
# Stored as SQL spells them, in place of these fixture threads: the two above, and beside them the keys they must
# not merge with: the BLOB x'ff', and the text backslash-x-f-f (which is what the report shows for LONE_FF).
RENAMED = {
    "clean-delta-k3": "CAST(x'66ff80' AS TEXT)",
    "fault-ck105-foreign-ext": "CAST(x'ff' AS TEXT)",
    "clean-delta-k2": "x'ff'",
    "clean-delta-k1": "'\\xff'",
}
# Any byte that is not UTF-8, or a surrogate, reaching stdout fails the run instead of passing unseen.
STRICT = {"PYTHONIOENCODING": "utf-8:strict"}
PATHS = {"compiled": None, "python": "0"}


@pytest.fixture
def not_utf8_db(built_sqlite: BuiltDatabase, tmp_path: Path) -> Path:
    path = tmp_path / "not-utf8.db"
    shutil.copyfile(built_sqlite.path, path)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        for thread_id, stored in RENAMED.items():
            for table in ("checkpoints", "writes"):
                connection.execute(f"UPDATE {table} SET thread_id = {stored} WHERE thread_id = ?", (thread_id,))
        connection.commit()
        query = (
            "SELECT count(*) FROM checkpoints WHERE thread_id = CAST(x'66ff80' AS TEXT) AND typeof(thread_id) = 'text'"
        )
        assert connection.execute(query).fetchone() == (36,)  # stored as TEXT, its bytes as given
    return path


def _threads_in(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return int(connection.execute("SELECT count(DISTINCT thread_id) FROM checkpoints").fetchone()[0])


def _run(native: str | None, *args: str) -> CkptRun:
    # A process of its own: CKPT_NATIVE is read once, at import; argv carries the id's raw bytes.
    return run_ckpt(*args, env={"CKPT_NATIVE": native, **STRICT}, process=True, timeout=300)


@pytest.mark.slow
def test_verify_shape_judges_every_thread_beside_ids_that_are_not_utf8(not_utf8_db: Path) -> None:
    reports = {}
    for path, native in PATHS.items():
        result = _run(native, "verify-shape", "--db", str(not_utf8_db), "--format", "json", "-v")
        assert result.exit_code == 1, result.stderr  # findings, not exit 2
        assert ("compiled SQLite reader" in result.stderr) == (path == "compiled")
        report = json.loads(result.stdout)
        # Every thread read, each key its own: the BLOB x'ff' and the text "\\xff" beside LONE_FF.
        assert report["summary"]["threads"] == _threads_in(not_utf8_db) == 43
        ck105 = {finding["thread_id"] for finding in report["findings"] if finding["rule"] == "CK105"}
        assert ck105 == {"fault-ck105-pickle", LONE_FF}
        reports[path] = result.stdout
        text = _run(native, "verify-shape", "--db", str(not_utf8_db))
        assert text.exit_code == 1, text.stderr
        assert "CK105 error thread \\xff checkpoint" in text.stdout and "thread fault-ck105-pickle" in text.stdout
        for output_format in ("sarif", "github"):
            assert _run(native, "verify-shape", "--db", str(not_utf8_db), "--format", output_format).exit_code == 1
    assert reports["compiled"] == reports["python"]


@pytest.mark.slow
def test_inspect_reads_and_names_ids_that_are_not_utf8(not_utf8_db: Path) -> None:
    db = ("--db", str(not_utf8_db))
    for native in PATHS.values():
        summary = _run(native, "inspect", "summary", *db, "--format", "json")
        assert summary.exit_code == 0, summary.stderr
        assert json.loads(summary.stdout)["summary"]["threads"] == 43
        assert _run(native, "inspect", "summary", *db).exit_code == 0
        # Named by its bytes (the shell's $'f\\xff\\x80'): read alone, shown escaped, its lists proved.
        named = _run(native, "inspect", "thread", NOT_UTF8, "--deep", *db)
        assert named.exit_code == 0, named.stderr
        assert f"Thread {NOT_UTF8_SHOWN}  namespace" in named.stdout and "36 checkpoints" in named.stdout
        assert "proof: all 8 stored lists equal the replay of their writes" in named.stdout
        as_json = _run(native, "inspect", "thread", NOT_UTF8, LONE_FF, "fault-ck105-pickle", *db, "--format", "json")
        assert as_json.exit_code == 0, as_json.stderr
        threads = {thread["thread_id"]: thread["checkpoints"] for thread in json.loads(as_json.stdout)["threads"]}
        # b'\\xff' as TEXT is its own 21 checkpoints: not merged with the BLOB x'ff' or the text "\\xff" (36 each).
        assert threads == {NOT_UTF8: 36, LONE_FF: 21, "fault-ck105-pickle": 21}


# The other key columns a script names rows by, made invalid UTF-8 in three more threads.
OTHER_KEYS = [
    f"UPDATE {table} SET checkpoint_ns = CAST(x'6e73ff' AS TEXT) WHERE thread_id = 'clean-full'"
    for table in ("checkpoints", "writes")
] + [
    "UPDATE writes SET task_id = task_id || CAST(x'fe' AS TEXT) WHERE thread_id = 'clean-delta-k10'",
    "UPDATE writes SET checkpoint_id = checkpoint_id || CAST(x'fd' AS TEXT) WHERE thread_id = 'old-fork-k3'",
    "UPDATE checkpoints SET checkpoint_id = checkpoint_id || CAST(x'fd' AS TEXT), "
    "parent_checkpoint_id = parent_checkpoint_id || CAST(x'fd' AS TEXT) WHERE thread_id = 'old-fork-k3'",
]


@pytest.mark.slow
def test_plan_retention_deletes_exactly_the_planned_rows_of_ids_that_are_not_utf8(
    not_utf8_db: Path, tmp_path: Path
) -> None:
    with contextlib.closing(sqlite3.connect(not_utf8_db)) as connection:
        for statement in OTHER_KEYS:
            connection.execute(statement)
        connection.commit()
    db = ("--db", str(not_utf8_db), "--keep-newest", "3")
    scripts = []
    for native in PATHS.values():
        plan = _run(native, "plan", "retention", *db, "--format", "json")
        assert plan.exit_code == 0, plan.stderr
        lineages = {
            (lineage["thread_id"], lineage["checkpoint_ns"]): lineage for lineage in json.loads(plan.stdout)["lineages"]
        }
        for key in ((NOT_UTF8, ""), (LONE_FF, ""), ("clean-full", "ns\udcff"), ("clean-delta-k10", "")):
            assert lineages[key]["skipped"] is None and lineages[key]["deleted"], key
        assert all(checkpoint_id.endswith("\udcfd") for checkpoint_id in lineages[("old-fork-k3", "")]["deleted"])
        # The BLOB key is refused by name, never guessed at.
        assert (
            lineages[("x'ff'", "")]["skipped"] == "its keys are not all text: a script could not name its rows exactly"
        )
        text = _run(native, "plan", "retention", *db)
        assert text.exit_code == 0 and NOT_UTF8_SHOWN in text.stdout and "left whole: thread x'ff'" in text.stdout
        script = _run(native, "plan", "retention", *db, "--format", "sql")
        assert script.exit_code == 0, script.stderr
        assert "CAST(x'66ff80' AS TEXT)" in script.stdout and "CAST(x'ff' AS TEXT)" in script.stdout
        scripts.append(script.stdout)
    assert scripts[0].split("\n", 2)[2] == scripts[1].split("\n", 2)[2]  # the same but for the time planned
    applied = tmp_path / "applied.db"
    shutil.copyfile(not_utf8_db, applied)
    done = subprocess.run(["sqlite3", str(applied)], input=scripts[0], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    # Every key as stored: its bytes and its storage class (the BLOB x'ff' and the TEXT x'ff' share their bytes).
    planned = {
        (_stored(thread_id), "text", _stored(ns), _stored(checkpoint_id))
        for (thread_id, ns), lineage in lineages.items()
        if lineage["skipped"] is None
        for checkpoint_id in lineage["deleted"]
    }
    assert {key[0] for key in planned} >= {b"f\xff\x80", b"\xff", b"clean-full", b"clean-delta-k10", b"old-fork-k3"}
    before, after = _rows(not_utf8_db), _rows(applied)
    assert after["checkpoints"] <= before["checkpoints"] and after["writes"] <= before["writes"]
    assert before["checkpoints"] - after["checkpoints"] == planned
    # Each gone checkpoint's write rows went with it, and no other (task ids ending in \xfe among them).
    gone_writes = before["writes"] - after["writes"]
    assert {row[:4] for row in gone_writes} <= planned
    assert not {row for row in after["writes"] if row[:4] in planned}
    assert any(row[4].endswith(b"\xfe") for row in gone_writes)


def _stored(thread_id: str) -> bytes:
    return thread_id.encode("utf-8", "surrogateescape")


def _rows(path: Path) -> dict[str, set[tuple[object, ...]]]:
    """Every checkpoint's and write row's key as stored bytes, with the thread id's storage class."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.text_factory = bytes
        checkpoints = "SELECT thread_id, typeof(thread_id), checkpoint_ns, checkpoint_id FROM checkpoints"
        writes = "SELECT thread_id, typeof(thread_id), checkpoint_ns, checkpoint_id, task_id, idx FROM writes"
        decoded = lambda row: (row[0], row[1].decode(), *row[2:])  # noqa: E731
        return {
            "checkpoints": {decoded(row) for row in connection.execute(checkpoints)},
            "writes": {decoded(row) for row in connection.execute(writes)},
        }


def _expected_threads(path: Path, condition: str) -> list[str]:
    """The thread keys SQLite itself finds under `condition`, in its order, as the readers show them."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.text_factory = bytes
        query = f"SELECT DISTINCT thread_id, typeof(thread_id) FROM checkpoints WHERE {condition} ORDER BY thread_id"
        return [
            key.decode("utf-8", "surrogateescape") if kind == b"text" else key_text(key)
            for key, kind in connection.execute(query)
        ]


def test_both_readers_select_keys_that_are_not_utf8_exactly(not_utf8_db: Path) -> None:
    """A thread named by such a key, a --since list holding it (and a BLOB key), and share bounds at it."""
    target = SqliteTarget(not_utf8_db)
    compiled, python = SqliteCheckpointReader(target), SqliteCheckpointReader(target, compiled=False)
    assert compiled.python_reader_because() is None  # the compiled reader runs, not a fallback
    since = compiled.threads_since("0")
    assert {NOT_UTF8, LONE_FF, b"\xff", "\\xff"} <= set(since) and len(since) == 43
    selections = {
        "thread_id = CAST(x'66ff80' AS TEXT)": ThreadSelection(thread_id=NOT_UTF8),
        "thread_id IN (CAST(x'66ff80' AS TEXT), CAST(x'ff' AS TEXT), x'ff', 'fault-ck105-pickle')": ThreadSelection(
            thread_ids=(NOT_UTF8, LONE_FF, b"\xff", "fault-ck105-pickle")  # type: ignore[arg-type]
        ),
        "thread_id >= CAST(x'ff' AS TEXT)": ThreadSelection(lower=LONE_FF),
        "thread_id >= CAST(x'66ff80' AS TEXT) AND thread_id < CAST(x'ff' AS TEXT)": ThreadSelection(
            lower=NOT_UTF8, upper=LONE_FF
        ),
        "thread_id < CAST(x'66ff80' AS TEXT)": ThreadSelection(upper=NOT_UTF8),
        "1": ThreadSelection(thread_ids=tuple(since)),
    }
    for condition, selection in selections.items():
        expected = _expected_threads(not_utf8_db, condition)
        assert expected, condition
        read = [(lineage.thread_id, lineage.records) for lineage in compiled.lineages(selection)]
        assert read == [(lineage.thread_id, lineage.records) for lineage in python.lineages(selection)]
        # A thread's lineages (its namespaces) come together: each thread once, in SQLite's order.
        assert list(dict.fromkeys(thread for thread, _ in read)) == expected
        assert list(dict.fromkeys(rows.key[0] for rows in lineage_rows(target, selection))) == expected
        histories = SqliteHistoryReader(target).histories(selection)
        assert list(dict.fromkeys(history.thread_id for history in histories)) == expected


@pytest.mark.slow
@pytest.mark.postgres
def test_a_name_that_is_not_utf8_names_no_postgres_thread(pg_database: str) -> None:
    """Postgres text is always UTF-8: such a name (argv's raw bytes) is no thread there, not an internal error."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_database) as saver:
        saver.setup()
    for command in (("inspect", "thread", LONE_FF), ("verify-shape", "--thread", LONE_FF)):
        result = run_ckpt(*command, "--db", pg_database, env=STRICT, process=True)
        assert result.exit_code == 2 and "no checkpoints for thread '\\\\udcff'" in result.stderr, result.stderr
    planned = run_ckpt(
        "plan", "retention", "--keep-newest", "3", "--thread", LONE_FF, "--thread", "other", "--db", pg_database
    )
    assert planned.exit_code == 2 and "no checkpoints for thread '\\\\udcff'" in planned.stderr, planned.stderr
