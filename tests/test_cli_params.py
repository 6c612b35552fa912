"""Option values coerced without pydantic (cli/params.py) come out exactly as typer's own coercion makes them,
and every refusal is in ckpt's words, never pydantic's.

Every option and argument of every command that takes the direct path is given the values an operator could
type (each choice, other spellings of it, paths that exist as files or directories or not at all, text, lists,
integers in and out of bounds and in pydantic's lax spellings) and coerced both ways: the same value of the
same type, or a refusal by both; where typer words it through pydantic ("Value error, ...", "Input should be
..."), ckpt's own sentence instead, else the same words. And a migrate-config run, what pre-commit calls on
every commit, and a verify-shape or inspect run that reads no config, import no pydantic.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from enum import Enum
from importlib.metadata import version
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import typer

from tests.cli import run_ckpt
from tests.test_manpages import contexts

REPO = Path(__file__).resolve().parents[1]
# The typer releases cli/params.py was run against (this file and tests/test_import_cost.py passed on each).
TESTED_TYPER_RELEASES = ("0.29.0", "0.29.1", "0.29.2")


def test_typer_is_a_version_the_direct_coercion_was_tested_with() -> None:
    """cli/params.py subclasses typer's private RuntimeParam and calls its private coercion functions, which
    typer may change in any release: a typer outside the tested minor version fails here, by name, before
    the comparisons below say anything about it."""
    from deerflow_ckpt.cli import app

    installed = version("typer")
    assert tuple(int(part) for part in installed.split(".")[:2]) == app.TESTED_TYPER, (
        f"typer {installed} is not a version cli/params.py was tested with ({', '.join(TESTED_TYPER_RELEASES)}; "
        "pyproject.toml pins >=0.29,<0.30): check typer._coercion and typer._param_types against cli/params.py, "
        "run this file and tests/test_import_cost.py, then widen the pin and TESTED_TYPER together"
    )
    assert typer.__version__ == installed and app.install_direct_coercion is not None


def test_the_typer_pin_is_the_tested_minor_version() -> None:
    from deerflow_ckpt.cli import app

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    low, high = app.TESTED_TYPER, (app.TESTED_TYPER[0], app.TESTED_TYPER[1] + 1)
    pin = f"typer>={low[0]}.{low[1]},<{high[0]}.{high[1]}"
    assert [entry for entry in declared if entry.startswith("typer")] == [pin]
    assert {release.rsplit(".", 1)[0] for release in TESTED_TYPER_RELEASES} == {f"{low[0]}.{low[1]}"}


def test_the_typer_version_is_read_by_minor_version() -> None:
    """cli/app.py installs the direct coercion under typer 0.29.x only; any other version (installed by hand)
    parses through typer's own coercion."""
    from deerflow_ckpt.cli.app import _typer_minor

    assert _typer_minor("0.29.2") == (0, 29) and _typer_minor("0.30.0rc1") == (0, 30)
    assert _typer_minor("1.0.0") != (0, 29) and _typer_minor("dev") == ()


def _direct_params() -> list[tuple[Any, Any]]:
    found = []
    for ctx in contexts():
        for param in ctx.command.get_params(ctx):
            if type(getattr(param, "_runtime_param", None)).__name__ == "_DirectParam":
                found.append((ctx, param))
    return found


def _samples(annotation: Any, tmp_path: Path) -> list[Any]:
    if get_origin(annotation) is list:
        items = _samples(get_args(annotation)[0], tmp_path)
        return [tuple(items[:2]), tuple(items), ()]
    if annotation is bool:
        return [True, False]
    if annotation is int:
        # Bounds (0, 1), pydantic's lax forms (sign, spaces, underscores, a float's text, a bool), digits
        # no option takes, and the int defaults typer passes through the same coercion.
        return ["1", "10", "007", "0", "-1", "+5", " 5", "5 ", "1_000", "1.0", "1e3", "0x10", "\u0663", "abc", "",
                "9" * 18, "9" * 19, 0, 1, 4, -3, True, 2.0]  # fmt: skip
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        values = [str(member.value) for member in annotation]
        return [*values, values[0].upper(), "nope", ""]
    existing = tmp_path / "config.yaml"
    existing.write_text("database: {}\n")
    return ["text", " spaced ", "-", str(existing), str(tmp_path), str(tmp_path / "missing" / "x.yaml"), "", "a b/'c'"]


def _outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        result = runtime.coerce(value, param=param, ctx=ctx)
    except typer.BadParameter as exc:
        return "refused", exc.format_message()
    kinds = [type(item) for item in result] if isinstance(result, list | tuple) else type(result)
    return "value", (result, kinds)


# pydantic's phrasing, which typer's refusals carry: "Value error, 'x' is not one of ...", "Input should be ...".
PYDANTIC_WORDING = ("Value error", "Input should", "pydantic", "validation error", "unable to parse")


def test_every_direct_option_agrees_with_typer(tmp_path: Path) -> None:
    from typer._coercion import build_runtime_param

    checked = set()
    reworded = 0
    for ctx, param in _direct_params():
        ours = param._runtime_param
        theirs = build_runtime_param(param.type_descriptor)
        assert type(theirs).__name__ != "_DirectParam"
        for value in [None, *_samples(param.type_descriptor.annotation, tmp_path)]:
            where = (ctx.command_path, param.name, value)
            (our_kind, our_outcome), (their_kind, their_outcome) = (
                _outcome(ours, value, param, ctx),
                _outcome(theirs, value, param, ctx),
            )
            assert our_kind == their_kind, where
            if our_kind == "value" or not any(words in their_outcome for words in PYDANTIC_WORDING):
                assert our_outcome == their_outcome, where
            else:
                assert not any(words in our_outcome for words in PYDANTIC_WORDING), (where, our_outcome)
                reworded += 1
        checked.add((ctx.command_path, param.name))
    # Choices and bounded integers were refused, and said in ckpt's words.
    assert reworded >= 100
    # The commands pre-commit runs, with their paths, choices and lists.
    assert {("ckpt migrate-config", "paths"), ("ckpt migrate-config", "output_format")} <= checked
    assert {
        ("ckpt lint-config", "files"),
        ("ckpt lint-config", "assume_set"),
        ("ckpt lint-config", "output"),
    } <= checked
    assert len(checked) >= 60


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--format", "jsn"], "'jsn' is not one of 'text', 'json', 'github', 'sarif' (did you mean json?)."),
        (["--fail-on", "nope"], "'nope' is not one of 'error', 'warning', 'info'."),
        (["--mode", "fulll"], "'fulll' is not one of 'full', 'delta' (did you mean full?)."),
        (["--jobs", "0"], "'0' is not in the range x>=1."),
        (["--jobs", "+0"], "'+0' is not in the range x>=1."),
        (["--cadence", "-3"], "'-3' is not in the range x>=1."),
        (["--jobs", "abc"], "'abc' is not a valid integer."),
        (["--jobs", "1.5"], "'1.5' is not a valid integer."),
    ],
)
def test_refusals_are_worded_by_ckpt(args: list[str], said: str) -> None:
    result = run_ckpt("verify-shape", *args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.rstrip("\n").endswith(f"Error: Invalid value for '{args[0]}': {said}"), result.stderr
    assert not any(words in result.stderr for words in PYDANTIC_WORDING)


def test_a_lax_integer_typer_takes_is_still_taken(tmp_path: Path) -> None:
    """pydantic's lax spellings stay accepted (typer decides them): only the refusals changed words."""
    result = run_ckpt("verify-shape", "-q", "--jobs", "1_0", "--db", str(tmp_path / "missing.db"))
    assert (result.exit_code, result.stderr) == (2, f"ckpt: error: {tmp_path / 'missing.db'}: no such file\n")


def test_integer_options_take_the_direct_path() -> None:
    """Every integer option (--jobs, --cadence, --top) is coerced directly, typer's coercion behind it."""
    integers = {
        (ctx.command_path, param.name)
        for ctx in contexts()
        for param in ctx.command.get_params(ctx)
        if getattr(param, "type_descriptor", None) is not None and param.type_descriptor.annotation is int
    }
    direct = {(ctx.command_path, param.name) for ctx, param in _direct_params()}
    assert {
        ("ckpt verify-shape", "jobs"),
        ("ckpt verify-shape", "cadence"),
        ("ckpt inspect summary", "heaviest"),
    } <= integers
    assert integers <= direct


def _pydantic_modules_after(*args: str) -> tuple[int, list[str]]:
    """The exit code of `ckpt ARGS` in a fresh interpreter, and the pydantic modules it imported."""
    probe = (
        "import json, sys\n"
        "from deerflow_ckpt.cli.app import main\n"
        f"sys.argv = ['ckpt', *{list(args)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic')]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    code, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return code, loaded


def test_migrate_config_imports_no_pydantic(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: 10\n")
    assert _pydantic_modules_after("migrate-config", "--check", "--format", "json", str(config)) == (1, [])
