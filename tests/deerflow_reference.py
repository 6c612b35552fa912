"""DeerFlow's rules restated for tests, independently of ckpt's code (docs/deerflow-config.md)."""

from __future__ import annotations

from typing import Any

LEGACY_KEY = "checkpoint_delta_snapshot_frequency"


def legacy_shim(database: dict[Any, Any]) -> dict[Any, Any]:
    """DatabaseConfig._migrate_legacy_snapshot_frequency: a nested cadence wins, a nested non-mapping drops
    the legacy key, otherwise the legacy value is carried under checkpoint_delta."""
    if LEGACY_KEY not in database:
        return database
    data = dict(database)
    legacy = data.pop(LEGACY_KEY)
    nested = data.get("checkpoint_delta")
    if isinstance(nested, dict) and "snapshot_frequency" in nested:
        return data
    if nested is None:
        data["checkpoint_delta"] = {"snapshot_frequency": legacy}
    elif isinstance(nested, dict):
        data["checkpoint_delta"] = {**nested, "snapshot_frequency": legacy}
    return data
