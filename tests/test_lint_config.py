"""`ckpt lint-config`: every rule on its fixture with exact lines, DeerFlow's warnings verbatim, `$VAR`
values, the cross-file check on SQLite and Postgres, and the CLI contract (formats, streams, exits,
colour), in process. Fixtures: fixtures/lint_configs/ (see its README).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from deerflow_ckpt.commands.lint_config import LintReport, lint_files
from deerflow_ckpt.config import messages
from deerflow_ckpt.config.identity import DatabaseIdentity, postgres_identity
from deerflow_ckpt.config.lint import FileLint, Finding, lint_config_bytes
from deerflow_ckpt.dsn import parse_dsn
from deerflow_ckpt.rules import RULES
from tests.cli import CkptRun, run_ckpt
from tests.deerflow_reference import REFUSALS, load_app_config

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "lint_configs"
SHARED = FIXTURES / "shared"
# config.example.yaml's layout after make config-upgrade, migrated: what a clean DeerFlow config looks like.
DEERFLOW_CLEAN = REPO / "fixtures" / "configs" / "deerflow_style_upgraded" / "expected.yaml"
PASSWORD = "s3cret"
ANSI = "\x1b["


def lint(path: Path, environ: dict[str, str] | None = None, cwd: Path = REPO) -> FileLint:
    return lint_config_bytes(path.read_bytes(), environ or {}, cwd)


def spots(findings: tuple[Finding, ...] | list[Finding]) -> list[tuple[str, int | None]]:
    return [(finding.rule, finding.line) for finding in findings]


def only(findings: tuple[Finding, ...], code: str, line: int) -> Finding:
    matching = [finding for finding in findings if (finding.rule, finding.line) == (code, line)]
    assert len(matching) == 1, findings
    return matching[0]


def report(*paths: Path, environ: dict[str, str] | None = None, base: Path = REPO) -> LintReport:
    return lint_files([(str(path), path.read_bytes()) for path in paths], environ or {}, base)


def cross(result: LintReport) -> list[tuple[str, int | None]]:
    return sorted((Path(path).name, finding.line) for path, finding in result.consistency.findings)


def ckpt(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO, process: bool = False) -> CkptRun:
    """lint-config where the keys DeerFlow's example config reads are set, as where DeerFlow runs."""
    return run_ckpt("lint-config", *args, env={**CLEAN_ENV, **(env or {})}, cwd=cwd, process=process)


# -- one file: each rule on its case, at its line --------------------------------------------------

EXPECTED: dict[str, list[tuple[str, int | None]]] = {
    "clean_delta": [],
    "rejected_values": [("CK500", line) for line in (5, 6, 7, 8, 9, 11, 13, 15, 16)],
    "backend_unknown": [("CK500", 2)],
    "postgres_without_url": [("CK513", 3)],
    "checkpointer_postgres_without_url": [("CK513", 3)],
    "bad_dsn_scheme": [("CK513", 3)],
    "database_not_mapping": [("CK500", 3)],
    "invalid_yaml": [("CK500", 4)],
    "multi_document": [("CK500", 4)],
    "legacy_carried": [("CK501", 6)],
    "legacy_same_as_nested": [("CK501", 6)],
    "legacy_lost_to_upgrade": [("CK502", 8)],
    "delta_scalar_with_legacy": [("CK503", 4)],
    "delta_null": [("CK503", 4)],
    "boolean_cadence": [("CK504", 5)],
    "unknown_keys": [("CK505", 2), ("CK505", 7), ("CK505", 10), ("CK505", 12)],
    "cadence_in_full_mode": [("CK506", 5)],
    "cadence_without_mode": [("CK506", 4)],
    "checkpointer_override": [("CK507", 7)],
    "duplicate_keys": [("CK508", 1), ("CK508", 10)],
    "env_references": [("CK500", 4), ("CK500", 8)],
}
# The variables the clean configs reference: DeerFlow refuses a file whose $VAR is unset (CK500).
CLEAN_ENV = {"OPENAI_API_KEY": "sk-test", "DEEPSEEK_API_KEY": "sk-test"}
# The text report's last line: what lint-config verified, never that DeerFlow loads the file.
CHECKED_ONE = (
    "Checked: the YAML and $VAR references of the whole file, and its database: and checkpointer: sections. "
    "DeerFlow's other sections (sandbox:, models: and the rest) are not checked, so this does not say whether "
    "DeerFlow loads it."
)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_rule_fires_on_its_case_at_its_line(name: str) -> None:
    assert spots(lint(FIXTURES / f"{name}.yaml", CLEAN_ENV).findings) == EXPECTED[name]


def test_every_config_rule_has_a_case() -> None:
    fired = {code for cases in EXPECTED.values() for code, _ in cases}
    # CK510 spans files; CK509 (a variable set here) has its case in the set-variables test below; CK511
    # and CK512 need the files beside the config (tests/test_deployments.py).
    assert fired | {"CK509", "CK510", "CK511", "CK512"} == {code for code in RULES if code.startswith("CK5")}


@pytest.mark.parametrize("path", [DEERFLOW_CLEAN, FIXTURES / "clean_delta.yaml"], ids=["deerflow_example", "delta"])
def test_a_clean_deerflow_config_gets_no_findings(path: Path) -> None:
    result = lint(path, CLEAN_ENV)
    assert result.findings == ()
    assert result.facts is not None
    # Where OPENAI_API_KEY is unset DeerFlow refuses the whole file: the CK500 names the variable.
    unset = lint(path, {"DEEPSEEK_API_KEY": "x"}).findings
    assert [finding.rule for finding in unset] == ["CK500"]
    assert "Environment variable OPENAI_API_KEY not found for config value $OPENAI_API_KEY" in unset[0].message


def test_unknown_keys_say_what_deerflow_does_instead() -> None:
    findings = lint(FIXTURES / "unknown_keys.yaml").findings
    assert only(findings, "CK505", 10).message == (
        "database.checkpoint_delta.snapshot_freq is not a key DeerFlow knows; it is ignored and the cadence "
        "stays 10 (did you mean snapshot_frequency?)"
    )
    assert only(findings, "CK505", 7).message.endswith("(did you mean pool_size?)")
    assert only(findings, "CK505", 12).message.endswith("(did you mean max_entries?)")
    top = only(findings, "CK505", 2).message
    assert "not read at the top level" in top and "did you mean database.checkpoint_channel_mode?" in top


def test_rejected_values_name_key_value_and_pydantic_reason() -> None:
    findings = lint(FIXTURES / "rejected_values.yaml").findings
    mode = only(findings, "CK500", 9).message
    assert mode.startswith("database.checkpoint_channel_mode: Delta is rejected by DeerFlow")
    assert "write delta" in mode
    assert "database.pool_recycle: 0" in only(findings, "CK500", 5).message
    assert "database.checkpoint_delta.snapshot_frequency: 0" in only(findings, "CK500", 11).message
    assert "database.checkpoint_cache.type: Redis" in only(findings, "CK500", 15).message
    schema = only(findings, "CK500", 8).message
    assert "postgres_schema must be a plain lowercase PostgreSQL identifier matching [a-z_][a-z0-9_]{0,62}" in schema


def test_a_file_deerflow_refuses_takes_no_part_in_the_cross_file_check() -> None:
    for name in (
        "rejected_values",
        "invalid_yaml",
        "multi_document",
        "delta_null",
        "database_not_mapping",
        "bad_dsn_scheme",
    ):
        assert lint(FIXTURES / f"{name}.yaml").facts is None, name


def test_boolean_cadence_is_read_as_1() -> None:
    result = lint(FIXTURES / "boolean_cadence.yaml")
    assert "yes is a boolean" in only(result.findings, "CK504", 5).message
    assert result.facts is not None and result.facts.cadence.value == 1


def test_non_utf8_and_unconstructible_files_are_ck500_at_their_line() -> None:
    corpus = REPO / "fixtures" / "configs"
    assert spots(lint(corpus / "fail_non_utf8" / "input.yaml").findings) == [("CK500", 1)]
    assert spots(lint(corpus / "fail_unknown_tag" / "input.yaml").findings)[0][0] == "CK500"
    assert spots(lint_config_bytes(b"database:\n  backend: sqlite\n- x\n", {}, REPO).findings) == [("CK500", 3)]


def test_full_mode_says_the_cadence_changes_nothing() -> None:
    unset = only(lint(FIXTURES / "cadence_without_mode.yaml").findings, "CK506", 4).message
    assert "checkpoint_channel_mode is not set, so it is full" in unset
    written = only(lint(FIXTURES / "cadence_in_full_mode.yaml").findings, "CK506", 5).message
    assert written.startswith("database.checkpoint_delta.snapshot_frequency is 250 but")


def test_checkpointer_section_names_where_checkpoints_really_go(tmp_path: Path) -> None:
    finding = only(lint(FIXTURES / "checkpointer_override.yaml", cwd=tmp_path).findings, "CK507", 7)
    assert f"SQLite {tmp_path.resolve()}/.deer-flow/checkpoints.db" in finding.message
    assert f"SQLite {tmp_path.resolve()}/.deer-flow/data/deerflow.db" in finding.message
    home = tmp_path / "home"
    moved = lint(FIXTURES / "checkpointer_override.yaml", {"DEER_FLOW_HOME": str(home)}, tmp_path)
    assert moved.facts is not None and moved.facts.database == DatabaseIdentity(
        "sqlite", ("sqlite", str(home / "checkpoints.db")), f"SQLite {home / 'checkpoints.db'}"
    )


# DeerFlow's loader accepts both sections (DatabaseConfig.postgres_url and CheckpointerConfig.connection_string accept
# "" and None) and its providers raise when the process starts: bytedance/deer-flow f1f4af99,
# backend/packages/harness/deerflow/runtime/checkpointer/provider.py lines 45, 75-77 and 137-139,
# runtime/checkpointer/async_provider.py lines 129-131 and 171-173 (the store providers say the same).
STARTUP_FAILURES = {
    "postgres_without_url": (
        "postgres_without_url.yaml:3: CK513 error: database.backend: postgres without a postgres_url: DeerFlow "
        'accepts the section when it loads the config, then stops at startup with "database.postgres_url is required '
        'for the postgres backend"\n'
    ),
    "checkpointer_postgres_without_url": (
        "checkpointer_postgres_without_url.yaml:3: CK513 error: checkpointer.type: postgres without a "
        "connection_string: DeerFlow accepts the section when it loads the config, then stops at startup with "
        '"checkpointer.connection_string is required for the postgres backend"\n'
    ),
}


@pytest.mark.parametrize("name", sorted(STARTUP_FAILURES))
def test_postgres_without_a_dsn_is_accepted_and_then_cannot_start_in_both_sections(name: str) -> None:
    result = ckpt("--color", "never", f"{name}.yaml", cwd=FIXTURES)
    assert result.exit_code == 1
    assert result.stdout == STARTUP_FAILURES[name] + f"\n1 config file: 1 error, 0 warnings, 0 info.\n{CHECKED_ONE}\n"
    # No process starts with it, so it shares no database with other configs.
    assert lint(FIXTURES / f"{name}.yaml").facts is None


def test_duplicate_database_section_names_the_one_that_counts() -> None:
    findings = lint(FIXTURES / "duplicate_keys.yaml").findings
    assert "database: is written 2 times (lines 1, 6)" in only(findings, "CK508", 1).message
    assert "(lines 10, 11)" in only(findings, "CK508", 10).message


# -- DeerFlow's warnings, verbatim ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "code", "line", "warning"),
    [
        ("legacy_carried", "CK501", 6, messages.carried_forward(1000)),
        ("legacy_same_as_nested", "CK501", 6, messages.BOTH_KEYS_SET),
        ("legacy_lost_to_upgrade", "CK502", 8, messages.BOTH_KEYS_SET),
        ("delta_scalar_with_legacy", "CK503", 4, messages.IGNORED_NON_MAPPING),
    ],
)
def test_deerflow_warnings_verbatim(name: str, code: str, line: int, warning: str) -> None:
    finding = only(lint(FIXTURES / f"{name}.yaml").findings, code, line)
    assert finding.deerflow_warning == warning
    text = ckpt("--color", "never", str(FIXTURES / f"{name}.yaml"))
    assert f"    DeerFlow logs: {warning}\n" in text.stdout
    document = json.loads(ckpt("--format", "json", str(FIXTURES / f"{name}.yaml")).stdout)
    assert [f["deerflow_warning"] for f in document["findings"]] == [warning]


def test_carried_warning_shows_the_resolved_value_as_deerflow_logs_it() -> None:
    path = REPO / "fixtures" / "configs" / "env_var" / "input.yaml"
    carried = only(lint(path, {"SNAPSHOT_FREQ": "250"}).findings, "CK501", 4)
    assert carried.deerflow_warning == messages.carried_forward("250")
    assert "('250')" in carried.deerflow_warning


def test_an_unset_legacy_variable_gets_no_deerflow_warning_in_any_branch() -> None:
    # DeerFlow's resolve_env_variables raises before DatabaseConfig's shim can log (bytedance/deer-flow
    # f1f4af99, backend/packages/harness/deerflow/config/app_config.py lines 410-412 and 545-560).
    for text in (
        "database:\n  checkpoint_delta_snapshot_frequency: $MISSING\n",
        "database:\n  checkpoint_delta_snapshot_frequency: $MISSING\n  checkpoint_delta: {snapshot_frequency: 10}\n",
    ):
        findings = lint_config_bytes(text.encode(), {}, REPO).findings
        assert [finding.deerflow_warning for finding in findings] == [None, None], findings
        assert "Environment variable MISSING not found" in only(findings, "CK500", 2).message


def test_any_unset_variable_in_the_file_means_no_deerflow_warning(tmp_path: Path) -> None:
    # DeerFlow's AppConfig.from_file (bytedance/deer-flow f1f4af99, backend/packages/harness/deerflow/config/
    # app_config.py:405-431) runs resolve_env_variables (:545-567) over the whole file at :412, raising at the
    # first unset `$VAR` wherever it is, and only then model_validate (:431), where DatabaseConfig's shim logs.
    # So a model's unset key silences the legacy-key warning as much as the legacy key's own variable does.
    carried = (
        "models:\n  - name: gpt-4\n    api_key: $PROVIDER_KEY\n"
        "database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: 1000\n"
    )
    nested = carried + "  checkpoint_delta: {snapshot_frequency: 1000}\n"
    for text, code, warning in (
        (carried, "CK501", messages.carried_forward(1000)),
        (nested, "CK501", messages.BOTH_KEYS_SET),
    ):
        unset = lint_config_bytes(text.encode(), {}, REPO).findings
        assert only(unset, code, 6).deerflow_warning is None, unset
        assert "Environment variable PROVIDER_KEY not found" in only(unset, "CK500", 3).message
        # Set where DeerFlow runs (here, or assumed with --assume-set): it loads, and its shim logs.
        assert (
            only(lint_config_bytes(text.encode(), {"PROVIDER_KEY": "sk"}, REPO).findings, code, 6).deerflow_warning
            == warning
        )
        assumed = lint_config_bytes(text.encode(), {}, REPO, frozenset({"PROVIDER_KEY"})).findings
        assert only(assumed, code, 6).deerflow_warning == warning
    # Through the CLI: no "DeerFlow logs:" line while $PROVIDER_KEY is unset.
    config = tmp_path / "config.yaml"
    config.write_text(carried)
    result = ckpt("--color", "never", str(config))
    assert "DeerFlow logs:" not in result.stdout and "PROVIDER_KEY not found" in result.stdout, result.output
    result = ckpt("--color", "never", str(config), env={"PROVIDER_KEY": "sk"})
    assert f"    DeerFlow logs: {messages.carried_forward(1000)}\n" in result.stdout, result.output


def test_lost_legacy_cadence_names_both_values() -> None:
    message = only(lint(FIXTURES / "legacy_lost_to_upgrade.yaml").findings, "CK502", 8).message
    assert "checkpoint_delta_snapshot_frequency is 1000" in message
    assert "snapshot_frequency (line 7) is 10" in message


# -- $VAR values ------------------------------------------------------------------------------------


def test_unset_variables_are_ck500_and_leave_the_value_unknown() -> None:
    result = lint(FIXTURES / "env_references.yaml")
    url = only(result.findings, "CK500", 4).message
    assert "Environment variable DATABASE_URL not found for config value $DATABASE_URL" in url
    assert "leaves it out of the cross-file check" in url
    assert "its cadence is not compared" in only(result.findings, "CK500", 8).message
    assert result.facts is not None
    assert result.facts.cadence.value is None
    assert not isinstance(result.facts.database, DatabaseIdentity)


def test_set_variables_are_resolved_and_linted_without_showing_secrets() -> None:
    environ = {
        "DATABASE_URL": f"postgresql+psycopg://deerflow:{PASSWORD}@db.internal/deerflow",
        "SNAPSHOT_FREQUENCY": "250",
    }
    result = lint(FIXTURES / "env_references.yaml", environ)
    assert spots(result.findings) == [("CK509", 4), ("CK509", 8)]
    assert "set (the value is not shown)" in only(result.findings, "CK509", 4).message
    assert "here it is '250'" in only(result.findings, "CK509", 8).message
    assert result.facts is not None and result.facts.cadence.value == 250
    assert isinstance(result.facts.database, DatabaseIdentity)
    assert result.facts.database.display == "PostgreSQL db.internal:5432/deerflow, schema deerflow"
    assert all(PASSWORD not in finding.message for finding in result.findings)


@pytest.mark.parametrize("value", ["abc", "true", "0"])
def test_a_resolved_value_deerflow_rejects_is_ck500(value: str) -> None:
    # Resolved values are strings: "true" is not a boolean here, pydantic cannot parse it as an int.
    result = lint(FIXTURES / "env_references.yaml", {"DATABASE_URL": "postgresql://h/db", "SNAPSHOT_FREQUENCY": value})
    assert ("CK500", 8) in spots(result.findings)


def test_an_unset_section_is_unknown_not_rejected() -> None:
    text = "database:\n  checkpoint_delta_snapshot_frequency: $LEGACY\n  checkpoint_delta: $DELTA\n"
    assert spots(lint_config_bytes(text.encode(), {}, REPO).findings) == [("CK500", 2), ("CK500", 3)]
    # Set, the string is not a mapping: DeerFlow drops the legacy key (W2) and rejects the section.
    rejected = lint_config_bytes(text.encode(), {"LEGACY": "5", "DELTA": "5"}, REPO).findings
    assert only(rejected, "CK503", 3).deerflow_warning == messages.IGNORED_NON_MAPPING


# -- across files -----------------------------------------------------------------------------------


def test_sqlite_same_relative_dir_written_two_ways_must_agree_on_cadence() -> None:
    result = report(SHARED / "sqlite_gateway.yaml", SHARED / "sqlite_worker.yaml")
    assert len(result.consistency.databases) == 1
    assert cross(result) == [("sqlite_gateway.yaml", 8), ("sqlite_worker.yaml", 2)]
    messages_by_file = {Path(p).name: f.message for p, f in result.consistency.findings}
    gateway = messages_by_file["sqlite_gateway.yaml"]
    assert gateway.startswith("the effective cadence is 250 here (database.checkpoint_delta.snapshot_frequency")
    assert f"10 in {SHARED / 'sqlite_worker.yaml'} (DeerFlow's default, line 2)" in gateway
    assert f"SQLite {REPO}/.deer-flow/data/deerflow.db" in gateway
    assert "250 in" in messages_by_file["sqlite_worker.yaml"]


def test_sqlite_agreeing_configs_get_no_conflict() -> None:
    result = report(SHARED / "sqlite_gateway.yaml", SHARED / "sqlite_agrees.yaml")
    assert result.consistency.findings == ()
    assert [len(shared.paths) for shared in result.consistency.databases] == [2]


def test_sqlite_octal_cadence_disagrees() -> None:
    result = report(SHARED / "sqlite_gateway.yaml", SHARED / "sqlite_octal.yaml")
    assert cross(result) == [("sqlite_gateway.yaml", 8), ("sqlite_octal.yaml", 6)]
    assert any("168 here" in finding.message for _, finding in result.consistency.findings)


def test_sqlite_same_absolute_path_written_two_ways_must_agree_on_mode() -> None:
    result = report(SHARED / "sqlite_absolute_a.yaml", SHARED / "sqlite_absolute_b.yaml")
    assert [shared.identity.display for shared in result.consistency.databases] == [
        "SQLite /srv/deerflow/data/deerflow.db"
    ]
    assert cross(result) == [("sqlite_absolute_a.yaml", 4), ("sqlite_absolute_b.yaml", 4)]
    for path, finding in result.consistency.findings:
        assert finding.rule == "CK510"
        other = "sqlite_absolute_b.yaml" if path.endswith("a.yaml") else "sqlite_absolute_a.yaml"
        assert other in finding.message
        assert "delta" in finding.message and "full" in finding.message


def test_relative_sqlite_dir_resolves_against_the_sqlite_base(tmp_path: Path) -> None:
    absolute = tmp_path / "absolute.yaml"
    absolute.write_text(
        f"database:\n  backend: sqlite\n  sqlite_dir: {tmp_path}/.deer-flow/data\n  checkpoint_channel_mode: full\n",
        encoding="utf-8",
    )
    apart = report(SHARED / "sqlite_gateway.yaml", absolute, base=REPO)
    assert apart.consistency.findings == () and len(apart.consistency.databases) == 2
    together = report(SHARED / "sqlite_gateway.yaml", absolute, base=tmp_path)
    assert cross(together) == [("absolute.yaml", 4), ("sqlite_gateway.yaml", 6)]


def test_postgres_same_database_through_different_dsn_spellings() -> None:
    result = report(
        SHARED / "postgres_gateway.yaml", SHARED / "postgres_worker.yaml", SHARED / "postgres_keywords.yaml"
    )
    assert [shared.identity.display for shared in result.consistency.databases] == [
        "PostgreSQL db.internal:5432/deerflow, schema deerflow"
    ]
    # Mode: the +asyncpg worker is full; cadence: only the delta files are compared (250 against 100).
    assert cross(result) == [
        ("postgres_gateway.yaml", 5),
        ("postgres_gateway.yaml", 7),
        ("postgres_keywords.yaml", 5),
        ("postgres_keywords.yaml", 7),
        ("postgres_worker.yaml", 6),
    ]
    assert all(PASSWORD not in finding.message for _, finding in result.consistency.findings)


def test_postgres_different_schemas_do_not_conflict() -> None:
    result = report(SHARED / "postgres_gateway.yaml", SHARED / "postgres_other_schema.yaml")
    assert result.consistency.findings == ()
    assert len(result.consistency.databases) == 2


def test_unresolved_database_url_is_left_out_with_its_reason() -> None:
    result = report(FIXTURES / "env_references.yaml", SHARED / "postgres_gateway.yaml")
    assert result.consistency.left_out == (
        (
            str(FIXTURES / "env_references.yaml"),
            "database.postgres_url comes from $DATABASE_URL, which is not set here",
        ),
    )


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://deerflow:{PASSWORD}@db.internal:5432/deerflow",
        "postgresql://DB.internal/deerflow?sslmode=require",
        "postgresql://u:p%40ss@h:6543/d%20b?application_name=x",
        "postgresql://h1:5432,h2:5433/db",
        "postgresql://[::1]:5432/db",
        "postgresql://h/db?host=other&port=7000",
        "postgresql:///deerflow",
        f"host=db.internal port=5432 dbname=deerflow user=deerflow password={PASSWORD}",
        "host = h  dbname='my db' password='it\\'s'",
    ],
)
def test_dsn_parsing_matches_libpq(dsn: str) -> None:
    assert parse_dsn(dsn) == conninfo_to_dict(dsn)


def test_postgres_identity_normalises_driver_host_case_and_default_port() -> None:
    spellings = [
        "postgresql://u:a@db.internal:5432/deerflow",
        "postgresql+asyncpg://u:b@DB.internal/deerflow",
        "postgres://db.internal/deerflow",
        "host=db.internal dbname=deerflow",
    ]
    assert len({postgres_identity(dsn, "deerflow").key for dsn in spellings}) == 1
    assert postgres_identity(spellings[0], "").key == postgres_identity(spellings[0], "public").key
    assert postgres_identity(spellings[0], "staging").key != postgres_identity(spellings[0], "deerflow").key


# -- the command line, as an operator runs it ----------------------------------------------------------


def test_clean_exits_0_with_the_report_on_stdout_only() -> None:
    result = ckpt(str(DEERFLOW_CLEAN))
    assert result.exit_code == 0
    assert result.stderr == ""
    assert "1 config file: no findings." in result.stdout
    assert f"SQLite {REPO}/.deer-flow/data/deerflow.db" in result.stdout


def test_text_lines_are_path_line_rule_severity_message() -> None:
    path = FIXTURES / "boolean_cadence.yaml"
    result = ckpt("--color", "never", str(path))
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{path}:5: CK504 error: database.checkpoint_delta.snapshot_frequency: yes")
    assert "1 config file: 1 error, 0 warnings, 0 info." in result.stdout


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("boolean_cadence", (), 1),  # error
        ("boolean_cadence", ("--exit-zero",), 0),
        ("legacy_carried", (), 0),  # warning only
        ("legacy_carried", ("--fail-on", "warning"), 1),
        ("legacy_carried", ("--fail-on", "warning", "--exit-zero"), 0),
        ("env_references", ("--exit-zero",), 0),
        ("env_references", (), 1),  # unset variables: DeerFlow refuses the file
        ("clean_delta", ("--fail-on", "info"), 0),
    ],
)
def test_exit_codes(name: str, args: tuple[str, ...], expected: int) -> None:
    for output_format in ("text", "json"):
        result = ckpt(*args, "--format", output_format, str(FIXTURES / f"{name}.yaml"))
        assert result.exit_code == expected, (output_format, result.stdout)


@pytest.mark.parametrize("args", [("--exit-zero",), ()])
def test_a_missing_file_exits_2_with_one_line_and_no_payload(args: tuple[str, ...], tmp_path: Path) -> None:
    # A real process: the exit status and the only bytes a shell sees come from the console script.
    missing = str(tmp_path / "missing.yaml")
    result = ckpt(*args, "--format", "json", str(FIXTURES / "clean_delta.yaml"), missing, process=True)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"ckpt: error: {tmp_path / 'missing.yaml'}: no such file\n"


def test_a_directory_exits_2(tmp_path: Path) -> None:
    result = ckpt(str(tmp_path))
    assert result.exit_code == 2 and result.stdout == ""
    assert "is a directory" in result.stderr


def test_without_files_it_lints_the_config_deerflow_would_find(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_bytes((FIXTURES / "boolean_cadence.yaml").read_bytes())
    result = ckpt("--format", "json", cwd=tmp_path)
    assert result.exit_code == 1
    assert "ckpt: using" in result.stderr
    assert [(f["rule"], f["line"]) for f in json.loads(result.stdout)["findings"]] == [("CK504", 5)]


def test_relative_sqlite_dir_resolves_against_the_working_directory(tmp_path: Path) -> None:
    result = ckpt("--format", "json", str(SHARED / "sqlite_gateway.yaml"), cwd=tmp_path)
    databases = json.loads(result.stdout)["databases"]
    assert databases[0]["display"] == f"SQLite {tmp_path.resolve()}/.deer-flow/data/deerflow.db"
    based = ckpt("--format", "json", "--sqlite-base", str(tmp_path / "backend"), str(SHARED / "sqlite_gateway.yaml"))
    display = json.loads(based.stdout)["databases"][0]["display"]
    assert display == f"SQLite {tmp_path.resolve()}/backend/.deer-flow/data/deerflow.db"


def test_json_document() -> None:
    result = ckpt("--format", "json", str(SHARED / "sqlite_gateway.yaml"), str(SHARED / "sqlite_worker.yaml"))
    assert result.exit_code == 1 and result.stderr == ""
    document = json.loads(result.stdout)
    assert document["schema_version"] == 2
    assert document["command"] == "lint-config"
    assert document["checked"] == {"whole_file": ["yaml", "variables"], "sections": ["database", "checkpointer"]}
    assert document["exit_code"] == 1
    assert document["summary"] == {
        "files": 2,
        "by_rule": {"CK510": 2},
        "by_severity": {"error": 2, "warning": 0, "info": 0},
    }
    assert [(f["path"], f["line"], f["rule"], f["severity"]) for f in document["findings"]] == [
        (str(SHARED / "sqlite_gateway.yaml"), 8, "CK510", "error"),
        (str(SHARED / "sqlite_worker.yaml"), 2, "CK510", "error"),
    ]
    gateway = document["files"][0]
    assert (gateway["yaml_valid"], gateway["database_valid"]) == (True, True) and "loads" not in gateway
    assert gateway["channel_mode"] == {
        "value": "delta",
        "line": 6,
        "origin": "database.checkpoint_channel_mode",
        "default": False,
    }
    assert gateway["cadence"]["value"] == 250
    assert document["databases"] == [
        {
            "kind": "sqlite",
            "display": f"SQLite {REPO}/.deer-flow/data/deerflow.db",
            "paths": [str(SHARED / "sqlite_gateway.yaml"), str(SHARED / "sqlite_worker.yaml")],
        }
    ]


def test_github_format_annotates_each_file_line_and_appends_the_step_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    paths = (FIXTURES / "legacy_carried.yaml", FIXTURES / "backend_unknown.yaml", FIXTURES / "env_references.yaml")
    result = ckpt("--format", "github", *map(str, paths), env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["::warning", "::error", "::error", "::error"]
    # Relative to the working directory (the repository here), as GitHub needs them.
    shown = [path.relative_to(REPO).as_posix() for path in paths]
    assert f"file={shown[0]},line=6::" in lines[0]
    assert "title=CK501 deprecated flat cadence key" in lines[0]
    assert messages.carried_forward(1000) in lines[0]
    assert f"file={shown[1]},line=2::" in lines[1]
    assert f"file={shown[2]},line=4::" in lines[2] and f"file={shown[2]},line=8::" in lines[3]
    assert "ckpt: Linted 3 config file(s)" in result.stderr
    written = summary.read_text(encoding="utf-8")
    assert written.startswith("earlier step\n### ckpt lint-config\n")
    assert "| CK500 | error |" in written


def test_sarif_format() -> None:
    path = FIXTURES / "unknown_keys.yaml"
    result = ckpt("--format", "sarif", str(path))
    assert result.exit_code == 0 and result.stderr == ""
    sarif = json.loads(result.stdout)
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results] == [
        ("CK505", 2),
        ("CK505", 7),
        ("CK505", 10),
        ("CK505", 12),
    ]


def test_output_file_takes_the_payload(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    result = ckpt("--format", "json", "--output", str(target), str(FIXTURES / "boolean_cadence.yaml"))
    assert result.exit_code == 1 and result.stdout == ""
    assert json.loads(target.read_text(encoding="utf-8"))["findings"][0]["rule"] == "CK504"


PASSWORD_FILES = (
    SHARED / "postgres_gateway.yaml",
    SHARED / "postgres_worker.yaml",
    SHARED / "postgres_keywords.yaml",
    FIXTURES / "bad_dsn_scheme.yaml",
    FIXTURES / "env_references.yaml",
)


@pytest.mark.parametrize("output_format", ["text", "json", "github", "sarif"])
def test_passwords_never_appear(output_format: str, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    env = {
        "GITHUB_STEP_SUMMARY": str(summary),
        "DATABASE_URL": f"postgresql://deerflow:{PASSWORD}@db.internal/deerflow",
        "SNAPSHOT_FREQUENCY": "250",
    }
    result = ckpt("--format", output_format, *map(str, PASSWORD_FILES), env=env)
    assert result.exit_code == 1
    assert "CK510" in result.stdout and "CK513" in result.stdout
    assert PASSWORD not in result.stdout + result.stderr
    if summary.exists():
        assert PASSWORD not in summary.read_text(encoding="utf-8")


LEAKY_CONFIGS = {
    # DeerFlow's carry-forward warning quotes the value (%r) it read from the variable.
    "quoted_by_deerflow.yaml": "database:\n  checkpoint_delta_snapshot_frequency: $DATABASE_URL\n",
    # A long value is shortened for display; the cut must not fall before the mask.
    "shortened.yaml": "database:\n  backend: $DATABASE_URL\n",
    # No scheme: a key=value parse error must not quote the text.
    "no_scheme.yaml": f"database:\n  backend: postgres\n  postgres_url: u:{PASSWORD}@h/db\n",
    # Unencoded '/' or '@' in the password: libpq refuses it, and no fragment may show as host or database.
    "slash.yaml": f"database:\n  backend: postgres\n  postgres_url: postgresql://u:pa/{PASSWORD}@h/db\n",
    "at.yaml": f"database:\n  backend: postgres\n  postgres_url: postgresql://u:p@{PASSWORD}@h/db\n",
}


@pytest.mark.parametrize("output_format", ["text", "json", "github", "sarif"])
def test_passwords_never_appear_in_odd_places(output_format: str, tmp_path: Path) -> None:
    for name, text in LEAKY_CONFIGS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    long_dsn = f"postgresql://deerflow_application_user:{PASSWORD}-and-more@db.internal.example.com:5432/deerflow"
    result = ckpt("--format", output_format, *sorted(LEAKY_CONFIGS), env={"DATABASE_URL": long_dsn}, cwd=tmp_path)
    assert result.exit_code == 1
    assert PASSWORD not in result.stdout + result.stderr
    for name in ("slash.yaml", "at.yaml", "no_scheme.yaml"):
        assert name in result.stdout


def test_brackets_in_paths_and_values_are_text(tmp_path: Path) -> None:
    """rich markup is off: `[bold]` in a value and `[/x]` in a path print as written, no crash."""
    directory = tmp_path / "[prod]" / "a[/x]"
    directory.mkdir(parents=True)
    config = directory / "config.yaml"
    config.write_text("database:\n  backend: sqlite\n  sqlite_dir: /srv/[bold]x[/bold]/data\n", encoding="utf-8")
    other = tmp_path / "config.yaml"
    other.write_text("database:\n  sqlite_dir: /srv/[bold]x[/bold]/data\n  checkpoint_channel_mode: delta\n")
    result = ckpt(str(config), str(other))
    assert result.exit_code == 1, result.stderr
    assert "/srv/[bold]x[/bold]/data/deerflow.db" in result.stdout
    assert str(config) in result.stdout


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        ((), {}, False),  # piped
        (("--color", "never"), {"FORCE_COLOR": "1"}, False),
        (("--color", "auto"), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        (("--color", "auto"), {"FORCE_COLOR": "1"}, True),
        (("--color", "always"), {}, True),
    ],
)
def test_text_colour(args: tuple[str, ...], env: dict[str, str], coloured: bool) -> None:
    result = ckpt(*args, str(FIXTURES / "boolean_cadence.yaml"), env=env)
    assert result.exit_code == 1
    assert (ANSI in result.stdout) is coloured
    assert ANSI not in result.stderr


@pytest.mark.parametrize("output_format", ["json", "github", "sarif"])
def test_machine_formats_never_carry_ansi(output_format: str) -> None:
    result = ckpt("--format", output_format, "--color", "always", str(FIXTURES / "boolean_cadence.yaml"))
    assert result.exit_code == 1
    assert ANSI not in result.stdout + result.stderr


def test_text_to_a_file_has_no_colour(tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    ckpt("--color", "always", "--output", str(target), str(FIXTURES / "boolean_cadence.yaml"))
    assert "CK504" in target.read_text(encoding="utf-8")
    assert ANSI not in target.read_text(encoding="utf-8")


def test_the_same_file_twice_is_linted_once() -> None:
    path = str(FIXTURES / "boolean_cadence.yaml")
    document: dict[str, Any] = json.loads(ckpt("--format", "json", path, path).stdout)
    assert len(document["files"]) == 1 and len(document["findings"]) == 1


def test_empty_sqlite_dir_is_the_working_directory(tmp_path: Path) -> None:
    """DeerFlow resolves sqlite_dir "" as Path("").resolve(): the process directory, not .deer-flow/data."""
    (tmp_path / "empty.yaml").write_text('database:\n  sqlite_dir: ""\n  checkpoint_channel_mode: delta\n')
    (tmp_path / "default.yaml").write_text("database:\n  checkpoint_channel_mode: full\n")
    (tmp_path / "dot.yaml").write_text("database:\n  sqlite_dir: .\n  checkpoint_channel_mode: full\n")
    apart = ckpt("empty.yaml", "default.yaml", cwd=tmp_path)
    assert apart.exit_code == 0, apart.stdout
    shared = ckpt("empty.yaml", "dot.yaml", cwd=tmp_path)
    assert shared.exit_code == 1 and "CK510" in shared.stdout
    assert f"SQLite {tmp_path.resolve() / 'deerflow.db'}" in shared.stdout


@pytest.mark.parametrize(
    ("written", "read_as", "flagged"),
    [("010", 8, True), ("1:30", 90, True), ("'010'", 10, False), ("0x10", 16, False), ("250", 250, False)],
)
def test_cadence_spelt_so_yaml_11_reads_another_number(
    tmp_path: Path, written: str, read_as: int, flagged: bool
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta:\n    snapshot_frequency: {written}\n"
    )
    result = ckpt("--format", "json", str(config))
    document = json.loads(result.stdout)
    findings = [f for f in document["findings"] if f["rule"] == "CK504"]
    assert document["files"][0]["cadence"]["value"] == read_as
    if flagged:
        assert result.exit_code == 1
        assert [f["line"] for f in findings] == [4]
        assert f"{written} is read by DeerFlow (PyYAML, YAML 1.1) as {read_as}" in findings[0]["message"]
    else:
        assert result.exit_code == 0 and findings == []


# -- what lint-config verified, and never more -----------------------------------------------------------

# DeerFlow refuses each of these for a section lint-config does not read (tests/deerflow_reference.py:
# `sandbox:` has no default, max_recursion_limit >= 1); their checkpoint sections are clean.
OUTSIDE_DATABASE = {
    "no sandbox": "database:\n  backend: sqlite\n  checkpoint_channel_mode: delta\n",
    "null sandbox": "sandbox:\ndatabase:\n  backend: sqlite\n",
    "max_recursion_limit 0": (
        "max_recursion_limit: 0\nsandbox:\n  use: deerflow.sandbox.local:LocalSandboxProvider\n"
        "database:\n  backend: sqlite\n"
    ),
}


@pytest.mark.parametrize("case", sorted(OUTSIDE_DATABASE))
def test_a_file_deerflow_refuses_outside_database_passes_without_a_claim_that_it_loads(
    case: str, tmp_path: Path
) -> None:
    text = OUTSIDE_DATABASE[case]
    with pytest.raises(REFUSALS):
        load_app_config(text, {})
    config = tmp_path / "config.yaml"
    config.write_text(text)
    result = ckpt("--color", "never", str(config))
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith(f"1 config file: no findings.\n{CHECKED_ONE}\n")
    assert "loads the file" not in result.stdout
    document = json.loads(ckpt("--format", "json", str(config)).stdout)
    (entry,) = document["files"]
    assert "loads" not in entry
    assert (entry["yaml_valid"], entry["database_valid"]) == (True, True)
    assert document["checked"]["sections"] == ["database", "checkpointer"]
    github = ckpt("--format", "github", str(config))
    assert github.stdout == ""
    assert "Linted 1 config file(s) (YAML, $VAR references, database: and checkpointer: only)" in github.stderr


def test_the_checked_line_names_every_file(tmp_path: Path) -> None:
    result = ckpt("--color", "never", str(SHARED / "sqlite_agrees.yaml"), str(DEERFLOW_CLEAN))
    assert result.stdout.splitlines()[-1] == (
        "Checked: the YAML and $VAR references of each whole file, and their database: and checkpointer: sections. "
        "DeerFlow's other sections (sandbox:, models: and the rest) are not checked, so this does not say whether "
        "DeerFlow loads them."
    )


@pytest.mark.parametrize(
    ("name", "environ", "verdicts"),
    [
        ("clean_delta", {}, (True, True)),
        ("invalid_yaml", {}, (False, None)),
        ("multi_document", {}, (False, None)),
        ("database_not_mapping", {}, (True, False)),
        ("rejected_values", {}, (True, False)),
        ("delta_null", {}, (True, False)),
        ("postgres_without_url", {}, (True, False)),
        # A `$VAR` the database: section reads: its value is unknown here, and so is the verdict.
        ("env_references", {}, (True, None)),
        ("env_references", {"DATABASE_URL": "postgresql://db/deerflow", "SNAPSHOT_FREQUENCY": "250"}, (True, True)),
    ],
)
def test_json_says_what_it_verified_of_each_file(
    name: str, environ: dict[str, str], verdicts: tuple[bool, bool | None]
) -> None:
    document = json.loads(ckpt("--format", "json", str(FIXTURES / f"{name}.yaml"), env=environ).stdout)
    (entry,) = document["files"]
    assert (entry["yaml_valid"], entry["database_valid"]) == verdicts
    assert "loads" not in entry


def test_an_unset_variable_outside_database_is_ck500_and_leaves_the_database_verdict(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("models: [$MISSING]\ndatabase:\n  backend: sqlite\n")
    result = ckpt("--format", "json", str(config))
    document = json.loads(result.stdout)
    assert result.exit_code == 1 and [(f["rule"], f["line"]) for f in document["findings"]] == [("CK500", 1)]
    assert (document["files"][0]["yaml_valid"], document["files"][0]["database_valid"]) == (True, True)
