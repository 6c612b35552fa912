"""The README is the front door: short, its quick start runs, its samples are marked where they are cut, and
each of its examples runs on the demo project. The references moved to docs/ (tests/test_docs.py holds them)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from fixtures.demo import build_demo
from tests.cli import run_ckpt

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
# Pages with sample outputs besides the README: every one is held to the same marking of cuts.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# The front door stays short: what ckpt is, install, the quick start, an example per command, links.
MAX_LINES = 250


def test_readme_stays_short() -> None:
    assert len(README.splitlines()) <= MAX_LINES, "move reference text into docs/ and link it from the README"


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


def examples() -> list[list[str]]:
    """The README's one example per command, as arguments to ckpt."""
    block = README.split("## One example per command", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split("  #", 1)[0])[1:] for line in block.strip().splitlines()]


def test_there_is_an_example_for_every_command() -> None:
    """Every command with a man page (`ckpt-inspect-thread.1`: `inspect thread`) is shown in the README."""
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    shown = [shlex.split(line)[2:] for line in quick_start.splitlines() if line.startswith("$ ckpt ")]
    groups = ("inspect", "plan")  # commands with subcommands
    named = {"-".join(arguments[:2]) if arguments[0] in groups else arguments[0] for arguments in examples() + shown}
    assert named == {page.stem.removeprefix("ckpt-") for page in (REPO / "man").glob("ckpt-*.1")}


@pytest.mark.slow
def test_every_example_runs_on_the_demo(tmp_path: Path) -> None:
    """Run from the demo project, as the README says; each example does its job (exit 0, or 1 for findings)."""
    build_demo(tmp_path)
    for arguments in examples():
        result = run_ckpt(*arguments, cwd=tmp_path)
        assert result.exit_code in (0, 1), (arguments, result.output)
        assert "Traceback" not in result.output and "error:" not in result.stderr, (arguments, result.stderr)
    assert (tmp_path / "plan.sql").stat().st_size > 0 and (tmp_path / "converted.db").stat().st_size > 0
