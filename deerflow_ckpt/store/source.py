"""Which checkpoint database to read: a --db argument, DeerFlow's config.yaml, or its default places.

Everything that names a database for people goes through `describe()`, which never shows a password.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from deerflow_ckpt.config.database import DatabaseSettings
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.redact import redact, remember_secret

SQLITE_FILE_NAME = "deerflow.db"
# SQLAlchemy-style schemes DeerFlow accepts in postgres_url: postgresql+asyncpg://, postgres+psycopg://
_DRIVER_SCHEME = re.compile(r"^postgres(?:ql)?\+[A-Za-z0-9_]+://")
_POSTGRES_URL = re.compile(r"^postgres(?:ql)?(?:\+[A-Za-z0-9_]+)?://")
_CONNINFO_KEY = re.compile(r"^\s*(host|hostaddr|dbname|user|port|service)\s*=")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True)
class SqliteTarget:
    path: Path
    # Explicit opt-in for a copy nobody writes to: ignores -wal and -shm entirely.
    immutable: bool = False

    def describe(self) -> str:
        suffix = " (immutable)" if self.immutable else ""
        return f"SQLite {self.path}{suffix}"


@dataclass(frozen=True)
class PostgresTarget:
    # libpq conninfo or URL with the scheme normalised; holds the password, so never print it.
    conninfo: str
    schema: str = ""

    def describe(self) -> str:
        where = f" schema {self.schema}" if self.schema else ""
        return f"PostgreSQL {redact_dsn(self.conninfo)}{where}"


DatabaseTarget = SqliteTarget | PostgresTarget


@dataclass(frozen=True)
class DatabaseChoice:
    target: DatabaseTarget
    # How it was chosen, for the "scanned ..." line.
    found_via: str


def normalize_dsn(dsn: str) -> str:
    """Strip a SQLAlchemy `+driver` suffix, as DeerFlow's normalize_libpq_dsn does."""
    return _DRIVER_SCHEME.sub("postgresql://", dsn, count=1)


def redact_dsn(dsn: str) -> str:
    """The DSN with any password masked, in URL or key=value form."""
    return redact(dsn)


def _postgres_target(dsn: str, schema: str) -> PostgresTarget:
    if schema and not _SCHEMA_NAME.fullmatch(schema):
        raise StoreError(f"postgres schema {schema!r} is not a plain lowercase PostgreSQL identifier")
    normalized = normalize_dsn(dsn.strip())
    _remember_password(normalized)
    return PostgresTarget(normalized, schema)


def _remember_password(dsn: str) -> None:
    # psycopg's own errors can echo a DSN; registering the password masks it in every message.
    try:
        from psycopg.conninfo import conninfo_to_dict

        remember_secret(str(conninfo_to_dict(dsn).get("password") or ""))
    except Exception:  # an unparsable DSN fails later with a redacted message
        match = re.search(r"://[^:/@\s]*:([^@\s]*)@", dsn)
        remember_secret(match.group(1) if match else None)


def is_postgres_dsn(value: str) -> bool:
    return bool(_POSTGRES_URL.match(value) or _CONNINFO_KEY.match(value))


def target_from_argument(value: str, schema: str = "", immutable: bool = False) -> DatabaseTarget:
    """A --db value: a postgresql:// DSN (or key=value conninfo), else a SQLite file path."""
    if is_postgres_dsn(value):
        return _postgres_target(value, schema)
    return SqliteTarget(Path(value).expanduser(), immutable)


def _sqlite_candidates(sqlite_dir: str, config_path: Path | None, cwd: Path) -> list[Path]:
    directory = Path(sqlite_dir).expanduser()
    if directory.is_absolute():
        return [directory / SQLITE_FILE_NAME]
    # DeerFlow resolves sqlite_dir against the process CWD, and its gateway runs from backend/.
    bases = [cwd]
    if config_path is not None:
        config_dir = config_path.resolve().parent
        bases += [config_dir, config_dir / "backend"]
    seen: list[Path] = []
    for base in bases:
        candidate = (base / directory / SQLITE_FILE_NAME).resolve()
        if candidate not in seen:
            seen.append(candidate)
    return seen


def _first_existing(candidates: list[Path], via: str, immutable: bool) -> DatabaseChoice:
    for candidate in candidates:
        if candidate.is_file():
            return DatabaseChoice(SqliteTarget(candidate, immutable), via)
    tried = ", ".join(str(c) for c in candidates)
    raise StoreError(f"no checkpoint database found ({via}); tried {tried}")


def target_from_settings(
    settings: DatabaseSettings,
    config_path: Path,
    environ: Mapping[str, str],
    cwd: Path,
    immutable: bool = False,
) -> DatabaseChoice:
    """The database DeerFlow's checkpointer uses under these settings."""
    override = settings.checkpointer
    if override is not None:
        via = f"checkpointer: section of {config_path} (it overrides database:)"
        if override.kind == "postgres":
            if not override.connection_string:
                raise StoreError(f"{via} has type postgres but no connection_string")
            return DatabaseChoice(_postgres_target(override.connection_string, override.postgres_schema or ""), via)
        if override.kind == "sqlite":
            connection = override.connection_string or "store.db"
            if connection == ":memory:":
                raise StoreError(f"{via} uses an in-memory SQLite checkpointer: nothing is stored on disk")
            location = Path(connection.removeprefix("file:").split("?", 1)[0]).expanduser()
            if location.is_absolute():
                return _first_existing([location], via, immutable)
            home = environ.get("DEER_FLOW_HOME")
            bases = [Path(home)] if home else []
            bases += [cwd / ".deer-flow", config_path.resolve().parent / ".deer-flow"]
            return _first_existing([(b / location).resolve() for b in bases], via, immutable)
        raise StoreError(f"{via} has type {override.kind!r}: nothing is stored on disk")
    via = f"database: section of {config_path}"
    if settings.backend == "postgres":
        if settings.postgres_url is None:
            raise StoreError(f"{via}: postgres_url refers to ${settings.postgres_url_reference}, which is not set")
        if not settings.postgres_url:
            raise StoreError(f"{via}: database.postgres_url is required for the postgres backend")
        return DatabaseChoice(_postgres_target(settings.postgres_url, settings.postgres_schema), via)
    if settings.backend == "sqlite":
        return _first_existing(_sqlite_candidates(settings.sqlite_dir, config_path, cwd), via, immutable)
    raise StoreError(f"{via} selects backend {settings.backend!r}: nothing is stored on disk")


def default_sqlite_choice(environ: Mapping[str, str], cwd: Path, immutable: bool = False) -> DatabaseChoice:
    """No config: DeerFlow's default SQLite places (gateway from backend/, or DEER_FLOW_HOME)."""
    candidates = [
        (cwd / ".deer-flow" / "data" / SQLITE_FILE_NAME).resolve(),
        (cwd / "backend" / ".deer-flow" / "data" / SQLITE_FILE_NAME).resolve(),
    ]
    home = environ.get("DEER_FLOW_HOME")
    if home:
        candidates.append((Path(home).expanduser() / "data" / SQLITE_FILE_NAME).resolve())
    return _first_existing(candidates, "DeerFlow's default SQLite locations", immutable)
