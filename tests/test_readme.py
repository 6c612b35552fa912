"""The README documents what the code does: its rule table is the registry, its quick start runs."""

from __future__ import annotations

import re
from pathlib import Path

from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.rules import RULES

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `(CK\d{3})` \| (\w+) \| ([^|]+) \| ([^|]+) \|$", re.M)


def test_rule_table_matches_the_registry() -> None:
    rows = {code: (severity, title.strip(), impact.strip()) for code, severity, title, impact in ROW.findall(README)}
    assert rows == {rule.code: (rule.severity.value, rule.title, rule.impact) for rule in RULES.values()}


def test_exit_code_table_lists_every_code() -> None:
    for code in ExitCode:
        assert f"| {int(code)} |" in README


def test_quick_start_is_two_commands() -> None:
    block = README.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]
    assert commands == ["./scripts/demo.sh", "./scripts/test.sh"]
