"""`--help` of every command and subcommand speaks the operator's terms: domain metavars (PATH, FILE, N,
FORMAT...), never Python type names or typer's `<type>` labels; group listings give whole summaries; the
short flags the conventions promise exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.core import TyperGroup

from deerflow_ckpt.cli.app import app
from deerflow_ckpt.exitcodes import exit_statuses
from tests.cli import run_ckpt
from tests.test_manpages import contexts

# typer's labels ("<list[str]>", "<text|json>", "<int>") and bare Python type names in a help row.
PYTHON_TYPES = re.compile(r"<[^>\s]*>|\b(?:list|dict|tuple|set)\[|\b(?:str|int|bool|float|Path|NoneType)\b")
COMMAND_PATHS = {
    "ckpt",
    "ckpt migrate-config",
    "ckpt lint-config",
    "ckpt verify-shape",
    "ckpt inspect",
    "ckpt plan",
    "ckpt convert",
    "ckpt config",
}
# Groups, and `ckpt config`, which prints nothing informational to leave out.
NO_QUIET = {"ckpt", "ckpt inspect", "ckpt plan", "ckpt config"}
LEAVES = {"ckpt inspect thread", "ckpt inspect summary", "ckpt inspect storage", "ckpt plan retention"}


def command_paths() -> list[tuple[str, bool]]:
    """Every visible command's path, and whether it is a group, walked from the click tree typer builds."""
    return [(ctx.command_path, isinstance(ctx.command, TyperGroup)) for ctx in contexts()]


def help_of(path: str) -> str:
    result = run_ckpt(*path.split()[1:], "--help", env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_walk_reaches_every_command() -> None:
    assert {path for path, _ in command_paths()} == COMMAND_PATHS | LEAVES


def test_the_pattern_catches_typer_labels() -> None:
    for bad in ("PATH <list[str]>", "FILE <list[Path]>", "--stdin-filename <str>", "--format <text|json|csv>"):
        assert PYTHON_TYPES.search(bad), bad
    for good in ("PATH", "--db PATH|DSN", "--what-if K,K,...", "the plain integer you mean", "[default: text]"):
        assert not PYTHON_TYPES.search(good), good


@pytest.mark.parametrize("path", sorted(COMMAND_PATHS | LEAVES))
def test_help_shows_no_python_types(path: str) -> None:
    text = help_of(path)
    found = [line for line in text.splitlines() if PYTHON_TYPES.search(line)]
    assert not found, f"`{path} --help` shows Python types:\n" + "\n".join(found)


@pytest.mark.parametrize("path", sorted(path for path, group in command_paths() if group))
def test_group_listings_show_whole_summaries(path: str) -> None:
    listing = help_of(path).split("Commands:", 1)[1].split("\nExit codes:", 1)[0]
    assert "..." not in listing, listing
    summaries = re.split(r"\n  \S+ +", "\n" + listing.strip("\n"))[1:]
    assert summaries and all(" ".join(s.split()).endswith(".") for s in summaries), listing


@pytest.mark.parametrize(
    ("path", "short", "long"),
    [
        ("ckpt", "-V", "--version"),
        *((path, "-q", "--quiet") for path in sorted(COMMAND_PATHS - NO_QUIET | LEAVES)),
        ("ckpt lint-config", "-o", "--output"),
        ("ckpt verify-shape", "-o", "--output"),
        ("ckpt plan retention", "-o", "--output"),
    ],
)
def test_short_flags(path: str, short: str, long: str) -> None:
    assert re.search(rf"^\s+{short}, {long}\b", help_of(path), re.M)


def test_every_output_option_has_its_short_form() -> None:
    def visit(command: Any) -> list[list[str]]:
        opts = [param.opts for param in command.params if "--output" in param.opts]
        for sub in getattr(command, "commands", {}).values():
            opts += visit(sub)
        return opts

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="ckpt")
    assert isinstance(root, TyperGroup)
    outputs = [opts for name in root.list_commands(ctx) for opts in visit(root.get_command(ctx, name))]
    assert outputs and all("-o" in opts for opts in outputs), outputs


def test_migrate_config_help_says_a_hand_fix_exits_2_without_check(tmp_path: Path) -> None:
    """A file migrate-config must leave for a hand fix exits 2 without --check and 1 under it: its --help and
    `ckpt --help` say both."""
    config = tmp_path / "config.yaml"
    config.write_text("database:\n  checkpoint_delta_snapshot_frequency: yes\n", encoding="utf-8")
    for args, code in ((("migrate-config",), 2), (("migrate-config", "--diff"), 2), (("migrate-config", "--check"), 1)):
        result = run_ckpt("--isolated", *args, str(config))
        assert result.exit_code == code and "fix it by hand" in result.stderr, (args, result.output)
    for path, row in (("ckpt migrate-config", "(without --check) a file that needs a hand fix"), ("ckpt", "hand fix")):
        listed = " ".join(help_of(path).split("\nExit codes:\n", 1)[1].split())
        assert "2 usage, configuration, I/O or internal error, or " in listed and row in listed, listed


def test_version_short_flag() -> None:
    result = run_ckpt("-V")
    assert result.exit_code == 0 and result.stdout.startswith("ckpt ")


@pytest.mark.parametrize("path", sorted(COMMAND_PATHS | LEAVES))
def test_help_lists_the_exit_codes(path: str) -> None:
    """Every --help ends with what each exit code means for that command, from exitcodes.py's one table."""
    words = path.split()
    rows = exit_statuses(words[1] if len(words) > 1 else None)
    section = help_of(path).split("\nExit codes:\n", 1)[1]
    listed = re.findall(r"^  (\S+) +(.*(?:\n {5,}\S.*)*)", section, re.M)
    assert [(code, " ".join(meaning.split())) for code, meaning in listed] == [
        (code, " ".join(meaning.split())) for code, meaning in rows
    ]
    codes = [code for code, _ in listed]
    assert codes[0] == "0" and codes[-2:] == ["2", "128+N"]
    # Only the commands that report findings (and ckpt as a whole) ever exit 1.
    assert ("1" in codes) == (len(words) == 1 or words[1] in ("migrate-config", "lint-config", "verify-shape"))
