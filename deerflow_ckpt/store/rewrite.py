"""A stored checkpoint row rewritten for `ckpt convert`: only its `messages` value and its delta metadata.

Every other byte stays as the saver wrote it: the checkpoint's msgpack map is split into its values without
decoding them (msgspec `Raw`), one value is set or removed, and the map is framed again, so the result is
what LangGraph's serializer writes for the changed checkpoint (tests/test_convert.py compares it with
`JsonPlusSerializer.dumps_typed` of the same checkpoint read through the saver). Metadata is JSON, written
as the savers write it (`json.dumps(..., ensure_ascii=False)`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.store.writes import MESSAGES_CHANNEL

# DeerFlow's mode marker (absence means full) and LangGraph's delta counters, in checkpoint metadata.
MODE_MARKER = "deerflow_checkpoint_channel_mode"
COUNTERS = "counters_since_delta_snapshot"

_map = msgspec.msgpack.Decoder(dict[str, msgspec.Raw])
_encoder = msgspec.msgpack.Encoder()


@dataclass(frozen=True, slots=True)
class RowChange:
    """One checkpoint rewritten: its stored bytes before and after, and whether anything changed."""

    before: int
    after: int
    changed: bool


class RowNotRewritable(Exception):
    """The row is not a msgpack checkpoint of LangGraph's shape; the message says what it is."""


def split_checkpoint(data: bytes) -> dict[str, msgspec.Raw]:
    try:
        top = _map.decode(data)
        top["channel_values"]
    except (msgspec.DecodeError, KeyError, RecursionError) as exc:
        raise RowNotRewritable(f"the checkpoint is not a LangGraph msgpack map ({exc})") from None
    return top


def with_messages(top: dict[str, msgspec.Raw], messages: bytes | None) -> bytes:
    """The checkpoint's bytes with channel_values["messages"] set to the serialized `messages`, or removed."""
    try:
        values = _map.decode(top["channel_values"])
    except (msgspec.DecodeError, RecursionError) as exc:
        raise RowNotRewritable(f"the checkpoint's channel_values is not a map ({exc})") from None
    if messages is None:
        values.pop(MESSAGES_CHANNEL, None)
    elif MESSAGES_CHANNEL in values:
        values[MESSAGES_CHANNEL] = msgspec.Raw(messages)
    else:
        # LangGraph lays channel values out in the graph's channel order, where a state field comes first.
        values = {MESSAGES_CHANNEL: msgspec.Raw(messages), **values}
    framed = dict(top)
    framed["channel_values"] = msgspec.Raw(_encoder.encode(values))
    return _encoder.encode(framed)


def metadata_dict(raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise RowNotRewritable(f"the metadata is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise RowNotRewritable("the metadata is not a JSON object")
    return value


def delta_metadata(metadata: dict[str, Any], counters: tuple[int, int] | None) -> dict[str, Any]:
    """The metadata a delta-mode DeerFlow process writes: its messages counters (absent at a snapshot) and the
    mode marker; other channels' counters and every other key unchanged."""
    others = {k: v for k, v in (metadata.get(COUNTERS) or {}).items() if k != MESSAGES_CHANNEL}
    merged = {**others, MESSAGES_CHANNEL: list(counters)} if counters is not None else others
    out: dict[str, Any] = {}
    had_counters = COUNTERS in metadata
    for key, value in metadata.items():
        if key == COUNTERS:
            if merged:
                out[COUNTERS] = merged
            continue
        out[key] = value
        # LangGraph puts the counters right after "parents"; the marker comes from the run's config.
        if key == "parents" and merged and not had_counters:
            out[COUNTERS] = merged
    if merged and COUNTERS not in out:
        out[COUNTERS] = merged
    out[MODE_MARKER] = "delta"
    return out


def full_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata a full-mode process writes: no messages counters and no mode marker."""
    out = {k: v for k, v in metadata.items() if k != MODE_MARKER}
    counters = out.get(COUNTERS)
    if isinstance(counters, dict) and MESSAGES_CHANNEL in counters:
        rest = {k: v for k, v in counters.items() if k != MESSAGES_CHANNEL}
        if rest:
            out[COUNTERS] = rest
        else:
            del out[COUNTERS]
    return out


def metadata_bytes(metadata: dict[str, Any], like: bytes | str) -> bytes | str:
    """Serialized as the savers serialize metadata, in the stored value's own type (SQLite keeps either)."""
    text = json.dumps(metadata, ensure_ascii=False)
    return text if isinstance(like, str) else text.encode()


def converted_metadata(metadata: dict[str, Any], delta: bool, counters: tuple[int, int] | None) -> dict[str, Any]:
    return delta_metadata(metadata, counters) if delta else full_metadata(metadata)


# The two keys a conversion changes, where the savers put them (", " and ": " separators): the counters right
# after "parents" (whose value holds no nested object), the mode marker last, from the run's config.
_MARKER = b', "deerflow_checkpoint_channel_mode": "delta"'
_COUNTERS_KEY = b'"counters_since_delta_snapshot"'
_COUNTERS = re.compile(rb'"parents": \{[^{}]*\}(, "counters_since_delta_snapshot": \{"messages": \[(\d+), (\d+)\]\})')


def converted_metadata_bytes(raw: bytes | str, delta: bool, counters: tuple[int, int] | None) -> bytes | str:
    """metadata_bytes(converted_metadata(...)) of a stored metadata value, by splicing the two keys where the
    value is laid out as the savers write it (a json.loads per row costs more than the rest of a conversion);
    otherwise through JSON. tests/test_convert.py holds both ways equal on every fixture row."""
    data = raw.encode() if isinstance(raw, str) else raw
    spliced = _splice(data, delta, counters)
    if spliced is None:
        return metadata_bytes(converted_metadata(metadata_dict(raw), delta, counters), raw)
    return spliced.decode() if isinstance(raw, str) else spliced


def _splice(data: bytes, delta: bool, counters: tuple[int, int] | None) -> bytes | None:
    # Only the layout the savers write: one marker, last; one "parents"; the counters, if any, right after it
    # and for messages alone. Anything else (a key nested in user metadata, other channels' counters) is JSON's.
    if not data.startswith(b"{") or not data.endswith(_MARKER + b"}") or data.count(_MARKER) != 1:
        return None
    if data.count(b'"parents": {') != 1 or data.count(_COUNTERS_KEY) > 1 or b"\\u" in data:
        return None  # \u escapes: not json.dumps(ensure_ascii=False)'s text, which JSON writes anew
    found = _COUNTERS.search(data)
    if _COUNTERS_KEY in data and found is None:
        return None
    start, end = (found.start(1), found.end(1)) if found is not None else (0, 0)
    if not delta:
        data = data[: -len(_MARKER) - 1] + b"}"
        return data if found is None else data[:start] + data[end:]
    if found is None:
        return data if counters is None else None
    if counters is None:
        return data[:start] + data[end:]
    value = b', "counters_since_delta_snapshot": {"messages": [%d, %d]}' % counters
    return data[:start] + value + data[end:]
