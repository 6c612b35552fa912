"""The committed man pages are what the generator writes from the CLI as it is, they lint clean in groff, and
no option of any command goes missing from them.

Rendering and linting run the real groff (groff-base) and man (man-db); nothing is mocked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.core import TyperGroup

from deerflow_ckpt import manpages
from deerflow_ckpt.cli.app import app

MAN = Path(__file__).resolve().parents[1] / "man"
REGENERATE = "run `python -m deerflow_ckpt.manpages man/` and commit man/"
# groff's typographic hyphens, minus signs and quotes, read back as the ASCII a user types.
PLAIN = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2212": "-", "\u2019": "'", "\u2018": "'"})


def groff() -> str:
    path = shutil.which("groff")
    if path is None:
        pytest.fail("groff is not installed (Debian: apt-get install groff-base)")
    return path


def render(page: Path) -> str:
    """The page as plain text on one very wide, unhyphenated line per paragraph, whitespace collapsed."""
    completed = subprocess.run(
        [groff(), "-man", "-Tutf8", "-rLL=2000n", "-rHY=0", "-P-cbou", str(page)],
        capture_output=True,
        check=True,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
    )
    return " ".join(completed.stdout.decode("utf-8").translate(PLAIN).split())


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("man")
    assert manpages.main([str(directory)]) == 0
    return directory


def contexts() -> list[Any]:
    """Every visible command's context, walked here apart from the generator so the two can disagree."""
    found: list[Any] = []

    def visit(command: Any, name: str, parent: Any) -> None:
        ctx = typer.Context(command, info_name=name, parent=parent, **command.context_settings)
        found.append(ctx)
        if isinstance(command, TyperGroup):
            for sub_name in command.list_commands(ctx):
                sub = command.get_command(ctx, sub_name)
                if sub is not None and not sub.hidden:
                    visit(sub, sub_name, ctx)

    visit(typer.main.get_command(app), "ckpt", None)
    return found


def pages_documenting(ctx: Any, every: list[Any]) -> list[str]:
    """ckpt's options are in ckpt.1, a command's in its page, a nested group's in every page below it."""
    if ctx.parent is None:
        return ["ckpt.1"]
    if not isinstance(ctx.command, TyperGroup):
        return [ctx.command_path.replace(" ", "-") + ".1"]
    below = [c for c in every if c.command_path.startswith(ctx.command_path + " ")]
    return [c.command_path.replace(" ", "-") + ".1" for c in below if not isinstance(c.command, TyperGroup)]


def test_committed_pages_are_what_the_generator_writes(generated: Path) -> None:
    committed = sorted(p.name for p in MAN.iterdir()) if MAN.is_dir() else []
    fresh = sorted(p.name for p in generated.iterdir())
    assert committed == fresh, f"man/ holds {committed}, the CLI gives {fresh}: {REGENERATE}"
    stale = [name for name in fresh if (MAN / name).read_bytes() != (generated / name).read_bytes()]
    assert not stale, f"out of date: {stale}: {REGENERATE}"


def test_every_page_lints_clean_in_groff(generated: Path) -> None:
    complaints = {}
    for page in sorted(generated.iterdir()):
        completed = subprocess.run([groff(), "-man", "-ww", "-z", str(page)], capture_output=True, check=False)
        if completed.returncode or completed.stderr:
            complaints[page.name] = completed.stderr.decode(errors="replace")
    assert not complaints


@pytest.mark.slow
def test_every_option_and_argument_of_every_command_is_documented(generated: Path) -> None:
    every = contexts()
    assert {"ckpt inspect thread", "ckpt inspect summary"} <= {ctx.command_path for ctx in every}
    missing = []
    for ctx in every:
        for param in ctx.command.get_params(ctx):
            is_nested_help = ctx.parent is not None and set(param.opts) <= set(ctx.help_option_names)
            if param.hidden or (isinstance(ctx.command, TyperGroup) and is_nested_help):
                continue
            for name in pages_documenting(ctx, every):
                source = (generated / name).read_text(encoding="ascii")
                text = render(generated / name)
                if param.param_type_name == "option":
                    flags = [
                        "\\fB" + flag.replace("-", "\\-") + "\\fR" for flag in [*param.opts, *param.secondary_opts]
                    ]
                    missing += [f"{name}: {flag}" for flag in flags if flag not in source]
                else:
                    tag = "\\fI" + (param.metavar or param.name.upper()).replace("-", "\\-")
                    missing += [] if tag in source else [f"{name}: {param.name}"]
                helped = " ".join((param.help or "").split())
                missing += [] if helped in text else [f"{name}: help of {param.name}: {helped!r}"]
    assert not missing


def test_man_renders_verify_shape_format(generated: Path) -> None:
    page = generated / "ckpt-verify-shape.1"
    # man -l as a reader would run it; groff alone where man-db is missing.
    man = ["man", "-l", str(page)]
    command = man if shutil.which("man") else [groff(), "-man", "-Tutf8", "-P-cbou", str(page)]
    env = {**os.environ, "MANWIDTH": "100", "MANPAGER": "cat", "PAGER": "cat", "LC_ALL": "C.UTF-8"}
    shown = subprocess.run(command, capture_output=True, check=True, env=env).stdout.decode("utf-8").translate(PLAIN)
    lines = [line.strip() for line in shown.splitlines()]
    assert any(line.startswith("--format FORMAT") for line in lines), shown
    assert "OPTIONS" in lines and "EXIT STATUS" in lines


def test_machine_dependent_defaults_are_words(generated: Path) -> None:
    """--jobs defaults to what this machine and the store allow; its page must say so in words, not show a number."""
    page = render(generated / "ckpt-verify-shape.1")
    assert "at most the idle CPUs and 4" in page


def test_roff_escaping_survives_groff(tmp_path: Path) -> None:
    tricky = ".starts with a dot\n'starts with a quote\na back\\slash, --a-flag, caf\u00e9\n\nsecond paragraph"
    page = tmp_path / "t.1"
    body = manpages._paragraphs(tricky, ".PP")
    page.write_text("\n".join(['.TH T 1 "2026-01-01" "t" "t"', ".SH NAME", "t \\- t", *body]) + "\n", encoding="ascii")
    lint = subprocess.run([groff(), "-man", "-ww", "-z", str(page)], capture_output=True, check=False)
    assert lint.stderr == b""
    text = render(page)
    for expected in (".starts with a dot", "'starts with a quote", "back\\slash", "--a-flag", "caf\u00e9", "second"):
        assert expected in text


def test_check_reports_changed_missing_and_extra_pages(
    generated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(generated, tmp_path, dirs_exist_ok=True)
    (tmp_path / "unrelated.1").write_text(".TH X 1\n")
    assert manpages.main(["--check", str(tmp_path)]) == 0
    (tmp_path / "ckpt.1").write_text("stale\n")
    (tmp_path / "ckpt-verify-shape.1").unlink()
    (tmp_path / "ckpt-gone.1").write_text("old\n")
    assert manpages.main(["--check", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    for line in ("ckpt.1: differs", "ckpt-verify-shape.1: missing", "ckpt-gone.1: extra", "python -m deerflow_ckpt"):
        assert line in err
    assert "unrelated.1" not in err
    assert (tmp_path / "ckpt.1").read_text() == "stale\n", "--check wrote a file"
    assert manpages.main([str(tmp_path)]) == 0
    assert manpages.main(["--check", str(tmp_path)]) == 0
    assert not (tmp_path / "ckpt-gone.1").exists() and (tmp_path / "unrelated.1").exists()


def test_ckpt_help_does_not_import_the_generator() -> None:
    probe = "import sys; from deerflow_ckpt.cli.app import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
    probe += "assert 'deerflow_ckpt.manpages' not in sys.modules, 'ckpt --help imported the generator'\n"
    subprocess.run([sys.executable, "-c", probe, "--help"], capture_output=True, check=True, timeout=120)
