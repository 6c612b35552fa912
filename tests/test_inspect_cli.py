"""`ckpt inspect thread` and `ckpt inspect summary` through the command line, on SQLite and Postgres.

Formats, exits, unknown threads and namespaces, --top/--by/--all, --what-if, and the terminal
conventions (ASCII fallback, NO_COLOR), in a real process where the stream's encoding matters.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from typing import Any

import pytest

from deerflow_ckpt.analysis.store_summary import RankBy
from deerflow_ckpt.analysis.what_if import DEFAULT_WHAT_IF
from deerflow_ckpt.cli import inspect as inspect_cli
from tests.cli import CkptRun, run_ckpt
from tests.conftest import BuiltDatabase

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
COLOUR_SGR = re.compile(r"\x1b\[[0-9;]*(?:3[0-9]|9[0-7]|38;[0-9;]+)m")


@pytest.fixture(params=BACKENDS)
def built(request: pytest.FixtureRequest) -> BuiltDatabase:
    database: BuiltDatabase = request.getfixturevalue(f"built_{request.param}")
    return database


def run(*args: str, env: dict[str, str] | None = None, process: bool = False) -> CkptRun:
    """The command every test here runs."""
    return run_ckpt("inspect", *args, env=env, process=process)


def db_args(built: BuiltDatabase) -> list[str]:
    return ["--db", built.db, *(["--schema", built.schema] if built.schema else [])]


def as_json(built: BuiltDatabase, *args: str) -> dict[str, Any]:
    result = run(*args, *db_args(built), "--format", "json")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_rank_choices_match_the_analysis() -> None:
    assert set(inspect_cli.RankChoice.__args__) == {by.value for by in RankBy}


def test_text_report(built: BuiltDatabase) -> None:
    result = run("thread", "clean-delta-k3", *db_args(built), "--cadence", "3")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for expected in (
        "Thread clean-delta-k3",
        "Snapshot intervals",
        "open tail: 0 message-writing steps",
        "Cadence: K = 3 (K in [3, 3]), matches the expected K = 3 (from --cadence)",
        "Storage (stored column lengths)",
        "What-if",
        "exactly as modelled",
    ):
        assert expected in out
    assert "█" in out
    assert "\x1b[" not in out  # not a terminal: no escape codes at all
    # The database is named once, in the report (which describes itself when saved), not again on stderr.
    assert out.startswith("Inspected ") and "inspecting" not in result.stderr


def test_json_document(built: BuiltDatabase) -> None:
    document = as_json(built, "thread", "clean-delta-k10", "overwrite-node-k10")
    assert document["schema_version"] == 2
    assert document["command"] == "inspect thread"
    assert document["database"]["backend"] == built.backend
    assert [t["thread_id"] for t in document["threads"]] == ["clean-delta-k10", "overwrite-node-k10"]
    shown = document["threads"][0]["shown"]
    (epoch,) = shown["epochs"]
    counters, chain = epoch["metrics"]
    assert (counters["method"], chain["method"]) == ("counters", "chain")
    assert counters["buckets"] == [{"lower": 10, "upper": 11, "count": counters["count"]}]
    assert shown["cadence"]["inferred"] == 10
    cadences = [row["cadence"] for row in shown["what_if"]["rows"]]
    assert cadences == [*sorted(DEFAULT_WHAT_IF), None]
    assert shown["what_if"]["model_check"]["exact"] is True
    forced = document["threads"][1]["shown"]["intervals"]["forced"]
    assert [f["trigger"] for f in forced] == ["overwrite"]
    assert document["threads"][1]["shown"]["what_if"]["append_only"] is False


def test_what_if_cadences(built: BuiltDatabase) -> None:
    document = as_json(built, "thread", "clean-delta-k3", "--what-if", "1,5,50", "--cadence", "7")
    rows = document["threads"][0]["shown"]["what_if"]["rows"]
    assert [row["cadence"] for row in rows] == [1, 5, 7, 50, None]
    document = as_json(built, "thread", "clean-delta-k3", "--what-if", "2")
    assert [row["cadence"] for row in document["threads"][0]["shown"]["what_if"]["rows"]] == [2, 3, None]
    for bad in ("a,b", "0", ","):
        result = run("thread", "clean-delta-k3", *db_args(built), "--what-if", bad)
        assert result.exit_code == 2, bad


def test_csv_matches_the_json_buckets(built: BuiltDatabase) -> None:
    threads = ("mixed-writers-k10-k1000-k10", "fault-ck204-stripped-snapshot")
    result = run("thread", *threads, *db_args(built), "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0]) == ["thread_id", "checkpoint_ns", "epoch", "metric", "lower", "upper", "count"]
    document = as_json(built, "thread", *threads)
    names = ("snapshot_interval", "snapshot_interval_chain")
    for thread in document["threads"]:
        assert len(thread["shown"]["epochs"]) == (3 if thread["thread_id"].startswith("mixed") else 1)
        for epoch in thread["shown"]["epochs"]:
            for metric, name in zip(epoch["metrics"], names, strict=True):
                expected = [(b["lower"], b["upper"], b["count"]) for b in metric["buckets"]]
                got = [
                    (int(r["lower"]), int(r["upper"]), int(r["count"]))
                    for r in rows
                    if r["thread_id"] == thread["thread_id"]
                    and r["metric"] == name
                    and r["epoch"] == str(epoch["index"])
                ]
                assert got == expected
        tail = [r for r in rows if r["thread_id"] == thread["thread_id"] and r["metric"] == "open_tail"]
        assert [int(tail[0]["lower"])] == [thread["shown"]["intervals"]["open_tail"]]


def test_unknown_thread_exits_2_before_any_output(built: BuiltDatabase) -> None:
    for output_format in ("text", "json", "csv"):
        result = run("thread", "clean-delta-k3", "no-such-thread", *db_args(built), "--format", output_format)
        assert result.exit_code == 2
        assert "no checkpoints for thread 'no-such-thread'" in result.stderr
        assert result.stdout == ""


def test_selection_is_exactly_one_of_ids_top_all(built: BuiltDatabase) -> None:
    for args in ([], ["clean-delta-k3", "--all"], ["--top", "2", "--all"], ["clean-delta-k3", "--top", "1"]):
        result = run("thread", *args, *db_args(built))
        assert result.exit_code == 2, args
        assert "exactly one" in result.output


def test_namespaces(built: BuiltDatabase) -> None:
    document = as_json(built, "thread", "subgraph-stable-k3", "--ns", "sub")
    thread = document["threads"][0]
    assert thread["shown"]["checkpoint_ns"] == "sub"
    assert thread["subgraphs"] == []
    default = as_json(built, "thread", "subgraph-percall-k3")["threads"][0]
    assert default["shown"]["checkpoint_ns"] == ""
    assert [g["namespace"] for g in default["subgraphs"]] == ["sub:*"]
    missing = run("thread", "subgraph-stable-k3", "--ns", "nope", *db_args(built))
    assert missing.exit_code == 2
    assert "has no namespace 'nope'" in missing.stderr and "'sub'" in missing.stderr
    only = as_json(built, "thread", "--all", "--ns", "sub")
    assert [t["thread_id"] for t in only["threads"]] == ["subgraph-stable-k3"]


def test_all_and_top(built: BuiltDatabase) -> None:
    every = as_json(built, "thread", "--all")["threads"]
    assert [t["thread_id"] for t in every] == sorted(t.thread_id for t in built.manifest.threads)
    keys = {
        "size": lambda t: t["storage"]["total"],
        "checkpoints": lambda t: t["checkpoints"],
        "replay-depth": lambda t: t["shown"]["replay_depth"]["max"],
    }
    for by, key in keys.items():
        ranked = sorted(every, key=lambda t: (-key(t), t["thread_id"]))
        top = as_json(built, "thread", "--top", "4", "--by", by)["threads"]
        assert [t["thread_id"] for t in top] == [t["thread_id"] for t in ranked[:4]], by


@pytest.mark.slow
def test_summary_read_by_several_processes_is_the_same(built: BuiltDatabase) -> None:
    """inspect summary splits the threads over processes as verify-shape does; every byte of every format is the
    same as one process's, the heaviest threads and the timeline (its epochs and fronts, merged) included."""
    for output_format in ("json", "csv"):
        single = run("summary", *db_args(built), "--heaviest", "3", "--format", output_format, "--jobs", "1")
        parallel = run("summary", *db_args(built), "--heaviest", "3", "--format", output_format, "--jobs", "3")
        assert single.exit_code == parallel.exit_code == 0, single.output + parallel.output
        assert parallel.stdout == single.stdout
    said = run("summary", *db_args(built), "--format", "json", "--jobs", "3", "--verbose").stderr.splitlines()
    assert any(line.startswith("ckpt: threads read by 3 processes (--jobs 3;") for line in said), said


def test_summary(built: BuiltDatabase) -> None:
    every = as_json(built, "thread", "--all")["threads"]
    summary = as_json(built, "summary", "--heaviest", "3")["summary"]
    assert summary["threads"] == len(built.manifest.threads)
    modes = Counter(t["shown"]["mode"] for t in every)
    assert summary["modes"] == {mode: modes.get(mode, 0) for mode in ("delta", "full", "migrated")}
    assert summary["modes"]["migrated"] == len(built.manifest.by_scenario("migration"))
    inferred = Counter(t["shown"]["cadence"]["inferred"] for t in every if t["shown"]["cadence"]["inferred"])
    buckets = summary["inferred_cadence"]["buckets"]
    assert {b["lower"]: b["count"] for b in buckets} == dict(inferred)
    assert all(b["upper"] == b["lower"] + 1 for b in buckets)
    assert summary["storage"]["total"] == sum(t["storage"]["total"] for t in every)
    heaviest = sorted(every, key=lambda t: (-t["storage"]["total"], t["thread_id"]))[:3]
    assert [h["thread_id"] for h in summary["heaviest"]] == [t["thread_id"] for t in heaviest]
    assert summary["threads_with_several_epochs"] == len(built.manifest.by_scenario("mixed-writers"))
    timeline = summary["timeline"]
    assert sum(c["epochs"] for c in timeline["classes"]) + timeline["ambiguous_epochs"] >= summary["threads"] - 2
    assert timeline["in_force"] is None  # the catalogue's threads write several cadences side by side
    assert {row["cadence"] for row in summary["chart"]["rows"]} == {c["cadence"] for c in timeline["classes"]}
    text = run("summary", *db_args(built))
    assert text.exit_code == 0, text.output
    assert "Inferred K across threads" in text.stdout and "Heaviest threads" in text.stdout
    assert "Cadence over time" in text.stdout and "in force: none; " in text.stdout
    table = run("summary", *db_args(built), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert {int(r["lower"]): int(r["count"]) for r in rows if r["metric"] == "inferred_cadence"} == dict(inferred)


@pytest.mark.slow
def test_ascii_terminal_gets_hash_bars(built_sqlite: BuiltDatabase) -> None:
    """rich raises UnicodeEncodeError on an ASCII stdout; the report falls back to '#' bars."""
    for command in (["thread", "mixed-writers-k10-k1000-k10"], ["summary"]):
        # A real process: only there is sys.stdout an ASCII stream, as on an ASCII terminal.
        done = run(*command, *db_args(built_sqlite), env={"PYTHONIOENCODING": "ascii"}, process=True)
        assert done.exit_code == 0, done.stderr
        out = done.stdout_bytes.decode("ascii")  # raises if anything non-ASCII was written
        assert re.search(r"\s#+\s", out), out


def test_colour_follows_force_color_and_no_color(built_sqlite: BuiltDatabase) -> None:
    args = ("thread", "clean-delta-k3", "--cadence", "3", *db_args(built_sqlite))
    forced = run(*args, env={"FORCE_COLOR": "1"})
    assert COLOUR_SGR.search(forced.stdout)
    plain = run(*args, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert plain.exit_code == 0
    assert not COLOUR_SGR.search(plain.stdout)
    machine = run(*args, "--format", "json", env={"FORCE_COLOR": "1"})
    assert "\x1b" not in machine.stdout
    json.loads(machine.stdout)


@pytest.mark.slow
def test_help_imports_nothing_heavy() -> None:
    from tests.test_import_cost import probe

    for args in (["inspect", "--help"], ["inspect", "thread", "--help"], ["inspect", "summary", "--help"]):
        report = probe(*args)
        assert report["code"] == 0
        assert report["loaded"] == [], args
