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
from pathlib import Path
from typing import Any

from deerflow_ckpt.config.database import read_database_settings
from deerflow_ckpt.config.keys import CADENCE_KEY, DATABASE, DELTA_SECTION, LEGACY_CADENCE_KEY
from deerflow_ckpt.config.values import ExpansionError, load_values
from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.fileio import resolved

EXAMPLE_NAME = "config.example.yaml"
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
    """A file beside the config as DeerFlow's tools read it; None when it cannot be read (never an error)."""
    import yaml

    from deerflow_ckpt.fileio import ConfigReadError, read_config_file

    try:
        return load_values(read_config_file(path).decode("utf-8-sig"))
    except (ConfigReadError, UnicodeDecodeError, yaml.YAMLError, ExpansionError, ValueError, TypeError, RecursionError):
        return None


@dataclass(frozen=True)
class Example:
    path: Path
    version: int
    # The cadence the upgrader adds next to a legacy key.
    cadence: object


def find_example(config: Path) -> Example | None:
    """The config.example.yaml make config-upgrade merges from: the repository root's, which is the
    config's directory (config.yaml at the root) or the one above backend/ (backend/config.yaml)."""
    directory = resolved(config).parent
    candidates = [directory / EXAMPLE_NAME]
    if directory.name == "backend":
        candidates.insert(0, directory.parent / EXAMPLE_NAME)
    for candidate in candidates:
        if candidate.is_file():
            data = _load(candidate)
            database = data.get(DATABASE) if isinstance(data, dict) else None
            delta = database.get(DELTA_SECTION) if isinstance(database, dict) else None
            cadence = delta.get(CADENCE_KEY, UPGRADER_DEFAULT) if isinstance(delta, dict) else UPGRADER_DEFAULT
            return Example(candidate, config_version(data), cadence)
    return None


@dataclass(frozen=True)
class PendingUpgrade:
    """The next start's upgrader will add the example's nested cadence beside a legacy key."""

    example: Example
    version: int


def pending_upgrade(config: Path, data: object) -> PendingUpgrade | None:
    """When the file holds only the legacy key and is older than the example the upgrader merges from."""
    if not isinstance(data, dict):
        return None
    database = data.get(DATABASE)
    if not isinstance(database, dict) or LEGACY_CADENCE_KEY not in database:
        return None
    if DELTA_SECTION in database and not isinstance(database.get(DELTA_SECTION), dict):
        return None  # the upgrader only merges into mappings: a null or scalar checkpoint_delta stays
    if _has_nested(data):
        return None  # the upgrader only adds missing keys
    raw_version = data.get("config_version", 0)
    if not isinstance(raw_version, int) or isinstance(raw_version, bool):
        return None  # the upgrader compares it with an int as it is: anything else makes it fail
    example = find_example(config)
    if example is None or raw_version >= example.version:
        return None
    return PendingUpgrade(example, raw_version)


@dataclass(frozen=True)
class LostCadence:
    """A backup beside the file holds a cadence the file no longer runs with."""

    backup: Path
    # The cadence the backup gives DeerFlow, and where in it.
    backup_cadence: int
    backup_origin: str
    current_cadence: int | None


def lost_cadence(config: Path, data: object, environ: Mapping[str, str]) -> LostCadence | None:
    """The upgrader's backup beside `config`, when the upgrade replaced the cadence: the backup ran on the
    legacy key alone, and the file now has the nested key at the value the upgrader adds."""
    backup = backup_of(config)
    before = _load(backup) if backup.is_file() else None
    if not isinstance(before, dict) or not isinstance(data, dict):
        return None
    if not _legacy_only(before) or not _has_nested(data):
        return None  # a nested key the operator wrote (before or after the upgrade) is theirs
    nested = data[DATABASE][DELTA_SECTION][CADENCE_KEY]
    if isinstance(nested, str) and nested.startswith("$"):
        return None  # the upgrader writes a number; a $VAR is the operator's
    old = read_database_settings(before, environ)
    new = read_database_settings(data, environ)
    if new.cadence.effective != UPGRADER_DEFAULT or old.cadence.effective in (None, new.cadence.effective):
        return None
    assert old.cadence.effective is not None
    return LostCadence(backup, old.cadence.effective, old.cadence_origin, new.cadence.effective)


def _legacy_only(data: dict[Any, Any]) -> bool:
    database = data.get(DATABASE)
    return isinstance(database, dict) and LEGACY_CADENCE_KEY in database and not _has_nested(data)


def _has_nested(data: dict[Any, Any]) -> bool:
    database = data.get(DATABASE)
    delta = database.get(DELTA_SECTION) if isinstance(database, dict) else None
    return isinstance(delta, dict) and CADENCE_KEY in delta


def lost_message(lost: LostCadence) -> str:
    """What was lost, and the way back: CK512 in lint-config and migrate-config alike."""
    now = "no valid cadence" if lost.current_cadence is None else f"cadence {lost.current_cadence}"
    return (
        f"{lost.backup.name} beside this file (make config-upgrade's backup) gives DeerFlow cadence "
        f"{lost.backup_cadence} (from {lost.backup_origin}), but this file now gives {now}, the value the "
        f"upgrade added: run ckpt migrate-config --restore-from-backup to carry {lost.backup_cadence} back, then "
        "restart every process sharing the database"
    )
