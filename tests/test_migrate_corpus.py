"""Every case under fixtures/configs/ through migrate_config_bytes and through the CLI, exact bytes.

Each case directory holds `input.yaml`, `case.json` (expected status and diagnostics) and, for cases that
migrate, `expected.yaml`, written by hand from docs/commands.md ("`ckpt migrate-config [PATH]...`") and
docs/architecture.md ("migrate-config: the minimal edit"), never copied from the tool's output. Refusals,
failures and no-ops have no expected.yaml: their output is the input.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from deerflow_ckpt.config import messages
from deerflow_ckpt.config.migrate import Diagnostic, MigrationStatus, migrate_config_bytes
from deerflow_ckpt.rules import Severity
from tests.cli import run_ckpt
from tests.deerflow_reference import legacy_shim

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
SEED = Path(__file__).resolve().parents[1] / "docs" / "deerflow-config.md"
FLAT = "checkpoint_delta_snapshot_frequency"
BOM = b"\xef\xbb\xbf"
STATUSES = {status.value for status in MigrationStatus}
# DeerFlow's environment: the variables the corpus's DeerFlow-style files reference are set there, as they must
# be for DeerFlow to load them at all (an unset one anywhere fails the load before the legacy-key shim logs:
# tests/test_lint_config.py). $SNAPSHOT_FREQ stays unset: the env_var case is about that.
ENVIRON = {
    "DATABASE_URL": "postgresql://deerflow@db.internal/deerflow",
    "OPENAI_API_KEY": "sk-test",
    "DEEPSEEK_API_KEY": "sk-test",
    "VOLCENGINE_API_KEY": "test",
}


@dataclass(frozen=True)
class Case:
    name: str
    directory: Path
    input: bytes
    expected: bytes | None
    meta: dict[str, Any]

    @property
    def status(self) -> MigrationStatus:
        return MigrationStatus(self.meta["status"])

    @property
    def output(self) -> bytes:
        """The bytes the tool must produce: expected.yaml, or the input left as it is."""
        return self.expected if self.expected is not None else self.input


def _load(name: str) -> Case:
    directory = CORPUS / name
    expected = directory / "expected.yaml"
    return Case(
        name,
        directory,
        (directory / "input.yaml").read_bytes(),
        expected.read_bytes() if expected.exists() else None,
        json.loads((directory / "case.json").read_text(encoding="utf-8")),
    )


CASE_NAMES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
CASES = [_load(name) for name in CASE_NAMES]
MIGRATING = [case for case in CASES if case.status is MigrationStatus.MIGRATED]


def by_name(cases: list[Case]) -> Any:
    return pytest.mark.parametrize("case", cases, ids=[case.name for case in cases])


def deerflow_warning(meta: dict[str, Any]) -> str | None:
    """The verbatim DeerFlow warning a case expects, built from the strings in config/messages.py."""
    spec = meta.get("deerflow_warning")
    if spec is None:
        return None
    if spec["kind"] == "both":
        return messages.BOTH_KEYS_SET
    if spec["kind"] == "ignored":
        return messages.IGNORED_NON_MAPPING
    assert spec["kind"] == "carried"
    return messages.CARRIED_FORWARD.replace("%r", spec["repr"])


# -- the corpus itself ----------------------------------------------------------------------------


def test_corpus_covers_every_layout_and_outcome() -> None:
    assert len(CASES) >= 80
    assert {case.status for case in CASES} == set(MigrationStatus)
    for case in CASES:
        assert case.meta["status"] in STATUSES, case.name
        assert (case.expected is not None) == (case.status is MigrationStatus.MIGRATED), case.name
        assert case.expected != case.input, case.name
    kinds = {case.meta["deerflow_warning"]["kind"] for case in CASES if case.meta.get("deerflow_warning")}
    assert kinds == {"both", "ignored", "carried"}
    raw = [case.input for case in CASES]
    assert any(b.startswith(BOM) for b in raw)
    assert any(b"\r\n" in b for b in raw)
    assert any(b and not b.endswith(b"\n") for b in raw)
    assert any(b"\t" in b for b in raw)


def _strict_equal(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        # Key order is not meaning: DeerFlow hands pydantic a dict, and the shim appends the new key.
        return left.keys() == right.keys() and all(_strict_equal(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(_strict_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    return bool(left == right)


@by_name(MIGRATING)
def test_hand_written_expectation_means_what_the_shim_means(case: Case) -> None:
    """Checks the fixture, not the tool: expected.yaml loads to shim(input) under PyYAML (YAML 1.1)."""
    assert case.expected is not None
    before = yaml.safe_load(case.input.decode("utf-8-sig"))
    after = yaml.safe_load(case.expected.decode("utf-8-sig"))
    wanted = dict(before)
    wanted["database"] = legacy_shim(before["database"])
    assert _strict_equal(after, wanted)
    assert case.input.startswith(BOM) == case.expected.startswith(BOM)
    assert case.input.endswith(b"\n") == case.expected.endswith(b"\n")


@by_name(MIGRATING)
def test_hand_written_expectation_only_touches_the_cadence_lines(case: Case) -> None:
    """Every input line that does not mention checkpoint_delta appears, in order, in the output."""
    assert case.expected is not None
    lines = case.input.split(b"\n")
    # A flat key whose value stands on the next line owns that line too.
    owned = {i + 1 for i, line in enumerate(lines) if line.rstrip(b"\r").endswith(FLAT.encode() + b":")}
    kept = [line for i, line in enumerate(lines) if b"checkpoint_delta" not in line and i not in owned]
    output = iter(case.expected.split(b"\n"))
    for line in kept:
        assert any(line == candidate for candidate in output), (case.name, line)


# -- through migrate_config_bytes -----------------------------------------------------------------


def _check_diagnostics(case: Case, diagnostics: tuple[Diagnostic, ...]) -> None:
    meta = case.meta
    from_deerflow = [d for d in diagnostics if d.from_deerflow]
    wanted = deerflow_warning(meta)
    if wanted is None:
        assert from_deerflow == []
    else:
        assert [(d.severity, d.line, d.message) for d in from_deerflow] == [
            (Severity.WARNING, meta["deerflow_warning_line"], wanted)
        ]
    ours = [d for d in diagnostics if d.severity is Severity.WARNING and not d.from_deerflow]
    assert len(ours) == len(meta["warnings"]), [d.message for d in ours]
    for diagnostic, needles in zip(ours, meta["warnings"], strict=True):
        for needle in needles:
            assert needle in diagnostic.message
    notes = [d for d in diagnostics if d.severity is Severity.INFO]
    assert len(notes) == len(meta["notes"]), [d.message for d in notes]
    for needles in meta["notes"]:
        assert any(all(needle in d.message for needle in needles) for d in notes), needles
    errors = [d for d in diagnostics if d.severity is Severity.ERROR]
    if meta["error"] is None:
        assert errors == []
    else:
        assert len(errors) == 1, [d.message for d in errors]
        if meta["error"]["line"] is not None:
            assert errors[0].line == meta["error"]["line"], errors[0]
        for needle in meta["error"]["contains"]:
            assert needle in errors[0].message


@by_name(CASES)
def test_migrate_config_bytes(case: Case) -> None:
    result = migrate_config_bytes(case.input, ENVIRON)
    assert result.status is case.status, [d.message for d in result.diagnostics]
    assert result.migrated == case.output
    assert result.changed == (case.expected is not None)
    _check_diagnostics(case, result.diagnostics)


@by_name(MIGRATING)
def test_second_run_is_a_no_op(case: Case) -> None:
    assert case.expected is not None
    again = migrate_config_bytes(case.expected)
    assert again.status is MigrationStatus.UNCHANGED
    assert again.migrated == case.expected
    assert again.diagnostics == ()


# -- through the CLI ------------------------------------------------------------------------------

# Default (in place), --stdout and stdin: 0 when done or nothing to do, 2 when refused or unreadable.
WRITE_EXIT = {
    MigrationStatus.MIGRATED: 0,
    MigrationStatus.UNCHANGED: 0,
    MigrationStatus.NEEDS_HAND_FIX: 2,
    MigrationStatus.FAILED: 2,
}
# --check: 1 when the file would change or must be fixed by hand.
CHECK_EXIT = {
    MigrationStatus.MIGRATED: 1,
    MigrationStatus.UNCHANGED: 0,
    MigrationStatus.NEEDS_HAND_FIX: 1,
    MigrationStatus.FAILED: 2,
}


def _copy(case: Case, tmp_path: Path) -> Path:
    target = tmp_path / "config.yaml"
    shutil.copyfile(case.directory / "input.yaml", target)
    return target


def _assert_no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr


def _assert_deerflow_warning_printed(case: Case, stderr: str) -> None:
    wanted = deerflow_warning(case.meta)
    if wanted is not None:
        assert wanted in stderr
        line = case.meta["deerflow_warning_line"]
        assert re.search(rf":{line}: warning: {re.escape(wanted)}", stderr), stderr


@by_name(CASES)
def test_cli_in_place(case: Case, tmp_path: Path) -> None:
    path = _copy(case, tmp_path)
    result = run_ckpt("migrate-config", str(path), env=ENVIRON)
    assert result.exit_code == WRITE_EXIT[case.status], result.stderr
    assert path.read_bytes() == case.output
    assert result.stdout_bytes == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]
    _assert_no_traceback(result.stderr)
    _assert_deerflow_warning_printed(case, result.stderr)
    if case.meta["error"] is not None and case.meta["error"]["line"] is not None:
        assert f"{path}:{case.meta['error']['line']}: error: " in result.stderr


@by_name(CASES)
def test_cli_stdout(case: Case, tmp_path: Path) -> None:
    path = _copy(case, tmp_path)
    result = run_ckpt("migrate-config", "--stdout", str(path), env=ENVIRON)
    assert result.exit_code == WRITE_EXIT[case.status], result.stderr
    assert path.read_bytes() == case.input
    if case.status in (MigrationStatus.MIGRATED, MigrationStatus.UNCHANGED):
        assert result.stdout_bytes == case.output
    else:
        # A refusal never prints a half-migrated file: nothing, or the input as it was.
        assert result.stdout_bytes in (b"", case.input)
    _assert_no_traceback(result.stderr)


@by_name(CASES)
def test_cli_stdin(case: Case) -> None:
    result = run_ckpt("migrate-config", "-", input=case.input, env=ENVIRON)
    assert result.exit_code == WRITE_EXIT[case.status], result.stderr
    if case.status in (MigrationStatus.MIGRATED, MigrationStatus.UNCHANGED):
        assert result.stdout_bytes == case.output
    else:
        assert result.stdout_bytes in (b"", case.input)
    _assert_no_traceback(result.stderr)
    _assert_deerflow_warning_printed(case, result.stderr)


@by_name(CASES)
def test_cli_check(case: Case, tmp_path: Path) -> None:
    path = _copy(case, tmp_path)
    before = path.stat()
    result = run_ckpt("migrate-config", "--check", str(path), env=ENVIRON)
    assert result.exit_code == CHECK_EXIT[case.status], result.stderr
    assert path.read_bytes() == case.input
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert result.stdout_bytes == b""
    _assert_no_traceback(result.stderr)
    _assert_deerflow_warning_printed(case, result.stderr)


# -- DeerFlow's strings ---------------------------------------------------------------------------


def test_warning_strings_are_the_verbatim_spec_text() -> None:
    """config/messages.py must hold exactly DeerFlow's three warnings (docs/deerflow-config.md, "The legacy-key shim
    and its warnings")."""
    if not SEED.exists():
        pytest.skip(f"{SEED} is not available on this machine")
    text = SEED.read_text(encoding="utf-8")
    # The table rows quote each warning in backticks, one per line.
    pattern = re.compile(r"`([^`]*database\.checkpoint_delta_snapshot_frequency[^`]*\.)`")
    verbatim = {found for line in text.splitlines() for found in pattern.findall(line)}
    assert verbatim == {messages.BOTH_KEYS_SET, messages.IGNORED_NON_MAPPING, messages.CARRIED_FORWARD}
    assert messages.carried_forward(1000).endswith("Carried the legacy value (1000) forward.")
    assert messages.carried_forward("250").endswith("Carried the legacy value ('250') forward.")
