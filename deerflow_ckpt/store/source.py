"""Which checkpoint database to read: a --db argument, or the first checkpoint database among the candidates
config/discovery.py worked out.

Everything that names a database for people goes through `describe()`, which never shows a password.
"""

from __future__ import annotations

import re
from pathlib import Path

from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.dsn import DsnError, is_postgres_dsn, is_schema_name, libpq_parameters, normalize_dsn
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.locations import DatabaseLocation, PostgresLocation, SqliteLocation
from deerflow_ckpt.redact import redact, remember_dsn

# How store/sqlite.py says a file opened but holds no checkpoint tables.
NOT_CHECKPOINT_DATABASE = "is not a LangGraph checkpoint database"


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
    """How long a Postgres scan waits, in seconds (docs/security.md, "Security model and limits")."""

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
        return f"PostgreSQL {redact(self.conninfo)}{where}"


DatabaseTarget = SqliteTarget | PostgresTarget


@dataclass(frozen=True)
class DatabaseChoice:
    target: DatabaseTarget
    # How it was chosen, for the "scanned ..." line.
    found_via: str


def postgres_target(dsn: str, schema: str, given_by: str = "--db") -> PostgresTarget:
    """The Postgres database `dsn` names; `given_by` (the option or config section) heads a refusal."""
    if schema and not is_schema_name(schema):
        raise StoreError(f"postgres schema {schema!r} is not a plain lowercase PostgreSQL identifier")
    normalized = normalize_dsn(dsn.strip())
    # psycopg's errors can echo a DSN: every reading of its password is masked in every later message.
    remember_dsn(normalized)
    try:
        libpq_parameters(normalized)
    except DsnError as exc:
        raise StoreError(f"{given_by}: the PostgreSQL DSN cannot be used: {exc}") from None
    return PostgresTarget(normalized, schema)


# Any URL scheme: a --db that has one and is no PostgreSQL DSN is refused, not taken for a file name.
_URL_SCHEME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*)://")


def target_from_argument(value: str, schema: str = "", immutable: bool = False) -> DatabaseTarget:
    """A --db value: a postgresql:// DSN (or key=value conninfo), else a SQLite file path."""
    if is_postgres_dsn(value):
        return postgres_target(value, schema)
    scheme = _URL_SCHEME.match(value)
    if scheme is not None:
        remember_dsn(value)
        raise StoreError(
            f"--db {redact(value)}: ckpt reads PostgreSQL (postgresql://, postgres://) and SQLite files, not "
            f"{scheme.group(1)}://; give a SQLite database as a path"
        )
    return SqliteTarget(Path(value).expanduser(), immutable)


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


def _first_existing(location: SqliteLocation, immutable: bool) -> DatabaseChoice:
    """The first candidate that is a checkpoint database; files that are not are named and skipped."""
    candidates, via = location.candidates, location.via
    skipped: list[str] = []
    for candidate in candidates:
        if not candidate.is_file():
            continue
        reason = None if immutable else _not_a_checkpoint_database(candidate)
        if reason is None:
            if (why := location.why(candidate)) is not None:
                via += f", {why}"
            if skipped:
                via += f"; skipped {'; '.join(skipped)}"
            return DatabaseChoice(SqliteTarget(candidate, immutable), via)
        skipped.append(reason)
    tried = ", ".join(str(c) for c in candidates)
    found = f" ({'; '.join(skipped)})" if skipped else ""
    raise StoreError(f"no checkpoint database found ({via}); tried {tried}{found}")


def choose(location: DatabaseLocation, immutable: bool = False) -> DatabaseChoice:
    """The database at `location`: its Postgres target, or the first candidate file that is a checkpoint
    database."""
    if isinstance(location, PostgresLocation):
        return DatabaseChoice(postgres_target(location.dsn, location.schema, location.via), location.via)
    return _first_existing(location, immutable)
