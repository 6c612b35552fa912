"""Which checkpoint database to read: a --db argument, DeerFlow's config.yaml, or its default places.

Everything that names a database for people goes through `describe()`, which never shows a password.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from deerflow_ckpt.config.database import DatabaseSettings
from deerflow_ckpt.config.locate import PROJECT_ROOT_ENV
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.redact import redact, remember_secret, url_password

SQLITE_FILE_NAME = "deerflow.db"
# How store/sqlite.py says a file opened but holds no checkpoint tables.
NOT_CHECKPOINT_DATABASE = "is not a LangGraph checkpoint database"
# checkpointer: type sqlite: the default file, and the base dir relative paths resolve against.
CHECKPOINTER_SQLITE_DEFAULT = "store.db"
HOME_ENV = "DEER_FLOW_HOME"
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
class PostgresTimeouts:
    """How long a Postgres scan waits, in seconds (docs in the README's security section)."""

    # Each host's connection attempt (libpq's connect_timeout).
    connect: int = 10
    # No data from the server for this long (a dead network, a proxy that stopped forwarding): give up.
    network: float = 120.0
    # Waiting behind another session's lock (an exclusive lock held by a migration, say).
    lock: float = 10.0
    # Ours, only when asked: otherwise the role's or the server's statement_timeout applies unchanged.
    statement: float | None = None


@dataclass(frozen=True)
class PostgresTarget:
    # libpq conninfo or URL with the scheme normalised; holds the password, so never print it.
    conninfo: str
    schema: str = ""
    timeouts: PostgresTimeouts = PostgresTimeouts()

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
    # psycopg's own errors can echo a DSN; registering the password masks it in every message. The
    # forgiving reading first: libpq stops a password at an unencoded '@' and would leave the rest shown.
    remember_secret(url_password(dsn))
    try:
        from psycopg.conninfo import conninfo_to_dict

        remember_secret(str(conninfo_to_dict(dsn).get("password") or ""))
    except Exception:  # an unparsable DSN fails later with a redacted message
        pass


def is_postgres_dsn(value: str) -> bool:
    return bool(_POSTGRES_URL.match(value) or _CONNINFO_KEY.match(value))


# Any URL scheme: a --db that has one and is no PostgreSQL DSN is refused, not taken for a file name.
_URL_SCHEME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*)://")


def target_from_argument(value: str, schema: str = "", immutable: bool = False) -> DatabaseTarget:
    """A --db value: a postgresql:// DSN (or key=value conninfo), else a SQLite file path."""
    if is_postgres_dsn(value):
        return _postgres_target(value, schema)
    scheme = _URL_SCHEME.match(value)
    if scheme is not None:
        remember_secret(url_password(value))
        raise StoreError(
            f"--db {redact(value)}: ckpt reads PostgreSQL (postgresql://, postgres://) and SQLite files, not "
            f"{scheme.group(1)}://; give a SQLite database as a path"
        )
    return SqliteTarget(Path(value).expanduser(), immutable)


def sqlite_file(sqlite_dir: str, process_dir: Path) -> Path:
    """database.sqlite_dir's file for a DeerFlow process running in `process_dir` (Path(dir).resolve())."""
    return (process_dir / sqlite_dir / SQLITE_FILE_NAME).resolve()


def checkpointer_sqlite_file(connection: str | None, environ: Mapping[str, str], process_dir: Path) -> Path | None:
    """checkpointer: type sqlite's file for a process in `process_dir`; None for :memory:."""
    connection = connection or CHECKPOINTER_SQLITE_DEFAULT
    if connection == ":memory:":
        return None
    if connection.startswith("file:"):
        # URIs go to SQLite unchanged: a relative one opens against the process working directory.
        path = connection[len("file:") :].split("?", 1)[0].split("#", 1)[0]
        if path.startswith("//"):
            path = path[path.find("/", 2) :] if "/" in path[2:] else "/"
        return (process_dir / unquote(path)).resolve()
    location = Path(connection)
    if location.is_absolute():
        return location.resolve()
    # Relative paths resolve against DeerFlow's base dir: $DEER_FLOW_HOME, else <project root>/.deer-flow.
    home = environ.get(HOME_ENV)
    base = Path(home) if home else Path(environ.get(PROJECT_ROOT_ENV) or process_dir) / ".deer-flow"
    return (process_dir / base / location).resolve()


def _process_dirs(config_path: Path, cwd: Path, gateway_dir: Path | None) -> list[Path]:
    """Where the DeerFlow process may run: its gateway's backend/ when the checkout is known (every launcher
    starts it there), here, beside the config, or in the config's backend/."""
    config_dir = config_path.resolve().parent
    first = [gateway_dir] if gateway_dir is not None else []
    return list(dict.fromkeys([*first, cwd.resolve(), config_dir, config_dir / "backend"]))


def _candidates(
    locate: Callable[[Path], Path | None], config_path: Path, cwd: Path, gateway_dir: Path | None
) -> list[Path]:
    found = (locate(directory) for directory in _process_dirs(config_path, cwd, gateway_dir))
    return list(dict.fromkeys(path for path in found if path is not None))


def _home_mount(sqlite_dir: str, environ: Mapping[str, str]) -> Path | None:
    """Docker compose mounts $DEER_FLOW_HOME as the gateway's backend/.deer-flow: on the host, a sqlite_dir
    under .deer-flow/ is under $DEER_FLOW_HOME."""
    home = environ.get(HOME_ENV)
    parts = Path(sqlite_dir).parts
    if not home or not parts or parts[0] != ".deer-flow":
        return None
    return (Path(home).joinpath(*parts[1:]) / SQLITE_FILE_NAME).resolve()


def _not_a_checkpoint_database(path: Path) -> str | None:
    """Why the file at `path` is no checkpoint database (opened read-only), or None when it is one."""
    from deerflow_ckpt.store.sqlite import connect_readonly

    try:
        connect_readonly(SqliteTarget(path)).close()
    except StoreError as exc:
        # Only a database without LangGraph's tables is skipped: one that cannot be opened (permissions, a
        # corrupt file) may be the one DeerFlow uses, and DeerFlow would fail on it too.
        if NOT_CHECKPOINT_DATABASE not in str(exc):
            raise
        return str(exc)
    return None


def _first_existing(candidates: list[Path], via: str, immutable: bool) -> DatabaseChoice:
    """The first candidate that is a checkpoint database; files that are not are named and skipped."""
    skipped: list[str] = []
    for candidate in candidates:
        if not candidate.is_file():
            continue
        reason = None if immutable else _not_a_checkpoint_database(candidate)
        if reason is None:
            if skipped:
                via += f"; skipped {'; '.join(skipped)}"
            return DatabaseChoice(SqliteTarget(candidate, immutable), via)
        skipped.append(reason)
    tried = ", ".join(str(c) for c in candidates)
    found = f" ({'; '.join(skipped)})" if skipped else ""
    raise StoreError(f"no checkpoint database found ({via}); tried {tried}{found}")


def target_from_settings(
    settings: DatabaseSettings,
    config_path: Path,
    environ: Mapping[str, str],
    cwd: Path,
    immutable: bool = False,
    gateway_dir: Path | None = None,
) -> DatabaseChoice:
    """The database DeerFlow's checkpointer uses under these settings (`gateway_dir`: the checkout's backend/,
    where DeerFlow's gateway runs, when the checkout is known)."""
    override = settings.checkpointer
    if override is not None:
        via = f"checkpointer: section of {config_path} (it overrides database:)"
        if override.kind is None:
            raise StoreError(f"{via} has no type: DeerFlow refuses this config (checkpointer.type: Field required)")
        if override.kind not in ("memory", "sqlite", "postgres"):
            raise StoreError(
                f"{via} has type {override.kind!r}: DeerFlow refuses this config (memory, sqlite or postgres)"
            )
        if override.postgres_schema and not _SCHEMA_NAME.fullmatch(override.postgres_schema):
            raise StoreError(
                f"{via}: postgres_schema {override.postgres_schema!r} is not a plain lowercase PostgreSQL identifier; "
                "DeerFlow refuses this config"
            )
        if override.kind == "postgres":
            if not override.connection_string:
                raise StoreError(f"{via} has type postgres but no connection_string")
            return DatabaseChoice(_postgres_target(override.connection_string, override.postgres_schema or ""), via)
        if override.kind == "sqlite":
            connection = override.connection_string
            candidates = _candidates(
                lambda d: checkpointer_sqlite_file(connection, environ, d), config_path, cwd, gateway_dir
            )
            if not candidates:
                raise StoreError(f"{via} uses an in-memory SQLite checkpointer: nothing is stored on disk")
            return _first_existing(candidates, via, immutable)
        raise StoreError(f"{via} has type {override.kind!r}: nothing is stored on disk")
    via = f"database: section of {config_path}"
    if settings.backend == "postgres":
        if settings.postgres_url is None:
            raise StoreError(f"{via}: postgres_url refers to ${settings.postgres_url_reference}, which is not set")
        if not settings.postgres_url:
            raise StoreError(f"{via}: database.postgres_url is required for the postgres backend")
        return DatabaseChoice(_postgres_target(settings.postgres_url, settings.postgres_schema), via)
    if settings.backend == "sqlite":
        candidates = _candidates(lambda d: sqlite_file(settings.sqlite_dir, d), config_path, cwd, gateway_dir)
        mounted = _home_mount(settings.sqlite_dir, environ)
        if mounted is not None:
            candidates = list(dict.fromkeys([*candidates[: 1 if gateway_dir else 0], mounted, *candidates]))
        return _first_existing(candidates, via, immutable)
    raise StoreError(f"{via} selects backend {settings.backend!r}: nothing is stored on disk")


def default_sqlite_choice(
    sqlite_dir: str, environ: Mapping[str, str], cwd: Path, immutable: bool = False, gateway_dir: Path | None = None
) -> DatabaseChoice:
    """No config: DeerFlow's default SQLite places for its default `sqlite_dir` (its gateway runs from backend/;
    Docker mounts DEER_FLOW_HOME)."""
    candidates = [sqlite_file(sqlite_dir, directory) for directory in (gateway_dir, cwd, cwd / "backend") if directory]
    mounted = _home_mount(sqlite_dir, environ)
    if mounted is not None:
        candidates.insert(1 if gateway_dir else 0, mounted)
    return _first_existing(list(dict.fromkeys(candidates)), "DeerFlow's default SQLite locations", immutable)
