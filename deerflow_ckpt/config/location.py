"""Where DeerFlow's checkpointer keeps its database under given settings: a Postgres DSN and schema, or
the SQLite files it may have opened (which one depends on the directory its process runs in).

Only paths and strings are worked out here; store/source.py opens the candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from deerflow_ckpt.config.locate import PROJECT_ROOT_ENV
from deerflow_ckpt.dsn import is_schema_name
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.fileio import resolved
from deerflow_ckpt.locations import DatabaseLocation, PostgresLocation, SqliteLocation

if TYPE_CHECKING:
    from deerflow_ckpt.config.database import DatabaseSettings

SQLITE_FILE_NAME = "deerflow.db"
# checkpointer: type sqlite: the default file, and the base dir relative paths resolve against.
CHECKPOINTER_SQLITE_DEFAULT = "store.db"
HOME_ENV = "DEER_FLOW_HOME"


def sqlite_file(sqlite_dir: str, process_dir: Path) -> Path:
    """database.sqlite_dir's file for a DeerFlow process running in `process_dir` (Path(dir).resolve())."""
    return resolved(process_dir / sqlite_dir / SQLITE_FILE_NAME)


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
        return resolved(process_dir / unquote(path))
    location = Path(connection)
    if location.is_absolute():
        return resolved(location)
    # Relative paths resolve against DeerFlow's base dir: $DEER_FLOW_HOME, else <project root>/.deer-flow.
    home = environ.get(HOME_ENV)
    base = Path(home) if home else Path(environ.get(PROJECT_ROOT_ENV) or process_dir) / ".deer-flow"
    return resolved(process_dir / base / location)


def _process_dirs(config_path: Path, cwd: Path, gateway_dir: Path | None) -> list[Path]:
    """Where the DeerFlow process may run: its gateway's backend/ when the checkout is known (every launcher
    starts it there), here, beside the config, or in the config's backend/."""
    config_dir = resolved(config_path).parent
    first = [gateway_dir] if gateway_dir is not None else []
    return list(dict.fromkeys([*first, resolved(cwd), config_dir, config_dir / "backend"]))


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
    return resolved(Path(home).joinpath(*parts[1:]) / SQLITE_FILE_NAME)


def database_location(
    settings: DatabaseSettings,
    config_path: Path,
    environ: Mapping[str, str],
    cwd: Path,
    gateway_dir: Path | None = None,
) -> DatabaseLocation:
    """The database DeerFlow's checkpointer uses under these settings (`gateway_dir`: the checkout's backend/,
    where DeerFlow's gateway runs, when the checkout is known)."""
    # Here, not at the top: the default database's place is worked out without a config's reader.
    from deerflow_ckpt.config.database import NotAString

    override = settings.checkpointer
    if override is not None:
        via = f"checkpointer: section of {config_path} (it overrides database:)"
        if override.kind is None:
            raise ConfigError(f"{via} has no type: DeerFlow refuses this config (checkpointer.type: Field required)")
        if override.kind not in ("memory", "sqlite", "postgres"):
            raise ConfigError(
                f"{via} has type {override.kind!r}: DeerFlow refuses this config (memory, sqlite or postgres)"
            )
        if override.postgres_schema and not is_schema_name(override.postgres_schema):
            raise ConfigError(
                f"{via}: postgres_schema {override.postgres_schema!r} is not a plain lowercase PostgreSQL identifier; "
                "DeerFlow refuses this config"
            )
        if isinstance(override.connection_string, NotAString):
            raise ConfigError(f"{via}: {override.connection_string.problem}")
        if override.kind == "postgres":
            if not override.connection_string:
                raise ConfigError(f"{via} has type postgres but no connection_string")
            return PostgresLocation(override.connection_string, override.postgres_schema or "", via)
        if override.kind == "sqlite":
            connection = override.connection_string
            candidates = _candidates(
                lambda d: checkpointer_sqlite_file(connection, environ, d), config_path, cwd, gateway_dir
            )
            if not candidates:
                raise ConfigError(f"{via} uses an in-memory SQLite checkpointer: nothing is stored on disk")
            return SqliteLocation(candidates, via)
        raise ConfigError(f"{via} has type {override.kind!r}: nothing is stored on disk")
    via = f"database: section of {config_path}"
    if settings.backend == "postgres":
        if settings.postgres_url is None:
            raise ConfigError(f"{via}: postgres_url refers to ${settings.postgres_url_reference}, which is not set")
        if isinstance(settings.postgres_url, NotAString):
            raise ConfigError(f"{via}: {settings.postgres_url.problem}")
        if not settings.postgres_url:
            raise ConfigError(f"{via}: database.postgres_url is required for the postgres backend")
        return PostgresLocation(settings.postgres_url, settings.postgres_schema, via)
    if settings.backend == "sqlite":
        candidates = _candidates(lambda d: sqlite_file(settings.sqlite_dir, d), config_path, cwd, gateway_dir)
        mounted = _home_mount(settings.sqlite_dir, environ)
        if mounted is not None:
            candidates = list(dict.fromkeys([*candidates[: 1 if gateway_dir else 0], mounted, *candidates]))
        return SqliteLocation(candidates, via)
    raise ConfigError(f"{via} selects backend {settings.backend!r}: nothing is stored on disk")


def default_sqlite_location(
    sqlite_dir: str, environ: Mapping[str, str], cwd: Path, gateway_dir: Path | None = None
) -> SqliteLocation:
    """No config: DeerFlow's default SQLite places for its default `sqlite_dir` (its gateway runs from backend/;
    Docker mounts DEER_FLOW_HOME)."""
    candidates = [sqlite_file(sqlite_dir, directory) for directory in (gateway_dir, cwd, cwd / "backend") if directory]
    mounted = _home_mount(sqlite_dir, environ)
    if mounted is not None:
        candidates.insert(1 if gateway_dir else 0, mounted)
    return SqliteLocation(list(dict.fromkeys(candidates)), "DeerFlow's default SQLite locations")
