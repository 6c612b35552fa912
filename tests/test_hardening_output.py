"""Output that drives other programs (README, "Security model and limits"): CSV cells a spreadsheet would
run, a newline in a path that a CI log reads as a workflow command, and `-o` onto a pipe, a device or a
socket. Each attack is rebuilt as it was made: crafted rows by SQL on both backends, hostile names as real
paths, real FIFOs, devices, sockets and pipes."""

from __future__ import annotations

import csv
import io
import re
import shutil
import sqlite3
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
