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


def fenced_blocks(text: str) -> list[tuple[str, list[str]]]:
    """Every fenced block as (its language, its lines), fences paired in order."""
    blocks: list[tuple[str, list[str]]] = []
    current: tuple[str, list[str]] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            if current is None:
                current = (stripped[3:], [])
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current[1].append(line)
    return blocks


def unmarked_cuts(text: str) -> list[str]:
    """Lines of sample outputs (fences without a language) that drop lines, or a line's end, silently."""
    # A line that is, or ends in, an ellipsis: "…" alone, or a message cut with "; …".
    cut = re.compile(r"(?:…|\.\.\.)\s*$")
    samples = [lines for language, lines in fenced_blocks(text) if language == ""]
    return [line for lines in samples for line in lines if cut.search(line) and not line.rstrip().endswith("…]")]


def test_sample_outputs_mark_every_cut() -> None:
    """A cut in a sample output is written as `[… what was left out …]`, never as a bare `…`."""
    assert any(language == "" for language, _ in fenced_blocks(README))
    assert unmarked_cuts("```\nfirst line\n…\n```\n") == ["…"]
    assert unmarked_cuts("```\nfirst line; …\n[… 3 more lines …]\n```\n") == ["first line; …"]
    assert not unmarked_cuts(README)


def test_quick_start_says_how_to_run_ckpt_yourself() -> None:
    after = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/ckpt" in after and ".venv/bin/activate" in after
