"""The CI contract of the reporting commands: formats, streams, exits, colour.

verify-shape and migrate-config here; lint-config has its own tests. Runs are in process, each with only
the environment it names (NO_COLOR, FORCE_COLOR, GITHUB_STEP_SUMMARY); a real process where the exit
status itself is the point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deerflow_ckpt.config import messages
from deerflow_ckpt.rules import RULES
from tests.cli import CkptRun, run_ckpt
from tests.conftest import BuiltDatabase

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "fixtures" / "configs"
ANSI = "\x1b["
# Threads of the built database with known findings: an error rule, and a fork (info only).
FAULTY = "fault-ck101-stuffed-list"
FORK_ONLY = "fork-update-k3"
CLEAN = "clean-delta-k3"


def scan(built: BuiltDatabase, thread: str, *args: str, env: dict[str, str] | None = None) -> CkptRun:
    return run_ckpt("verify-shape", "--db", str(built.path), "--thread", thread, *args, env=env)


def json_findings(built: BuiltDatabase, thread: str) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = json.loads(scan(built, thread, "--format", "json").stdout)["findings"]
    return findings


# -- verify-shape ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_github_format_annotates_every_finding_at_run_level(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    expected = json_findings(built_sqlite, FAULTY)
    result = scan(
        built_sqlite, FAULTY, "--format", "github", "--color", "always", env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == len(expected) > 0
    for line, finding in zip(lines, expected, strict=True):
        level = {"error": "error", "warning": "warning", "info": "notice"}[finding["severity"]]
        assert line.startswith(f"::{level} title={finding['rule']} ")
        # Database findings have no file to point at.
        assert "file=" not in line.split("::")[1]
        assert f"thread {FAULTY}" in line
    assert ANSI not in result.stdout
    written = summary.read_text(encoding="utf-8")
    assert written.startswith("earlier step\n")
    assert "### ckpt verify-shape" in written and FAULTY in written


def test_github_format_without_step_summary_writes_no_file(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    result = scan(built_sqlite, FAULTY, "--format", "github")
    assert result.exit_code == 1 and result.stdout.startswith("::error")
    assert "Scanned" in result.stderr


def test_sarif_format_carries_the_registry_and_logical_locations(built_sqlite: BuiltDatabase) -> None:
    expected = json_findings(built_sqlite, FAULTY)
    result = scan(built_sqlite, FAULTY, "--format", "sarif", env={"FORCE_COLOR": "1"})
    assert result.exit_code == 1 and ANSI not in result.stdout
    sarif = json.loads(result.stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == list(RULES)
    assert run["invocations"][0]["exitCode"] == 1
    results = run["results"]
    assert [r["ruleId"] for r in results] == [f["rule"] for f in expected]
    for sarif_result, finding in zip(results, expected, strict=True):
        logical = sarif_result["locations"][0]["logicalLocations"][0]
        assert finding["thread_id"] in logical["fullyQualifiedName"]
        if finding["checkpoint_id"]:
            assert finding["checkpoint_id"] in logical["fullyQualifiedName"]


def test_sarif_to_output_file_leaves_stdout_empty(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    target = tmp_path / "shape.sarif"
    result = scan(built_sqlite, CLEAN, "--cadence", "3", "--format", "sarif", "--output", str(target))
    assert result.exit_code == 0 and result.stdout == ""
    assert json.loads(target.read_text(encoding="utf-8"))["runs"][0]["results"] == []


@pytest.mark.parametrize(
    ("thread", "args", "expected"),
    [
        (FAULTY, (), 1),
        (FAULTY, ("--exit-zero",), 0),
        (FORK_ONLY, ("--fail-on", "info"), 1),
        (FORK_ONLY, ("--fail-on", "info", "--exit-zero"), 0),
        (FORK_ONLY, ("--fail-on", "warning"), 0),
    ],
)
def test_exit_zero_and_fail_on(built_sqlite: BuiltDatabase, thread: str, args: tuple[str, ...], expected: int) -> None:
    assert scan(built_sqlite, thread, *args).exit_code == expected


def test_exit_zero_never_hides_a_failed_scan(tmp_path: Path) -> None:
    # A real process: what a CI step sees is the console script's exit status.
    result = run_ckpt("verify-shape", "--db", str(tmp_path / "missing.db"), "--exit-zero", process=True)
    assert result.exit_code == 2 and result.stdout == ""


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        ((), {}, False),  # piped: no colour
        (("--color", "always"), {}, True),
        (("--color", "always"), {"NO_COLOR": "1"}, True),  # an explicit flag beats the environment
        (("--color", "never"), {"FORCE_COLOR": "1"}, False),
        (("--color", "auto"), {"FORCE_COLOR": "1"}, True),
        (("--color", "auto"), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        (("--color", "auto"), {"TERM": "dumb", "FORCE_COLOR": "1"}, False),  # a dumb terminal draws no colour
    ],
)
def test_text_colour_follows_the_flag_and_environment(
    built_sqlite: BuiltDatabase, args: tuple[str, ...], env: dict[str, str], coloured: bool
) -> None:
    result = scan(built_sqlite, FAULTY, *args, env=env)
    assert result.exit_code == 1
    assert (ANSI in result.stdout) is coloured


def test_machine_formats_never_carry_ansi(built_sqlite: BuiltDatabase) -> None:
    for output_format in ("json", "github", "sarif"):
        result = scan(built_sqlite, FAULTY, "--format", output_format, "--color", "always")
        assert ANSI not in result.stdout and ANSI not in result.stderr, output_format


# -- migrate-config -------------------------------------------------------------------------------


def legacy_config(tmp_path: Path, name: str = "carry_basic") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "config.yaml"
    path.write_bytes((CORPUS / name / "input.yaml").read_bytes())
    return path


def flat_key_line(path: Path) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if "checkpoint_delta_snapshot_frequency" in line)


def test_migrate_github_annotates_the_flat_key_line(tmp_path: Path) -> None:
    path = legacy_config(tmp_path)
    before = path.read_bytes()
    result = run_ckpt("migrate-config", "--check", "--format", "github", str(path))
    assert result.exit_code == 1 and path.read_bytes() == before
    command, _, message = result.stdout.splitlines()[0].partition("::")[2].partition("::")
    level, _, properties = command.partition(" ")
    assert level == "warning"
    assert set(properties.split(",")) == {
        f"file={path}",
        f"line={flat_key_line(path)}",
        "title=CK501 deprecated flat cadence key",
    }
    assert message.startswith("database.checkpoint_delta_snapshot_frequency is deprecated")
    # DeerFlow's warning, verbatim apart from the workflow-command escaping of its characters.
    assert "checkpoint_delta_snapshot_frequency is deprecated" in result.stdout
    assert messages.CARRIED_FORWARD.split("(%r)")[0] in result.stdout


def test_migrate_sarif_locates_findings_in_the_file(tmp_path: Path) -> None:
    path = legacy_config(tmp_path, "both_differ_1000_vs_10")
    result = run_ckpt("migrate-config", "--check", "--format", "sarif", str(path))
    assert result.exit_code == 1
    results = json.loads(result.stdout)["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"CK501", "CK502"}
    region = results[0]["locations"][0]["physicalLocation"]
    assert region["region"]["startLine"] == flat_key_line(path)
    assert region["artifactLocation"]["uri"].endswith("config.yaml")


def test_migrate_exit_zero_keeps_the_check_read_only(tmp_path: Path) -> None:
    path = legacy_config(tmp_path)
    before = path.read_bytes()
    assert run_ckpt("migrate-config", "--check", "--exit-zero", str(path)).exit_code == 0
    assert path.read_bytes() == before


def test_migrate_fail_on_counts_notes(tmp_path: Path) -> None:
    """With no channel mode DeerFlow runs full mode, which migrate-config notes (info)."""
    path = tmp_path / "config.yaml"
    path.write_bytes(b"database:\n  backend: sqlite\n  checkpoint_delta_snapshot_frequency: 5\n")
    assert run_ckpt("migrate-config", "--diff", str(path)).exit_code == 0
    assert run_ckpt("migrate-config", "--diff", "--fail-on", "info", str(path)).exit_code == 1
    assert run_ckpt("migrate-config", "--diff", "--fail-on", "info", "--exit-zero", str(path)).exit_code == 0


def test_migrate_diff_in_colour_only_when_asked(tmp_path: Path) -> None:
    path = legacy_config(tmp_path)
    plain = run_ckpt("migrate-config", "--diff", str(path)).stdout
    coloured = run_ckpt("migrate-config", "--diff", "--color", "always", str(path)).stdout
    assert ANSI not in plain and "\x1b[31m-" in coloured and "\x1b[32m+" in coloured
    # Stripping the colour gives back the plain diff exactly.
    stripped = coloured
    for code in ("\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[36m"):
        stripped = stripped.replace(code, "")
    assert stripped == plain


def test_github_file_paths_are_relative_to_the_workspace(tmp_path: Path) -> None:
    """GitHub attaches an annotation to the diff only for a workspace-relative path."""
    path = legacy_config(tmp_path / "deploy")
    by_absolute = run_ckpt(
        "migrate-config", "--check", "--format", "github", str(path), env={"GITHUB_WORKSPACE": str(tmp_path)}
    )
    by_dot = run_ckpt("migrate-config", "--check", "--format", "github", "./deploy/config.yaml", cwd=tmp_path)
    outside = run_ckpt(
        "migrate-config", "--check", "--format", "github", str(path), env={"GITHUB_WORKSPACE": str(REPO)}
    )
    assert "file=deploy/config.yaml," in by_absolute.stdout
    assert "file=deploy/config.yaml," in by_dot.stdout
    # A file outside the workspace keeps the path it was given.
    assert f"file={path}," in outside.stdout
