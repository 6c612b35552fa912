"""Where a config says the checkpoint database is: worked out by config/location.py, opened by
store/source.py (a neutral module, so the store never imports config/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PostgresLocation:
    dsn: str
    schema: str
    via: str


@dataclass(frozen=True)
class SqliteLocation:
    """The files DeerFlow may be using, most likely first; the first that is a checkpoint database wins."""

    candidates: list[Path]
    via: str


DatabaseLocation = PostgresLocation | SqliteLocation
