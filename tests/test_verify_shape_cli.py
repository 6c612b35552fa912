"""verify-shape as an operator runs it: which database, read-only proof, formats, exits, redaction."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import psycopg
import pytest

from deerflow_ckpt.report.shape_json import JSON_SCHEMA_VERSION
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase

REPO = Path(__file__).resolve().parents[1]
ANSI_ESCAPE = "\x1b["


def scan_json(*args: str) -> tuple[int, dict[str, object]]:
    code, out, err = run_ckpt("verify-shape", "--format", "json", *args)
    assert code in (0, 1), err
    document: dict[str, object] = json.loads(out)
    return code, document


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def sidecars(path: Path) -> dict[str, str | None]:
    """The bytes that a read-only scan must leave as they were: the database and its WAL (not -shm)."""
    return {suffix: digest(path.with_name(path.name + suffix)) for suffix in ("", "-wal")}


@pytest.fixture
def sqlite_copy(built_sqlite: BuiltDatabase, tmp_path: Path) -> Path:
    copy = tmp_path / "deerflow.db"
    shutil.copyfile(built_sqlite.path, copy)
    return copy


# -- read-only proof ------------------------------------------------------------------------------


def test_scan_leaves_database_and_wal_byte_identical_under_a_live_writer(sqlite_copy: Path) -> None:
    """A writer holds uncheckpointed rows in -wal; the scan sees them and changes no byte."""
    writer = sqlite3.connect(sqlite_copy)
    try:
        assert writer.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        writer.execute("PRAGMA wal_autocheckpoint=0")
        with writer:
            # A second copy of a clean thread, rows and writes, as a writer would leave it mid-flight.
            for table, columns in (
                ("checkpoints", "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"),
                ("writes", "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value"),
            ):
                writer.execute(
                    f"INSERT INTO {table} (thread_id, {columns}) SELECT 'live-writer-thread', {columns} "
                    f"FROM {table} WHERE thread_id = 'clean-delta-k3'"
                )
        assert sqlite_copy.with_name("deerflow.db-wal").stat().st_size > 0
        before = sidecars(sqlite_copy)
        code, document = scan_json("--db", str(sqlite_copy), "--thread", "live-writer-thread")
        assert code == 0
        summary = document["summary"]
        assert isinstance(summary, dict) and summary["threads"] == 1 and summary["checkpoints"] > 0
        assert sidecars(sqlite_copy) == before
    finally:
        writer.close()


def test_scan_of_a_rollback_journal_database_stays_rollback(tmp_path: Path, sqlite_copy: Path) -> None:
    """SqliteSaver would switch the journal to WAL on first use; ckpt must not."""
    with sqlite3.connect(sqlite_copy) as connection:
        connection.execute("PRAGMA journal_mode=DELETE")
    before = sidecars(sqlite_copy)
    files_before = sorted(p.name for p in tmp_path.iterdir())
    code, _ = scan_json("--db", str(sqlite_copy))
    assert code == 1
    assert sidecars(sqlite_copy) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files_before


def test_missing_database_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    code, out, err = run_ckpt("verify-shape", "--db", str(missing))
    assert code == 2 and out == ""
    assert f"ckpt: error: {missing}: no such file\n" in err and "Traceback" not in err
    assert not missing.exists()


def test_path_with_uri_characters_is_opened_not_created(tmp_path: Path, sqlite_copy: Path) -> None:
    """'?' and '#' in a path must not turn into URI query or fragment (which would create a new file)."""
    odd = tmp_path / "we?ird #name.db"
    shutil.copyfile(sqlite_copy, odd)
    code, document = scan_json("--db", str(odd), "--thread", "clean-delta-k3")
    assert code == 0 and document["summary"]["threads"] == 1  # type: ignore[index]
    assert not (tmp_path / "we").exists()


@pytest.mark.slow
def test_wal_database_without_shm_in_a_read_only_directory(tmp_path: Path, sqlite_copy: Path) -> None:
    """SQLite cannot open it read-only there: say so and offer the explicit immutable opt-in."""
    with sqlite3.connect(sqlite_copy) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
    backup = tmp_path / "backup"
    backup.mkdir()
    shutil.copyfile(sqlite_copy, backup / "deerflow.db")
    backup.chmod(0o555)
    try:
        # A real process without root's capabilities: only there does the directory's mode bind.
        refused = run_ckpt("verify-shape", "--db", str(backup / "deerflow.db"), unprivileged=True)
        assert refused.exit_code == 2, refused.stderr
        assert "without its -shm file" in refused.stderr and "--immutable" in refused.stderr
        immutable = run_ckpt(
            "verify-shape",
            "--db",
            str(backup / "deerflow.db"),
            "--immutable",
            "--thread",
            "clean-delta-k3",
            unprivileged=True,
        )
        assert immutable.exit_code == 0, immutable.stderr
        assert "(immutable)" in immutable.stdout
        assert sorted(p.name for p in backup.iterdir()) == ["deerflow.db"]
    finally:
        backup.chmod(0o755)


@pytest.mark.postgres
def test_scan_works_for_a_role_that_can_only_select(built_postgres: BuiltDatabase, pg_readonly_role) -> None:  # type: ignore[no-untyped-def]
    readonly_dsn = pg_readonly_role(built_postgres.db)
    _, as_owner = scan_json("--db", built_postgres.db)
    _, as_reader = scan_json("--db", readonly_dsn)
    assert as_reader["summary"] == as_owner["summary"]
    assert as_reader["findings"] == as_owner["findings"]


@pytest.mark.postgres
def test_scan_creates_nothing_on_postgres(built_postgres: BuiltDatabase) -> None:
    """No setup(), no migrations: the schema and the migration rows are as the saver left them."""
    query = (
        "SELECT (SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'),"
        " (SELECT count(*) FROM checkpoint_migrations), (SELECT count(*) FROM checkpoints)"
    )
    with psycopg.connect(built_postgres.db) as connection:
        before = connection.execute(query).fetchone()
    scan_json("--db", built_postgres.db)
    with psycopg.connect(built_postgres.db) as connection:
        assert connection.execute(query).fetchone() == before


# -- older savers ----------------------------------------------------------------------------------


def test_sqlite_written_before_task_path_existed(sqlite_copy: Path) -> None:
    _, current = scan_json("--db", str(sqlite_copy))
    with sqlite3.connect(sqlite_copy) as connection:
        connection.execute("ALTER TABLE writes DROP COLUMN task_path")
    _, older = scan_json("--db", str(sqlite_copy))
    assert older["findings"] == current["findings"]


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_set_up_by_an_older_saver(built_postgres: BuiltDatabase, pg_database: str) -> None:
    """checkpoint_writes without task_path and fewer migration rows still scan the same."""
    _, current = scan_json("--db", built_postgres.db)
    with psycopg.connect(pg_database, autocommit=True) as target, psycopg.connect(built_postgres.db) as source:
        for table in ("checkpoint_migrations", "checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            described = source.execute(
                "SELECT column_name || ' ' || data_type FROM information_schema.columns "
                "WHERE table_name = %s AND column_name <> 'task_path' ORDER BY ordinal_position",
                (table,),
            )
            columns = [row[0] for row in described]
            target.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
            names = ", ".join(c.split(" ")[0] for c in columns)
            with (
                source.cursor().copy(f"COPY {table} ({names}) TO STDOUT") as out,
                target.cursor().copy(f"COPY {table} ({names}) FROM STDIN") as into,
            ):
                for chunk in out:
                    into.write(chunk)
        target.execute("DELETE FROM checkpoint_migrations WHERE v > 4")
    _, older = scan_json("--db", pg_database)
    assert older["findings"] == current["findings"]


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_metadata_nested_past_the_decoder_limit(built_postgres: BuiltDatabase, pg_database: str) -> None:
    """jsonb nested deeper than a JSON decoder follows: an inline messages value reads as no marker, metadata
    is CK104 (LangGraph's savers decode it with the same json module, and fail), and the scan goes on."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_database) as saver:
        saver.setup()  # the test's own scratch database: the scan itself never sets anything up
    with psycopg.connect(pg_database, autocommit=True) as target, psycopg.connect(built_postgres.db) as source:
        row = source.execute("SELECT thread_id, checkpoint_id, checkpoint FROM checkpoints LIMIT 1").fetchone()
        assert row is not None
        deep = "[" * 5000 + "]" * 5000
        target.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata) "
            "VALUES (%s, '', %s, jsonb_set(%s, '{channel_values,messages}', %s::jsonb), %s::jsonb)",
            (row[0], row[1], psycopg.types.json.Jsonb(row[2]), deep, f'{{"step": {deep}, "source": "loop"}}'),
        )
    code, document = scan_json("--db", pg_database)
    assert code == 1, document
    assert document["summary"]["checkpoints"] == 1  # type: ignore[index]
    (finding,) = document["findings"]  # type: ignore[misc]
    assert finding["rule"] == "CK104" and "nested deeper than a JSON decoder follows" in finding["message"]


# -- formats and exit codes -------------------------------------------------------------------------


def test_json_document_shape(built_sqlite: BuiltDatabase) -> None:
    code, out, _ = run_ckpt("verify-shape", "--db", str(built_sqlite.path), "--format", "json")
    assert code == 1 and ANSI_ESCAPE not in out
    document = json.loads(out)
    assert document["schema_version"] == JSON_SCHEMA_VERSION == 4 and document["command"] == "verify-shape"
    assert set(document["timeline"]) >= {"classes", "changes", "in_force"}
    assert document["database"]["backend"] == "sqlite"
    assert document["exit_code"] == 1
    assert sum(document["summary"]["by_rule"].values()) == len(document["findings"])
    finding = document["findings"][0]
    assert set(finding) >= {"rule", "severity", "thread_id", "checkpoint_ns", "checkpoint_id", "step", "message"}


def test_output_file_keeps_stdout_empty(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    code, out, err = run_ckpt(
        "verify-shape", "--db", str(built_sqlite.path), "--format", "json", "--output", str(report)
    )
    assert code == 1 and out == ""
    assert json.loads(report.read_text())["summary"]["threads"] > 0
    assert "scanning SQLite" in err


def test_text_report_names_database_and_findings(built_sqlite: BuiltDatabase) -> None:
    code, out, _ = run_ckpt("verify-shape", "--db", str(built_sqlite.path), "--thread", "fault-ck101-stuffed-list")
    assert code == 1
    assert f"Scanned SQLite {built_sqlite.path}" in out
    assert "CK101" in out and "fault-ck101-stuffed-list" in out


@pytest.mark.parametrize(
    ("fail_on", "expected"),
    [("error", 0), ("warning", 0), ("info", 1)],
)
def test_fail_on_decides_the_exit_code(built_sqlite: BuiltDatabase, fail_on: str, expected: int) -> None:
    """A fork is an info finding: only --fail-on info turns it into exit 1."""
    code, _, _ = run_ckpt(
        "verify-shape", "--db", str(built_sqlite.path), "--thread", "fork-update-k3", "--fail-on", fail_on
    )
    assert code == expected


def test_clean_thread_exits_zero(built_sqlite: BuiltDatabase) -> None:
    code, out, _ = run_ckpt(
        "verify-shape", "--db", str(built_sqlite.path), "--thread", "clean-delta-k3", "--cadence", "3"
    )
    assert code == 0 and "No storage-shape violations found." in out


def test_unknown_thread_is_an_error(built_sqlite: BuiltDatabase) -> None:
    code, out, err = run_ckpt("verify-shape", "--db", str(built_sqlite.path), "--thread", "no-such-thread")
    assert code == 2 and out == ""
    assert "no checkpoints for thread 'no-such-thread'" in err


@pytest.mark.parametrize("debug", [[], ["--debug"]])
def test_password_never_printed(debug: list[str]) -> None:
    dsn = "postgresql+psycopg://operator:s3cr3t-pw@127.0.0.1:1/deerflow"
    code, out, err = run_ckpt(*debug, "verify-shape", "--db", dsn)
    assert code == 2
    assert "s3cr3t-pw" not in out + err
    assert "operator:***@127.0.0.1:1/deerflow" in err


# -- choosing the database from config.yaml ----------------------------------------------------------


def write_config(directory: Path, text: str) -> Path:
    path = directory / "config.yaml"
    path.write_text(text)
    return path


def test_sqlite_from_config_with_cadence(tmp_path: Path, sqlite_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """database.sqlite_dir resolves against the working directory, the file is deerflow.db."""
    (tmp_path / "data").mkdir()
    shutil.move(sqlite_copy, tmp_path / "data" / "deerflow.db")
    write_config(
        tmp_path,
        "database:\n  backend: sqlite\n  sqlite_dir: data\n  checkpoint_channel_mode: delta\n"
        "  checkpoint_delta_snapshot_frequency: 3   # legacy key, carried by DeerFlow's shim\n",
    )
    monkeypatch.chdir(tmp_path)
    code, document = scan_json("--thread", "clean-delta-k3")
    assert code == 0
    assert document["database"]["description"] == f"SQLite {(tmp_path / 'data' / 'deerflow.db').resolve()}"  # type: ignore[index]
    assert document["settings"]["expected_cadence"] == 3  # type: ignore[index]


def test_legacy_checkpointer_section_overrides_database(
    tmp_path: Path, sqlite_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path,
        f"database:\n  backend: sqlite\n  sqlite_dir: nowhere\ncheckpointer:\n  type: sqlite\n"
        f"  connection_string: {sqlite_copy}\n",
    )
    code, out, err = run_ckpt("verify-shape", "--config", str(config), "--thread", "clean-delta-k3")
    assert code == 0, err
    assert "checkpointer: section" in out and str(sqlite_copy) in out


@pytest.mark.postgres
def test_postgres_url_from_an_environment_variable(
    tmp_path: Path, built_postgres: BuiltDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, "database:\n  backend: postgres\n  postgres_url: $CKPT_TEST_DATABASE_URL\n")
    monkeypatch.setenv("CKPT_TEST_DATABASE_URL", built_postgres.db.replace("postgresql://", "postgresql+psycopg://"))
    code, document = scan_json("--config", str(config), "--thread", "clean-delta-k3")
    assert code == 0
    assert document["database"]["backend"] == "postgres"  # type: ignore[index]
    monkeypatch.delenv("CKPT_TEST_DATABASE_URL")
    code, _, err = run_ckpt("verify-shape", "--config", str(config))
    assert code == 2 and "CKPT_TEST_DATABASE_URL" in err


def test_nothing_found_lists_what_was_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_ckpt("verify-shape")
    assert code == 2 and out == ""
    assert str(tmp_path / "config.yaml") in err
    assert str(tmp_path / ".deer-flow" / "data" / "deerflow.db") in err


@pytest.mark.parametrize(
    ("section", "relative_file"),
    [
        ("database:\n  backend: sqlite\n  sqlite_dir: data\n", Path("data") / "deerflow.db"),
        ("checkpointer:\n  type: sqlite\n  connection_string: ckpts/store.db\n", Path("home") / "ckpts" / "store.db"),
        ("checkpointer:\n  type: sqlite\n  connection_string: file:raw%20dir/x.db?mode=rwc\n", Path("raw dir/x.db")),
    ],
)
def test_verify_shape_scans_the_database_lint_config_names(
    built_sqlite: BuiltDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, section: str, relative_file: Path
) -> None:
    """Both commands locate a config's checkpoint database with the same rules."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEER_FLOW_HOME", str(tmp_path / "home"))
    target = tmp_path / relative_file
    target.parent.mkdir(parents=True)
    shutil.copyfile(built_sqlite.path, target)
    (tmp_path / "config.yaml").write_text(section, encoding="utf-8")
    code, out, _ = run_ckpt("lint-config", "--format", "json", "config.yaml")
    assert code in (0, 1)
    named = json.loads(out)["files"][0]["checkpoint_database"]["display"]
    assert named == f"SQLite {target.resolve()}"
    code, _, err = run_ckpt("verify-shape", "--config", "config.yaml", "--format", "json")
    assert code in (0, 1), err
    assert f"scanning SQLite {target.resolve()} " in err
