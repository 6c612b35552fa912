"""DeerFlow's checkpoint history cache: whether a config keeps delta histories in Redis, and under which keys.

DeerFlow (runtime/checkpoint_cache/) caches each checkpoint's delta-channel history, keyed by checkpoint id,
and assumes an entry never changes once written. `ckpt convert` changes how existing checkpoint ids store
their messages, so entries cached before it must be purged: this says where they are. Facts in
docs/conversion.md ("DeerFlow's history cache").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

from deerflow_ckpt.dataclass import dataclass

# The cache's entry format version, the first part of every default prefix.
CACHE_FORMAT_VERSION = 1
# The parts of a database URL DeerFlow's identity keeps (SQLAlchemy's URL grammar: the password stops at the
# first '@', the host at ':', '/' or '?').
_URL = re.compile(
    r"^[\w+]+://(?:[^:/]*(?::[^@]*)?@)?(?:\[(?P<ipv6>[^/?]+)\]|(?P<host>[^/:?]+))?(?::(?P<port>[^/?]*))?"
    r"(?:/(?P<database>[^?]*))?"
)


@dataclass(frozen=True)
class HistoryCache:
    """A Redis history cache DeerFlow would use for this database."""

    key_prefix: str
    # Where the prefix came from: the config's key_prefix, or DeerFlow's derivation from the database.
    prefix_origin: str

    def thread_pattern(self, thread_id: str) -> str:
        """Every cached key of one thread (DeerFlow's thread_key_stem, then anything)."""
        return f"{self.key_prefix}:{thread_id}:*"


def _postgres_identity(url: str) -> str:
    """host:port/database without credentials, as DeerFlow derives it; an unparsable URL stays whole."""
    if not url:
        return ""
    match = _URL.match(url)
    if match is None:
        return url
    host = match.group("ipv6") or match.group("host") or "localhost"
    return f"{host}:{match.group('port') or 5432}/{match.group('database') or ''}"


def history_cache(
    section: Mapping[str, object], backend: str, postgres_url: str, schema: str, sqlite_path: Path | None
) -> HistoryCache | None:
    """The Redis history cache `database.checkpoint_cache` enables, or None (memory, disabled, not set)."""
    if section.get("type") != "redis" or section.get("max_entries") == 0:
        return None
    explicit = section.get("key_prefix")
    if isinstance(explicit, str) and explicit:
        return HistoryCache(explicit, "database.checkpoint_cache.key_prefix")
    if backend == "postgres":
        identity = f"postgres:{_postgres_identity(postgres_url)}:{schema}"
    elif backend == "sqlite" and sqlite_path is not None:
        identity = f"sqlite:{sqlite_path}"
    else:
        return None
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return HistoryCache(f"ckpt-hist:v{CACHE_FORMAT_VERSION}:{digest}", "derived by DeerFlow from the database")
