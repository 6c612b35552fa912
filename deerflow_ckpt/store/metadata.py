"""Checkpoint metadata as the shape rules read it: step, source, DeerFlow's mode marker and the messages counters.

The metadata is JSON text on both backends (SQLite stores it so; Postgres renders its jsonb as text). The
compiled reader (`native.metadata_summary`) reads it where it can; this is the reading it agrees with, and the
one that takes over where it abstains.
"""

from __future__ import annotations

import functools
import json
from types import ModuleType
from typing import Any

from deerflow_ckpt.rules import RuleCode
from deerflow_ckpt.store.records import Problem
from deerflow_ckpt.store.writes import MESSAGES_CHANNEL

# JSONDecoder.decode on text skips json.loads's per-call encoding sniffing of bytes.
_decode_json = json.JSONDecoder().decode


def _metadata_fields(raw: bytes | str | None, problems: list[Problem]) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        metadata = _decode_json(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except RecursionError:
        # LangGraph's savers read metadata with the same decoder, and fail on it too.
        problems.append(Problem(RuleCode.CK104, "metadata is nested deeper than a JSON decoder follows"))
        return {}
    except (ValueError, UnicodeDecodeError):
        problems.append(Problem(RuleCode.CK104, "metadata is not valid JSON text"))
        return {}
    if type(metadata) is not dict:
        problems.append(Problem(RuleCode.CK104, "metadata is not a JSON object"))
        return {}
    return metadata


def _metadata_values(raw: bytes | None, problems: list[Problem]) -> tuple[Any, Any, Any, Any]:
    """step, source, DeerFlow's mode marker and the counters, read by the full JSON decoder."""
    get = _metadata_fields(raw, problems).get
    return get("step"), get("source"), get("deerflow_checkpoint_channel_mode"), get("counters_since_delta_snapshot")


@functools.cache
def lean_decoders() -> ModuleType:
    """store/lean.py, imported on first use: msgspec loads only where the compiled judge is not used (a scan's
    start-up); cached, as the per-row callers would otherwise pay an import statement a row."""
    from deerflow_ckpt.store import lean

    return lean


MetadataFacts = tuple[int | None, str | None, str | None, int | None, int | None]


def metadata_in_python(raw: bytes | None, lean: bool, problems: list[Problem]) -> MetadataFacts:
    """step, source, mode marker and the two messages counters, each None unless of the type the rules read."""
    fields = lean_decoders().read_metadata(raw) if lean and raw is not None else None
    if fields is not None:
        step, source = fields.step, fields.source
        mode, counters = fields.deerflow_checkpoint_channel_mode, fields.counters_since_delta_snapshot
    else:
        step, source, mode, counters = _metadata_values(raw, problems)
    pair = counters.get(MESSAGES_CHANNEL) if type(counters) is dict else None
    updates = supersteps = None
    if type(pair) is list and len(pair) >= 2:
        updates, supersteps = pair[0], pair[1]
        # bool is an int subclass; `type() is int` keeps true/false out of the counters.
        updates = updates if type(updates) is int else None
        supersteps = supersteps if type(supersteps) is int else None
    return (
        step if type(step) is int else None,
        source if type(source) is str else None,
        mode if type(mode) is str else None,
        updates,
        supersteps,
    )
