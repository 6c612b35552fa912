"""What attacking ckpt's limits found: a huge integer or a symbolic-link loop is a one-line error, each tested
as the attack was made.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli import CkptRun, run_ckpt
from tests.conftest import BuiltDatabase


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- 14: a 4,301-digit decimal cadence and a symbolic-link loop are one-line errors -----------------------

DIGITS = "9" * 4301
HUGE_CADENCES = {
    "nested": f"database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta:\n    snapshot_frequency: {DIGITS}\n",
    "legacy": f"database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: {DIGITS}\n",
}
READING_COMMANDS = (("verify-shape",), ("inspect", "summary"), ("plan", "retention", "--keep-newest", "1"))


def one_line_error(result: CkptRun) -> str:
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ckpt: error: "), result.stderr
    assert "internal error" not in result.stderr
    return result.stderr


@pytest.mark.parametrize("layout", sorted(HUGE_CADENCES))
def test_a_cadence_of_4301_digits_is_a_clean_error(tmp_path: Path, layout: str, built_sqlite: BuiltDatabase) -> None:
    config = write(tmp_path / "config.yaml", HUGE_CADENCES[layout])
    line = 4 if layout == "nested" else 3
    for command in READING_COMMANDS:
        error = one_line_error(run_ckpt(*command, "-q", "--config", str(config), "--db", built_sqlite.db))
        assert "an integer of 4301 digits" in error and f"line {line}" in error and "set_int_max_str" not in error
    lint = run_ckpt("lint-config", str(config), "--format", "json")
    assert lint.exit_code == 1, lint.output
    [finding] = json.loads(lint.stdout)["findings"]
    assert finding["rule"] == "CK500" and finding["line"] == line and "an integer of 4301 digits" in finding["message"]
    migrate = run_ckpt("migrate-config", str(config))
    assert migrate.exit_code == 2 and "an integer of 4301 digits" in migrate.stderr, migrate.output
    assert "internal error" not in migrate.stderr and config.read_text() == HUGE_CADENCES[layout]


def test_a_symlink_loop_for_a_config_is_a_clean_error(tmp_path: Path, built_sqlite: BuiltDatabase) -> None:
    first, second, itself = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "self.yaml"
    os.symlink(second, first)
    os.symlink(first, second)
    os.symlink(itself, itself)
    for config in (first, itself):
        for command in READING_COMMANDS:
            for debug in ((), ("--debug",)):
                result = run_ckpt(*debug, *command, "--config", str(config), "--db", built_sqlite.db)
                error = result.stderr.splitlines()[-1] if debug else one_line_error(result)
                assert f"{config}: is a loop of symbolic links" in error, result.stderr
        for args in (("lint-config",), ("migrate-config",), ("migrate-config", "--diff")):
            assert f"{config}: is a loop of symbolic links" in one_line_error(run_ckpt(*args, str(config)))
        valid = write(tmp_path / "valid.yaml", "database:\n  backend: sqlite\n")
        assert f"{config}: is a loop of symbolic links" in one_line_error(
            run_ckpt("lint-config", str(valid), str(config))
        )


def test_a_symlink_loop_for_a_database_is_a_clean_error(tmp_path: Path) -> None:
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    os.symlink(second, first)
    os.symlink(first, second)
    for command in (*READING_COMMANDS, ("inspect", "storage")):
        assert f"{first}: is a loop of symbolic links" in one_line_error(run_ckpt(*command, "-q", "--db", str(first)))


def test_a_symlink_loop_for_a_report_file_is_a_clean_error(tmp_path: Path, built_sqlite: BuiltDatabase) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    os.symlink(second, first)
    os.symlink(first, second)
    result = run_ckpt("verify-shape", "-q", "--db", built_sqlite.db, "-o", str(first))
    assert f"{first}: is a loop of symbolic links" in one_line_error(result)
