"""One decision for where a config's checkpoints go (config/discovery.py, checkpoint_storage): lint-config's
identity of the database, which compares configs, and verify-shape's location, which opens it, agree on every
kind of settings: the same SQLite file among the candidates, the same Postgres database, or both no database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deerflow_ckpt.config.database import read_database_settings
from deerflow_ckpt.config.discovery import (
    DeerFlowEnvironment,
    Refusal,
    RefusedFor,
    checkpoint_storage,
    database_location,
)
from deerflow_ckpt.config.identity import DatabaseIdentity, Unlocated, checkpoint_identity, postgres_identity
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.locations import PostgresLocation, SqliteLocation

DSN = "postgresql://app@db.internal:5433/deerflow"
ENVIRON = {"DEER_FLOW_HOME": "/srv/deerflow-home", "DATABASE_URL": DSN}

CASES: dict[str, tuple[dict[str, Any], str]] = {
    "database sqlite, default dir": ({"database": {"backend": "sqlite"}}, "sqlite"),
    "database sqlite, own dir": ({"database": {"backend": "sqlite", "sqlite_dir": "state/db"}}, "sqlite"),
    "database postgres": ({"database": {"backend": "postgres", "postgres_url": DSN}}, "postgres"),
    "database postgres from a variable": (
        {"database": {"backend": "postgres", "postgres_url": "$DATABASE_URL"}},
        "postgres",
    ),
    "database postgres, unset variable": ({"database": {"backend": "postgres", "postgres_url": "$MISSING"}}, "unset"),
    "database postgres, empty url": ({"database": {"backend": "postgres", "postgres_url": ""}}, "startup"),
    "database postgres, url not a string": ({"database": {"backend": "postgres", "postgres_url": 5}}, "load"),
    "database postgres, null url": ({"database": {"backend": "postgres", "postgres_url": None}}, "load"),
    "database sqlite, null postgres_url": ({"database": {"backend": "sqlite", "postgres_url": None}}, "load"),
    "checkpointer sqlite, database postgres_url not a string": (
        {"database": {"postgres_url": ["x"]}, "checkpointer": {"type": "sqlite"}},
        "load",
    ),
    "database memory": ({"database": {"backend": "memory"}}, "memory"),
    "checkpointer sqlite, default file": ({"checkpointer": {"type": "sqlite"}}, "sqlite"),
    "checkpointer sqlite, relative": ({"checkpointer": {"type": "sqlite", "connection_string": "cp/x.db"}}, "sqlite"),
    "checkpointer sqlite, absolute": ({"checkpointer": {"type": "sqlite", "connection_string": "/var/x.db"}}, "sqlite"),
    "checkpointer sqlite, URI": (
        {"checkpointer": {"type": "sqlite", "connection_string": "file:u.db?mode=rwc"}},
        "sqlite",
    ),
    "checkpointer sqlite, :memory:": ({"checkpointer": {"type": "sqlite", "connection_string": ":memory:"}}, "memory"),
    "checkpointer memory": ({"checkpointer": {"type": "memory"}}, "memory"),
    "checkpointer postgres": ({"checkpointer": {"type": "postgres", "connection_string": DSN}}, "postgres"),
    "checkpointer postgres, no DSN": ({"checkpointer": {"type": "postgres"}}, "startup"),
    "checkpointer postgres over database sqlite": (
        {"database": {"backend": "sqlite"}, "checkpointer": {"type": "postgres", "connection_string": DSN}},
        "postgres",
    ),
    "checkpointer without a type": ({"checkpointer": {"connection_string": "x.db"}}, "load"),
    "checkpointer of another type": ({"checkpointer": {"type": "redis"}}, "load"),
    "checkpointer with a refused schema": (
        {"checkpointer": {"type": "postgres", "connection_string": DSN, "postgres_schema": "Bad-Name"}},
        "load",
    ),
}


@pytest.mark.parametrize(("data", "outcome"), list(CASES.values()), ids=list(CASES))
def test_lint_configs_identity_and_verify_shapes_location_agree(
    data: dict[str, Any], outcome: str, tmp_path: Path
) -> None:
    settings = read_database_settings(data, ENVIRON)
    identity = checkpoint_identity(settings, ENVIRON, tmp_path)
    try:
        location = database_location(settings, tmp_path / "config.yaml", DeerFlowEnvironment(ENVIRON, None), tmp_path)
    except ConfigError:
        location = None
    storage = checkpoint_storage(settings)
    if outcome == "sqlite":
        assert isinstance(identity, DatabaseIdentity) and isinstance(location, SqliteLocation)
        assert identity.key[1] in {str(candidate) for candidate in location.candidates}
    elif outcome == "postgres":
        assert isinstance(identity, DatabaseIdentity) and isinstance(location, PostgresLocation)
        assert postgres_identity(location.dsn, location.schema) == identity
    else:
        assert isinstance(identity, Unlocated) and location is None
        assert identity.in_memory is (outcome == "memory")
        refusals = {"load": Refusal.LOAD, "startup": Refusal.STARTUP}
        assert identity.refused is refusals.get(outcome)
        assert storage.refusal is refusals.get(outcome)
    assert (storage.refused_for is RefusedFor.NO_DSN) is (outcome == "startup")


def test_a_null_postgres_url_is_refused_as_deerflow_refuses_it(tmp_path: Path) -> None:
    """DatabaseConfig's postgres_url is a str: pydantic refuses null when the file loads (no $VAR is involved)."""
    settings = read_database_settings({"database": {"backend": "postgres", "postgres_url": None}}, {})
    with pytest.raises(ConfigError) as refused:
        database_location(settings, tmp_path / "config.yaml", DeerFlowEnvironment({}, None), tmp_path)
    assert str(refused.value) == (
        f"database: section of {tmp_path / 'config.yaml'}: database.postgres_url is null, not a string: DeerFlow "
        "refuses it (Input should be a valid string)"
    )


def test_a_null_postgres_url_refuses_the_file_under_a_checkpointer_section_too(tmp_path: Path) -> None:
    data = {"database": {"postgres_url": None}, "checkpointer": {"type": "sqlite"}}
    settings = read_database_settings(data, {})
    with pytest.raises(ConfigError) as refused:
        database_location(settings, tmp_path / "config.yaml", DeerFlowEnvironment({}, None), tmp_path)
    assert str(refused.value).endswith(
        "database.postgres_url is null, not a string: DeerFlow refuses it (Input should be a valid string) (DeerFlow "
        "checks database: under a checkpointer: section too)"
    )
