"""Which checkpoint database a config points at, as a value two configs can be compared by.

Nothing is opened and no driver is imported (lint-config stays light):
- SQLite: the file DeerFlow would open, resolved against the directory its process runs in;
- Postgres: host(s), port(s), database name and schema parsed from the DSN the way libpq reads it,
  after the same `+driver` normalisation verify-shape applies. User and password never take part,
  and nothing here ever shows them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from deerflow_ckpt.config.database import DatabaseSettings
from deerflow_ckpt.config.discovery import Refusal, RefusedFor, checkpoint_storage, file_for_process
from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.dsn import URI_SCHEME, DsnError, libpq_parameters, normalize_dsn
from deerflow_ckpt.fileio import resolved
from deerflow_ckpt.redact import redact

DEFAULT_PORT = "5432"
_ANY_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@dataclass(frozen=True)
class DatabaseIdentity:
    """Equal identities mean the same checkpoint tables."""

    kind: str
    key: tuple[str, ...]
    # For people: a path, or host:port/dbname and schema; never a user or password.
    display: str


@dataclass(frozen=True)
class Unlocated:
    """No shared database, or one ckpt cannot pin down; `reason` says which and why."""

    reason: str
    # True when the checkpoints live in no file or server at all (memory), so nothing is shared.
    in_memory: bool = False
    # Set when DeerFlow itself refuses these settings, and says at which step.
    refused: Refusal | None = None


def postgres_identity(dsn: str, schema: str) -> DatabaseIdentity:
    """The server, database and schema `dsn` with `schema` reaches; raises DsnError when unparsable."""
    scheme = _ANY_SCHEME.match(dsn)
    normalized = normalize_dsn(dsn.strip())
    if scheme and not URI_SCHEME.match(normalized):
        # DeerFlow's normalize_libpq_dsn raises for these; the scheme holds no secret.
        raise DsnError(f"unsupported PostgreSQL DSN scheme {scheme.group(1)}://")
    params = libpq_parameters(normalized)
    hosts = [host.lower() for host in (params.get("host") or params.get("hostaddr") or "").split(",")]
    ports = [port or DEFAULT_PORT for port in (params.get("port") or "").split(",")]
    if len(ports) == 1 and len(hosts) > 1:
        ports *= len(hosts)
    # libpq's default database name is the user name.
    dbname = params.get("dbname") or params.get("user") or ""
    service = params.get("service", "")
    # DeerFlow passes the DSN unchanged when no schema is configured: a search_path in its options decides.
    from_options = None if schema else search_path_option(params.get("options", ""))
    # Otherwise the server's search_path, which is public unless a $user schema exists.
    effective_schema = schema or from_options or "public"
    servers = ",".join(f"{host or 'local socket'}:{port}" for host, port in zip(hosts, ports, strict=False))
    display = f"PostgreSQL {servers}/{dbname or '(default database)'}"
    if service:
        display += f" (service {service})"
    if schema:
        display += f", schema {schema}"
    elif from_options:
        display += f", schema {from_options} (the DSN's options set search_path)"
    else:
        display += ", schema public (server default)"
    key = ("postgres", ",".join(hosts), ",".join(ports), dbname, service, effective_schema)
    return DatabaseIdentity("postgres", key, redact(display))


def _option_tokens(options: str) -> list[str]:
    """The server's split of libpq's `options`: whitespace separates, a backslash keeps the next character."""
    tokens: list[str] = []
    current: list[str] | None = None
    escaped = False
    for char in options:
        if escaped:
            current = (current or []) + [char]
            escaped = False
        elif char == "\\":
            escaped = True
            current = current or []
        elif char.isspace():
            if current is not None:
                tokens.append("".join(current))
            current = None
        else:
            current = (current or []) + [char]
    if current is not None:
        tokens.append("".join(current))
    return tokens


def search_path_option(options: str) -> str | None:
    """The search_path a connection's `options` sets (`-c search_path=x`, `-csearch_path=x`,
    `--search_path=x`; the last wins), or None."""
    found = None
    tokens = _option_tokens(options)
    for index, token in enumerate(tokens):
        if token == "-c" and index + 1 < len(tokens):
            setting = tokens[index + 1]
        elif token.startswith("-c") and token != "-c":
            setting = token[2:]
        elif token.startswith("--"):
            setting = token[2:].replace("-", "_")
        else:
            continue
        name, equals, value = setting.partition("=")
        if equals and name.strip().lower() == "search_path":
            found = value.strip()
    return found or None


def sqlite_identity(path: Path) -> DatabaseIdentity:
    real = resolved(path)
    return DatabaseIdentity("sqlite", ("sqlite", str(real)), f"SQLite {real}")


def checkpoint_identity(
    settings: DatabaseSettings, environ: Mapping[str, str], cwd: Path
) -> DatabaseIdentity | Unlocated:
    """The database DeerFlow's checkpointer writes to under `settings`, for a process running in `cwd` with
    `environ`: discovery's checkpoint_storage (the same decision verify-shape's database_location takes), without
    needing the file to exist and without touching the network."""
    storage = checkpoint_storage(settings)
    refused_for, refusal = storage.refused_for, storage.refusal
    if refused_for is RefusedFor.NO_TYPE:
        return Unlocated("the checkpointer: section has no type, which DeerFlow requires", refused=refusal)
    if refused_for is RefusedFor.UNKNOWN_TYPE:
        return Unlocated(f"the checkpointer: section has type {storage.kind}, which DeerFlow refuses", refused=refusal)
    if refused_for is RefusedFor.BAD_SCHEMA:
        return Unlocated(
            f"the checkpointer: section's postgres_schema {storage.schema!r} is refused by DeerFlow", refused=refusal
        )
    if refused_for is RefusedFor.NOT_A_STRING:
        return Unlocated(storage.problem, refused=refusal)
    if refused_for is RefusedFor.NO_DSN:
        # runtime/checkpointer/provider.py POSTGRES_CONN_REQUIRED, raised by both providers.
        setting, field_name = (
            ("connection_string", "checkpointer.connection_string")
            if storage.section == "checkpointer"
            else ("postgres_url", "database.postgres_url")
        )
        return Unlocated(
            f"postgres without a {setting}: DeerFlow accepts the section when it loads the config, then stops at "
            f'startup with "{field_name} is required for the postgres backend"',
            refused=refusal,
        )
    if storage.unset_reference is not None:
        return Unlocated(f"postgres_url comes from ${storage.unset_reference}, which is not set here")
    if storage.dsn is not None:
        return _postgres_or_unlocated(storage.dsn, storage.schema)
    if storage.file_for is not None:
        path = file_for_process(storage, environ, cwd)
        if path is None:
            return Unlocated("the checkpointer: section keeps checkpoints in memory (:memory:)", in_memory=True)
        return sqlite_identity(path)
    if storage.section == "checkpointer":
        return Unlocated(f"the checkpointer: section has type {storage.kind}: nothing is stored", in_memory=True)
    return Unlocated(f"backend {storage.kind}: checkpoints are kept in memory", in_memory=True)


def _postgres_or_unlocated(dsn: str, schema: str) -> DatabaseIdentity | Unlocated:
    try:
        return postgres_identity(dsn, schema)
    except DsnError as exc:
        # The models take any string; the providers' pools fail on it when the process starts.
        return Unlocated(
            f"the PostgreSQL DSN cannot be used: {exc}; DeerFlow accepts it when it loads the config, then stops at "
            "startup",
            refused=Refusal.STARTUP,
        )
