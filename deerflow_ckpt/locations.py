"""Where a config says the checkpoint database is: worked out by config/discovery.py, opened by
store/source.py (a neutral module, so the store never imports config/)."""

from __future__ import annotations

from pathlib import Path

from deerflow_ckpt.dataclass import dataclass, field


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
    # Why each candidate is one (the DeerFlow process that would use it), beside `candidates`.
    whys: list[str] = field(default_factory=list)

    def why(self, candidate: Path) -> str | None:
        index = self.candidates.index(candidate)
        return self.whys[index] if index < len(self.whys) else None


DatabaseLocation = PostgresLocation | SqliteLocation
