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
from hypothesis import given
from hypothesis import strategies as st
from psycopg import sql

from tests.cli import run_ckpt
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
