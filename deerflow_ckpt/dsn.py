"""PostgreSQL DSNs as DeerFlow and libpq read them: the `+driver` normalisation, what a --db or config value
that names Postgres looks like, and libpq's own parse of a URI or key=value conninfo.

Pure text work with no driver imported, shared by config/ (which database a config names) and store/
(refusing a DSN before libpq reads it), so neither reaches into the other.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from deerflow_ckpt.redact import url_password

URI_SCHEME = re.compile(r"^postgres(?:ql)?://")
# SQLAlchemy-style schemes DeerFlow accepts in postgres_url: postgresql+asyncpg://, postgres+psycopg://
_DRIVER_SCHEME = re.compile(r"^postgres(?:ql)?\+[A-Za-z0-9_]+://")
_POSTGRES_URL = re.compile(r"^postgres(?:ql)?(?:\+[A-Za-z0-9_]+)?://")
_CONNINFO_KEY = re.compile(r"^\s*(host|hostaddr|dbname|user|port|service)\s*=")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def normalize_dsn(dsn: str) -> str:
    """Strip a SQLAlchemy `+driver` suffix, as DeerFlow's normalize_libpq_dsn does."""
    return _DRIVER_SCHEME.sub("postgresql://", dsn, count=1)


def is_postgres_dsn(value: str) -> bool:
    return bool(_POSTGRES_URL.match(value) or _CONNINFO_KEY.match(value))


def is_schema_name(schema: str) -> bool:
    """A plain lowercase PostgreSQL identifier, the only schema names DeerFlow accepts."""
    return bool(_SCHEMA_NAME.fullmatch(schema))


class DsnError(ValueError):
    """A DSN libpq would refuse; the message never contains the DSN."""


def parse_dsn(dsn: str) -> dict[str, str]:
    """libpq's connection parameters for a postgresql:// URI or a key=value string (given keys only)."""
    if URI_SCHEME.match(dsn):
        return _parse_uri(dsn)
    return _parse_keywords(dsn)


def _parse_uri(uri: str) -> dict[str, str]:
    rest = uri.split("://", 1)[1]
    params: dict[str, str] = {}
    # libpq looks for user credentials before the first '/'.
    at = rest.find("@", 0, _end_of(rest, "/"))
    if at >= 0:
        user, _, password = rest[:at].partition(":")
        if user:
            params["user"] = unquote(user)
        if password:
            params["password"] = unquote(password)
        rest = rest[at + 1 :]
    hosts, ports = [], []
    while True:
        if rest.startswith("["):
            close = rest.find("]")
            if close < 0:
                raise DsnError("unterminated IPv6 host address in the URI")
            host, rest = rest[1:close], rest[close + 1 :]
        else:
            end = _end_of(rest, ":/?,")
            host, rest = unquote(rest[:end]), rest[end:]
        port = ""
        if rest.startswith(":"):
            end = _end_of(rest, "/?,")
            port, rest = unquote(rest[1:end]), rest[end:]
        hosts.append(host)
        ports.append(port)
        if not rest.startswith(","):
            break
        rest = rest[1:]
    if any(hosts):
        params["host"] = ",".join(hosts)
    if any(ports):
        params["port"] = ",".join(ports)
    path, _, query = rest.partition("?")
    if path.startswith("/") and path[1:]:
        params["dbname"] = unquote(path[1:])
    for item in filter(None, query.split("&")):
        name, equals, value = item.partition("=")
        if not equals:
            raise DsnError("a URI query parameter has no '='")
        params[unquote(name)] = unquote(value)
    return params


def _end_of(text: str, stops: str) -> int:
    return next((i for i, char in enumerate(text) if char in stops), len(text))


def _parse_keywords(dsn: str) -> dict[str, str]:
    params: dict[str, str] = {}
    i, n = 0, len(dsn)
    while True:
        while i < n and dsn[i].isspace():
            i += 1
        if i >= n:
            return params
        start = i
        while i < n and dsn[i] != "=" and not dsn[i].isspace():
            i += 1
        name = dsn[start:i]
        while i < n and dsn[i].isspace():
            i += 1
        if i >= n or dsn[i] != "=":
            raise DsnError('missing "=" in the key=value connection string (a URI needs postgresql://)')
        i += 1
        while i < n and dsn[i].isspace():
            i += 1
        value: list[str] = []
        quoted = i < n and dsn[i] == "'"
        i += quoted
        while i < n and (dsn[i] != "'" if quoted else not dsn[i].isspace()):
            if dsn[i] == "\\" and i + 1 < n:
                i += 1
            value.append(dsn[i])
            i += 1
        if quoted:
            if i >= n:
                raise DsnError("unterminated quoted value in the connection string")
            i += 1
        params[name] = "".join(value)


def libpq_parameters(dsn: str) -> dict[str, str]:
    """What libpq reads from a normalised DSN, or DsnError where it would fail on it or misread it.

    An unencoded '@', ':' or '/' in a password makes libpq take the rest of it for a host, a port or a
    database name, and its error would then show that piece: such a DSN is refused before libpq reads it.
    """
    params = parse_dsn(dsn)
    hosts = (params.get("host") or params.get("hostaddr") or "").split(",")
    ports = (params.get("port") or "").split(",")
    misread = bool(URI_SCHEME.match(dsn)) and url_password(dsn) is not None and not _has_credentials(dsn)
    if misread or any(port and not port.isdigit() for port in ports) or any("@" in host for host in hosts):
        raise DsnError("the host or port is malformed (percent-encode '@', ':' and '/' in a password)")
    return params


def _has_credentials(uri: str) -> bool:
    # libpq looks for user credentials before the first '/'.
    rest = uri.split("://", 1)[1]
    return rest.find("@", 0, _end_of(rest, "/")) >= 0
