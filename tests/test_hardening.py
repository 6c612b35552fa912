"""What attacking ckpt found, each point tested the way the attack was made (docs/security.md, "Security model
and limits")."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase

CKPT = [sys.executable, "-m", "deerflow_ckpt"]


# -- 10: --debug prints the traceback, and is accepted after the subcommand -----------------------------


def test_debug_prints_the_real_traceback_wherever_it_is_given(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.db")
    for args in (["--debug", "verify-shape", "--db", missing], ["verify-shape", "--db", missing, "--debug"]):
        result = run_ckpt(*args)
        assert result.exit_code == 2
        assert "Traceback (most recent call last)" in result.stderr and "NoneType: None" not in result.stderr
        assert f"StoreError: {missing}: no such file" in result.stderr
    quiet = run_ckpt("verify-shape", "--db", missing)
    assert quiet.exit_code == 2 and "Traceback" not in quiet.stderr


def test_a_value_named_debug_is_not_taken_for_the_option(tmp_path: Path) -> None:
    """Only the flag moves: after a "--" every argument is left as it was."""
    result = run_ckpt("migrate-config", "--check", "--", "--debug")
    assert result.exit_code == 2 and "--debug" in result.stderr and "Traceback" not in result.stderr


# -- 11: huge hex or sexagesimal cadences are refused cleanly -------------------------------------------


def test_huge_cadences_are_refused_in_one_line(tmp_path: Path) -> None:
    hex_config = tmp_path / "hex.yaml"
    hex_config.write_text(
        "database:\n  backend: sqlite\n  checkpoint_channel_mode: delta\n  checkpoint_delta:\n"
        f"    snapshot_frequency: 0x{'f' * 4000}\n"
    )
    sexagesimal = tmp_path / "sexagesimal.yaml"
    sexagesimal.write_text(
        f"database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: {'59:' * 3000}1\n"
    )
    for config in (hex_config, sexagesimal):
        lint = run_ckpt("lint-config", str(config))
        assert lint.exit_code == 1 and "internal error" not in lint.stderr
        assert "CK504" in lint.stdout and "beyond any count a process reaches" in lint.stdout
    before = sexagesimal.read_bytes()
    migrate = run_ckpt("migrate-config", str(sexagesimal))
    assert migrate.exit_code == 2 and "internal error" not in migrate.stderr
    assert "beyond any count a process reaches" in migrate.stderr
    assert sexagesimal.read_bytes() == before


# -- 14: a closed pipe ends the command quietly -----------------------------------------------------------


def test_a_reader_that_closes_the_pipe_gets_no_traceback(built_sqlite: BuiltDatabase) -> None:
    """`ckpt inspect thread --all --format json | head -1`: far more than a pipe buffer holds."""
    command = [*CKPT, "inspect", "thread", "--all", "--db", built_sqlite.db, "--format", "json"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 2
    assert "Error" not in stderr and "Traceback" not in stderr and "Exception ignored" not in stderr


# -- 7: --output never overwrites an input, and is written atomically ----------------------------------


def test_output_that_is_an_input_is_refused(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    database = tmp_path / "deerflow.db"
    database.write_bytes(built_sqlite.path.read_bytes())
    original = database.read_bytes()
    link = tmp_path / "report.json"
    link.hardlink_to(database)
    for target in (database, link, tmp_path / "deerflow.db-wal", tmp_path / "sub" / ".." / "deerflow.db"):
        result = run_ckpt("verify-shape", "--db", str(database), "--format", "json", "--output", str(target))
        assert result.exit_code == 2, target
        assert "would overwrite it" in result.stderr and "Traceback" not in result.stderr
    assert database.read_bytes() == original and not (tmp_path / "deerflow.db-wal").exists()
    config = tmp_path / "config.yaml"
    config.write_text("database:\n  backend: sqlite\n")
    result = run_ckpt("lint-config", str(config), "--output", str(config))
    assert result.exit_code == 2 and config.read_text() == "database:\n  backend: sqlite\n"


def test_output_replaces_a_report_whole(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text("an older, longer report " * 1000)
    report.chmod(0o640)
    result = run_ckpt("verify-shape", "--db", built_sqlite.db, "--format", "json", "--output", str(report))
    assert result.exit_code == 1
    assert report.read_text().startswith("{") and report.read_text().rstrip().endswith("}")
    assert report.stat().st_mode & 0o777 == 0o640
    assert not list(tmp_path.glob("*.ckpt-tmp"))


# -- 13: every error is one line ---------------------------------------------------------------------------


def test_a_multi_line_libpq_error_is_one_line() -> None:
    result = run_ckpt("verify-shape", "--db", "postgresql://postgres:s3cret-pw@127.0.0.1:1/nothing")
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("ckpt: error")]
    assert len(errors) == 1 and "Connection refused" in errors[0] and "Is the server running" in errors[0]
    assert result.stderr.count("\n") == 2  # the database chosen, then the error
    assert "s3cret-pw" not in result.stderr


# -- 4: identifiers from the database are shown escaped ----------------------------------------------------

EVIL = "evil\x1b[31mRED\x1b]0;title\x07\n::warning title=pwned::owned <script>x</script> [bold]b[/bold] |cell|\u202e"


def _evil_copy(built_sqlite: BuiltDatabase, tmp_path: Path) -> Path:
    import sqlite3

    database = tmp_path / "evil.db"
    database.write_bytes(built_sqlite.path.read_bytes())
    with sqlite3.connect(database) as connection:
        for table in ("checkpoints", "writes"):
            connection.execute(
                f"UPDATE {table} SET thread_id = ? WHERE thread_id = 'mixed-writers-k10-k1000-k10'", (EVIL,)
            )
    return database


def _no_raw_controls(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert not any(line.lstrip().startswith("::warning title=pwned") for line in text.splitlines())


@pytest.mark.slow
def test_identifiers_cannot_drive_a_terminal_or_a_ci_log(
    built_sqlite: BuiltDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = str(_evil_copy(built_sqlite, tmp_path))
    text = run_ckpt("verify-shape", "--db", database, "--cadence", "10")
    assert text.exit_code == 1 and "evil\\x1b[31mRED" in text.stdout and ":\\x3awarning" in text.stdout
    _no_raw_controls(text.stdout)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    github = run_ckpt("verify-shape", "--db", database, "--cadence", "10", "--format", "github")
    _no_raw_controls(github.stdout)
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in github.stdout.splitlines())
    markdown = summary.read_text()
    _no_raw_controls(markdown)
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown and "\\|cell\\|" in markdown
    for command in (["inspect", "summary"], ["inspect", "thread", "--all"]):
        shown = run_ckpt(*command, "--db", database)
        assert shown.exit_code == 0, shown.stderr
        _no_raw_controls(shown.stdout)
        assert "evil\\x1b" in shown.stdout


@given(st.text())
def test_printable_leaves_nothing_a_terminal_or_a_ci_log_would_act_on(text: str) -> None:
    from deerflow_ckpt.report.printable import markdown_cell, printable

    shown = printable(text)
    bidi = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029, 0x200E, 0x200F)}
    assert not bidi & set(shown)
    assert "::" not in shown and not any(0x80 <= ord(ch) <= 0x9F or ord(ch) < 0x20 for ch in shown)
    assert printable(text) == text or "\\" in shown  # anything changed is written as an escape
    cell = markdown_cell(text)
    assert "|" not in cell.replace("\\|", "") and "<" not in cell.replace("<br>", "") and "\n" not in cell


@given(st.text(alphabet=st.characters(codec=None)) | st.binary().map(lambda b: b.decode("utf-8", "surrogateescape")))
def test_text_read_losslessly_is_printable_and_json_safe(text: str) -> None:
    """Keys that were not UTF-8 come back as surrogate escapes: printable writes each byte as \\xNN, and the
    json of a report keeps them (and controls) as JSON escapes, the same string to a parser."""
    import json

    from deerflow_ckpt.report.printable import json_text, printable

    shown = printable(text)
    assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in shown)
    shown.encode("utf-8")  # writable to any UTF-8 terminal
    document = json_text(json.dumps({"thread_id": text}, ensure_ascii=False))
    document.encode("utf-8")
    assert json.loads(document) == {"thread_id": text}
    assert not any(0x7F <= ord(ch) <= 0x9F or 0xD800 <= ord(ch) <= 0xDFFF or ord(ch) < 0x20 for ch in document)


def test_an_error_never_writes_a_control_character(tmp_path: Path) -> None:
    """A failure quotes what it was handed (a path, a database's words): one line, escaped, with --debug too."""
    folder = tmp_path / "evil\x1b[31mRED\x07"
    for extra in ([], ["--debug"]):
        result = run_ckpt("inspect", "storage", "--db", str(folder / "missing.db"), *extra)
        assert result.exit_code == 2
        _no_raw_controls(result.stderr)
        assert "evil\\x1b[31mRED\\x07" in result.stderr


# -- 3: passwords are masked in every output path --------------------------------------------------------

SECRET = "Hunter2wOrd"


def _leaks(text: str) -> bool:
    pieces = [SECRET, "Hunter2", "wOrd", "unter2wO"]
    return any(piece in text for piece in pieces)


def test_malformed_dsns_never_print_their_password(tmp_path: Path) -> None:
    for dsn in (
        "postgresql://postgres:Hunter2 wOrd@127.0.0.1:1/db",
        "postgresql://postgres:Hunter2@wOrd@127.0.0.1:1/db",
        "postgresql://postgres:Hunter2/wOrd@127.0.0.1:1/db",
        f"postgresql+asyncpg://postgres:{SECRET}@127.0.0.1:1/db",
        "host=127.0.0.1 port=1 password='Hunter2 wOrd' dbname=db",
    ):
        for extra in ([], ["--debug"], ["--format", "json"], ["--format", "sarif"], ["--format", "github"]):
            result = run_ckpt("verify-shape", "--db", dsn, *extra)
            assert result.exit_code == 2, (dsn, extra)
            assert not _leaks(result.stdout + result.stderr), (dsn, extra, result.stderr)


@pytest.mark.slow
def test_the_ssl_key_passphrase_is_masked_too() -> None:
    # A fresh process: a secret masked once is remembered, which would hide a pattern that misses it.
    for dsn in ("postgresql://u@127.0.0.1:1/db?sslpassword=Pass9phrase&sslmode=disable",
                "host=127.0.0.1 port=1 sslpassword=Pass9phrase dbname=db"):  # fmt: skip
        result = run_ckpt("verify-shape", "--db", dsn, process=True)
        assert result.exit_code == 2 and "cannot connect" in result.stderr, result.stderr
        assert "Pass9phrase" not in result.stdout + result.stderr and "sslpassword=***" in result.stderr


def test_an_unknown_scheme_is_refused_not_taken_for_a_file() -> None:
    for dsn in (f"mysql://u:{SECRET}@h/db", f"postgressql://u:{SECRET}@h/db", f"sqlite://u:{SECRET}@x"):
        result = run_ckpt("verify-shape", "--db", dsn)
        assert result.exit_code == 2 and "not " in result.stderr and "give a SQLite database as a path" in result.stderr
        assert result.stderr.count("\n") == 1 and not _leaks(result.stderr)


@pytest.mark.postgres
def test_a_scan_with_a_percent_encoded_password_prints_it_nowhere(
    built_postgres: BuiltDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test server trusts local connections, so any password connects: the scan runs to the end."""
    from urllib.parse import quote, urlsplit, urlunsplit

    parts = urlsplit(built_postgres.db)
    netloc = f"{parts.username}:{quote('Hunter2 w@O/rd', safe='')}@{parts.hostname}:{parts.port or 5432}"
    dsn = urlunsplit(parts._replace(netloc=netloc))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    for output_format in ("text", "json", "github", "sarif"):
        result = run_ckpt("verify-shape", "--db", dsn, "--format", output_format, "--debug")
        assert result.exit_code == 1, result.stderr
        shown = result.stdout + result.stderr
        assert "Hunter2" not in shown and "w%40O" not in shown and "O%2Frd" not in shown
    assert summary.exists() and "Hunter2" not in summary.read_text()


def test_a_postgres_url_given_as_a_mapping_is_not_printed(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"database:\n  backend: postgres\n  postgres_url:\n    host: db\n    password: {SECRET}\n")
    for output_format in ("text", "json", "github", "sarif"):
        result = run_ckpt("lint-config", str(config), "--format", output_format)
        assert result.exit_code == 1 and "CK500" in result.stdout
        assert not _leaks(result.stdout + result.stderr), output_format


# -- 2: only the types LangGraph's strict loader allows are trusted ------------------------------------------


def _gadgets(target: Path) -> dict[str, bytes]:
    """Writes naming callables of a LangChain package that LangGraph's default loader calls."""
    import ormsgpack

    from deerflow_ckpt.store.peek import EXT_CONSTRUCTOR_KW_ARGS, EXT_CONSTRUCTOR_SINGLE_ARG

    handler = ("langchain_core.callbacks.file", "FileCallbackHandler", {"filename": str(target), "mode": "w"})
    importer = ("langchain_core.utils.utils", "guard_import", "json")
    return {
        "langchain_core.callbacks.file.FileCallbackHandler": ormsgpack.packb(
            [ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb(handler))]
        ),
        "langchain_core.utils.utils.guard_import": ormsgpack.packb(
            [ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb(importer))]
        ),
    }


def test_the_gadgets_run_under_langgraphs_default_loader(tmp_path: Path) -> None:
    """What makes them gadgets: the permissive loader truncates the file and imports the module."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    target = tmp_path / "truncated-by-the-loader"
    target.write_text("precious")
    handler, importer = _gadgets(target).values()
    loaded = JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(("msgpack", handler))
    assert type(loaded[0]).__name__ == "FileCallbackHandler" and target.read_text() == ""
    loaded[0].file.close()
    assert JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(("msgpack", importer))[0].__name__ == "json"


@pytest.mark.slow  # builds its own database with the real graphs
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_gadget_writes_are_reported_never_loaded(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from fixtures.dbbuilder.build import build_postgres, build_sqlite, open_backend

    target = tmp_path / "must-stay"
    target.write_text("precious")
    if backend == "sqlite":
        db = str(tmp_path / "gadgets.db")
        manifest = build_sqlite(db, ["clean-delta"])
        handle = open_backend("sqlite", db, None, None)
    else:
        db = request.getfixturevalue("pg_database")
        manifest = build_postgres(db, None, ["clean-delta"])
        handle = open_backend("postgres", db, None, None)
    threads = manifest.threads[:2]
    try:
        for thread, value in zip(threads, _gadgets(target).values(), strict=True):
            write = thread.writes[3]
            handle.set_write(thread.thread_id, "", write.checkpoint_id, write.task_id, "msgpack", value)
    finally:
        handle.close()
    result = run_ckpt("verify-shape", "--db", db, "--format", "json")
    assert result.exit_code == 1, result.stderr
    import json

    unsafe = {
        (f["thread_id"], f["message"].split(" names ")[1].split(",")[0])
        for f in json.loads(result.stdout)["findings"]
        if f["rule"] == "CK105"
    }
    assert unsafe == {(t.thread_id, name) for t, name in zip(threads, _gadgets(target), strict=True)}
    assert target.read_text() == "precious"


# -- 9: migrate-config leaves no temporary file behind ------------------------------------------------------

LEGACY = "database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: 50\n"


@pytest.mark.slow
def test_sigterm_while_migrating_leaves_old_or_new_bytes_and_no_temporary(tmp_path: Path) -> None:
    import os
    import random
    import signal
    import time

    config = tmp_path / "config.yaml"
    padding = "".join(f"# padding line {i} " + "x" * 200 + "\n" for i in range(20_000))  # about 4 MB
    old = (LEGACY + padding).encode()
    outcomes = set()
    for attempt in range(25):
        config.write_bytes(old)
        process = subprocess.Popen([*CKPT, "migrate-config", str(config)], stderr=subprocess.DEVNULL)
        time.sleep(random.Random(attempt).uniform(0.15, 0.6))
        process.send_signal(signal.SIGTERM)
        outcomes.add(process.wait(timeout=60))
        written = config.read_bytes()
        assert written == old or (
            b"checkpoint_delta:\n    snapshot_frequency: 50" in written and written.endswith(padding.encode())
        )
        assert not [name for name in os.listdir(tmp_path) if name.endswith(".ckpt-tmp")]
    assert outcomes <= {0, 143, -signal.SIGTERM}


def test_a_killed_runs_leftovers_are_removed_on_the_next_write(tmp_path: Path) -> None:
    import os
    import time

    config = tmp_path / "config.yaml"
    config.write_text(LEGACY)
    stale = tmp_path / ".config.yaml.abc123.ckpt-tmp"
    fresh = tmp_path / ".config.yaml.def456.ckpt-tmp"
    other = tmp_path / ".other.yaml.abc123.ckpt-tmp"
    for leftover in (stale, fresh, other):
        leftover.write_text("partial")
    an_hour_ago = time.time() - 3600
    os.utime(stale, (an_hour_ago, an_hour_ago))
    os.utime(other, (an_hour_ago, an_hour_ago))
    result = run_ckpt("migrate-config", str(config))
    assert result.exit_code == 0, result.stderr
    assert not stale.exists() and fresh.exists() and other.exists()


def test_sigterm_inside_the_write_removes_the_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal arrives while the temporary file exists (here: during its fsync)."""
    import os
    import signal

    from deerflow_ckpt import fileio

    target = tmp_path / "config.yaml"
    target.write_text("old bytes\n")
    real_fsync = os.fsync

    def fsync_then_terminated(descriptor: int) -> None:
        real_fsync(descriptor)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(fileio.os, "fsync", fsync_then_terminated)
    with pytest.raises(SystemExit) as stopped:
        fileio.write_atomically(target, b"new bytes\n")
    assert stopped.value.code == 128 + signal.SIGTERM
    assert target.read_text() == "old bytes\n" and not list(tmp_path.glob("*.ckpt-tmp"))
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


# -- 5: alias bombs, special files and huge files are refused in one line, quickly --------------------------


def _alias_bomb(levels: int = 9) -> str:
    lines = [
        "database:",
        "  backend: sqlite",
        "  checkpoint_delta_snapshot_frequency: 5",
        "a0: &a0 [x, x, x, x, x, x, x, x, x]",
    ]
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    import time

    bomb = tmp_path / "config.yaml"
    bomb.write_text(_alias_bomb())
    assert len(bomb.read_bytes()) < 1000
    for command in (["lint-config", str(bomb)], ["migrate-config", "--check", str(bomb)], ["migrate-config", str(bomb)],
                    ["verify-shape", "--config", str(bomb)]):  # fmt: skip
        started = time.monotonic()
        result = run_ckpt(*command)
        assert time.monotonic() - started < 10, command
        assert result.exit_code in (1, 2) and "alias bomb" in result.stdout + result.stderr, command
        assert "internal error" not in result.stderr
    recursive = tmp_path / "recursive.yaml"
    recursive.write_text("database: &d\n  backend: sqlite\n  again: *d\n")
    result = run_ckpt("lint-config", str(recursive))
    assert result.exit_code == 2 and "internal error" not in result.stderr


@pytest.mark.slow
def test_special_and_huge_files_are_refused(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as stream:
        stream.truncate(17 * 1024 * 1024)
    cases = {"/dev/zero": "not a regular file", str(fifo): "not a regular file", str(tmp_path): "directory",
             str(huge): "larger than 16 MB"}  # fmt: skip
    for path, reason in cases.items():
        for command in (["lint-config", path], ["migrate-config", "--check", path]):
            # A real process, so a read that never ends (/dev/zero, a FIFO) is stopped by the timeout.
            result = run_ckpt(*command, process=True, timeout=30)
            assert result.exit_code in (1, 2), (command, result.exit_code)
            assert reason in result.output, (command, result.stderr)
    piped = run_ckpt("migrate-config", "-", input=b"#" * (17 * 1024 * 1024), process=True, timeout=30)
    assert piped.exit_code == 2 and "more than 16 MB" in piped.stderr


# -- 8: keys that are no text (BLOB, NULL, numbers) are shown typed, never crash a report ----------------------


def _odd_keys_copy(built_sqlite: BuiltDatabase, tmp_path: Path, loose_schema: bool) -> Path:
    import sqlite3

    database = tmp_path / ("loose.db" if loose_schema else "blob.db")
    if not loose_schema:
        database.write_bytes(built_sqlite.path.read_bytes())
    with sqlite3.connect(database) as connection:
        if loose_schema:
            # A hand-made schema with no affinity and no NOT NULL: keys keep whatever type was stored.
            connection.execute(f"ATTACH DATABASE '{built_sqlite.path}' AS source")
            connection.execute("CREATE TABLE checkpoints AS SELECT * FROM source.checkpoints WHERE 0")
            connection.execute("CREATE TABLE writes AS SELECT * FROM source.writes WHERE 0")
            for table in ("checkpoints", "writes"):
                connection.execute(f"INSERT INTO {table} SELECT * FROM source.{table}")
        for table in ("checkpoints", "writes"):
            odd = (b"\x00blob\xff" if not loose_schema else None, 4242 if loose_schema else b"\x01")
            connection.execute(
                f"UPDATE {table} SET thread_id = ? WHERE thread_id = 'fault-ck101-stuffed-list'", (odd[0],)
            )
            connection.execute(
                f"UPDATE {table} SET thread_id = ? WHERE thread_id = 'fault-ck304-pruned-writes'", (odd[1],)
            )
    return database


@pytest.mark.slow
@pytest.mark.parametrize("loose_schema", [False, True], ids=["savers-schema", "loose-schema"])
def test_odd_keys_are_shown_typed_in_every_format(
    built_sqlite: BuiltDatabase, tmp_path: Path, loose_schema: bool
) -> None:
    import json

    database = str(_odd_keys_copy(built_sqlite, tmp_path, loose_schema))
    expected = {"NULL", "4242"} if loose_schema else {"x'00626c6f62ff'", "x'01'"}
    for output_format in ("text", "json", "github", "sarif"):
        result = run_ckpt("verify-shape", "--db", database, "--format", output_format)
        assert result.exit_code == 1, (output_format, result.stderr)
        assert "internal error" not in result.stderr
        if output_format == "json":
            threads = {f["thread_id"] for f in json.loads(result.stdout)["findings"]}
            assert expected <= threads
    for command in (["summary"], ["thread", "--all"]):
        shown = run_ckpt("inspect", *command, "--db", database, "--format", "json")
        assert shown.exit_code == 0 and "internal error" not in shown.stderr


def test_both_sqlite_readers_agree_on_blob_keys(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    from deerflow_ckpt.store.source import target_from_argument
    from deerflow_ckpt.store.sqlite import SqliteCheckpointReader

    target = target_from_argument(str(_odd_keys_copy(built_sqlite, tmp_path, False)))

    def summary(compiled: bool) -> list[tuple[str, str, int, int]]:
        reader = SqliteCheckpointReader(target, compiled=compiled)
        return [(ln.thread_id, ln.checkpoint_ns, len(ln.records), sum(r.message_write_rows for r in ln.records))
                for ln in reader.lineages()]  # fmt: skip

    assert summary(True) == summary(False)
    assert ("x'00626c6f62ff'", "", 25, 16) in summary(True)


# -- 6: a Postgres scan never hangs: network, locks, and the role's own statement_timeout -------------------


class _StallingProxy:
    """A TCP proxy to the test server that stops forwarding server bytes after `budget` of them, keeping
    both connections open: what a broken middlebox does."""

    def __init__(self, budget: int) -> None:
        import socket
        import threading

        self.budget = budget
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", 5432))
            self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, None), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, self), daemon=True).start()

    def _pump(self, source: Any, sink: Any, metered: _StallingProxy | None) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if metered is not None:
                if metered.budget <= 0:
                    continue  # swallow: the client waits for bytes that never come
                metered.budget -= len(data)
            try:
                sink.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        import socket

        self.listener.close()
        for sock in self.sockets:
            # shutdown first: close() alone leaves the connection up while a pump thread sits in recv, and
            # the server keeps the scan's lock until it notices (a later lock test then waits on it).
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.mark.slow  # waits out a 3 s network timeout
@pytest.mark.postgres
def test_a_proxy_that_stops_forwarding_ends_the_scan(built_postgres: BuiltDatabase) -> None:
    import time
    from urllib.parse import urlsplit, urlunsplit

    proxy = _StallingProxy(budget=200_000)
    try:
        parts = urlsplit(built_postgres.db)
        dsn = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}"))
        started = time.monotonic()
        # A real process, so a scan that never ends is stopped by the timeout.
        result = run_ckpt(
            "verify-shape", "--db", dsn, "--jobs", "1", "--network-timeout", "3s", process=True, timeout=90
        )
        assert time.monotonic() - started < 60
        assert result.exit_code == 2
        errors = [line for line in result.stderr.splitlines() if line.startswith("ckpt: error")]
        assert len(errors) == 1 and "no data from the server for 3 s" in errors[0]
    finally:
        proxy.close()


@pytest.mark.slow  # waits out the scan's lock timeout
@pytest.mark.postgres
def test_a_scan_behind_an_exclusive_lock_stops_with_one_line(built_postgres: BuiltDatabase) -> None:
    import psycopg

    with psycopg.connect(built_postgres.db) as holder:
        holder.execute("LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE")
        # A real process, so a scan that never ends is stopped by the timeout.
        result = run_ckpt("verify-shape", "--db", built_postgres.db, "--jobs", "1", process=True, timeout=90)
        holder.rollback()
    assert result.exit_code == 2
    assert "lock timeout" in result.stderr and result.stderr.count("\n") == 2


@pytest.mark.postgres
def test_the_roles_statement_timeout_is_respected(
    built_postgres: BuiltDatabase, pg_readonly_role: Callable[..., str]
) -> None:
    import psycopg
    from psycopg import sql

    dsn = pg_readonly_role(built_postgres.db)
    role = psycopg.conninfo.conninfo_to_dict(dsn).get("user") or urlsplit_user(dsn)
    with psycopg.connect(built_postgres.db, autocommit=True) as admin:
        admin.execute(sql.SQL("ALTER ROLE {} SET statement_timeout = '1ms'").format(sql.Identifier(role)))
    strict = run_ckpt("verify-shape", "--db", dsn, "--jobs", "1")
    assert strict.exit_code == 2 and "statement timeout" in strict.stderr
    relaxed = run_ckpt("verify-shape", "--db", dsn, "--jobs", "1", "--statement-timeout", "5m")
    assert relaxed.exit_code == 1, relaxed.stderr


def urlsplit_user(dsn: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(dsn).username or ""


# -- 12: in-place rewrites respect what the file says about itself ------------------------------------------


def test_rewrites_refuse_read_only_and_hard_linked_files(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(LEGACY)
    config.chmod(0o444)
    result = run_ckpt("migrate-config", str(config))
    assert result.exit_code == 2 and "does not let you write it" in result.stdout + result.stderr
    assert config.read_text() == LEGACY
    config.chmod(0o644)
    link = tmp_path / "linked.yaml"
    link.hardlink_to(config)
    result = run_ckpt("migrate-config", str(config))
    assert result.exit_code == 2 and "hard links" in result.stdout + result.stderr
    assert config.read_text() == LEGACY == link.read_text()


def test_rewrites_keep_owner_and_extended_attributes(tmp_path: Path) -> None:
    import os

    config = tmp_path / "config.yaml"
    config.write_text(LEGACY)
    os.setxattr(config, "user.origin", b"ops-repo")
    if os.geteuid() == 0:
        os.chown(config, 12345, 12345)  # root rewrites another user's file and gives it back
    result = run_ckpt("migrate-config", str(config))
    assert result.exit_code == 0, result.stderr
    assert "checkpoint_delta:" in config.read_text()
    assert os.getxattr(config, "user.origin") == b"ops-repo"
    if os.geteuid() == 0:
        assert (config.stat().st_uid, config.stat().st_gid) == (12345, 12345)


def test_a_concurrent_edit_is_never_overwritten(tmp_path: Path) -> None:
    from deerflow_ckpt.errors import OutputError
    from deerflow_ckpt.fileio import write_atomically

    config = tmp_path / "config.yaml"
    config.write_text(LEGACY)
    read_then = config.read_bytes()
    config.write_text(LEGACY + "# someone else's edit\n")  # between our read and our rename
    with pytest.raises(OutputError, match="changed while ckpt was working on it"):
        write_atomically(config, b"migrated\n", expected=read_then)
    assert config.read_text().endswith("# someone else's edit\n")
    assert not list(tmp_path.glob("*.ckpt-tmp"))


def test_another_users_file_is_not_taken_over() -> None:
    """As `nobody`, in a directory anyone may write: rewriting root's config would make it nobody's."""
    import os
    import shutil
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root (CI runs as root)")
    directory = Path(tempfile.mkdtemp(prefix="ckpt-owner-"))
    try:
        directory.chmod(0o777)
        config = directory / "config.yaml"
        config.write_text(LEGACY)
        config.chmod(0o666)
        setpriv = shutil.which("setpriv")
        assert setpriv is not None
        # Reading and searching stay allowed, so ckpt imports from a checkout in a private directory.
        reader = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
        as_nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *reader]
        command = [*as_nobody, *CKPT, "migrate-config", str(config)]
        result = subprocess.run(
            command, capture_output=True, text=True, check=False, env={**os.environ, "HOME": "/tmp"}
        )
        assert result.returncode == 2, result.stderr + result.stdout
        assert "belongs to another user" in result.stdout + result.stderr
        assert config.read_text() == LEGACY and config.stat().st_uid == 0
    finally:
        shutil.rmtree(directory)


# -- 1: snapshot payloads get the same checks as any payload (SQLite) ---------------------------------------


def _messages_running(command: str) -> bytes:
    """A message list whose one item LangGraph's default loader builds by calling os.system(command)."""
    import ormsgpack

    from deerflow_ckpt.store.peek import EXT_CONSTRUCTOR_POS_ARGS

    call = ormsgpack.packb(("os", "system", [command]))
    return ormsgpack.packb([ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, call)])


def _rewrite_snapshot(db: str, thread_id: str, checkpoint_id: str, payload: bytes) -> None:
    """Replace the _DeltaSnapshot in a checkpoint blob by one holding `payload` (targeted SQL)."""
    import sqlite3

    import ormsgpack

    from deerflow_ckpt.store.peek import EXT_DELTA_SNAPSHOT

    with sqlite3.connect(db) as connection:
        (blob,) = connection.execute(
            "SELECT checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?", (thread_id, checkpoint_id)
        ).fetchone()
        # Ext values are kept as (code, bytes) pairs, then packed back as they were.
        checkpoint = ormsgpack.unpackb(blob, ext_hook=lambda code, data: ("ext", code, data))
        assert checkpoint["channel_values"]["messages"][1] == EXT_DELTA_SNAPSHOT
        checkpoint["channel_values"]["messages"] = ("ext", EXT_DELTA_SNAPSHOT, payload)

        def repacked(value: Any) -> Any:
            if isinstance(value, tuple) and len(value) == 3 and value[0] == "ext":
                return ormsgpack.Ext(value[1], value[2])
            if isinstance(value, dict):
                return {key: repacked(item) for key, item in value.items()}
            if isinstance(value, list):
                return [repacked(item) for item in value]
            return value

        checkpoint = repacked(checkpoint)
        connection.execute(
            "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
            (ormsgpack.packb(checkpoint), thread_id, checkpoint_id),
        )


@pytest.mark.slow  # builds its own database with the real graphs
def test_a_snapshot_that_runs_code_on_load_never_scans_clean(tmp_path: Path) -> None:
    import json

    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.sqlite import SqliteSaver

    from fixtures.dbbuilder.build import build_sqlite

    db = str(tmp_path / "snapshots.db")
    manifest = build_sqlite(db, ["clean-delta"])
    evil, broken = manifest.threads[0], manifest.threads[1]
    marker = tmp_path / "ran"
    _rewrite_snapshot(db, evil.thread_id, evil.snapshot_ids()[-1], _messages_running(f"touch {marker}"))
    _rewrite_snapshot(db, broken.thread_id, broken.snapshot_ids()[-1], b"\xc1 not msgpack")
    result = run_ckpt("verify-shape", "--db", db, "--format", "json")
    assert result.exit_code == 1, result.stderr
    found = {(f["rule"], f["thread_id"], f["checkpoint_id"]) for f in json.loads(result.stdout)["findings"]}
    assert ("CK105", evil.thread_id, evil.snapshot_ids()[-1]) in found
    assert ("CK104", broken.thread_id, broken.snapshot_ids()[-1]) in found
    assert not marker.exists()  # ckpt named it and ran nothing
    # What makes it matter: LangGraph's default loader runs the command when it reads that checkpoint.
    import sqlite3

    with sqlite3.connect(db) as connection:
        saver = SqliteSaver(connection, serde=JsonPlusSerializer(allowed_msgpack_modules=True))
        config = {
            "configurable": {"thread_id": evil.thread_id, "checkpoint_ns": "", "checkpoint_id": evil.snapshot_ids()[-1]}
        }
        saver.get_tuple(config)  # type: ignore[arg-type]
    assert marker.exists()


# -- 1: snapshot payloads get the same checks as any payload (Postgres: the checkpoint_blobs row) ----------


def _rewrite_snapshot_blob(dsn: str, thread_id: str, checkpoint_id: str, payload: bytes) -> None:
    """Replace the _DeltaSnapshot blob a checkpoint's messages version names by one holding `payload`."""
    import ormsgpack
    import psycopg

    from deerflow_ckpt.store.peek import EXT_DELTA_SNAPSHOT, head_is_snapshot

    with psycopg.connect(dsn) as connection:
        (version,) = connection.execute(
            "SELECT checkpoint->'channel_versions'->>'messages' FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_id = %s",
            (thread_id, checkpoint_id),
        ).fetchone()
        (blob,) = connection.execute(
            "SELECT blob FROM checkpoint_blobs WHERE thread_id = %s AND channel = 'messages' AND version = %s",
            (thread_id, version),
        ).fetchone()
        assert head_is_snapshot(bytes(blob[:8]))
        connection.execute(
            "UPDATE checkpoint_blobs SET blob = %s WHERE thread_id = %s AND channel = 'messages' AND version = %s",
            (ormsgpack.packb(ormsgpack.Ext(EXT_DELTA_SNAPSHOT, payload)), thread_id, version),
        )


@pytest.mark.slow  # builds its own database with the real graphs
@pytest.mark.postgres
def test_a_postgres_snapshot_blob_that_runs_code_on_load_never_scans_clean(pg_database: str, tmp_path: Path) -> None:
    import json

    import ormsgpack
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from deerflow_ckpt.native import value_summary
    from deerflow_ckpt.store.peek import EXT_DELTA_SNAPSHOT
    from fixtures.dbbuilder.build import build_postgres

    manifest = build_postgres(pg_database, None, ["clean-delta"])
    evil, broken, keyed = manifest.threads[0], manifest.threads[1], manifest.threads[2]
    marker = tmp_path / "ran"
    _rewrite_snapshot_blob(pg_database, evil.thread_id, evil.snapshot_ids()[-1], _messages_running(f"touch {marker}"))
    # The same call under an integer map key: the compiled judge abstains, so the Python one must name it.
    keyed_payload = ormsgpack.packb({1: ormsgpack.unpackb(_messages_running("true"), ext_hook=ormsgpack.Ext)},
                                    option=ormsgpack.OPT_NON_STR_KEYS)  # fmt: skip
    assert value_summary(ormsgpack.packb(ormsgpack.Ext(EXT_DELTA_SNAPSHOT, keyed_payload))) is None
    _rewrite_snapshot_blob(pg_database, keyed.thread_id, keyed.snapshot_ids()[-1], keyed_payload)
    _rewrite_snapshot_blob(pg_database, broken.thread_id, broken.snapshot_ids()[-1], b"\xc1 not msgpack")
    for jobs in ("1", "2"):
        result = run_ckpt("verify-shape", "--db", pg_database, "--format", "json", "--jobs", jobs)
        assert result.exit_code == 1, result.stderr
        found = {(f["rule"], f["thread_id"], f["checkpoint_id"]) for f in json.loads(result.stdout)["findings"]}
        assert ("CK105", evil.thread_id, evil.snapshot_ids()[-1]) in found
        assert ("CK104", broken.thread_id, broken.snapshot_ids()[-1]) in found
        assert ("CK105", keyed.thread_id, keyed.snapshot_ids()[-1]) in found
    assert not marker.exists()  # ckpt named it and ran nothing
    # What makes it matter: LangGraph's default loader runs the command when it reads that checkpoint.
    with psycopg.connect(pg_database, autocommit=True) as connection:
        saver = PostgresSaver(connection, serde=JsonPlusSerializer(allowed_msgpack_modules=True))  # type: ignore[arg-type]
        config = {
            "configurable": {"thread_id": evil.thread_id, "checkpoint_ns": "", "checkpoint_id": evil.snapshot_ids()[-1]}
        }
        saver.get_tuple(config)  # type: ignore[arg-type]
    assert marker.exists()
