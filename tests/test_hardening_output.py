"""Output that drives other programs (docs/security.md, "Security model and limits"): CSV cells a spreadsheet would
run, a newline in a path that a CI log reads as a workflow command, and `-o` onto a pipe, a device or a
socket. Each attack is rebuilt as it was made: crafted rows by SQL on both backends, hostile names as real
paths, real FIFOs, devices, sockets and pipes."""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import os
import re
import shutil
import socket
import sqlite3
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from psycopg import sql

from tests.cli import REPO, run_ckpt
from tests.conftest import BuiltDatabase

# -- CSV cells are neither formulas nor terminal controls ----------------------------------------------

FORMULA = '=HYPERLINK("http://x","c")'
CONTROLS = "e\x1b[31m\x07x"
# Every start OWASP lists, and a value that already starts with the quote that marks a neutralised cell.
HOSTILE_IDS = {
    "clean-full": FORMULA,
    "clean-delta-k1": CONTROLS,
    "clean-delta-k2": "@SUM(1+1)*cmd|' /C calc'!A0",
    "clean-delta-k3": "+1+1",
    "clean-delta-k10": "-2+3",
    "fork-invoke-k3": "'=quoted",
}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _hostile_sqlite(built_sqlite: BuiltDatabase, tmp_path: Path) -> str:
    database = tmp_path / "hostile.db"
    shutil.copyfile(built_sqlite.path, database)
    with sqlite3.connect(database) as connection:
        for old, new in HOSTILE_IDS.items():
            for table in ("checkpoints", "writes"):
                connection.execute(f"UPDATE {table} SET thread_id = ? WHERE thread_id = ?", (new, old))
    return str(database)


def _hostile_postgres(built_postgres: BuiltDatabase, target: str) -> str:
    """The hostile threads' rows copied from the built fixture into `target` (set up by the real saver), their
    ids then changed by SQL."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(target) as saver:
        saver.setup()
    tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
    with psycopg.connect(target, autocommit=True) as into, psycopg.connect(built_postgres.db) as source:
        for table in tables:
            names = sql.SQL(", ").join(
                sql.Identifier(column.name)
                for column in source.execute(
                    sql.SQL("SELECT * FROM {} LIMIT 0").format(sql.Identifier(table))
                ).description
                or ()
            )
            chosen = sql.SQL("COPY (SELECT {} FROM {} WHERE thread_id = ANY({})) TO STDOUT").format(
                names, sql.Identifier(table), sql.Literal(list(HOSTILE_IDS))
            )
            with (
                source.cursor().copy(chosen) as out,
                into.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(table), names)) as writer,
            ):
                for chunk in out:
                    writer.write(chunk)
            for old, new in HOSTILE_IDS.items():
                into.execute(
                    sql.SQL("UPDATE {} SET thread_id = %s WHERE thread_id = %s").format(sql.Identifier(table)),
                    (new, old),
                )
    return target


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def hostile_ids_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return _hostile_sqlite(request.getfixturevalue("built_sqlite"), tmp_path)
    return _hostile_postgres(request.getfixturevalue("built_postgres"), request.getfixturevalue("pg_database"))


def _safe_cells(document: str) -> list[list[str]]:
    """The CSV's rows, after checking no cell would run as a formula or carry a control character."""
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", document), document
    rows = list(csv.reader(io.StringIO(document)))
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA_STARTS), (cell, row)
    return rows


def _shown(value: str) -> str:
    from deerflow_ckpt.report.printable import printable

    shown = printable(value)
    return "'" + shown if shown.startswith((*FORMULA_STARTS, "'")) else shown


@pytest.mark.slow
def test_csv_thread_ids_are_neither_formulas_nor_controls(hostile_ids_db: str) -> None:
    thread = run_ckpt("inspect", "thread", "--all", "--db", hostile_ids_db, "--format", "csv")
    assert thread.exit_code == 0, thread.stderr
    ids = {row[0] for row in _safe_cells(thread.stdout)[1:]}
    storage = run_ckpt("inspect", "storage", "--top", "100", "--db", hostile_ids_db, "--format", "csv")
    assert storage.exit_code == 0, storage.stderr
    heaviest = {row[1] for row in _safe_cells(storage.stdout)[1:] if row[0] == "thread"}
    for hostile in HOSTILE_IDS.values():
        # Each id is there, told apart from the others: the formula quoted, the controls as escapes.
        assert _shown(hostile) in ids and _shown(hostile) in heaviest, (hostile, ids)
    assert '\'=HYPERLINK("http://x","c")' in ids and "e\\x1b[31m\\x07x" in ids and "''=quoted" in ids


@given(st.text())
def test_a_csv_cell_is_printable_text_with_a_formula_neutralised(text: str) -> None:
    from deerflow_ckpt.report.printable import csv_cell, csv_text, printable

    cell = csv_cell(text)
    assert not cell.startswith(FORMULA_STARTS)
    assert cell == printable(text) or (cell.startswith("'") and cell[1:] == printable(text))
    (row,) = csv.reader(io.StringIO(csv_text([(text, 7)])))
    assert row == [cell, "7"]


# -- a newline in a path or a file name never starts a line of ckpt's output -----------------------------

HOSTILE_NAME = "data\n::error file=README.md,line=1::INJECTED\nx"
SHOWN_NAME = "data\\x0a:\\x3aerror file=README.md,line=1:\\x3aINJECTED\\x0ax"
# The pre-commit hooks pass every file this pattern matches: a config whose own name carries the injection.
HOSTILE_CONFIG = "config\n::error file=README.md,line=1::INJECTED\n.yaml"
LEGACY_CONFIG = (
    "database:\n  backend: sqlite\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: 10\n"
)
# ckpt's own annotations: a command and a title, every property and the message escaped as GitHub reads them.
OWN_ANNOTATION = re.compile(r"::(error|warning|notice) title=[^:,]*(,file=[^:,]*)?(,line=\d+)?::[^\r]*")


@pytest.fixture
def hostile_directory(built_sqlite: BuiltDatabase, tmp_path: Path) -> Path:
    """A real directory whose name carries a workflow command, holding a database and config files."""
    directory = tmp_path / HOSTILE_NAME
    directory.mkdir()
    shutil.copyfile(built_sqlite.path, directory / "deerflow.db")
    chooser = {"database": {**yaml.safe_load(LEGACY_CONFIG)["database"], "sqlite_dir": str(directory)}}
    (directory / "config.yaml").write_text(yaml.safe_dump(chooser))
    (directory / HOSTILE_CONFIG).write_text(LEGACY_CONFIG)
    return directory


def _no_injected_line(output: str) -> None:
    """Nothing but ckpt's own annotations starts a line with '::', and the name's newline never reaches it."""
    assert "\n::error file=README.md" not in output and "\r" not in output
    for line in output.split("\n"):
        if line.lstrip().startswith("::"):
            assert OWN_ANNOTATION.fullmatch(line), line


def test_the_hostile_config_is_one_the_hooks_pass() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    for hook in hooks:
        assert re.search(hook["files"], f"{HOSTILE_NAME}/{HOSTILE_CONFIG}"), hook["id"]
        assert re.search(hook["files"], f"{HOSTILE_NAME}/config.yaml"), hook["id"]


@pytest.mark.slow
def test_verify_shape_in_a_hostile_directory_injects_no_workflow_command(
    hostile_directory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    database, config = str(hostile_directory / "deerflow.db"), str(hostile_directory / "config.yaml")
    for chosen in (["--db", database], ["--config", config]):
        for output_format in ("github", "text"):
            result = run_ckpt("verify-shape", *chosen, "--format", output_format, process=True)
            assert result.exit_code == 1, result.stderr
            _no_injected_line(result.stdout + result.stderr)
            # The name is shown, its newline as a visible escape.
            assert SHOWN_NAME in result.stderr
    missing = str(hostile_directory / "missing.db")
    for extra in ([], ["--debug"]):
        failed = run_ckpt("verify-shape", "--db", missing, "--format", "github", *extra, process=True)
        assert failed.exit_code == 2
        _no_injected_line(failed.stdout + failed.stderr)


@pytest.mark.slow
def test_config_commands_on_a_hostile_name_inject_no_workflow_command(hostile_directory: Path) -> None:
    configs = [str(hostile_directory / "config.yaml"), str(hostile_directory / HOSTILE_CONFIG)]
    runs = [
        ["lint-config", *configs],
        ["lint-config", *configs, "--format", "github"],
        ["migrate-config", "--check", "--diff", *configs],  # the pre-commit hook's entry
        ["migrate-config", "--check", *configs, "--format", "github"],
        ["migrate-config", "--stdin-filename", HOSTILE_CONFIG, "-"],
    ]
    for args in runs:
        result = run_ckpt(*args, input=LEGACY_CONFIG, process=True)
        assert result.exit_code in (0, 1), result.output
        _no_injected_line(result.stdout + result.stderr)
        # The name is shown, escaped as the format escapes it.
        assert "\\x0a:\\x3aerror file=README.md" in result.output or "%0A%3A%3Aerror" in result.output
    # The directory as a DeerFlow checkout: its .env is named on stderr, escaped once.
    (hostile_directory / "backend/packages/harness/deerflow/config").mkdir(parents=True)
    (hostile_directory / ".env").write_text("DEER_FLOW_SOMETHING=1\n")
    located = run_ckpt("lint-config", "--deerflow-root", str(hostile_directory), *configs, process=True)
    _no_injected_line(located.stdout + located.stderr)
    assert f"ckpt: {hostile_directory.parent}/{SHOWN_NAME}/.env (DeerFlow loads it)" in located.stderr
    migrated = run_ckpt("migrate-config", *configs, process=True)
    assert migrated.exit_code == 0, migrated.stderr
    _no_injected_line(migrated.stdout + migrated.stderr)
    assert f"migrated {hostile_directory.parent}/{SHOWN_NAME}/config.yaml" in migrated.stderr


@pytest.mark.slow
def test_inspect_and_plan_in_a_hostile_directory_inject_no_workflow_command(hostile_directory: Path) -> None:
    config = str(hostile_directory / "config.yaml")
    runs = [
        ["inspect", "summary"],
        ["inspect", "thread", "--top", "2"],
        ["inspect", "thread", "--top", "2", "--format", "csv"],
        ["inspect", "storage"],
        ["inspect", "storage", "--format", "csv"],
        ["plan", "retention", "--keep-newest", "3"],
    ]
    for args in runs:
        result = run_ckpt(*args, "--config", config, process=True)
        assert result.exit_code == 0, result.stderr
        _no_injected_line(result.stdout + result.stderr)
        assert SHOWN_NAME in result.output


# -- -o onto a FIFO, a device, a socket or a pipe writes into it, never replaces it ----------------------


def _commands_with_output() -> set[str]:
    from deerflow_ckpt.cli.app import COMMANDS, load_command

    found = set()
    for name in COMMANDS:
        command = load_command(name)
        assert command is not None
        subcommands = getattr(command, "commands", {"": command})
        for sub_name, sub in subcommands.items():
            if any("--output" in getattr(param, "opts", ()) for param in sub.params):
                found.add(f"{name} {sub_name}".strip())
    # convert's --output is the new database it writes, not a report: it must not exist (tests/test_convert.py).
    found.discard("convert")
    return found


@pytest.fixture
def output_runs(built_sqlite: BuiltDatabase, tmp_path: Path) -> dict[str, list[str]]:
    """Every command that takes -o, with arguments that make it report (and the format it writes)."""
    config = tmp_path / "config.yaml"
    config.write_text(LEGACY_CONFIG)
    runs = {
        "verify-shape": ["verify-shape", "--db", built_sqlite.db, "--format", "json"],
        "lint-config": ["lint-config", str(config)],
        "plan retention": ["plan", "retention", "--keep-newest", "3", "--db", built_sqlite.db, "--format", "sql"],
    }
    assert set(runs) == _commands_with_output()
    return runs


@functools.cache
def _stdout_of(args: tuple[str, ...]) -> str:
    result = run_ckpt(*args)
    assert result.exit_code in (0, 1), result.stderr
    return result.stdout


def _expected(args: list[str]) -> str:
    """What the command writes to stdout, the payload -o must carry."""
    return _stdout_of(tuple(args))


def _comparable(args: list[str], text: str) -> str:
    # The SQL script's header names where it was written; everything else is the same bytes.
    if args[0] == "plan":
        return "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    return text


@pytest.mark.slow
def test_output_to_a_fifo_feeds_its_reader(output_runs: dict[str, list[str]], tmp_path: Path) -> None:
    for args in output_runs.values():
        fifo, copy = tmp_path / "report.fifo", tmp_path / "read.out"
        os.mkfifo(fifo)
        with copy.open("wb") as into:
            reader = subprocess.Popen(["cat", str(fifo)], stdout=into)
            try:
                result = run_ckpt(*args, "-o", str(fifo))
                reader.wait(timeout=30)
            finally:
                reader.kill()
                reader.wait()
        assert result.exit_code in (0, 1), result.stderr
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
        assert _comparable(args, copy.read_text()) == _comparable(args, _expected(args))
        fifo.unlink()


def _device(path: Path, kind: int) -> Path:
    """A real device node at `path`: made with mknod as root (the null device, or a block device); otherwise
    a link to the system's own, which only root could replace."""
    if os.geteuid() == 0:
        number = os.makedev(1, 3) if kind == stat.S_IFCHR else os.makedev(7, 250)
        os.mknod(path, kind | 0o666, number)
        return path
    system = (
        "/dev/null"
        if kind == stat.S_IFCHR
        else next(entry.path for entry in os.scandir("/dev") if stat.S_ISBLK(os.stat(entry.path).st_mode))
    )
    path.symlink_to(system)
    return path


def test_output_to_a_character_device_keeps_the_device(output_runs: dict[str, list[str]], tmp_path: Path) -> None:
    null = _device(tmp_path / "null", stat.S_IFCHR)
    before = os.stat(null)
    for args in output_runs.values():
        result = run_ckpt(*args, "-o", str(null))
        assert result.exit_code in (0, 1), result.stderr
        after = os.stat(null)
        assert stat.S_ISCHR(after.st_mode) and (after.st_rdev, after.st_ino) == (before.st_rdev, before.st_ino)
    assert sorted(os.listdir(tmp_path)) == ["config.yaml", "null"]  # no temporary left beside it


def test_output_to_a_block_device_is_refused(output_runs: dict[str, list[str]], tmp_path: Path) -> None:
    disk = _device(tmp_path / "disk", stat.S_IFBLK)
    before = os.stat(disk)
    for args in output_runs.values():
        result = run_ckpt(*args, "-o", str(disk))
        assert result.exit_code == 2 and "is a block device" in result.stderr, result.output
        assert os.stat(disk) == before


@pytest.mark.slow
def test_output_to_dev_stdout_writes_into_the_pipe(output_runs: dict[str, list[str]]) -> None:
    for args in output_runs.values():
        result = run_ckpt(*args, "-o", "/dev/stdout", process=True)  # stdout is the pipe subprocess reads
        assert result.exit_code in (0, 1), result.stderr
        assert _comparable(args, result.stdout) == _comparable(args, _expected(args))


@contextlib.contextmanager
def _draining(descriptor: int) -> Iterator[Callable[[], bytes]]:
    """Everything read from `descriptor` until EOF, by a thread (a pipe holds only 64 KB)."""
    received: list[bytes] = []

    def drain() -> None:
        while chunk := os.read(descriptor, 65536):
            received.append(chunk)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()

    def result() -> bytes:
        thread.join(timeout=30)
        assert not thread.is_alive()
        return b"".join(received)

    yield result


def test_output_to_a_process_substitution_pipe(output_runs: dict[str, list[str]]) -> None:
    """`-o >(cmd)` hands ckpt /dev/fd/N, the write end of a pipe: the report goes into the pipe."""
    for args in output_runs.values():
        read_end, write_end = os.pipe()
        os.set_inheritable(write_end, True)  # as bash hands it over: open across the exec
        try:
            with _draining(read_end) as received:
                result = run_ckpt(*args, "-o", f"/dev/fd/{write_end}")
                os.close(write_end)
                write_end = -1
                data = received()
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        assert result.exit_code in (0, 1), result.stderr
        assert _comparable(args, data.decode()) == _comparable(args, _expected(args))


def _accept_one(server: socket.socket, received: list[bytes]) -> None:
    connection, _ = server.accept()
    with connection:
        while chunk := connection.recv(65536):
            received.append(chunk)


def test_output_to_a_unix_socket_is_a_stream_connection(output_runs: dict[str, list[str]], tmp_path: Path) -> None:
    path = tmp_path / "report.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        server.settimeout(60)
        for args in output_runs.values():
            received: list[bytes] = []
            listener = threading.Thread(target=_accept_one, args=(server, received), daemon=True)
            listener.start()
            result = run_ckpt(*args, "-o", str(path))
            listener.join(timeout=30)
            assert result.exit_code in (0, 1), result.stderr
            assert stat.S_ISSOCK(os.lstat(path).st_mode)
            assert _comparable(args, b"".join(received).decode()) == _comparable(args, _expected(args))


def test_a_regular_file_is_still_replaced_whole(output_runs: dict[str, list[str]], tmp_path: Path) -> None:
    report = tmp_path / "report.out"
    for args in output_runs.values():
        report.write_text("old report, longer than nothing\n" * 10_000)
        inode = os.stat(report).st_ino
        result = run_ckpt(*args, "-o", str(report))
        assert result.exit_code in (0, 1), result.stderr
        assert _comparable(args, report.read_text()) == _comparable(args, _expected(args))
        assert os.stat(report).st_ino != inode  # renamed into place, not written over


# -- the step summary and every json report carry no markup, HTML or character a terminal acts on --------

# The reviewer's directory: an image that fetches on view, a Markdown link and ESC (a '/' makes subdirectories).
MARKUP_NAME = "x<img src=https://e.example/p.png>[c](https://e.example)\x1b[31m"
# Characters the old hand-written list let through: Arabic letter mark, word joiner, a Unicode tag,
# interlinear annotation, private use, and the C1 CSI, RLO, LRI and paragraph separator it did catch.
INVISIBLE = "a\u061cb\u2060c\U000e0041d\ufff9e\ue000f\u009b31m\u202e\u2067\u2029g"
INVISIBLE_SHOWN = "a\\u061cb\\u2060c\\U000e0041d\\ufff9e\\ue000f\\x9b31m\\u202e\\u2067\\u2029g"


def test_printable_escapes_every_invisible_and_bidi_character() -> None:
    from deerflow_ckpt.report.printable import json_dumps, printable

    assert printable(INVISIBLE) == INVISIBLE_SHOWN
    assert printable(INVISIBLE, keep_lines=True) == INVISIBLE_SHOWN
    document = json_dumps({"name": INVISIBLE + "\udcff"})
    assert document.isascii() and json.loads(document) == {"name": INVISIBLE + "\udcff"}
    assert "\\udb40\\udc41" in document and "\\udcff" in document  # a tag as its pair, a byte as sarif writes it


@pytest.mark.slow
def test_the_step_summary_headline_is_neither_markup_nor_html(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    directory = tmp_path / MARKUP_NAME
    directory.mkdir(parents=True)
    database = directory / "deerflow.db"
    shutil.copyfile(built_sqlite.path, database)
    summary = tmp_path / "summary.md"
    result = run_ckpt(
        "verify-shape",
        "--db",
        str(database),
        "--format",
        "github",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
        process=True,
    )
    assert result.exit_code == 1, result.stderr
    written = summary.read_text()
    # No tag, no link (a ']' before '(' only escaped), no ESC: the name shown as text.
    assert "<img" not in written and not re.search(r"(?<!\\)\]\(", written) and "\x1b" not in written, written
    assert "&lt;img src=https:/e.example/p.png&gt;\\[c\\](https:/e.example)\\x1b\\[31m" in written


@pytest.mark.slow
def test_every_json_report_escapes_invisible_characters(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """lint-config and migrate-config json on config files named with C1, bidi and invisible characters and a
    byte that is not UTF-8, as real paths: the document is ASCII-safe, and parses back to the names."""
    directory = tmp_path / INVISIBLE
    directory.mkdir()
    name = os.fsencode(directory / "c\u009b31m\u202e") + b"\xff.yaml"
    with open(name, "w") as config:
        config.write(LEGACY_CONFIG)
    shown = os.fsdecode(name)
    database = directory / "deerflow.db"
    shutil.copyfile(built_sqlite.path, database)
    runs = [
        ["lint-config", shown, "--format", "json"],
        ["migrate-config", "--check", shown, "--format", "json"],
        ["verify-shape", "--db", str(database), "--format", "json"],
        ["verify-shape", "--db", str(database), "--format", "sarif"],
        ["inspect", "storage", "--db", str(database), "--format", "json"],
    ]
    for args in runs:
        result = run_ckpt(*args, process=True)
        assert result.exit_code in (0, 1), result.stderr
        assert result.stdout.isascii(), [ch for ch in result.stdout if not ch.isascii()]
        parsed = json.dumps(json.loads(result.stdout), ensure_ascii=False)
        # Each names the file or the database, except sarif, whose results are about checkpoints.
        assert "sarif" in args or (shown if "config" in args[0] else str(database)) in parsed


# -- the retention script's "run it with" command names the planned database exactly --------------------


def _shell_argument(command: str) -> bytes:
    """The database argument bash makes of `sqlite3 WORD < plan.sql`, as bytes."""
    word = command.removeprefix("sqlite3 ").rsplit(" < ", 1)[0]
    return subprocess.run(["bash", "-c", f"printf '%s' {word}"], capture_output=True, check=True).stdout


@pytest.mark.slow
def test_the_run_it_with_command_names_the_database_exactly(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """A Windows-style name (its backslashes were doubled) and one with ESC and a newline, as real paths."""
    for name in ("C:\\deer\\flow's", "esc\x1b[31m\nnext"):
        directory = tmp_path / name
        directory.mkdir()
        database = directory / "deerflow.db"
        shutil.copyfile(built_sqlite.path, database)
        script = run_ckpt("plan", "retention", "--keep-newest", "3", "--db", str(database), "--format", "sql")
        text = run_ckpt("plan", "retention", "--keep-newest", "3", "--db", str(database))
        assert script.exit_code == 0 == text.exit_code, script.stderr + text.stderr
        assert "\x1b" not in script.stdout + text.stdout
        run_with = next(line for line in script.stdout.splitlines() if "run it with" in line)
        shown = run_with.split("the database's shell: ", 1)[1]
        assert _shell_argument(shown) == os.fsencode(database)
        # The text report's next step shows the same command.
        assert f"run {shown}; then" in " ".join(text.stdout.split()) or shown in text.stdout


# -- -o /dev/fd/N writes only to a descriptor ckpt was handed, and only into a stream --------------------


@pytest.mark.slow
def test_output_to_a_descriptor_ckpt_opened_itself_is_refused(output_runs: dict[str, list[str]]) -> None:
    """fds 3 and 4 were multiprocessing's shared-memory arena (verify-shape's shares): the report went there
    and was lost, exit 0. Every name of a descriptor not handed over is a one-line error, nothing written."""
    for args in output_runs.values():
        for name in ("/dev/fd/3", "/dev/fd/4", "/proc/self/fd/3", "/dev/fd/9"):
            result = run_ckpt(*args, "-o", name, process=True)
            assert result.exit_code == 2, result.output
            errors = [line for line in result.stderr.splitlines() if "error" in line]
            assert errors == [
                f"ckpt: error: cannot write {name}: descriptor {name.rsplit('/', 1)[1]} was not handed "
                "to ckpt when it started (-o /dev/fd/N writes only to one its caller opened, such as "
                ">(cmd)'s)"
            ], result.stderr
            assert result.stdout == ""


def test_an_inherited_descriptor_on_a_block_device_is_refused(
    output_runs: dict[str, list[str]], tmp_path: Path
) -> None:
    """What the descriptor is open on is judged by fstat after the open: a block device handed over as fd N
    (opened read-only, so a regression fails rather than writes) is refused as a block device."""
    disk = os.open(_device(tmp_path / "disk", stat.S_IFBLK), os.O_RDONLY)
    os.set_inheritable(disk, True)
    try:
        for args in output_runs.values():
            result = run_ckpt(*args, "-o", f"/dev/fd/{disk}")
            assert result.exit_code == 2 and "is a block device" in result.stderr, result.output
    finally:
        os.close(disk)
