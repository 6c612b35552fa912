"""`ckpt migrate-config` in process: modes, locating config.yaml, writes, errors."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from deerflow_ckpt.config import messages
from deerflow_ckpt.config.migrate import migrate_config_bytes
from deerflow_ckpt.rules import Severity
from tests.cli import CkptRun, run_ckpt

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def fixture(name: str, which: str = "input") -> bytes:
    return (CORPUS / name / f"{which}.yaml").read_bytes()


def place(path: Path, name: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(fixture(name))
    return path


def run(*args: str, input: bytes | None = None, env: dict[str, str | None] | None = None) -> CkptRun:
    """The command every test here runs."""
    return run_ckpt("migrate-config", *args, input=input, env=env)


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- modes ----------------------------------------------------------------------------------------


def test_default_rewrites_in_place(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "carry_basic")
    result = run(str(path))
    assert result.exit_code == 0
    assert path.read_bytes() == fixture("carry_basic", "expected")
    assert result.stdout == ""
    assert f"{path}:8: warning: {messages.carried_forward(1000)}" in result.stderr
    assert f"migrated {path}" in result.stderr
    assert files_in(tmp_path) == ["config.yaml"]


def test_check_exits_1_and_leaves_the_file_byte_for_byte(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "crlf")
    before = path.stat()
    result = run("--check", str(path))
    assert result.exit_code == 1
    assert path.read_bytes() == fixture("crlf")
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert path.stat().st_ino == before.st_ino
    assert result.stdout == ""
    assert f"would migrate {path}" in result.stderr


def test_check_on_a_refusal_exits_1_and_on_a_clean_file_exits_0(tmp_path: Path) -> None:
    refused = place(tmp_path / "refused.yaml", "refuse_yes")
    clean = place(tmp_path / "clean.yaml", "noop_already_migrated")
    assert run("--check", str(refused)).exit_code == 1
    assert run("--check", str(clean)).exit_code == 0
    assert refused.read_bytes() == fixture("refuse_yes")


DIFF_CARRY_BASIC = "".join(
    (
        "--- {name}\n",
        "+++ {name}\n",
        "@@ -5,7 +5,8 @@\n",
        "   backend: sqlite\n",
        "   sqlite_dir: .deer-flow/data\n",
        "   checkpoint_channel_mode: delta\n",
        "-  checkpoint_delta_snapshot_frequency: 1000\n",
        "+  checkpoint_delta:\n",
        "+    snapshot_frequency: 1000\n",
        "   pool_size: 5\n",
        " \n",
        " run_events:\n",
    )
)


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "carry_basic")
    result = run("--diff", str(path))
    # black's convention: --diff alone reports, it does not fail.
    assert result.exit_code == 0
    assert result.stdout == DIFF_CARRY_BASIC.format(name=path)
    assert path.read_bytes() == fixture("carry_basic")
    assert files_in(tmp_path) == ["config.yaml"]


def test_check_with_diff_shows_the_diff_and_fails(tmp_path: Path) -> None:
    """The CI pair: the diff on stdout, exit 1 because the file would change, nothing written."""
    path = place(tmp_path / "config.yaml", "carry_basic")
    result = run("--check", "--diff", str(path))
    assert result.exit_code == 1
    assert result.stdout == DIFF_CARRY_BASIC.format(name=path)
    assert path.read_bytes() == fixture("carry_basic")
    clean = place(tmp_path / "clean.yaml", "noop_no_flat_key")
    result = run("--check", "--diff", str(clean))
    assert (result.exit_code, result.stdout) == (0, "")


def test_diff_marks_a_missing_final_newline(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "no_final_newline_flat_last")
    result = run("--diff", str(path))
    assert result.exit_code == 0
    assert result.stdout == (
        f"--- {path}\n+++ {path}\n@@ -1,4 +1,5 @@\n"
        " database:\n"
        "   backend: sqlite\n"
        "   checkpoint_channel_mode: delta\n"
        "-  checkpoint_delta_snapshot_frequency: 500  # last\n"
        "\\ No newline at end of file\n"
        "+  checkpoint_delta:\n"
        "+    snapshot_frequency: 500  # last\n"
        "\\ No newline at end of file\n"
    )
    assert path.read_bytes() == fixture("no_final_newline_flat_last")


def test_diff_is_empty_when_nothing_changes(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "noop_no_flat_key")
    result = run("--diff", str(path))
    assert result.exit_code == 0
    assert result.stdout == ""


def test_stdout_prints_the_result_and_writes_nothing(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "bom")
    result = run("--stdout", str(path))
    assert result.exit_code == 0
    assert result.stdout_bytes == fixture("bom", "expected")
    assert path.read_bytes() == fixture("bom")


def test_dash_reads_stdin_and_writes_stdout() -> None:
    result = run("-", input=fixture("cjk"))
    assert result.exit_code == 0
    assert result.stdout_bytes == fixture("cjk", "expected")
    assert f"-:9: warning: {messages.carried_forward(128)}" in result.stderr


def test_stdin_filename_names_stdin_in_messages() -> None:
    result = run("--stdin-filename", "deploy/config.yaml", "-", input=fixture("both_differ_1000_vs_10"))
    assert result.exit_code == 0
    assert f"deploy/config.yaml:3: warning: {messages.BOTH_KEYS_SET}" in result.stderr
    assert result.stdout_bytes == fixture("both_differ_1000_vs_10", "expected")


def test_dash_with_check_prints_nothing_and_exits_1() -> None:
    result = run("--check", "-", input=fixture("carry_basic"))
    assert result.exit_code == 1
    assert result.stdout == ""


def test_modes_are_mutually_exclusive(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "carry_basic")
    result = run("--check", "--stdout", str(path))
    assert (result.exit_code, result.stdout) == (2, "")
    assert "--stdout does not combine with --check" in result.stderr
    assert path.read_bytes() == fixture("carry_basic")


def test_several_paths_exit_with_the_worst_code(tmp_path: Path) -> None:
    good = place(tmp_path / "a.yaml", "carry_basic")
    bad = place(tmp_path / "b.yaml", "refuse_true")
    result = run(str(good), str(bad))
    assert result.exit_code == 2
    assert good.read_bytes() == fixture("carry_basic", "expected")
    assert bad.read_bytes() == fixture("refuse_true")


# -- JSON -----------------------------------------------------------------------------------------


def load_json(result: CkptRun) -> dict[str, Any]:
    assert "\x1b[" not in result.stdout
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def test_json_shape(tmp_path: Path) -> None:
    migrating = place(tmp_path / "a.yaml", "both_differ_1000_vs_10")
    refused = place(tmp_path / "b.yaml", "refuse_on")
    clean = place(tmp_path / "c.yaml", "noop_no_flat_key")
    result = run("--check", "--format", "json", str(migrating), str(refused), str(clean))
    assert result.exit_code == 1
    document = load_json(result)
    assert document["schema_version"] == 1
    files = document["files"]
    assert [entry["path"] for entry in files] == [str(migrating), str(refused), str(clean)]
    assert [entry["changed"] for entry in files] == [True, False, False]
    for entry in files:
        assert {"path", "changed", "warnings", "errors"} <= set(entry)
        for item in entry["warnings"] + entry["errors"]:
            assert isinstance(item["message"], str)
            assert item["line"] is None or isinstance(item["line"], int)
    first, second, third = files
    assert first["warnings"][0]["message"] == messages.BOTH_KEYS_SET
    assert first["warnings"][0]["line"] == 3
    assert any("1000" in w["message"] and "10" in w["message"] for w in first["warnings"][1:])
    assert first["errors"] == []
    assert second["warnings"][0]["message"] == messages.carried_forward(True)
    assert [e["line"] for e in second["errors"]] == [4]
    assert "checkpoint_delta_snapshot_frequency" in second["errors"][0]["message"]
    assert third["warnings"] == third["errors"] == []
    assert migrating.read_bytes() == fixture("both_differ_1000_vs_10")


def test_json_in_place_reports_the_write(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "env_var")
    result = run("--format", "json", str(path))
    assert result.exit_code == 0
    (entry,) = load_json(result)["files"]
    assert entry["changed"] is True
    assert path.read_bytes() == fixture("env_var", "expected")


def test_json_for_an_unreadable_file(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "fail_non_utf8")
    result = run("--check", "--format", "json", str(path))
    assert result.exit_code == 2
    (entry,) = load_json(result)["files"]
    assert entry["changed"] is False
    assert len(entry["errors"]) == 1
    assert "UTF-8" in entry["errors"][0]["message"]


# -- locating config.yaml the way DeerFlow does --------------------------------------------------


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def test_locate_explicit_env_config_path_wins(cwd: Path, tmp_path: Path) -> None:
    chosen = place(tmp_path / "elsewhere" / "custom.yaml", "carry_basic")
    decoy = place(cwd / "config.yaml", "carry_basic")
    result = run("--check", env={"DEER_FLOW_CONFIG_PATH": str(chosen)})
    assert result.exit_code == 1
    assert str(chosen) in result.stderr
    assert "DEER_FLOW_CONFIG_PATH" in result.stderr
    assert f"would migrate {chosen}" in result.stderr
    assert str(decoy) not in result.stderr


def test_locate_missing_env_config_path_is_an_error_not_a_fallback(cwd: Path, tmp_path: Path) -> None:
    place(cwd / "config.yaml", "carry_basic")
    result = run("--check", env={"DEER_FLOW_CONFIG_PATH": str(tmp_path / "missing.yaml")})
    assert result.exit_code == 2
    assert "missing.yaml" in result.stderr
    assert "DEER_FLOW_CONFIG_PATH" in result.stderr


def test_locate_empty_env_config_path_is_ignored(cwd: Path) -> None:
    path = place(cwd / "config.yaml", "carry_basic")
    result = run("--check", env={"DEER_FLOW_CONFIG_PATH": ""})
    assert result.exit_code == 1
    assert f"would migrate {path}" in result.stderr


def test_locate_project_root(cwd: Path, tmp_path: Path) -> None:
    root = tmp_path / "deer-flow"
    chosen = place(root / "config.yaml", "carry_basic")
    place(cwd / "config.yaml", "carry_basic")
    result = run(env={"DEER_FLOW_PROJECT_ROOT": str(root)})
    assert result.exit_code == 0
    assert str(chosen) in result.stderr
    assert "DEER_FLOW_PROJECT_ROOT" in result.stderr
    assert chosen.read_bytes() == fixture("carry_basic", "expected")
    assert (cwd / "config.yaml").read_bytes() == fixture("carry_basic")


def test_locate_project_root_that_does_not_exist(cwd: Path, tmp_path: Path) -> None:
    result = run("--check", env={"DEER_FLOW_PROJECT_ROOT": str(tmp_path / "nope")})
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_locate_project_root_that_is_a_file(cwd: Path, tmp_path: Path) -> None:
    not_a_dir = place(tmp_path / "file.yaml", "carry_basic")
    result = run("--check", env={"DEER_FLOW_PROJECT_ROOT": str(not_a_dir)})
    assert result.exit_code == 2
    assert "not a directory" in result.stderr


def test_locate_working_directory(cwd: Path) -> None:
    path = place(cwd / "config.yaml", "carry_basic")
    result = run("--check")
    assert result.exit_code == 1
    assert f"using {path} " in result.stderr
    assert "working directory" in result.stderr
    assert f"would migrate {path}" in result.stderr


def test_locate_backend_config_yaml(cwd: Path) -> None:
    path = place(cwd / "backend" / "config.yaml", "carry_basic")
    result = run()
    assert result.exit_code == 0
    assert f"using {path} " in result.stderr
    assert path.read_bytes() == fixture("carry_basic", "expected")


def test_locate_project_root_file_before_backend(cwd: Path) -> None:
    top = place(cwd / "config.yaml", "carry_basic")
    backend = place(cwd / "backend" / "config.yaml", "carry_basic")
    result = run()
    assert result.exit_code == 0
    assert top.read_bytes() == fixture("carry_basic", "expected")
    assert backend.read_bytes() == fixture("carry_basic")


def test_locate_nothing_found(cwd: Path) -> None:
    result = run("--check")
    assert result.exit_code == 2
    assert "config.yaml" in result.stderr
    assert "DEER_FLOW_CONFIG_PATH" in result.stderr


# -- idempotence ----------------------------------------------------------------------------------


def test_second_run_is_a_no_op(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "deerflow_style")
    assert run(str(path)).exit_code == 0
    migrated = path.read_bytes()
    assert migrated == fixture("deerflow_style", "expected")
    before = path.stat()
    again = run(str(path))
    assert again.exit_code == 0
    assert "nothing to migrate" in again.stderr
    assert "warning" not in again.stderr
    assert path.read_bytes() == migrated
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert path.stat().st_ino == before.st_ino
    assert run("--check", str(path)).exit_code == 0


# -- atomic writes --------------------------------------------------------------------------------


def test_write_keeps_the_mode(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "carry_basic")
    path.chmod(0o640)
    assert run(str(path)).exit_code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.read_bytes() == fixture("carry_basic", "expected")
    assert files_in(tmp_path) == ["config.yaml"]


def test_write_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    target = place(tmp_path / "real" / "config.yaml", "comments_around")
    target.chmod(0o600)
    link = tmp_path / "config.yaml"
    link.symlink_to(target)
    assert run(str(link)).exit_code == 0
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert target.read_bytes() == fixture("comments_around", "expected")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert files_in(target.parent) == ["config.yaml"]


def test_nothing_written_on_refusal(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "refuse_duplicate_flat")
    before = path.stat()
    result = run(str(path))
    assert result.exit_code == 2
    assert f"{path}:5: error: " in result.stderr
    assert path.read_bytes() == fixture("refuse_duplicate_flat")
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert files_in(tmp_path) == ["config.yaml"]


def test_read_only_directory_gives_a_clean_error(tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    path = place(directory / "config.yaml", "carry_basic")
    directory.chmod(0o555)
    try:
        # A real process without root's capabilities: only there does the directory's mode bind.
        result = run_ckpt("migrate-config", str(path), unprivileged=True)
    finally:
        directory.chmod(0o755)
    assert result.exit_code == 2
    assert str(directory) in result.stderr
    assert path.read_bytes() == fixture("carry_basic")
    assert files_in(directory) == ["config.yaml"]


def test_unwritable_directory_gives_a_clean_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-only directory case, simulated so it also runs as root (CI containers)."""
    path = place(tmp_path / "config.yaml", "carry_basic")

    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("deerflow_ckpt.fileio.tempfile.mkstemp", refuse)
    result = run(str(path))
    assert result.exit_code == 2
    assert "Permission denied" in result.stderr
    assert str(tmp_path) in result.stderr
    assert path.read_bytes() == fixture("carry_basic")


def test_failed_rename_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = place(tmp_path / "config.yaml", "carry_basic")

    def refuse(source: object, target: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("deerflow_ckpt.fileio.os.replace", refuse)
    result = run(str(path))
    assert result.exit_code == 2
    assert "Read-only file system" in result.stderr
    assert path.read_bytes() == fixture("carry_basic")
    assert files_in(tmp_path) == ["config.yaml"]


# -- errors: one line, exit 2, no traceback ------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    result = run(str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "nope.yaml" in result.stderr
    assert files_in(tmp_path) == []


def test_directory_instead_of_a_file(tmp_path: Path) -> None:
    result = run(str(tmp_path))
    assert result.exit_code == 2
    assert "directory" in result.stderr


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "fail_invalid_yaml")
    result = run(str(path))
    assert result.exit_code == 2
    assert f"{path}:4: error: " in result.stderr
    assert path.read_bytes() == fixture("fail_invalid_yaml")


def test_unconstructible_yaml_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "fail_unknown_tag")
    result = run(str(path))
    assert result.exit_code == 2
    assert "internal error" not in result.stderr
    assert path.read_bytes() == fixture("fail_unknown_tag")


def test_unreadable_file(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "carry_basic")
    path.chmod(0)
    try:
        # A real process without root's capabilities: only there does the file's mode bind.
        result = run_ckpt("migrate-config", str(path), unprivileged=True)
    finally:
        path.chmod(0o644)
    assert result.exit_code == 2
    assert f"ckpt: error: {path}: Permission denied" in result.stderr and "Traceback" not in result.stderr


def test_help_lists_the_modes() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for option in ("--check", "--diff", "--stdout", "--format"):
        assert option in result.stdout


def test_corpus_fixture_names_used_here_exist() -> None:
    for name in ("carry_basic", "crlf", "bom", "cjk", "deerflow_style", "comments_around"):
        assert (CORPUS / name / "expected.yaml").exists()


# -- DeerFlow's warning beside ckpt's own words -----------------------------------------------------
# What DeerFlow logs, restated from bytedance/deer-flow f1f4af99, backend/packages/harness/deerflow/config/:
# app_config.py lines 394-431 (yaml.safe_load, so the last duplicate key and `<<` merges decide the values;
# then resolve_env_variables, lines 545-560, which raises for an unset `$VAR` before any model runs) and
# database_config.py lines 218-254 (the shim: nested key wins, else the legacy value is carried, with the
# warning of lines 250-253).

CARRIED = (
    "database.checkpoint_delta_snapshot_frequency is deprecated; use database.checkpoint_delta.snapshot_frequency "
    "instead. Carried the legacy value ({}) forward."
)


@pytest.mark.parametrize(
    ("name", "stderr"),
    [
        (
            "refuse_duplicate_flat",
            "{path}:5: warning: " + CARRIED.format(200) + "\n"
            "{path}:5: error: duplicate key 'checkpoint_delta_snapshot_frequency' (lines 3, 5); DeerFlow silently "
            "keeps the last one, so remove the duplicates by hand first\n"
            "{path}: left untouched; fix it by hand as the error above says\n",
        ),
        (
            "refuse_duplicate_database",
            "{path}:6: warning: " + CARRIED.format(250) + "\n"
            "{path}:4: error: duplicate key 'database' (lines 1, 4); DeerFlow silently keeps the last one, so "
            "remove the duplicates by hand first\n"
            "{path}: left untouched; fix it by hand as the error above says\n",
        ),
        (
            "refuse_merge_flat",
            "{path}:3: warning: " + CARRIED.format(100) + "\n"
            "{path}:4: error: checkpoint_delta_snapshot_frequency reaches database: through a merge key (<<); move "
            "it by hand\n"
            "{path}: left untouched; fix it by hand as the error above says\n",
        ),
    ],
)
def test_a_refusal_still_prints_what_deerflow_logs(name: str, stderr: str, tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", name)
    result = run("--check", str(path))
    assert result.exit_code == 1
    assert result.stderr == stderr.format(path=path)
    assert path.read_bytes() == fixture(name)


def test_an_unset_variable_gets_no_deerflow_warning_only_ckpts_note(tmp_path: Path) -> None:
    path = place(tmp_path / "config.yaml", "env_var")
    unset = run("--check", str(path), env={"SNAPSHOT_FREQ": None})
    assert unset.exit_code == 1
    assert unset.stderr == (
        f"{path}:4: note: $SNAPSHOT_FREQ is carried verbatim: DeerFlow resolves $SNAPSHOT_FREQ when it loads the "
        "config; $SNAPSHOT_FREQ is not set here, and where it is unset DeerFlow refuses the whole file (Environment "
        "variable SNAPSHOT_FREQ not found for config value $SNAPSHOT_FREQ) before its legacy-key shim runs, so it "
        "logs no warning\n"
        f"would migrate {path}\n"
    )
    # Where it is set, DeerFlow logs the resolved string.
    set_here = run("--check", str(path), env={"SNAPSHOT_FREQ": "250"})
    assert set_here.stderr.startswith(f"{path}:4: warning: {CARRIED.format(repr('250'))}\n")


def test_a_legacy_yes_is_not_advised_as_true(tmp_path: Path) -> None:
    # PyYAML's YAML 1.1 reads yes as True; DeerFlow's `snapshot_frequency: int = Field(ge=1)` (database_config.py
    # lines 74-83, pydantic lax mode) takes True as 1.
    path = place(tmp_path / "config.yaml", "both_differ_yes")
    result = run("--check", str(path))
    assert result.exit_code == 1
    assert result.stderr == (
        f"{path}:3: warning: {messages.BOTH_KEYS_SET}\n"
        f"{path}:3: warning: the legacy value yes differs from the nested value 10 (line 4): DeerFlow already runs "
        "with 10, and removing the flat key discards yes. yes is no cadence: DeerFlow's PyYAML (YAML 1.1) reads it "
        "as True, which its model would take as cadence 1, a snapshot on every write; if a cadence was meant, set "
        "database.checkpoint_delta.snapshot_frequency to that integer by hand and restart every process sharing "
        "the database (make config-upgrade adds the default 10 next to a legacy key; 1000 was the pre-rename "
        "default)\n"
        f"would migrate {path}\n"
    )
    assert "True by hand" not in result.stderr


@pytest.mark.parametrize(
    ("written", "advice"),
    [
        ("'250'", "DeerFlow reads '250' as 250. If 250 was the chosen cadence, set database.checkpoint_delta."
         "snapshot_frequency: 250 by hand"),
        ("010", "DeerFlow reads 010 as 8. If 8 was the chosen cadence, set database.checkpoint_delta."
         "snapshot_frequency: 8"),
        ("off", "off is a boolean (YAML 1.1 reads false/no/off as False), which DeerFlow rejects (must be 1 or more), "
         "so it never was a cadence DeerFlow could run with"),
        ("$LEGACY", "If $LEGACY holds the chosen cadence, set database.checkpoint_delta.snapshot_frequency: $LEGACY"),
    ],
)  # fmt: skip
def test_a_dropped_legacy_value_is_advised_as_deerflow_would_read_it(written: str, advice: str) -> None:
    text = (
        "database:\n  checkpoint_channel_mode: delta\n"
        f"  checkpoint_delta_snapshot_frequency: {written}\n  checkpoint_delta: {{snapshot_frequency: 10}}\n"
    )
    result = migrate_config_bytes(text.encode(), {"LEGACY": "250"})
    (dropped,) = [d for d in result.diagnostics if d.severity is Severity.WARNING and not d.from_deerflow]
    assert f"removing the flat key discards {written}. {advice}" in dropped.message
