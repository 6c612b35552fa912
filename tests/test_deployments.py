"""Configs and databases found as real DeerFlow deployments find them (source checkout, Docker, Helm, .env).

The rules come from DeerFlow's own loader (docs/deerflow-config.md); each test writes real files and
runs ckpt on them, in process with a clean environment.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from deerflow_ckpt.commands.lint_config import lint_files
from deerflow_ckpt.config.discovery import SOURCE_PACKAGE, deerflow_environment
from deerflow_ckpt.config.identity import DatabaseIdentity, postgres_identity, search_path_option
from deerflow_ckpt.config.lint import Finding, lint_config_bytes
from fixtures.dbbuilder.build import build_postgres, build_sqlite
from tests.cli import run_ckpt

PASSWORD = "pw-s3cret"


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
    code, _, err = run_ckpt("verify-shape", "--config", str(config))
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


@pytest.mark.slow  # builds its own database with the real graphs
@pytest.mark.postgres
def test_verify_shape_reads_the_schema_the_dsn_chooses(pg_schema: tuple[str, str], tmp_path: Path) -> None:
    dsn, schema = pg_schema
    build_postgres(dsn, schema, ["clean-delta"], turns=4, message_bytes=64)
    url = f"{dsn}?options=-c%20search_path%3D{schema}"
    config = tmp_path / "config.yaml"
    config.write_text(f"database:\n  backend: postgres\n  postgres_url: '{url}'\n  postgres_schema: ''\n")
    code, out, err = run_ckpt("verify-shape", "--config", str(config), "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["summary"]["threads"] > 0 and document["summary"]["checkpoints"] > 0
    # The same config without the DSN's search_path looks in public, where nothing was written.
    config.write_text(f"database:\n  backend: postgres\n  postgres_url: '{dsn}'\n  postgres_schema: ''\n")
    code, out, err = run_ckpt("verify-shape", "--config", str(config), "--format", "json")
    assert code == 2 and "checkpoint" in err, (code, out, err)


# -- DeerFlow-like trees: a source checkout, its .env, Docker's DEER_FLOW_HOME ---------------------------------


@pytest.fixture(scope="module")
def checkpoint_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small SQLite checkpoint database written by real graphs (copied into each layout)."""
    path = tmp_path_factory.mktemp("layout-db") / "deerflow.db"
    build_sqlite(path, ["clean-delta"], turns=4, message_bytes=64)
    return path


def place_db(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def checkout(root: Path, config: str | None = None) -> Path:
    """A DeerFlow source checkout's shape: the config package (where its .env search starts) and config.yaml."""
    (root / SOURCE_PACKAGE).mkdir(parents=True)
    if config is not None:
        (root / "config.yaml").write_text(config)
    return root


DELTA_FROM_ENV = (
    "database:\n  backend: sqlite\n  checkpoint_channel_mode: delta\n"
    "  checkpoint_delta:\n    snapshot_frequency: $SNAP\n"
)


def test_the_dotenv_deerflow_loads_supplies_variables_without_showing_values(
    tmp_path: Path, checkpoint_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = checkout(tmp_path / "deer-flow", DELTA_FROM_ENV)
    (root / ".env").write_text(f"SNAP=250\nSECRET_TOKEN={PASSWORD}\n")
    place_db(checkpoint_db, root / "backend" / ".deer-flow" / "data" / "deerflow.db")
    monkeypatch.chdir(root)
    code, out, err = run_ckpt("verify-shape", "--format", "json")
    assert code in (0, 1), err
    assert f"{root / '.env'} (DeerFlow loads it) supplies $SECRET_TOKEN, $SNAP" in err
    assert json.loads(out)["settings"]["expected_cadence"] == 250
    assert str(root / "backend" / ".deer-flow" / "data" / "deerflow.db") in out
    assert PASSWORD not in out + err
    # The environment wins over .env, as load_dotenv(override=False) has it.
    code, out, _ = run_ckpt("verify-shape", "--format", "json", env={"SNAP": "7"})
    assert json.loads(out)["settings"]["expected_cadence"] == 7


def test_backend_dotenv_is_found_before_the_repository_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = checkout(tmp_path / "deer-flow", DELTA_FROM_ENV)
    (root / ".env").write_text("SNAP=250\n")
    (root / "backend" / ".env").write_text("SNAP=40\n")
    environment = deerflow_environment({}, root)
    assert environment.dotenv == root / "backend" / ".env" and environment.variables["SNAP"] == "40"
    # python-dotenv's own rules: export, quotes, ${VAR} interpolation, comments.
    (root / "backend" / ".env").write_text("export A=1\nB=\"two words\" # note\nC=${A}-x\nD='${A}'\n")
    values = deerflow_environment({}, root).variables
    assert (values["A"], values["B"], values["C"], values["D"]) == ("1", "two words", "1-x", "1")
    assert deerflow_environment({"PYTHON_DOTENV_DISABLED": "1"}, root).dotenv is None
    monkeypatch.chdir(root)
    _, _, err = run_ckpt("lint-config")
    assert "backend/.env (DeerFlow loads it) supplies $A, $B, $C, $D" in err


def test_lint_and_migrate_resolve_variables_from_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = checkout(tmp_path / "deer-flow")
    (root / "config.yaml").write_text(
        "database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: $SNAP\n"
    )
    monkeypatch.chdir(root)
    code, out, _ = run_ckpt("lint-config")
    assert code == 1 and "Environment variable SNAP not found for config value $SNAP" in out
    (root / ".env").write_text("SNAP=250\n")
    code, out, _ = run_ckpt("lint-config")
    assert "CK500" not in out and "('250')" in out
    code, _, err = run_ckpt("migrate-config", "--check")
    # DeerFlow logs the resolved value: ('250'), not ('$SNAP').
    assert code == 1 and "Carried the legacy value ('250') forward." in err, err


def test_deerflow_root_decides_the_legacy_config_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = checkout(tmp_path / "deer-flow")
    (root / "backend" / "config.yaml").write_text("database:\n  backend: sqlite\n")
    (root / "config.yaml").write_text("database:\n  backend: memory\n")
    elsewhere = tmp_path / "ops"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # Without the checkout named, nothing is found from an unrelated directory.
    code, _, err = run_ckpt("lint-config")
    assert code == 2 and "--deerflow-root" in err
    # A source checkout's launchers read the root's config.yaml (make dev exports the checkout's root as
    # DEER_FLOW_PROJECT_ROOT, scripts/serve.sh:315-317; docker's DEER_FLOW_CONFIG_PATH defaults to it,
    # scripts/deploy.sh:129-131); backend/config.yaml, DeerFlow's legacy place, is named as passed over.
    # (This test expected backend/config.yaml here before: the rule of a process started outside the checkout.)
    code, _, err = run_ckpt("lint-config", "--deerflow-root", str(root))
    assert code == 0 and f"using {root / 'config.yaml'}" in err, err
    assert f"warning: {root / 'backend' / 'config.yaml'} also exists (last written " in err, err
    code, _, err = run_ckpt("lint-config", "--deerflow-root", str(root), env={"DEER_FLOW_PROJECT_ROOT": str(elsewhere)})
    assert f"using {root / 'backend' / 'config.yaml'}" in err, err
    # The legacy places sit beside the install named (app_config.py:158-162).
    (root / "config.yaml").unlink()
    code, _, err = run_ckpt("lint-config", "--deerflow-root", str(root))
    assert code == 0 and f"using {root / 'backend' / 'config.yaml'}" in err and "warning" not in err, err
    code, _, err = run_ckpt("lint-config", "--deerflow-root", str(tmp_path / "nothing-here"))
    assert code == 2 and "no DeerFlow there" in err


def test_a_tilde_in_deerflow_variables_fails_as_in_deerflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.yaml").write_text("database:\n  backend: sqlite\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_ckpt("lint-config", env={"HOME": str(tmp_path), "DEER_FLOW_CONFIG_PATH": "~/config.yaml"})
    assert code == 2
    assert "Config file specified by environment variable `DEER_FLOW_CONFIG_PATH` not found at ~/config.yaml" in err
    assert "DeerFlow does not expand '~'" in err
    code, _, err = run_ckpt("lint-config", env={"HOME": str(tmp_path), "DEER_FLOW_PROJECT_ROOT": "~"})
    assert code == 2 and "DEER_FLOW_PROJECT_ROOT is set to '~'" in err and "does not expand" in err


def test_docker_compose_layout_finds_the_database_under_deer_flow_home(
    tmp_path: Path, checkpoint_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docker-compose.yaml mounts ${DEER_FLOW_HOME} as the gateway's backend/.deer-flow.
    home = tmp_path / "srv" / "deer-flow-home"
    database = place_db(checkpoint_db, home / "data" / "deerflow.db")
    config = tmp_path / "srv" / "config.yaml"
    config.write_text("database:\n  backend: sqlite\n  sqlite_dir: .deer-flow/data\n")
    elsewhere = tmp_path / "ops"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    env = {"DEER_FLOW_HOME": str(home), "DEER_FLOW_CONFIG_PATH": str(config)}
    code, out, err = run_ckpt("verify-shape", "--format", "json", env=env)
    assert code in (0, 1), err
    assert json.loads(out)["database"]["description"] == f"SQLite {database}"


def test_a_stale_non_checkpoint_file_is_skipped_and_named(
    tmp_path: Path, checkpoint_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    stale = project / ".deer-flow" / "data" / "deerflow.db"
    stale.parent.mkdir(parents=True)
    with sqlite3.connect(stale) as connection:
        connection.execute("CREATE TABLE threads_meta (id TEXT)")
    connection.close()
    real = place_db(checkpoint_db, project / "backend" / ".deer-flow" / "data" / "deerflow.db")
    (project / "config.yaml").write_text("database:\n  backend: sqlite\n")
    monkeypatch.chdir(project)
    code, out, err = run_ckpt("verify-shape", "--format", "json")
    assert code in (0, 1), err
    document = json.loads(out)
    assert document["database"]["description"] == f"SQLite {real}"
    assert f"skipped {stale} is not a LangGraph checkpoint database" in document["database"]["found_via"]


def test_make_dev_layout_is_found_from_the_checkout(
    tmp_path: Path, checkpoint_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # make dev runs the gateway from backend/: the file is backend/.deer-flow/data/deerflow.db.
    root = checkout(tmp_path / "deer-flow", "database:\n  backend: sqlite\n  sqlite_dir: .deer-flow/data\n")
    real = place_db(checkpoint_db, root / "backend" / ".deer-flow" / "data" / "deerflow.db")
    monkeypatch.chdir(root / "backend" / "packages")
    code, out, err = run_ckpt("verify-shape", "--format", "json", env={"DEER_FLOW_PROJECT_ROOT": str(root)})
    assert code in (0, 1), err
    assert json.loads(out)["database"]["description"] == f"SQLite {real}"


# -- make config-upgrade: the warning before, the backup after, the restore -----------------------------------

DEPLOYMENTS = Path(__file__).resolve().parent.parent / "fixtures" / "deployments"


def upgrade_like_deerflow(config: Path) -> None:
    """scripts/config-upgrade.sh as docs/deerflow-config.md records it: back up to config.yaml.bak, add the
    example's missing keys, bump config_version, re-dump with yaml.dump (comments lost)."""
    import yaml

    example = yaml.safe_load((config.parent / "config.example.yaml").read_text())
    user = yaml.safe_load(config.read_text())
    if user.get("config_version", 0) >= example["config_version"]:
        return

    def merge(target: dict[str, object], source: dict[str, object]) -> None:
        for key, value in source.items():
            if key not in target:
                target[key] = value
            elif isinstance(target[key], dict) and isinstance(value, dict):
                merge(target[key], value)  # type: ignore[arg-type]

    merge(user, example)
    user["config_version"] = example["config_version"]
    shutil.copy2(config, config.with_suffix(".yaml.bak"))
    with config.open("w") as stream:
        yaml.dump(user, stream, default_flow_style=False, allow_unicode=True, sort_keys=False)


def test_the_upgraded_fixture_is_what_the_upgrader_writes(tmp_path: Path) -> None:
    shutil.copytree(DEPLOYMENTS / "before-upgrade", tmp_path / "tree")
    upgrade_like_deerflow(tmp_path / "tree" / "config.yaml")
    for name in ("config.yaml", "config.yaml.bak"):
        assert (tmp_path / "tree" / name).read_bytes() == (DEPLOYMENTS / "upgraded" / name).read_bytes()


def test_lint_warns_before_the_next_start_replaces_the_cadence(tmp_path: Path) -> None:
    tree = shutil.copytree(DEPLOYMENTS / "before-upgrade", tmp_path / "tree")
    _, out, _ = run_ckpt("lint-config", "--format", "json", str(tree / "config.yaml"))
    findings = json.loads(out)["findings"]
    warning = next(finding for finding in findings if finding["rule"] == "CK511")
    assert warning["line"] == 10 and "config_version 30 is below" in warning["message"]
    assert "adds checkpoint_delta.snapshot_frequency: 10" in warning["message"]
    # Migrated first, the upgrader finds the nested key present and leaves the cadence alone.
    assert run_ckpt("migrate-config", str(tree / "config.yaml")).exit_code == 0
    upgrade_like_deerflow(tree / "config.yaml")
    _, out, _ = run_ckpt("lint-config", "--format", "json", str(tree / "config.yaml"))
    assert json.loads(out)["files"][0]["cadence"]["value"] == 1000
    assert not any(finding["rule"] in ("CK511", "CK512") for finding in json.loads(out)["findings"])


def test_after_the_upgrade_lint_and_migrate_name_the_lost_cadence(tmp_path: Path) -> None:
    tree = shutil.copytree(DEPLOYMENTS / "upgraded", tmp_path / "tree")
    code, out, _ = run_ckpt("lint-config", "--format", "json", str(tree / "config.yaml"))
    lost = next(finding for finding in json.loads(out)["findings"] if finding["rule"] == "CK512")
    assert (
        lost["line"] == 9
        and "gives DeerFlow cadence 1000" in lost["message"]
        and "now gives cadence 10" in lost["message"]
    )
    code, _, err = run_ckpt("migrate-config", "--check", str(tree / "config.yaml"))
    assert (
        code == 1
        and "config.yaml.bak beside this file (make config-upgrade's backup) gives DeerFlow cadence 1000" in err
    )


def test_restore_from_backup_carries_the_cadence_back_as_a_minimal_edit(tmp_path: Path) -> None:
    tree = shutil.copytree(DEPLOYMENTS / "upgraded", tmp_path / "tree")
    config = tree / "config.yaml"
    before = config.read_bytes()
    config.chmod(0o640)
    code, _, _ = run_ckpt("migrate-config", "--restore-from-backup", "--check", str(config))
    assert code == 1 and config.read_bytes() == before
    code, _, err = run_ckpt("migrate-config", "--restore-from-backup", str(config))
    assert code == 0, err
    expected = before.replace(b"  checkpoint_delta_snapshot_frequency: 1000\n", b"").replace(
        b"    snapshot_frequency: 10\n", b"    snapshot_frequency: 1000\n"
    )
    assert config.read_bytes() == expected
    assert config.stat().st_mode & 0o777 == 0o640
    assert "set back to 1000" in err
    # Done once, it is done: a second run changes nothing and says so.
    code, _, err = run_ckpt("migrate-config", "--restore-from-backup", str(config))
    assert code == 0 and "nothing to restore" in err and config.read_bytes() == expected
    (tree / "config.yaml.bak").unlink()
    code, _, err = run_ckpt("migrate-config", "--restore-from-backup", str(config))
    assert code == 2 and "no config.yaml.bak beside it" in err


# -- Helm: config.yaml inside values.yaml -------------------------------------------------------------------

HELM = DEPLOYMENTS / "helm"


def test_lint_reads_the_config_block_at_the_outer_files_lines() -> None:
    linted = lint_config_bytes((HELM / "values.yaml").read_bytes(), {"DATABASE_URL": "postgresql://db/df"}, Path("/"))
    assert [(finding.rule, finding.line) for finding in linted.findings] == [
        ("CK509", 20), ("CK501", 22), ("CK509", 28),
    ]  # fmt: skip
    assert linted.facts is not None and linted.facts.cadence.value == 250 and linted.facts.cadence.line == 22
    # Without $DATABASE_URL, DeerFlow refuses the config, as it does in the pod.
    unset = lint_config_bytes((HELM / "values.yaml").read_bytes(), {}, Path("/")).findings
    assert [(finding.rule, finding.line) for finding in unset] == [("CK500", 20), ("CK501", 22), ("CK500", 28)]


def test_migrate_edits_the_block_in_place_keeping_its_indentation(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    shutil.copyfile(HELM / "values.yaml", values)
    # Without $DATABASE_URL (the pod gets it from the postgres Secret) DeerFlow refuses the block before its
    # shim logs: a note at the variable's outer line says so, and the key still moves.
    code, _, err = run_ckpt("migrate-config", "--check", str(values))
    assert code == 1 and "values.yaml:20: note: DeerFlow logs no warning" in err and "warning:" not in err, err
    code, _, err = run_ckpt("migrate-config", str(values), env={"DATABASE_URL": "postgresql://db/df"})
    assert code == 0, err
    assert "values.yaml:22: warning: database.checkpoint_delta_snapshot_frequency is deprecated" in err
    assert values.read_bytes() == (HELM / "expected.yaml").read_bytes()
    # The chart renders what DeerFlow reads: the block, now migrated, and nothing else changed.
    import yaml

    before, after = yaml.safe_load((HELM / "values.yaml").read_text()), yaml.safe_load(values.read_text())
    assert {k: v for k, v in before.items() if k != "config"} == {k: v for k, v in after.items() if k != "config"}
    assert yaml.safe_load(after["config"])["database"]["checkpoint_delta"] == {"snapshot_frequency": 250}
    code, _, err = run_ckpt("migrate-config", "--check", str(values))
    assert code == 0 and "nothing to migrate" in err


def test_a_block_with_crlf_and_a_refused_value(tmp_path: Path) -> None:
    text = (HELM / "values.yaml").read_text().replace("\n", "\r\n")
    values = tmp_path / "values.yaml"
    values.write_bytes(text.encode())
    assert run_ckpt("migrate-config", str(values)).exit_code == 0
    assert values.read_bytes() == (HELM / "expected.yaml").read_text().replace("\n", "\r\n").encode()
    refused = (HELM / "values.yaml").read_text().replace("frequency: 250", "frequency: yes")
    values.write_text(refused)
    code, _, err = run_ckpt("migrate-config", str(values))
    assert code == 2 and "values.yaml:22:" in err and values.read_text() == refused


def test_a_values_file_without_a_deerflow_block_is_an_ordinary_config() -> None:
    text = "config: |\n  apiVersion: v1\n  kind: Pod\ndatabase:\n  backend: sqlite\n"
    assert lint_config_bytes(text.encode(), {}, Path("/")).facts is not None
    assert [f.rule for f in lint_config_bytes(text.encode(), {}, Path("/")).findings] == []


# -- the Postgres saver's schema knowledge, reused ----------------------------------------------------------


def test_the_restated_migration_count_is_the_real_savers(pinned_saver: Path) -> None:
    """store/savers.py restates the Postgres saver's MIGRATIONS length (ckpt does not depend on the saver): the
    saver the dev extra installs and DeerFlow's pinned 3.1.1, each imported, have exactly that many."""
    from importlib.metadata import version

    from langgraph.checkpoint.postgres.base import MIGRATIONS

    from deerflow_ckpt.store.savers import KNOWN_SAVERS, POSTGRES_SAVER, SAVER_MIGRATIONS

    installed = version(POSTGRES_SAVER)
    assert len(MIGRATIONS) == SAVER_MIGRATIONS, (
        f"{POSTGRES_SAVER} {installed} has {len(MIGRATIONS)} migrations: update SAVER_MIGRATIONS and KNOWN_SAVERS"
    )
    newest = tuple(int(part) for part in KNOWN_SAVERS.split(" to ")[1].split("."))
    assert tuple(int(part) for part in installed.split(".")[: len(newest)]) <= newest, (
        f"{POSTGRES_SAVER} {installed} is newer than store/savers.py's KNOWN_SAVERS ({KNOWN_SAVERS})"
    )
    probe = (
        "import importlib.metadata, json\n"
        "from langgraph.checkpoint.postgres import base\n"
        f"print(json.dumps([importlib.metadata.version({POSTGRES_SAVER!r}), len(base.MIGRATIONS), base.__file__]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(pinned_saver)}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    pinned_version, pinned_count, source = json.loads(done.stdout)
    assert pinned_version == KNOWN_SAVERS.split(" to ")[0] == "3.1.1" and source.startswith(str(pinned_saver))
    assert pinned_count == SAVER_MIGRATIONS


def test_the_saver_setup_line_needs_no_saver_installed() -> None:
    """describe_setup reads nothing installed: the same words with or without a saver beside ckpt."""
    probe = (
        "import builtins, json, sys\n"
        "real = builtins.__import__\n"
        "def refuse(name, *args, **kwargs):\n"
        "    if name.startswith('langgraph'):\n"
        "        raise ImportError(name)\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = refuse\n"
        "from deerflow_ckpt.store.savers import describe_setup\n"
        "print(json.dumps([describe_setup(n) for n in (None, 5, 10, 12)]))\n"
        "assert not [m for m in sys.modules if m.startswith('langgraph')]\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    known = "langgraph-checkpoint-postgres 3.1.1 to 3.2 applies 10"
    assert json.loads(done.stdout) == [
        None,
        f"5 saver migrations applied ({known}): set up by an older saver, later columns may be absent",
        f"10 saver migrations applied ({known})",
        f"12 saver migrations applied ({known}): set up by a newer saver",
    ]


@pytest.mark.slow  # builds its own database with the real graphs
@pytest.mark.postgres
def test_verify_shape_says_which_saver_generation_set_the_tables_up(pg_database: str) -> None:
    """The real saver set these tables up (10 migrations): the line says so; with rows removed, an older one."""
    import psycopg

    build_postgres(pg_database, None, ["clean-delta"], turns=4, message_bytes=64)
    code, out, err = run_ckpt("verify-shape", "--db", pg_database, "--format", "json")
    assert code == 0, err
    setup = json.loads(out)["database"]["saver_setup"]
    assert setup == "10 saver migrations applied (langgraph-checkpoint-postgres 3.1.1 to 3.2 applies 10)"
    with psycopg.connect(pg_database, autocommit=True) as connection:
        connection.execute("DELETE FROM checkpoint_migrations WHERE v >= 5")
    code, out, _ = run_ckpt("verify-shape", "--db", pg_database)
    assert "tables: 5 saver migrations applied" in out and "set up by an older saver" in out


def test_a_cadence_the_operator_set_after_the_upgrade_is_theirs(tmp_path: Path) -> None:
    tree = shutil.copytree(DEPLOYMENTS / "upgraded", tmp_path / "tree")
    config = tree / "config.yaml"
    edited = config.read_text().replace("snapshot_frequency: 10", "snapshot_frequency: 500   # tuned")
    config.write_text(edited)
    _, out, _ = run_ckpt("lint-config", "--format", "json", str(config))
    assert not any(finding["rule"] == "CK512" for finding in json.loads(out)["findings"])
    code, _, err = run_ckpt("migrate-config", "--restore-from-backup", str(config))
    # Nothing to restore: the legacy key is moved as without the option, the operator's 500 kept.
    assert code == 0 and "nothing to restore" in err and "snapshot_frequency: 500   # tuned" in config.read_text()
    assert "checkpoint_delta_snapshot_frequency" not in config.read_text()
    config.write_text("database: [\n")
    code, _, err = run_ckpt("migrate-config", "--restore-from-backup", str(config))
    assert code == 2 and "not valid YAML" in err


def test_an_example_that_is_not_the_upgraders_is_ignored(tmp_path: Path) -> None:
    # config-upgrade.sh merges from the repository root's example only, never one further up.
    shutil.copyfile(DEPLOYMENTS / "before-upgrade" / "config.example.yaml", tmp_path / "config.example.yaml")
    project = tmp_path / "a" / "b"
    project.mkdir(parents=True)
    shutil.copyfile(DEPLOYMENTS / "before-upgrade" / "config.yaml", project / "config.yaml")
    _, out, _ = run_ckpt("lint-config", "--format", "json", str(project / "config.yaml"))
    assert not any(finding["rule"] == "CK511" for finding in json.loads(out)["findings"])
    backend = project / "backend"
    backend.mkdir()
    shutil.move(project / "config.yaml", backend / "config.yaml")
    shutil.copyfile(tmp_path / "config.example.yaml", project / "config.example.yaml")
    _, out, _ = run_ckpt("lint-config", "--format", "json", str(backend / "config.yaml"))
    assert any(finding["rule"] == "CK511" for finding in json.loads(out)["findings"])


def test_a_resolved_dsn_never_shows_its_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = checkout(tmp_path / "deer-flow")
    (root / "config.yaml").write_text(
        "database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: $DATABASE_URL\n"
    )
    (root / ".env").write_text(f"DATABASE_URL=postgresql://deer:{PASSWORD}@db/deerflow\n")
    monkeypatch.chdir(root)
    for args in (("migrate-config", "--check"), ("migrate-config", "--check", "--format", "json"), ("lint-config",)):
        _, out, err = run_ckpt(*args)
        assert "deer:***@db" in out + err and PASSWORD not in out + err, args


def test_a_candidate_that_cannot_be_opened_is_an_error_not_a_skip(
    tmp_path: Path, checkpoint_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DeerFlow's own file is corrupt: checking another database instead would say "clean" about the wrong one.
    root = checkout(tmp_path / "deer-flow", "database:\n  backend: sqlite\n")
    broken = root / "backend" / ".deer-flow" / "data" / "deerflow.db"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a database at all" * 10)
    place_db(checkpoint_db, root / ".deer-flow" / "data" / "deerflow.db")
    # Run from backend/, where make dev's gateway runs, backend's file is DeerFlow's (this test ran from the root
    # before, when ckpt put backend/ first wherever it ran; from the root, a process there uses the root's file).
    monkeypatch.chdir(root / "backend")
    code, _, err = run_ckpt("verify-shape")
    assert code == 2 and f"{broken} is not a SQLite database" in err


@pytest.mark.parametrize(
    ("section", "line"),
    [
        ("checkpointer:\n  type: postgres\n  connection_string: postgresql://h/db\n  postgres_schema:\n", 4),
        ("checkpointer:\n  type: sqlite\n  connection_string: 123\n", 3),
    ],
)
def test_checkpointer_values_deerflow_cannot_read_as_strings(section: str, line: int) -> None:
    findings = lint_text(section)
    assert ("CK500", line) in [(finding.rule, finding.line) for finding in findings]
    assert "Input should be a valid string" in next(f.message for f in findings if f.rule == "CK500")


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("checkpointer:\n  type: sqlite\n  postgres_schema: Bad\n", "not a plain lowercase PostgreSQL identifier"),
        ("checkpointer:\n  type: SQLite\n", "DeerFlow refuses this config (memory, sqlite or postgres)"),
    ],
)
def test_verify_shape_refuses_a_checkpointer_section_deerflow_refuses(
    tmp_path: Path, section: str, expected: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(section)
    code, _, err = run_ckpt("verify-shape", "--config", str(config))
    assert code == 2 and expected in err, err


@pytest.mark.slow
def test_nesting_past_the_parser_is_ck500_not_a_crash(tmp_path: Path) -> None:
    deep = "database: " + "[" * 5000 + "]" * 5000 + "\n"
    findings = lint_text(deep)
    assert [finding.rule for finding in findings] == ["CK500"] and "nesting deeper" in findings[0].message
    config = tmp_path / "config.yaml"
    config.write_text("database:\n  checkpoint_delta_snapshot_frequency: 5\n")
    (tmp_path / "config.yaml.bak").write_text(deep)  # a backup nobody can read is no finding
    assert run_ckpt("lint-config", str(config)).exit_code == 0
    assert run_ckpt("migrate-config", "--check", str(config)).exit_code == 1


def test_an_unreadable_dotenv_is_a_warning_and_its_variables_left_out(
    tmp_path: Path, checkpoint_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_bytes(b"DATABASE_URL=\xff\xfe\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_ckpt("verify-shape", "--db", str(checkpoint_db))
    assert code in (0, 1) and "warning: cannot read" in err and "UnicodeDecodeError" in err
    (tmp_path / ".env").unlink()
    os.mkfifo(tmp_path / ".env")
    code, _, err = run_ckpt("verify-shape", "--db", str(checkpoint_db))
    assert code in (0, 1) and "is a FIFO" in err


@pytest.mark.parametrize("case", ["indicator", "no_final_newline", "strip", "duplicate"])
def test_helm_block_shapes_migrate_and_read_back(tmp_path: Path, case: str) -> None:
    import yaml

    legacy = "  database:\n    checkpoint_channel_mode: delta\n    checkpoint_delta_snapshot_frequency: 250\n"
    text = {
        "indicator": "config: |2\n    # a more indented first line\n" + legacy,
        "no_final_newline": "image: x\nconfig: |\n" + legacy.rstrip("\n"),
        "strip": "config: |-\n" + legacy + "other: 1\n",
        "duplicate": "config: |\n  x: 1\nconfig: |\n" + legacy,
    }[case]
    values = tmp_path / "values.yaml"
    values.write_text(text)
    code, _, err = run_ckpt("migrate-config", str(values))
    assert code == 0, err
    after = yaml.safe_load(values.read_text())
    assert yaml.safe_load(after["config"])["database"]["checkpoint_delta"] == {"snapshot_frequency": 250}
    assert values.read_text().endswith("\n") == text.endswith("\n")


def test_assume_set_turns_an_unset_variable_into_info() -> None:
    text = "models:\n  - api_key: $OPENAI_API_KEY\ndatabase:\n  backend: sqlite\n"
    assert [(finding.rule, finding.line) for finding in lint_text(text)] == [("CK500", 2)]
    listed = lint_text("tools: [x, $T]\nmodels:\n  - name: a\n    api_key: $K\n")
    assert [(finding.rule, finding.line) for finding in listed] == [("CK500", 1), ("CK500", 4)]
    for assumed in ({"OPENAI_API_KEY"}, {"*"}):
        findings = lint_config_bytes(text.encode(), {}, Path("/"), frozenset(assumed)).findings
        assert [finding.rule for finding in findings] == ["CK509"]
    assert [f.rule for f in lint_config_bytes(text.encode(), {}, Path("/"), frozenset({"OTHER"})).findings] == ["CK500"]


def test_a_config_named_from_outside_its_checkout_gets_the_checkouts_dotenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = checkout(tmp_path / "deer-flow", "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n")
    (root / ".env").write_text(f"DATABASE_URL=postgresql://deer:{PASSWORD}@db/deerflow\n")
    elsewhere = tmp_path / "ops"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # Run from the checkout or from outside it, the same file reads the same: DeerFlow's .env is the checkout's.
    outside = run_ckpt("lint-config", str(root / "config.yaml"))
    monkeypatch.chdir(root)
    inside = run_ckpt("lint-config", str(root / "config.yaml"))
    assert outside[0] == inside[0] == 0 and "CK500" not in outside[1]
    assert "supplies $DATABASE_URL" in outside[2] and PASSWORD not in outside[1] + outside[2]
