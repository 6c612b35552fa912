"""`ckpt migrate-config` and `ckpt lint-config` must stay light: no LangGraph, no database drivers, no msgpack.

Checked in a fresh interpreter through sys.modules, never by timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.demo import build_demo
from tests.conftest import BuiltDatabase

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
HEAVY = ("langgraph", "langchain_core", "psycopg", "psycopg_pool", "ormsgpack", "aiosqlite")

PROBE = """
import json, sys
args, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
code = None
if args:
    sys.argv = ["ckpt", *args]
    from deerflow_ckpt.cli.app import main
    try:
        main()
    except SystemExit as exc:
        code = exc.code
else:
    import deerflow_ckpt.cli.app  # noqa: F401
loaded = sorted(name for name in sys.modules if name.split(".")[0] in heavy)
ours = sorted(name for name in sys.modules if name.startswith("deerflow_ckpt."))
sys.stdout.write("\\n" + json.dumps({"code": code, "loaded": loaded, "ours": ours}) + "\\n")
"""


def probe(*args: str, stdin: bytes = b"", heavy: tuple[str, ...] = HEAVY, cwd: Path | None = None) -> dict[str, object]:
    # The variables the lint configs reference are set, as where DeerFlow runs (an unset one is a CK500).
    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args)), json.dumps(heavy)],
        env=env,
        input=stdin,
        capture_output=True,
        check=True,
        timeout=120,
        cwd=cwd,
    )
    report = json.loads(completed.stdout.decode().strip().splitlines()[-1])
    assert isinstance(report, dict)
    return report


def test_importing_the_app_imports_nothing_heavy() -> None:
    assert probe()["loaded"] == []


COMMAND_MODULES = {
    "deerflow_ckpt.cli.migrate_config",
    "deerflow_ckpt.cli.lint_config",
    "deerflow_ckpt.cli.verify_shape",
    "deerflow_ckpt.cli.inspect",
}


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_top_level_help_loads_no_command_module(args: tuple[str, ...]) -> None:
    report = probe(*args)
    assert report["code"] == 0
    assert COMMAND_MODULES.isdisjoint(report["ours"])  # type: ignore[arg-type]


def test_migrate_config_loads_only_its_own_command() -> None:
    report = probe("migrate-config", "--check", str(CORPUS / "deerflow_style" / "input.yaml"))
    ours = set(report["ours"])  # type: ignore[call-overload]
    assert "deerflow_ckpt.cli.migrate_config" in ours
    assert ours.isdisjoint(COMMAND_MODULES - {"deerflow_ckpt.cli.migrate_config"})
    # Opening and judging databases is for the database commands.
    assert not [name for name in ours if name.startswith(("deerflow_ckpt.store", "deerflow_ckpt.analysis.shape"))]
    assert "deerflow_ckpt.cli.database_options" not in ours


@pytest.mark.slow
@pytest.mark.parametrize("case", ["deerflow_style", "both_differ_1000_vs_10", "refuse_yes"])
def test_migrate_config_check_imports_nothing_heavy(case: str) -> None:
    report = probe("migrate-config", "--check", str(CORPUS / case / "input.yaml"))
    assert report["code"] == 1
    assert report["loaded"] == []


def test_migrate_config_from_stdin_imports_nothing_heavy() -> None:
    report = probe("migrate-config", "--format", "json", "-", stdin=(CORPUS / "env_var" / "input.yaml").read_bytes())
    assert report["code"] == 0
    assert report["loaded"] == []


LINT = Path(__file__).resolve().parents[1] / "fixtures" / "lint_configs"

# What a scan given --db and --cadence, reading in one process, has no use for: pydantic (typer's adapters, or
# config validation), PyYAML (no config is read), rich (no text report), multiprocessing's pool, the deep proof;
# and what only a baseline, a socket, CSV, Markdown or a shell word uses. (msgspec and ormsgpack load here: this
# fixture's damaged rows are ones the compiled judge hands back to the Python decode.)
SCAN_NEEDS_NONE_OF = (
    "pydantic",
    "yaml",
    "rich",
    "multiprocessing",
    "concurrent",
    "hashlib",
    "socket",
    "csv",
    "html",
    "shlex",
)


@pytest.mark.slow
def test_a_json_scan_in_one_process_loads_only_what_it_uses(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    args = ("verify-shape", "--db", built_sqlite.db, "--cadence", "3", "--format", "json", "-o", os.devnull)
    report = probe(*args, "--jobs", "1", heavy=SCAN_NEEDS_NONE_OF, cwd=tmp_path)
    assert report["code"] == 1  # the fixture database holds faults
    assert report["loaded"] == []
    assert not [
        name
        for name in report["ours"]
        if name.startswith(("deerflow_ckpt.analysis.replay", "deerflow_ckpt.config.values"))
    ]  # type: ignore[union-attr]
    # Two processes are forked straight from ckpt (Linux): no pool, so neither multiprocessing nor its executor.
    parallel = probe(*args, "--jobs", "2", heavy=(*SCAN_NEEDS_NONE_OF, "ormsgpack"), cwd=tmp_path)["loaded"]
    assert parallel == []  # ormsgpack neither: the workers decode what the compiled judge hands back
    # The text report brings rich.
    text = probe(*args[:-4], "--jobs", "1", heavy=SCAN_NEEDS_NONE_OF, cwd=tmp_path)["loaded"]
    assert "rich" in text and "pydantic" not in text  # type: ignore[operator]


@pytest.mark.parametrize(
    ("output_format", "names", "code"),
    [
        ("text", ["clean_delta"], 0),
        ("json", ["rejected_values", "env_references"], 1),
        ("sarif", ["shared/postgres_gateway", "shared/postgres_keywords", "bad_dsn_scheme"], 1),
        ("text", ["shared/sqlite_gateway", "shared/sqlite_worker", "checkpointer_override"], 1),
    ],
)
@pytest.mark.slow
def test_lint_config_imports_nothing_heavy(output_format: str, names: list[str], code: int) -> None:
    report = probe("lint-config", "--format", output_format, *(str(LINT / f"{name}.yaml") for name in names))
    assert report["code"] == code
    assert report["loaded"] == []


@pytest.mark.slow
def test_project_config_costs_nothing_without_a_file(tmp_path: Path) -> None:
    """Every run looks for a project file; only a file found (or named) imports tomllib.
    A pyproject.toml without [tool.ckpt] is passed over by its text, unparsed."""
    config = str(CORPUS / "deerflow_style" / "input.yaml")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\n', encoding="utf-8")
    without = probe("migrate-config", "--check", config, cwd=tmp_path, heavy=("tomllib",))
    assert (without["code"], without["loaded"]) == (1, [])
    (tmp_path / ".ckpt.toml").write_text('format = "json"\n', encoding="utf-8")
    found = probe("migrate-config", "--check", config, cwd=tmp_path, heavy=("tomllib",))
    assert (found["code"], found["loaded"]) == (1, ["tomllib", "tomllib._parser", "tomllib._re", "tomllib._types"])


@pytest.fixture(scope="module")
def demo_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("demo")
    build_demo(directory)
    return directory


# The database commands run from a DeerFlow project, as an operator runs them: the config is found and read (PyYAML),
# and nothing validates values, so pydantic stays out, as do the drivers, LangGraph and multiprocessing (inspect
# storage's passes start a pool only for a file past store/storage_sqlite.py's SPLIT_BYTES; the demo is smaller).
@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("verify-shape", "--format", "json"), 1),
        (("verify-shape", "--config", "config.yaml", "--format", "json", "--jobs", "2"), 1),
        (("inspect", "summary", "--format", "json"), 0),
        (("inspect", "thread", "mixed-writers-k10-k1000-k10", "--format", "json"), 0),
        (("inspect", "storage", "--format", "json"), 0),
        (("plan", "retention", "--keep-newest", "10", "--format", "json"), 0),
    ],
)
def test_database_commands_from_a_project_load_no_pydantic(
    demo_project: Path, args: tuple[str, ...], code: int
) -> None:
    report = probe(*args, heavy=(*HEAVY, "pydantic", "multiprocessing"), cwd=demo_project)
    assert (report["code"], report["loaded"]) == (code, [])
