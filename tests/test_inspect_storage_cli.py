"""`ckpt inspect storage` end to end, on the storage scenario written by real graphs (both backends): text,
json and csv tell the same story, the app's orphan threads and the large base64 values are named, the
compaction advice follows the file, and a legacy checkpointer file in the database's home is named."""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deerflow_ckpt.analysis.storage import human_bytes
from fixtures import plain_app
from tests.cli import run_ckpt

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _json(*args: str) -> dict[str, Any]:
    result = run_ckpt("inspect", "storage", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.mark.slow
def test_json_names_where_the_bytes_are(built_storage: Callable[[str], Any], backend: str) -> None:
    built = built_storage(backend)
    document = _json("--db", str(built.after_deletes))
    manifest = built.after_deletes_manifest
    assert document["schema_version"] == 4 and document["command"] == "inspect storage"
    names = {relation["name"] for relation in document["relations"]}
    assert {"checkpoints"} <= names and ({"writes"} <= names or {"checkpoint_writes", "checkpoint_blobs"} <= names)
    channels = {(row["stored_in"], row["channel"]) for row in document["channels"]}
    assert any(channel == "viewed_images" for _, channel in channels)
    # The builder's image and documents are found in the threads and channels it wrote them to.
    found = {(value["thread_id"], value["channel"], value["looks_like"]) for value in document["large_values"]}
    for record in manifest.large_values:
        assert (record.thread_id, record.channel, record.looks_like) in found
    assert {(v["thread_id"], v["looks_like"]) for v in document["large_values"]} <= {
        (r.thread_id, r.looks_like) for r in manifest.large_values
    }
    # Four days of round-robin traffic: four daily buckets, adding up to the whole.
    growth = document["growth"]
    assert growth["unit"] == "day"
    assert [bucket["start"][:10] for bucket in growth["buckets"]] == manifest.days
    # The traffic ended days before the run: the week up to now holds all of it, and the store is idle.
    assert document["rate"]["bytes"] == sum(bucket["bytes"] for bucket in growth["buckets"])
    assert document["rate"]["idle_seconds"] > 24 * 3600
    assert growth["untimed"] == {"checkpoints": 0, "bytes": 0} and growth["out_of_range"]["checkpoints"] == 0
    app = document["app"]
    assert sorted(orphan["thread_id"] for orphan in app["orphans"]) == sorted(manifest.orphans)
    assert app["app_only"] == len(manifest.app_only)
    assert app["orphan_bytes"] == sum(orphan["bytes"] for orphan in app["orphans"]) > 0
    assert [thread["thread_id"] for thread in document["heaviest"]][:2] == sorted(
        {r.thread_id for r in manifest.large_values},
        key=lambda thread: -next(t["bytes"] for t in document["heaviest"] if t["thread_id"] == thread),
    )
    if backend == "sqlite":
        files = document["sqlite"]
        assert files["freelist_count"] > 0
        assert files["freelist_bytes"] == files["freelist_count"] * files["page_size"]
        used = (files["page_count"] - files["freelist_count"]) * files["page_size"]
        assert files["used_bytes"] == used
        assert files["vacuum"] == {
            "frees_at_least_bytes": files["freelist_bytes"],
            "needs_beside_the_file_bytes": used,
            "needs_in_temp_directory_bytes": used,
        }
        assert document["advice"][0]["subject"] == "VACUUM"
    else:
        assert any(relation["dead_rows"] for relation in document["relations"])
        assert document["postgres"]["database_bytes"] > 0


@pytest.mark.slow
def test_csv_is_the_growth_series_json_gives(built_storage: Callable[[str], Any], backend: str) -> None:
    built = built_storage(backend)
    document = _json("--db", str(built.db), "--top", "2")
    result = run_ckpt("inspect", "storage", "--db", str(built.db), "--top", "2", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0]) == ["series", "thread_id", "unit", "start", "checkpoints", "bytes", "blob_rows"]
    store = [(row["start"], int(row["checkpoints"]), int(row["bytes"])) for row in rows if row["series"] == "store"]
    assert store == [(b["start"], b["checkpoints"], b["bytes"]) for b in document["growth"]["buckets"]]
    assert {row["series"] for row in rows} == {"store", "thread"}
    threads = {row["thread_id"] for row in rows if row["series"] == "thread"}
    assert threads == {thread["thread_id"] for thread in document["heaviest"]} and len(threads) == 2
    for thread in document["heaviest"]:
        series = [
            (row["start"], int(row["checkpoints"]), int(row["bytes"]))
            for row in rows
            if row["series"] == "thread" and row["thread_id"] == thread["thread_id"]
        ]
        assert series == [(b["start"], b["checkpoints"], b["bytes"]) for b in thread["growth"]["buckets"]]
    # csv has no room to name the database: stderr does.
    assert "ckpt: inspecting" in result.stderr


def test_no_channels_reads_no_values(built_storage: Callable[[str], Any], backend: str) -> None:
    built = built_storage(backend)
    document = _json("--db", str(built.db), "--no-channels")
    assert document["channels"] is None and document["large_values"] == []
    assert document["growth"]["buckets"] and document["relations"]


def test_text_report_on_a_store_after_deletes(built_storage: Callable[[str], Any]) -> None:
    built = built_storage("sqlite")
    result = run_ckpt("inspect", "storage", "--db", str(built.after_deletes), env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith(f"Storage of SQLite {built.after_deletes} (chosen via --db)")
    for heading in ("Files", "Tables and indexes", "Bytes by channel", "Large values", "Bytes written per day",
                    "Heaviest threads", "Threads the app no longer knows", "Compaction"):  # fmt: skip
        assert heading in text, heading
    for orphan in built.after_deletes_manifest.orphans:
        assert orphan in text
    assert "ckpt never runs VACUUM" in text and "freelist" in text


@pytest.mark.slow
def test_text_shows_the_vacuum_and_table_figures(built_storage: Callable[[str], Any], backend: str) -> None:
    built = built_storage(backend)
    document = _json("--db", str(built.after_deletes))
    result = run_ckpt("inspect", "storage", "--db", str(built.after_deletes), env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    section = lines[lines.index("Tables and indexes") + 2 :]
    rows = {line.split()[0]: line for line in section[: len(document["relations"])]}
    for relation in document["relations"]:
        cells = rows[relation["name"]]
        # Every part of a table's bytes is shown: indexes on both backends, heap and TOAST apart on Postgres.
        assert human_bytes(relation["index_bytes"]) in cells
        if backend == "postgres":
            assert human_bytes(relation["heap_bytes"]) in cells and human_bytes(relation["toast_bytes"]) in cells
            assert relation["heap_bytes"] + relation["toast_bytes"] + relation["index_bytes"] == relation["bytes"]
    if backend == "postgres":
        assert "last (auto)analyze" in result.stdout
    else:
        used = human_bytes(document["sqlite"]["used_bytes"])
        vacuum = next(advice for advice in document["advice"] if advice["subject"] == "VACUUM")
        assert vacuum["urgency"] == "watch" and f"it needs about {used} free beside the file" in vacuum["message"]
        assert f"a VACUUM would free at least {human_bytes(document['sqlite']['freelist_bytes'])}" in result.stdout
    # The traffic ended more than a day before the run: the rate is the week up to now, and says so.
    assert "up to now" in result.stdout and "last write " in result.stdout


@pytest.mark.slow
def test_a_legacy_checkpointer_file_in_the_databases_home_is_named(built_storage: Callable[[str], Any],
                                                                    tmp_path: Path) -> None:  # fmt: skip
    built = built_storage("sqlite")
    # DeerFlow's layout: database.sqlite_dir's default `.deer-flow/data`, the legacy checkpointer's default
    # store.db in the home above it (tests/test_discovery_layouts.py restates the rules).
    database = tmp_path / ".deer-flow" / "data" / "deerflow.db"
    database.parent.mkdir(parents=True)
    shutil.copy(built.db, database)
    legacy = tmp_path / ".deer-flow" / "store.db"
    legacy.write_bytes(b"\0" * 12345)
    document = _json("--db", str(database))
    assert document["legacy_files"] == [
        {"path": str(legacy), "bytes": 12345, "wal_bytes": None, "shm_bytes": None, "total_bytes": 12345}
    ]
    # A legacy store in WAL mode: its -wal and -shm are part of what it holds on disk.
    legacy.with_name("store.db-wal").write_bytes(b"\0" * 4000)
    legacy.with_name("store.db-shm").write_bytes(b"\0" * 300)
    document = _json("--db", str(database))
    assert document["legacy_files"] == [
        {"path": str(legacy), "bytes": 12345, "wal_bytes": 4000, "shm_bytes": 300, "total_bytes": 16645}
    ]
    result = run_ckpt("inspect", "storage", "--db", str(database), env={"COLUMNS": "200"})
    assert f"legacy checkpointer file {legacy}: 16.3 KiB (file 12.1 KiB, -wal 3.9 KiB, -shm 300 B)" in result.stdout


@pytest.mark.slow
@pytest.mark.postgres
def test_a_password_in_the_dsn_is_never_shown(built_storage: Callable[[str], Any]) -> None:
    built = built_storage("postgres")
    dsn = str(built.db).replace("postgres@", "postgres:hunter2secret@", 1)
    assert "hunter2secret" in dsn
    for output_format in ("text", "json", "csv"):
        result = run_ckpt("inspect", "storage", "--db", dsn, "--format", output_format)
        assert result.exit_code == 0, result.output
        assert "hunter2secret" not in result.stdout + result.stderr


def test_inspect_summary_points_to_it(built_storage: Callable[[str], Any]) -> None:
    built = built_storage("sqlite")
    result = run_ckpt("inspect", "summary", "--db", str(built.db))
    assert result.exit_code == 0, result.output
    assert "ckpt inspect storage" in result.stdout


@pytest.mark.parametrize(
    "args", [("inspect", "storage", "--format", "csv"), ("inspect", "summary", "--format", "csv"), ("verify-shape",)]
)
def test_the_database_named_on_stderr_cannot_drive_a_terminal(
    built_storage: Callable[[str], Any], tmp_path: Path, args: tuple[str, ...]
) -> None:
    """The informational line naming the database escapes what a path brings in (ESC, BEL)."""
    odd = tmp_path / "a\x1b[31mred\x07.db"
    shutil.copyfile(built_storage("sqlite").path, odd)
    result = run_ckpt(*args, "--db", str(odd))
    assert result.exit_code in (0, 1), result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "a\\x1b[31mred\\x07.db" in result.stderr


def test_a_store_written_within_a_second_has_not_enough_history_for_a_rate(tmp_path: Path) -> None:
    """A plain LangGraph app's store written just now through the real SqliteSaver: no rate per week (its
    seconds stretched to a week read +58 MiB/week), in text and json; csv is the series alone, as ever."""
    database = plain_app.write_sqlite(tmp_path / "app.db")
    text = run_ckpt("inspect", "storage", "--db", str(database), "--color", "never")
    assert text.exit_code == 0, text.output
    assert "  rate: not enough history (a rate per week needs a day since the first write" in text.stdout
    assert "/week" not in text.stdout
    rate = _json("--db", str(database))["rate"]
    assert (rate["bytes_per_week"], rate["enough_history"]) == (None, False)
    assert rate["checkpoints"] == plain_app.THREADS * plain_app.TURNS * 3 and rate["bytes"] > 0
    assert rate["history_seconds"] < 24 * 3600
    csv_run = run_ckpt("inspect", "storage", "--db", str(database), "--format", "csv")
    assert csv_run.exit_code == 0 and "week" not in csv_run.stdout


def test_a_store_written_over_days_has_a_rate(built_storage: Callable[[str], Any]) -> None:
    built = built_storage("sqlite")
    rate = _json("--db", str(built.db))["rate"]
    assert rate["enough_history"] is True and rate["history_seconds"] > 24 * 3600
    # The window is at most the week up to now: what it wrote, per week, is at least what it wrote.
    assert rate["bytes_per_week"] >= rate["bytes"] > 0
    text = run_ckpt("inspect", "storage", "--db", str(built.db), "--color", "never")
    assert "up to now: +" in text.stdout and "/week written" in text.stdout and "not enough history" not in text.stdout
