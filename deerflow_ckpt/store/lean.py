"""Decode only the checkpoint and metadata fields a scan reads.

msgspec skips what a Struct does not declare and keeps `Raw` values as undecoded bytes, so one row costs
a fraction of a full decode. The types are strict on purpose: a field that could hide an ext value (a
type LangGraph would construct) fails validation, and so does anything malformed or unexpected. Every
such row returns None and the caller reads it through the full inert decoder, which judges and reports
it exactly as it always has. Channel values stay `Raw`; the caller decodes them inertly. This path only
makes ordinary rows cheaper.
"""

from __future__ import annotations

from typing import Any

import msgspec

from deerflow_ckpt.store.peek import EXT_DELTA_SNAPSHOT

# channel_versions values: LangGraph's savers write strings, other checkpointers ints or floats.
_Version = str | int | float


class MetadataFields(msgspec.Struct):
    """The metadata keys the rules read; others are skipped unparsed. Values keep their JSON types."""

    step: Any = None
    source: Any = None
    counters_since_delta_snapshot: Any = None
    deerflow_checkpoint_channel_mode: Any = None


class CheckpointFields(msgspec.Struct, forbid_unknown_fields=True):
    """LangGraph's Checkpoint mapping, with channel values left as raw msgpack."""

    v: int = 0
    id: str = ""
    ts: str = ""
    channel_values: dict[str, msgspec.Raw] = {}
    channel_versions: dict[str, _Version] = {}
    versions_seen: dict[str, dict[str, _Version]] = {}
    updated_channels: list[str] | None = None


_metadata_decoder = msgspec.json.Decoder(MetadataFields)
_checkpoint_decoder = msgspec.msgpack.Decoder(CheckpointFields)
# fixext 1, 2, 4, 8, 16: payload sizes by header byte.
_FIXEXT_SIZES = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
_EXT_LENGTH_BYTES = {0xC7: 1, 0xC8: 2, 0xC9: 4}  # ext 8, 16, 32: a big-endian length follows


def read_metadata(raw: bytes) -> MetadataFields | None:
    """The metadata's fields, or None when only the full JSON decoder can say what is wrong."""
    # msgspec does not check the UTF-8 of keys and values it skips; the full path decodes the whole text.
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        return _metadata_decoder.decode(raw)
    # Malformed, NaN, not an object, lone surrogates, nested past msgspec's limit: json.loads decides.
    except (msgspec.DecodeError, RecursionError):
        return None


def read_checkpoint(data: bytes) -> CheckpointFields | None:
    """The checkpoint's fields, or None when it is malformed or shaped unlike LangGraph's."""
    try:
        return _checkpoint_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None


def ext_header(data: bytes | memoryview | msgspec.Raw) -> tuple[int, int] | None:
    """(ext code, header size) when `data` is exactly one msgpack ext value, else None."""
    # bytes give the same ints and lengths as a view of them, without building one (--deep: each new message).
    view = data if type(data) is bytes else memoryview(data)
    if len(view) < 3:
        return None
    marker = view[0]
    size = _FIXEXT_SIZES.get(marker)
    if size is not None:
        header = 2
    else:
        width = _EXT_LENGTH_BYTES.get(marker)
        if width is None:
            return None
        header = 2 + width
        size = int.from_bytes(view[1 : 1 + width], "big")
    if header + size != len(view):
        return None
    return view[header - 1], header


def snapshot_payload_size(raw: msgspec.Raw) -> int | None:
    """The payload size when `raw` is exactly one `_DeltaSnapshot` ext value, else None."""
    found = ext_header(raw)
    if found is None or found[0] != EXT_DELTA_SNAPSHOT:
        return None
    return len(memoryview(raw)) - found[1]


def snapshot_is_empty(raw: msgspec.Raw, size: int) -> bool:
    """The snapshot's payload is an empty msgpack array."""
    return size == 1 and memoryview(raw)[-1] == 0x90
