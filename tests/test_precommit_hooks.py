"""The pre-commit hooks this repository publishes: their file pattern, and their entries run as pre-commit runs them.

pre-commit calls `entry` with the matching staged files appended; a hook fails on a non-zero exit or,
for the rewriting hook, when it modified a file.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli import CkptRun, run_ckpt

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "fixtures" / "configs"
HOOKS: list[dict[str, Any]] = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
BY_ID = {hook["id"]: hook for hook in HOOKS}


def run_hook(hook_id: str, *files: Path) -> CkptRun:
    program, *arguments = shlex.split(BY_ID[hook_id]["entry"])
    assert program == "ckpt"
    # A process of its own, as pre-commit runs the hook.
    return run_ckpt(*arguments, *map(str, files), cwd=REPO, process=True)


def place(tmp_path: Path, fixture: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((CORPUS / fixture / "input.yaml").read_bytes())
    return path


def test_every_hook_is_complete() -> None:
    assert set(BY_ID) == {"ckpt-migrate-config", "ckpt-migrate-config-fix", "ckpt-lint-config"}
    for hook in HOOKS:
        assert {"id", "name", "entry", "language", "files"} <= set(hook)
        assert hook["language"] == "python"
    # pre-commit may otherwise split the files over parallel processes, and the cross-file check
    # would never see two configs that share a database.
    assert BY_ID["ckpt-lint-config"]["require_serial"] is True


@pytest.mark.parametrize(
    ("path", "matches"),
    [
        ("config.yaml", True),
        ("backend/config.yaml", True),
        ("deploy/config.prod.yml", True),
        ("docker-compose.yaml", False),
        ("myconfig.yaml", False),
        ("config.yaml.bak", False),
        # DeerFlow's template: its settings are not what any process runs with.
        ("config.example.yaml", False),
        ("backend/config.example.yaml", False),
    ],
)
def test_file_pattern(path: str, matches: bool) -> None:
    for hook in HOOKS:
        selected = bool(re.search(hook["files"], path)) and not re.search(hook.get("exclude", "^$"), path)
        assert selected is matches, hook["id"]


def test_check_hook_fails_on_the_legacy_key_and_writes_nothing(tmp_path: Path) -> None:
    legacy = place(tmp_path, "carry_basic")
    before = legacy.read_bytes()
    result = run_hook("ckpt-migrate-config", legacy)
    assert result.exit_code == 1
    assert result.stdout.startswith(f"--- {legacy}") and legacy.read_bytes() == before


def test_check_hook_passes_a_current_config(tmp_path: Path) -> None:
    current = tmp_path / "config.yaml"
    current.write_bytes((CORPUS / "carry_basic" / "expected.yaml").read_bytes())
    assert run_hook("ckpt-migrate-config", current).exit_code == 0


def test_fix_hook_rewrites_once_then_is_quiet(tmp_path: Path) -> None:
    legacy = place(tmp_path, "carry_basic")
    assert run_hook("ckpt-migrate-config-fix", legacy).exit_code == 0
    assert legacy.read_bytes() == (CORPUS / "carry_basic" / "expected.yaml").read_bytes()
    # pre-commit fails a run that modified files; the second run leaves the file alone.
    rewritten = legacy.read_bytes()
    assert run_hook("ckpt-migrate-config-fix", legacy).exit_code == 0
    assert legacy.read_bytes() == rewritten


@pytest.mark.slow
def test_lint_hook_sees_every_file_in_one_run(tmp_path: Path) -> None:
    """Two configs pointing at one SQLite file with different cadences: an error only a joint run sees."""
    body = "database:\n  backend: sqlite\n  sqlite_dir: {dir}\n  checkpoint_channel_mode: delta\n"
    first, second = tmp_path / "a" / "config.yaml", tmp_path / "b" / "config.yaml"
    for path, cadence in ((first, 10), (second, 100)):
        path.parent.mkdir()
        text = body.format(dir=tmp_path / "data") + f"  checkpoint_delta:\n    snapshot_frequency: {cadence}\n"
        path.write_text(text, encoding="utf-8")
    assert run_hook("ckpt-lint-config", first).exit_code == 0
    joint = run_hook("ckpt-lint-config", first, second)
    assert joint.exit_code == 1
    assert "CK510" in joint.stdout + joint.stderr
