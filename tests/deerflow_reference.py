"""DeerFlow's rules restated for tests, independently of ckpt's code (docs/deerflow-config.md).

Each rule cites the upstream lines it restates: bytedance/deer-flow at f1f4af99, files under
backend/packages/harness/deerflow/config/. The whole-file loader (`load_app_config`) restates only the
parts of AppConfig.from_file the tests need: the YAML, `$VAR` resolution, the null-section drop, the
database defaults, the required `sandbox:` section, `max_recursion_limit`, the `models:` entries and the
checkpoint sections. Every other section is accepted as written here, though DeerFlow validates it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

LEGACY_KEY = "checkpoint_delta_snapshot_frequency"
# What makes AppConfig.from_file raise: the YAML, an unset `$VAR` (ValueError), pydantic.
REFUSALS = (yaml.YAMLError, ValueError, ValidationError, TypeError, AttributeError)


def legacy_shim(database: dict[Any, Any]) -> dict[Any, Any]:
    """DatabaseConfig._migrate_legacy_snapshot_frequency (database_config.py:218-254): a nested cadence
    wins, a nested non-mapping drops the legacy key, otherwise the legacy value is carried under
    checkpoint_delta."""
    if LEGACY_KEY not in database:
        return database
    data = dict(database)
    legacy = data.pop(LEGACY_KEY)
    nested = data.get("checkpoint_delta")
    if isinstance(nested, dict) and "snapshot_frequency" in nested:
        return data
    if nested is None:
        data["checkpoint_delta"] = {"snapshot_frequency": legacy}
    elif isinstance(nested, dict):
        data["checkpoint_delta"] = {**nested, "snapshot_frequency": legacy}
    return data


def postgres_schema(value: str) -> str:
    """validate_postgres_schema (postgres_schema.py:17-27): empty, or a plain lowercase identifier."""
    if value and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value):
        raise ValueError("postgres_schema must be a plain lowercase PostgreSQL identifier")
    return value


class Delta(BaseModel):
    """CheckpointDeltaConfig (database_config.py:61, 64-83): snapshot_frequency >= 1, default 10."""

    snapshot_frequency: Annotated[int, Field(ge=1)] = 10


class Database(BaseModel):
    """DatabaseConfig (database_config.py:142-214), the fields that place and shape checkpoints; unknown
    keys are ignored (pydantic's default)."""

    backend: Literal["memory", "sqlite", "postgres"] = "memory"
    sqlite_dir: str = ".deer-flow/data"
    postgres_url: str = ""
    postgres_schema: str = ""
    checkpoint_channel_mode: Literal["full", "delta"] = "full"
    checkpoint_delta: Delta = Field(default_factory=Delta)

    @model_validator(mode="before")
    @classmethod
    def _legacy_key(cls, data: Any) -> Any:
        return legacy_shim(data) if isinstance(data, dict) else data

    @field_validator("postgres_schema")
    @classmethod
    def _schema(cls, value: str) -> str:
        return postgres_schema(value)


class Checkpointer(BaseModel):
    """CheckpointerConfig (checkpointer_config.py:9-37): `type` required."""

    type: Literal["memory", "sqlite", "postgres"]
    connection_string: str | None = None
    postgres_schema: str = ""

    @field_validator("postgres_schema")
    @classmethod
    def _schema(cls, value: str) -> str:
        return postgres_schema(value)


class Sandbox(BaseModel):
    """SandboxConfig (sandbox_config.py:100-103, 202): `use`, the provider's class path, is required."""

    model_config = ConfigDict(extra="allow")
    use: str


class Model(BaseModel):
    """ModelConfig (model_config.py:7-15): `name`, `use` and `model` are required, other keys kept."""

    model_config = ConfigDict(extra="allow")
    name: str
    use: str
    model: str


class AppConfig(BaseModel):
    """AppConfig (app_config.py:189-328): `sandbox` has no default (227-232), so a file without it is
    refused; `max_recursion_limit` >= 1 (221-225); unknown sections are kept (265)."""

    model_config = ConfigDict(extra="allow")
    max_recursion_limit: Annotated[int, Field(ge=1)] = 1000
    models: list[Model] = Field(default_factory=list)
    sandbox: Sandbox
    database: Database = Field(default_factory=Database)
    checkpointer: Checkpointer | None = None

    @model_validator(mode="before")
    @classmethod
    def _drop_null_sections(cls, data: Any) -> Any:
        """_drop_null_config_sections (app_config.py:338-361): a null section is absent, so a null
        `sandbox:` is as missing as none."""
        return {key: value for key, value in data.items() if value is not None} if isinstance(data, dict) else data


def resolve_variables(value: Any, environ: Mapping[str, str]) -> Any:
    """AppConfig.resolve_env_variables (app_config.py:544-567): every string value (mapping values and list
    items, never keys) that starts with `$` is the variable named by the rest; an unset one raises."""
    if isinstance(value, str) and value.startswith("$"):
        if value[1:] not in environ:
            raise ValueError(f"Environment variable {value[1:]} not found for config value {value}")
        return environ[value[1:]]
    if isinstance(value, dict):
        return {key: resolve_variables(item, environ) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_variables(item, environ) for item in value]
    return value


def apply_database_defaults(data: dict[Any, Any]) -> None:
    """AppConfig._apply_database_defaults (app_config.py:59-62, 487-497): a missing or null `database:`
    becomes a mapping, and a mapping gets `backend: sqlite` and `sqlite_dir: .deer-flow/data` unless set."""
    database = data.get("database")
    if database is None:
        database = data["database"] = {}
    if isinstance(database, dict):
        database.setdefault("backend", "sqlite")
        database.setdefault("sqlite_dir", ".deer-flow/data")


def load_app_config(text: str, environ: Mapping[str, str]) -> AppConfig:
    """AppConfig.from_file (app_config.py:405-431) on a file's text, in its order: `yaml.safe_load(f) or {}`,
    `$VAR` resolution, the database defaults, validation. Raises one of REFUSALS where DeerFlow refuses."""
    data = yaml.safe_load(text) or {}
    data = resolve_variables(data, environ)
    apply_database_defaults(data)
    return AppConfig.model_validate(data)
