"""The README is the front door: its quick start runs, its samples are marked where they are cut. The
references moved to docs/ (tests/test_docs.py holds them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
# Pages with sample outputs besides the README: every one is held to the same marking of cuts.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


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


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_sample_outputs_mark_every_cut(page: Path) -> None:
    """A cut in a sample output is written as `[… what was left out …]`, never as a bare `…`."""
    assert unmarked_cuts("```\nfirst line\n…\n```\n") == ["…"]
    assert unmarked_cuts("```\nfirst line; …\n[… 3 more lines …]\n```\n") == ["first line; …"]
    assert not unmarked_cuts(page.read_text(encoding="utf-8"))


def test_the_samples_are_still_there() -> None:
    """The README keeps the quick start's sample; the command reference keeps the ones that moved there."""
    assert any(language == "" for language, _ in fenced_blocks(README))
    commands = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    samples = [lines[0] for language, lines in fenced_blocks(commands) if language == "" and lines]
    for command in ("$ ckpt inspect storage", "$ ckpt plan retention", "$ ckpt convert"):
        assert any(first.startswith(command) for first in samples), command


def test_quick_start_says_how_to_run_ckpt_yourself() -> None:
    after = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/ckpt" in after and ".venv/bin/activate" in after
