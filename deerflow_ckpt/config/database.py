"""The `database:` settings DeerFlow derives from config.yaml: backend, location, mode and cadence."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deerflow_ckpt.config.fields import HISTORY_CACHE_SECTION
from deerflow_ckpt.config.keys import (
    CADENCE_KEY,
    CHANNEL_MODE_KEY,
    DATABASE,
    DEFAULT_CADENCE,
    DEFAULT_CHANNEL_MODE,
    DELTA_SECTION,
    FILE_DATABASE_DEFAULTS,
    LEGACY_CHECKPOINTER,
)
from deerflow_ckpt.config.values import (
    CadenceReading,
    ExpansionError,
    ShimBranch,
    apply_legacy_shim,
    kind_of,
    load_values,
    read_cadence,
)
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.errors import ConfigError


@dataclass(frozen=True)
class NotAString:
    """A DSN setting that holds a mapping, a list or a number: DeerFlow refuses it, and ckpt never shows it
    (a mapping may well hold a password), only names it."""

    setting: str
    kind: str

    @property
    def problem(self) -> str:
        return (
            f"{self.setting} is {self.kind}, not a string: DeerFlow refuses it (Input should be a valid string); "
            "its value is not shown, it may hold a password"
        )


def dsn_setting(value: object, setting: str) -> str | NotAString | None:
    """A resolved DSN setting as text, never a mapping's str(): None stays None (unset, or null)."""
    if value is None or isinstance(value, str):
        return value
    return NotAString(setting, kind_of(value))


@dataclass(frozen=True)
class CheckpointerOverride:
    """The legacy `checkpointer:` section, which DeerFlow prefers over `database:` for checkpoints."""

    # None when the section has no type: DeerFlow's CheckpointerConfig requires one and refuses the file.
    kind: str | None
    connection_string: str | NotAString | None
    postgres_schema: str | None


@dataclass(frozen=True)
class DatabaseSettings:
    backend: str
    sqlite_dir: str
    # After `$VAR` resolution; None when the variable is unset here.
    postgres_url: str | NotAString | None
    postgres_url_reference: str | None
    postgres_schema: str
    channel_mode: object
    cadence: CadenceReading
    # Where the cadence came from: the nested key, the legacy flat key, or DeerFlow's default.
    cadence_origin: str
    checkpointer: CheckpointerOverride | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # database.checkpoint_cache with `$VAR` values resolved (empty: not configured).
    history_cache: Mapping[str, object] = field(default_factory=dict)


def resolve_reference(value: object, environ: Mapping[str, str]) -> tuple[object, str | None]:
    """DeerFlow's resolve_env_variables for one value: a string starting with `$` names a variable.

    Returns the resolved value (None when the variable is unset here) and the variable name.
    """
    if isinstance(value, str) and value.startswith("$"):
        name = value[1:]
        return environ.get(name), name
    return value, None


def read_database_settings(data: object, environ: Mapping[str, str]) -> DatabaseSettings:
    """What DeerFlow would use from an already-loaded config.yaml value."""
    top = data if isinstance(data, dict) else {}
    raw_database = top.get(DATABASE)
    if raw_database is None:
        raw_database = {}
    if not isinstance(raw_database, dict):
        raise ConfigError(f"database: is {type(raw_database).__name__}, not a mapping; DeerFlow cannot load it")
    database: dict[Any, Any] = {**FILE_DATABASE_DEFAULTS, **raw_database}
    shim = apply_legacy_shim(database)
    database = shim.database
    notes: list[str] = []

    delta = database.get(DELTA_SECTION)
    has_cadence = isinstance(delta, dict) and CADENCE_KEY in delta
    raw_cadence = delta[CADENCE_KEY] if has_cadence and isinstance(delta, dict) else DEFAULT_CADENCE
    if not has_cadence:
        origin = f"DeerFlow's default {DEFAULT_CADENCE}"
    elif shim.branch is ShimBranch.CARRIED:
        origin = "the deprecated database.checkpoint_delta_snapshot_frequency, carried by DeerFlow"
    else:
        origin = "database.checkpoint_delta.snapshot_frequency"
    resolved, reference = resolve_reference(raw_cadence, environ)
    if reference is not None and resolved is None:
        cadence = CadenceReading(raw_cadence, None, env_reference=reference)
        notes.append(f"the cadence comes from ${reference}, which is not set here")
    else:
        cadence = read_cadence(resolved)

    url, url_reference = resolve_reference(database.get("postgres_url", ""), environ)
    checkpointer = _checkpointer_override(top.get(LEGACY_CHECKPOINTER), environ)
    mode, _ = resolve_reference(database.get(CHANNEL_MODE_KEY, DEFAULT_CHANNEL_MODE), environ)
    backend, _ = resolve_reference(database.get("backend"), environ)
    schema, _ = resolve_reference(database.get("postgres_schema"), environ)
    return DatabaseSettings(
        backend=str(backend),
        sqlite_dir=_sqlite_dir(resolve_reference(database.get("sqlite_dir"), environ)[0]),
        postgres_url=dsn_setting(url, "database.postgres_url"),
        postgres_url_reference=url_reference,
        postgres_schema=str(schema or ""),
        channel_mode=mode,
        cadence=cadence,
        cadence_origin=origin,
        checkpointer=checkpointer,
        notes=tuple(notes),
        history_cache=_section(database.get(HISTORY_CACHE_SECTION), environ),
    )


def _section(value: object, environ: Mapping[str, str]) -> dict[str, object]:
    if not isinstance(value, dict):
        return {}
    return {str(key): resolve_reference(item, environ)[0] for key, item in value.items()}


def _sqlite_dir(value: object) -> str:
    """An empty sqlite_dir is DeerFlow's working directory (Path("").resolve()), not the default."""
    return FILE_DATABASE_DEFAULTS["sqlite_dir"] if value is None else str(value)


def _checkpointer_override(section: object, environ: Mapping[str, str]) -> CheckpointerOverride | None:
    if not isinstance(section, dict):
        return None
    connection, _ = resolve_reference(section.get("connection_string"), environ)
    schema, _ = resolve_reference(section.get("postgres_schema"), environ)
    kind, _ = resolve_reference(section.get("type"), environ)
    return CheckpointerOverride(
        kind=None if kind is None else str(kind),
        connection_string=dsn_setting(connection, "checkpointer.connection_string"),
        postgres_schema=None if schema is None else str(schema),
    )


def load_database_settings(path: Path, environ: Mapping[str, str]) -> DatabaseSettings:
    """Read config.yaml at `path` the way DeerFlow does and return its database settings."""
    import yaml

    from deerflow_ckpt.fileio import ConfigReadError, read_config_file

    try:
        text = read_config_file(path).decode("utf-8-sig")
    except ConfigReadError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text") from exc
    try:
        data = load_values(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}{where}") from exc
    except ExpansionError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return read_database_settings(data, environ)
