"""The demo's first screen reads plainly: a time a finding gives for a cadence lies inside a span the timeline lists
under that cadence's name (a class, or epochs it could not place in one), and a change is dated inside its newer
cadence's span, with the line saying which write dates it. The demo is the README's, written by the real graphs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fixtures.demo import build_demo
from tests.cli import run_ckpt

# "K=10 still wrote at 2026-12-06T01:35:00Z": the cadence a finding says wrote, and when.
STILL_WROTE = re.compile(r"(K(?:=|>=|<=| in )[^ ]*(?: [^ ]*\])?) still wrote at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("demo")
    build_demo(directory)
    return directory


@pytest.fixture(scope="module")
def document(demo: Path) -> dict[str, Any]:
    run = run_ckpt("verify-shape", "--format", "json", cwd=demo)
    assert run.exit_code == 1, run.stderr
    parsed: dict[str, Any] = json.loads(run.stdout)
    return parsed


def _spans(timeline: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    spans: dict[str, list[tuple[str, str]]] = {}
    for entry in [*timeline["classes"], *timeline.get("unplaced", [])]:
        spans.setdefault(entry["cadence"], []).append((entry["first_write"], entry["last_write"]))
    return spans


def test_every_time_a_finding_gives_a_cadence_is_inside_a_span_listed_for_it(document: dict[str, Any]) -> None:
    spans = _spans(document["timeline"])
    quoted = [match.groups() for f in document["findings"] for match in STILL_WROTE.finditer(f["message"])]
    assert len(quoted) >= 4  # the demo's CK201 and CK202 on two threads say when the other cadence wrote
    for label, written in quoted:
        assert any(first <= written <= last for first, last in spans.get(label, [])), (label, written, spans)


def test_the_epochs_no_class_holds_are_listed_with_what_they_fit(demo: Path, document: dict[str, Any]) -> None:
    timeline = document["timeline"]
    (unplaced,) = timeline["unplaced"]
    assert (unplaced["cadence"], unplaced["threads"], unplaced["fits"]) == ("K=10", 2, ["K>=17", "K=10"])
    assert timeline["ambiguous_epochs"] == 2
    text = run_ckpt("verify-shape", cwd=demo).stdout
    assert (
        f"    not placed: K=10 {unplaced['first_write']}..{unplaced['last_write']} (2 threads; too few snapshots "
        "to tell which of K>=17 and K=10 wrote them)"
    ) in text.splitlines()
    summary = run_ckpt("inspect", "summary", cwd=demo).stdout
    assert f"  not placed: K=10 {unplaced['first_write']}..{unplaced['last_write']} (2 threads;" in summary


def test_a_change_is_dated_inside_its_newer_cadence_and_says_by_which_write(
    demo: Path, document: dict[str, Any]
) -> None:
    timeline = document["timeline"]
    classes = {c["cadence"]: c for c in timeline["classes"]}
    text = run_ckpt("verify-shape", cwd=demo).stdout
    assert timeline["changes"]
    for change in timeline["changes"]:
        newer = classes[change["to"]]
        assert newer["first_write"] <= change["at"] <= newer["last_write"]
        assert (
            f"    {change['kind']} change {change['from']} -> {change['to']} at {change['at']} (the first "
            f"{change['to']} write {change['from']} cannot explain; last {change['from']} write "
            f"{change['last_old']['written']})"
        ) in text.splitlines()
