"""No test inherits the shell that started pytest: conftest clears what changes ckpt, and misses no `$VAR`."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import run_ckpt
from tests.conftest import TEST_CONTROL, clears_for_tests

REPO = Path(__file__).resolve().parents[1]
# DeerFlow's `$VAR` and `${VAR}` references, as configs (and the tests' inline configs) write them.
REFERENCE = re.compile(r"\$\{?([A-Z_][A-Z0-9_]*)")
LEAKED = {"DEER_FLOW_CONFIG_PATH": "/nowhere/config.yaml", "GITHUB_ACTIONS": "true", "NO_COLOR": "1", "SNAP": "7"}


@pytest.fixture(scope="module")
def leaky_shell() -> Iterator[None]:
    """The shell's variables, set before the per-test fixture runs, as a developer's would be."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in LEAKED.items():
            patch.setenv(name, value)
        patch.setenv("CKPT_TEST_PG_DSN", os.environ.get("CKPT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1/x"))
        yield


@pytest.mark.usefixtures("leaky_shell")
def test_a_test_starts_without_the_shells_variables() -> None:
    assert not [name for name in LEAKED if name in os.environ]
    assert "CKPT_TEST_PG_DSN" in os.environ  # a test-control variable reaches the tests


@pytest.mark.usefixtures("leaky_shell")
def test_a_variable_set_for_one_run_is_seen_by_that_run_only(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("database:\n  backend: sqlite\n  checkpoint_channel_mode: delta\n")
    found = run_ckpt("migrate-config", "--check", env={"DEER_FLOW_CONFIG_PATH": str(config)}, cwd=tmp_path)
    assert found.exit_code == 0 and "DEER_FLOW_CONFIG_PATH" in found.stderr
    assert "DEER_FLOW_CONFIG_PATH" not in os.environ


def test_every_variable_a_config_reads_is_cleared() -> None:
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in (REPO / "tests").glob("*.py")]
    texts += [p.read_text(encoding="utf-8", errors="replace") for p in (REPO / "fixtures").rglob("*.yaml")]
    read = {name for text in texts for name in REFERENCE.findall(text)} - TEST_CONTROL
    assert "DATABASE_URL" in read
    assert sorted(name for name in read if not clears_for_tests(name)) == []
