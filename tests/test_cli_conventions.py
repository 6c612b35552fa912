"""Conventions every command keeps: one wording for a file that is not there, -q/--quiet leaves out only
the informational stderr lines, the database inspected is named once, and migrate-config's machine
formats say each diagnostic once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli import CkptRun, run_ckpt
from tests.conftest import BuiltDatabase

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
# Both cadence keys, different values: DeerFlow's two warnings, and a file that would change.
LEGACY = (CONFIGS / "both_differ_1000_vs_10" / "input.yaml").read_bytes()


def run(*args: str) -> CkptRun:
    return run_ckpt(*args)


def missing_file_commands(missing: Path) -> list[list[str]]:
    return [
        ["migrate-config", str(missing)],
        ["migrate-config", "--check", "--diff", str(missing)],
        ["lint-config", str(missing)],
        ["verify-shape", "--config", str(missing)],
        ["verify-shape", "--db", str(missing)],
        ["inspect", "thread", "t", "--config", str(missing)],
        ["inspect", "summary", "--db", str(missing)],
        ["inspect", "storage", "--db", str(missing)],
    ]


def test_a_missing_file_reads_the_same_in_every_command(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    for args in missing_file_commands(missing):
        result = run(*args, "-q")
        assert result.exit_code == 2, args
        assert result.stderr == f"ckpt: error: {missing}: no such file\n", args
        assert result.stdout == "", args


def test_a_missing_project_file_reads_the_same(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    result = run("--config-file", str(missing), "config")
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"ckpt: error: {missing}: no such file\n")
    directory = run("--config-file", str(tmp_path), "config")
    assert directory.stderr == f"ckpt: error: {tmp_path}: is a directory, not a TOML file\n"


@pytest.mark.parametrize("output_format", ["json", "sarif", "github"])
def test_migrate_config_says_a_missing_file_in_machine_formats_too(tmp_path: Path, output_format: str) -> None:
    # The payload carries the diagnostic; the run's error (exit 2) is still said where operators look.
    missing = tmp_path / "missing.yaml"
    result = run("migrate-config", "--format", output_format, str(missing))
    assert result.exit_code == 2
    assert f"ckpt: error: {missing}: no such file\n" in result.stderr
    assert result.stderr.count("no such file") == 1


def test_a_directory_given_as_config_is_called_a_directory(tmp_path: Path) -> None:
    for args in (
        ["migrate-config", str(tmp_path)],
        ["lint-config", str(tmp_path)],
        ["verify-shape", "--config", str(tmp_path)],
        ["inspect", "summary", "--config", str(tmp_path)],
    ):
        result = run(*args)
        assert result.exit_code == 2, args
        assert result.stderr == f"ckpt: error: {tmp_path}: is a directory, not a config file\n", args


def test_a_directory_given_as_database_is_called_a_directory(tmp_path: Path) -> None:
    result = run("verify-shape", "-q", "--db", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr == f"ckpt: error: {tmp_path}: is a directory, not a SQLite database\n"


@pytest.mark.parametrize("command", ["migrate-config", "lint-config"])
def test_quiet_leaves_out_the_chosen_file_but_not_warnings_or_results(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.yaml").write_bytes(LEGACY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEER_FLOW_CONFIG_PATH", raising=False)
    monkeypatch.delenv("DEER_FLOW_PROJECT_ROOT", raising=False)
    args = [command, *(["--check"] if command == "migrate-config" else ["--fail-on", "warning"])]
    loud, quiet = run(*args), run(*args, "--quiet")
    assert loud.exit_code == quiet.exit_code == 1
    assert "ckpt: using " in loud.stderr and "ckpt: using " not in quiet.stderr
    assert quiet.stdout == loud.stdout
    assert quiet.stderr == loud.stderr.replace(loud.stderr.split("\n", 1)[0] + "\n", "", 1)
    if command == "migrate-config":
        assert "warning: " in quiet.stderr and f"would migrate {tmp_path / 'config.yaml'}" in quiet.stderr
    else:
        assert "CK502" in quiet.stdout


def test_quiet_is_per_run() -> None:
    """One run's -q does not silence the next one in the same process."""
    missing = "/nonexistent/ckpt/config.yaml"
    assert run("verify-shape", "-q", "--db", missing).stderr.count("\n") == 1
    assert "ckpt: scanning SQLite" in run("verify-shape", "--db", missing).stderr


def test_verify_shape_quiet_keeps_the_report(built_sqlite: BuiltDatabase) -> None:
    loud = run("verify-shape", "--db", built_sqlite.db)
    quiet = run("verify-shape", "-q", "--db", built_sqlite.db)
    assert "ckpt: scanning" in loud.stderr
    assert quiet.stderr == "" and quiet.stdout == loud.stdout and quiet.exit_code == loud.exit_code == 1
    assert "Scanned SQLite" in quiet.stdout


def test_inspect_names_the_database_once(built_sqlite: BuiltDatabase) -> None:
    text = run("inspect", "thread", "clean-delta-k3", "--db", built_sqlite.db)
    assert text.exit_code == 0, text.output
    assert text.stdout.count(built_sqlite.db) == 1 and built_sqlite.db not in text.stderr
    # csv has no room for it: there stderr names it, unless -q.
    csv = run("inspect", "summary", "--db", built_sqlite.db, "--format", "csv")
    assert csv.exit_code == 0 and f"ckpt: inspecting SQLite {built_sqlite.db}" in csv.stderr
    assert built_sqlite.db not in csv.stdout
    quiet = run("inspect", "summary", "--db", built_sqlite.db, "--format", "csv", "-q")
    assert quiet.stderr == "" and quiet.stdout == csv.stdout


@pytest.mark.parametrize("output_format", ["github", "json", "sarif"])
def test_migrate_config_machine_formats_say_each_diagnostic_once(output_format: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(LEGACY)
    text = run("migrate-config", "--check", str(config))
    result = run("migrate-config", "--check", "--format", output_format, str(config))
    assert text.exit_code == result.exit_code == 1
    diagnostics = re.findall(rf"^{re.escape(str(config))}:\d+: warning: (.*)$", text.stderr, re.M)
    assert len(diagnostics) == 2
    for diagnostic in diagnostics:
        assert diagnostic not in result.stderr
        assert result.stdout.count(diagnostic[:60]) == 1, output_format
    assert config.read_bytes() == LEGACY


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        (["verfy-shape"], "'verify-shape'"),
        (["inspct"], "'inspect'"),
        (["lint"], "'lint-config'"),
        (["retention"], "'plan retention'"),
        (["inspect", "sumary"], "'summary'"),
    ],
)
def test_a_misspelled_command_gets_a_did_you_mean(typed: list[str], suggested: str) -> None:
    result = run(*typed)
    assert result.exit_code == 2 and result.stdout == ""
    assert f"Error: No such command {typed[-1]!r}. Did you mean {suggested}?\n" in result.stderr, result.stderr


def test_a_command_nothing_resembles_gets_no_suggestion() -> None:
    result = run("xyzzy")
    assert result.exit_code == 2
    assert "Error: No such command 'xyzzy'.\n" in result.stderr and "Did you mean" not in result.stderr


def test_piped_text_reports_are_at_least_120_columns_wide(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """verify-shape's rule table wrapped at 80 columns in a pipe while inspect used 160: one width for every
    text report piped or written to --output (cli/console.py), --color always included."""
    from deerflow_ckpt.rules import RULES

    output = tmp_path / "report.txt"
    runs = {
        "piped": run("verify-shape", "-q", "--db", built_sqlite.db).stdout,
        "coloured": run("verify-shape", "-q", "--db", built_sqlite.db, "--color", "always").stdout,
        "process": run_ckpt("verify-shape", "-q", "--db", built_sqlite.db, process=True).stdout,
    }
    assert run("verify-shape", "-q", "--db", built_sqlite.db, "-o", str(output)).exit_code == 1
    runs["file"] = output.read_text(encoding="utf-8")
    for how, text in runs.items():
        plain = re.sub(r"\x1b\[[0-9;]*m", "", text)  # --color always styles the pipe
        table = plain.split("Findings by rule\n", 1)[1].split("\nCK", 1)[0]
        rows = {match[1]: match[0] for match in re.finditer(r"^ (CK\d{3}) .*$", table, re.M)}
        assert len(rows) >= 3, (how, text)
        # Each rule's row is one line, its whole title in it: nothing wrapped onto a next line.
        for code, line in rows.items():
            assert line.rstrip().endswith(RULES[code].title), (how, line)
        assert len(table.splitlines()) == len(rows) + 2, (how, table)
        # At 80 columns the widest rows wrapped their titles.
        assert max(len(line.rstrip()) for line in rows.values()) > 80, how


def test_the_piped_width_is_never_below_120_columns() -> None:
    from deerflow_ckpt.cli.console import PIPED_WIDTH, file_console, text_console

    assert PIPED_WIDTH >= 120
    # Under pytest stdout is no terminal: the piped width, even when rich is told it is one (--color always).
    assert text_console(None).width >= PIPED_WIDTH and text_console(True).width >= PIPED_WIDTH
    assert file_console().width >= PIPED_WIDTH
