"""What DeerFlow's `make config-upgrade` does to a config's cadence, before and after it runs.

DeerFlow's serve.sh runs scripts/config-upgrade.sh on every `make dev` / `make start`. When the file's
`config_version` is below config.example.yaml's, the upgrader adds every key the example has and the
file lacks (the example has `database.checkpoint_delta.snapshot_frequency: 10`), re-dumps the whole
file with yaml.dump (every comment lost) and leaves the previous text as `config.yaml.bak`. A file that
still holds the legacy flat key then gets the nested 10 beside it, and the nested key wins: the
operator's cadence is silently replaced. Facts: docs/deerflow-config.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deerflow_ckpt.config.database import read_database_settings
from deerflow_ckpt.config.keys import CADENCE_KEY, DATABASE, DELTA_SECTION, LEGACY_CADENCE_KEY
from deerflow_ckpt.config.values import ExpansionError, load_values

EXAMPLE_NAME = "config.example.yaml"
# DeerFlow's _check_config_version looks in the config's directory and four parents above it.
EXAMPLE_SEARCH_DEPTH = 5
# config.example.yaml's cadence, which the upgrader adds (its value is read from the example when found).
UPGRADER_DEFAULT = 10


def backup_of(config: Path) -> Path:
    """The upgrader's backup name: Path.with_suffix('.yaml.bak') (config.yaml -> config.yaml.bak)."""
    return config.with_suffix(".yaml.bak")


def config_version(data: object) -> int:
    """`config_version` as DeerFlow reads it: int(), 0 when missing or not a number."""
    raw = data.get("config_version", 0) if isinstance(data, dict) else 0
    try:
        return int(raw)
    except (TypeError, ValueError):
        return 0


def _load(path: Path) -> object:
    import yaml

    try:
        return load_values(path.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ExpansionError, ValueError, TypeError):
        return None


@dataclass(frozen=True)
class Example:
    path: Path
    version: int
    # The cadence the upgrader adds next to a legacy key.
    cadence: object


def find_example(config: Path) -> Example | None:
    """config.example.yaml as DeerFlow's version check finds it, with its version and cadence."""
    directory = config.resolve().parent
    for _ in range(EXAMPLE_SEARCH_DEPTH):
        candidate = directory / EXAMPLE_NAME
        if candidate.is_file():
            data = _load(candidate)
            database = data.get(DATABASE) if isinstance(data, dict) else None
            delta = database.get(DELTA_SECTION) if isinstance(database, dict) else None
            cadence = delta.get(CADENCE_KEY, UPGRADER_DEFAULT) if isinstance(delta, dict) else UPGRADER_DEFAULT
            return Example(candidate, config_version(data), cadence)
        if directory.parent == directory:
            break
        directory = directory.parent
    return None


@dataclass(frozen=True)
class PendingUpgrade:
    """The next start's upgrader will add the example's nested cadence beside a legacy key."""

    example: Example
    version: int


def pending_upgrade(config: Path, data: object) -> PendingUpgrade | None:
    """When the file holds only the legacy key and is older than the example DeerFlow finds beside it."""
    database = data.get(DATABASE) if isinstance(data, dict) else None
    if not isinstance(database, dict) or LEGACY_CADENCE_KEY not in database:
        return None
    delta = database.get(DELTA_SECTION)
    if isinstance(delta, dict) and CADENCE_KEY in delta:
        return None  # the upgrader only adds missing keys
    example = find_example(config)
    version = config_version(data)
    if example is None or version >= example.version:
        return None
    return PendingUpgrade(example, version)


@dataclass(frozen=True)
class LostCadence:
    """A backup beside the file holds a cadence the file no longer runs with."""

    backup: Path
    # The cadence the backup gives DeerFlow, and where in it.
    backup_cadence: int
    backup_origin: str
    current_cadence: int | None


def lost_cadence(config: Path, data: object, environ: Mapping[str, str]) -> LostCadence | None:
    """The upgrader's backup beside `config`, when its effective cadence differs from the file's."""
    backup = backup_of(config)
    if not backup.is_file():
        return None
    before = _load(backup)
    if not isinstance(before, dict) or not isinstance(data, dict):
        return None
    try:
        old = read_database_settings(before, environ)
        new = read_database_settings(data, environ)
    except Exception:  # a backup DeerFlow could not load says nothing about a lost cadence
        return None
    if old.cadence.effective is None or old.cadence.effective == new.cadence.effective:
        return None
    if not _sets_cadence(before):
        return None  # the backup ran on DeerFlow's default: nothing of the operator's was lost
    return LostCadence(backup, old.cadence.effective, old.cadence_origin, new.cadence.effective)


def _sets_cadence(data: dict[Any, Any]) -> bool:
    database = data.get(DATABASE)
    if not isinstance(database, dict):
        return False
    delta = database.get(DELTA_SECTION)
    return LEGACY_CADENCE_KEY in database or (isinstance(delta, dict) and CADENCE_KEY in delta)
