"""Configs and databases found as real DeerFlow deployments find them (source checkout, Docker, Helm, .env).

The rules come from DeerFlow's own loader (docs/deerflow-config.md); each test writes real files and
runs ckpt on them, in process with a clean environment.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deerflow_ckpt.cli.app import app
from deerflow_ckpt.config.lint import Finding, lint_config_bytes
from deerflow_ckpt.config.lint_files import lint_files
from deerflow_ckpt.store.identity import DatabaseIdentity, postgres_identity, search_path_option
from fixtures.dbbuilder.build import build_postgres

runner = CliRunner()
PASSWORD = "pw-s3cret"
# Every variable that changes where DeerFlow (and ckpt) looks; each test sets only what it means.
LOCATE_ENV = (
    "DEER_FLOW_CONFIG_PATH", "DEER_FLOW_PROJECT_ROOT", "DEER_FLOW_HOME", "DATABASE_URL", "SNAP", "GITHUB_STEP_SUMMARY",
    "PYTHON_DOTENV_DISABLED", "NO_COLOR", "FORCE_COLOR",
)  # fmt: skip


def ckpt(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    environment: dict[str, str | None] = dict.fromkeys(LOCATE_ENV)
    environment.update(env or {})
    result = runner.invoke(app, list(args), env=environment)
    return result.exit_code, result.stdout, result.stderr


def rules(findings: tuple[Finding, ...]) -> list[str]:
    return [finding.rule for finding in findings]


def lint_text(text: str, environ: dict[str, str] | None = None, cwd: Path = Path("/")) -> tuple[Finding, ...]:
    return lint_config_bytes(text.encode(), environ or {}, cwd).findings


# -- the legacy checkpointer: section -----------------------------------------------------------------------


def test_a_checkpointer_section_without_type_fails_the_whole_config(tmp_path: Path) -> None:
    text = "database:\n  backend: sqlite\ncheckpointer:\n  connection_string: store.db\n"
    findings = lint_text(text)
    assert rules(findings) == ["CK500"] and findings[0].line == 3
    assert "has no type" in findings[0].message and "Field required" in findings[0].message
    config = tmp_path / "config.yaml"
    config.write_text(text)
    code, _, err = ckpt("verify-shape", "--config", str(config))
    assert code == 2 and "has no type" in err, err


@pytest.mark.parametrize("schema", ["Team_A", "team-a", "1team", "'\"quoted\"'"])
def test_a_checkpointer_schema_deerflow_rejects_fails_the_config(schema: str) -> None:
    text = f"checkpointer:\n  type: postgres\n  connection_string: postgresql://h/db\n  postgres_schema: {schema}\n"
    findings = lint_text(text)
    assert "CK500" in rules(findings) and "CK507" not in rules(findings)
    refused = [finding for finding in findings if finding.rule == "CK500"]
    assert refused[0].line == 4 and "plain lowercase PostgreSQL identifier" in refused[0].message


def test_a_valid_checkpointer_section_still_loads() -> None:
    text = "checkpointer:\n  type: postgres\n  connection_string: postgresql://h/db\n  postgres_schema: team_a\n"
    assert rules(lint_text(text)) == ["CK507"]


HELM_LIKE = """\
database:
  backend: postgres
  postgres_url: $DATABASE_URL
  pool_recycle: 300
checkpointer:
  type: postgres
  connection_string: $DATABASE_URL
"""


@pytest.mark.parametrize("environ", [{"DATABASE_URL": f"postgresql://u:{PASSWORD}@db/deerflow"}, {}])
def test_both_sections_naming_one_database_is_no_override(environ: dict[str, str]) -> None:
    # Upstream's Helm chart writes exactly this: nothing is redirected, so no CK507.
    assert "CK507" not in rules(lint_text(HELM_LIKE, environ))


def test_a_checkpointer_naming_another_database_is_still_ck507() -> None:
    other = HELM_LIKE.replace("connection_string: $DATABASE_URL", "connection_string: postgresql://other/db")
    found = [f for f in lint_text(other, {"DATABASE_URL": "postgresql://db/deerflow"}) if f.rule == "CK507"]
    assert len(found) == 1 and "other:5432/db" in found[0].message and "db:5432/deerflow" in found[0].message


# -- the schema a DSN's options choose ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("-c search_path=team_a", "team_a"),
        ("-csearch_path=team_a -c statement_timeout=5000", "team_a"),
        ("-c statement_timeout=5000 --search_path=team_b", "team_b"),
        ("-c search_path=a -c search_path=b", "b"),
        ("-c statement_timeout=5000", None),
        ("", None),
    ],
)
def test_search_path_in_options(options: str, expected: str | None) -> None:
    assert search_path_option(options) == expected


def test_an_empty_schema_keeps_the_dsns_search_path() -> None:
    url = "postgresql://u:pw@db:5432/deerflow?options=-c%20search_path%3Dteam_a"
    identity = postgres_identity(url, "")
    assert identity.key[-1] == "team_a" and "schema team_a" in identity.display
    # A configured schema replaces it, as DeerFlow's dsn_with_search_path does.
    assert postgres_identity(url, "other").key[-1] == "other"
    keywords = "host=db dbname=deerflow options='-c search_path=team_b'"
    assert postgres_identity(keywords, "").key[-1] == "team_b"


def test_two_configs_on_two_dsn_schemas_do_not_conflict() -> None:
    def config(schema: str, mode: str) -> bytes:
        url = f"postgresql://u:{PASSWORD}@db:5432/deerflow?options=-c%20search_path%3D{schema}"
        return (
            f"database:\n  backend: postgres\n  postgres_url: '{url}'\n  postgres_schema: ''\n"
            f"  checkpoint_channel_mode: {mode}\n"
        ).encode()

    apart = lint_files([("a.yaml", config("team_a", "delta")), ("b.yaml", config("team_b", "full"))], {}, Path("/"))
    assert apart.consistency.findings == () and len(apart.consistency.databases) == 2
    together = lint_files([("a.yaml", config("team_a", "delta")), ("b.yaml", config("team_a", "full"))], {}, Path("/"))
    assert {finding.rule for _, finding in together.consistency.findings} == {"CK510"}
    assert all(isinstance(f.lint.facts.database, DatabaseIdentity) for f in apart.files if f.lint.facts)


@pytest.mark.postgres
def test_verify_shape_reads_the_schema_the_dsn_chooses(pg_schema: tuple[str, str], tmp_path: Path) -> None:
    dsn, schema = pg_schema
    build_postgres(dsn, schema, ["clean-delta"], turns=4, message_bytes=64)
    url = f"{dsn}?options=-c%20search_path%3D{schema}"
    config = tmp_path / "config.yaml"
    config.write_text(f"database:\n  backend: postgres\n  postgres_url: '{url}'\n  postgres_schema: ''\n")
    code, out, err = ckpt("verify-shape", "--config", str(config), "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["summary"]["threads"] > 0 and document["summary"]["checkpoints"] > 0
    # The same config without the DSN's search_path looks in public, where nothing was written.
    config.write_text(f"database:\n  backend: postgres\n  postgres_url: '{dsn}'\n  postgres_schema: ''\n")
    code, out, err = ckpt("verify-shape", "--config", str(config), "--format", "json")
    assert code == 2 and "checkpoint" in err, (code, out, err)
