"""docs/ci-gate.md's GitHub Actions example, run step by step against the demo project.

Every `run:` step that calls ckpt is executed with bash, as the runner does, in a directory holding the
demo's legacy config.yaml and its SQLite database; `secrets` are replaced by the demo database.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fixtures.demo import build_demo

REPO = Path(__file__).resolve().parents[1]
PAGE = (REPO / "docs" / "ci-gate.md").read_text(encoding="utf-8")


def workflow() -> dict[str, Any]:
    block = PAGE.split("\n## GitHub Actions\n", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    document: dict[str, Any] = yaml.safe_load(block)
    return document


def steps() -> list[dict[str, Any]]:
    jobs = workflow()["jobs"]
    assert list(jobs) == ["ckpt"]
    found: list[dict[str, Any]] = jobs["ckpt"]["steps"]
    return found


def ckpt_steps() -> list[dict[str, Any]]:
    return [step for step in steps() if str(step.get("run", "")).startswith("ckpt ")]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("ci-example")
    return directory, build_demo(directory)


def run_step(step: dict[str, Any], directory: Path, database: Path, summary: Path) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ)  # conftest has cleared what would change ckpt
    # The console script of the ckpt installed next to this interpreter, as `pip install` puts it on PATH.
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    environment["GITHUB_STEP_SUMMARY"] = str(summary)
    environment["GITHUB_ACTIONS"] = "true"
    environment["CKPT_DB"] = str(database)
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]], capture_output=True, text=True, cwd=directory, env=environment, check=False
    )


def test_the_example_runs_every_command_the_page_documents() -> None:
    commands = {shlex.split(step["run"])[1] for step in ckpt_steps()}
    assert commands == {"migrate-config", "lint-config", "verify-shape"}
    assert workflow()["jobs"]["ckpt"]["env"]["CKPT_DB"].startswith("${{ secrets.")


@pytest.mark.slow
def test_every_ckpt_step_runs(project: tuple[Path, Path], tmp_path: Path) -> None:
    directory, database = project
    summary = tmp_path / "summary.md"
    outcomes = {}
    for step in ckpt_steps():
        result = run_step(step, directory, database, summary)
        assert result.returncode in (0, 1), (step["run"], result.stderr)
        assert "Traceback" not in result.stderr
        if "--format github" in step["run"]:
            lines = result.stdout.splitlines()
            assert lines and all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
            assert "\x1b[" not in result.stdout
        outcomes[step["name"]] = result.returncode
    # The demo keeps the legacy key and a few storage faults: both gates fail, as they should.
    assert outcomes["config.yaml carries no deprecated key"] == 1
    assert outcomes["Checkpoint storage shape (a restored copy of production)"] == 1
    written = summary.read_text(encoding="utf-8")
    for command in ("migrate-config", "lint-config", "verify-shape"):
        assert f"### ckpt {command}" in written


@pytest.mark.slow
def test_the_uploaded_sarif_is_the_one_written(project: tuple[Path, Path], tmp_path: Path) -> None:
    directory, database = project
    (sarif_step,) = [step for step in ckpt_steps() if "--format sarif" in step["run"]]
    written = shlex.split(sarif_step["run"])
    target = written[written.index("--output") + 1]
    (upload,) = [step for step in steps() if str(step.get("uses", "")).startswith("github/codeql-action/upload-sarif")]
    assert upload["with"]["sarif_file"] == target
    result = run_step(sarif_step, directory, database, tmp_path / "summary.md")
    assert result.returncode == 0 and result.stdout == ""
    document = json.loads((directory / target).read_text(encoding="utf-8"))
    results = document["runs"][0]["results"]
    assert results and all("physicalLocation" in r["locations"][0] for r in results)
