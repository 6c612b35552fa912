"""The compiled judge and the lean SQLite decode are only faster ways to the full inert decode's records.

Every row of the fixture database, and rows crafted to hit each way out of the fast paths, must give
records equal field by field (problems included) on all three paths. Ordinary rows must really take the
fast paths, or the scan would only be correct and slow.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import ormsgpack
import pytest

from deerflow_ckpt import native
from deerflow_ckpt.store import lean, peek
from deerflow_ckpt.store.peek import InertDecoder
from deerflow_ckpt.store.records import CheckpointRecord, MessagesShape
from deerflow_ckpt.store.sqlite import _CHECKPOINTS_SQL, record_from_row
from tests.conftest import BuiltDatabase

FOREIGN = ormsgpack.Ext(peek.EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(("ckpt_never_imported", "system", ["x"])))
HUMAN = ormsgpack.Ext(
    peek.EXT_PYDANTIC_V2,
    ormsgpack.packb(("langchain_core.messages.human", "HumanMessage", {"content": "hi"}, "model_validate_json")),
)
METADATA = {"source": "loop", "step": 3, "counters_since_delta_snapshot": {"messages": [1, 2]}}


def _both(row: tuple[Any, ...]) -> tuple[CheckpointRecord, CheckpointRecord]:
    """(the default path's record, the full decode's), after checking the msgspec-only path agrees."""
    fast = record_from_row(row, InertDecoder(deep=False))
    full = record_from_row(row, InertDecoder(deep=False), lean=False)
    assert record_from_row(row, InertDecoder(deep=False), native=False) == full
    return fast, full


def _row(checkpoint: bytes, metadata: bytes | None = None, kind: str = "msgpack") -> tuple[Any, ...]:
    raw_metadata = json.dumps(METADATA).encode() if metadata is None else metadata
    return ("t", "", "c1", None, kind, checkpoint, raw_metadata)


def _checkpoint(**fields: Any) -> bytes:
    base: dict[Any, Any] = {"v": 4, "ts": "2026-01-01T00:00:00+00:00", "id": "c1", "channel_values": {},
                            "channel_versions": {"messages": "00000000000000000000000000000002.0.5"},
                            "versions_seen": {"__input__": {}}, "updated_channels": ["messages"]}  # fmt: skip
    base.update(fields)
    return ormsgpack.packb(base, option=ormsgpack.OPT_NON_STR_KEYS)


def _snapshot(payload: bytes) -> ormsgpack.Ext:
    return ormsgpack.Ext(peek.EXT_DELTA_SNAPSHOT, payload)


def test_every_fixture_row_decodes_the_same_both_ways(built_sqlite: BuiltDatabase) -> None:
    connection = sqlite3.connect(built_sqlite.path.resolve().as_uri() + "?mode=ro", uri=True)
    rows = connection.execute(_CHECKPOINTS_SQL.format(where="")).fetchall()
    lean_rows = native_rows = 0
    shapes: set[MessagesShape] = set()
    for row in rows:
        fast, full = _both(row)
        assert fast == full, row[:3]
        shapes.add(full.messages)
        lean_rows += lean.read_checkpoint(row[5]) is not None and lean.read_metadata(row[6]) is not None
        native_rows += row[4] == "msgpack" and native.checkpoint_summary(row[5]) is not None
    assert shapes >= {MessagesShape.ABSENT, MessagesShape.SNAPSHOT, MessagesShape.LIST}
    # Only the injected faults (garbage, pickle, foreign types) may need the full decode.
    assert lean_rows >= 0.95 * len(rows)
    assert native_rows >= 0.95 * len(rows)


@pytest.mark.parametrize(
    "checkpoint",
    [
        pytest.param(_checkpoint(versions_seen={"node": {"x": FOREIGN}}), id="foreign-type-in-versions-seen"),
        pytest.param(_checkpoint(channel_values={"__start__": {"messages": [FOREIGN]}}), id="foreign-type-in-channel"),
        pytest.param(_checkpoint(channel_values={"messages": [HUMAN, FOREIGN]}), id="foreign-type-in-list"),
        pytest.param(_checkpoint(pending_sends=[FOREIGN]), id="unknown-field"),
        pytest.param(_checkpoint(channel_values={"messages": _snapshot(b"\x90")}), id="empty-snapshot-fixext1"),
        pytest.param(_checkpoint(channel_values={"messages": _snapshot(b"\x91\xa1a")}), id="snapshot-ext8"),
        pytest.param(_checkpoint(channel_values={"messages": _snapshot(b"\x92" + b"\xa1a" * 2)}), id="fixext"),
        pytest.param(
            _checkpoint(channel_values={"messages": _snapshot(b"\xdc\x01\x00" + b"\xc0" * 256)}), id="snapshot-ext16"
        ),
        pytest.param(
            _checkpoint(channel_values={"messages": _snapshot(b"\xdd\x00\x01\x00\x00" + b"\xc0" * 65536)}),
            id="snapshot-ext32",
        ),
        pytest.param(_checkpoint(channel_values={"messages": []}), id="empty-list"),
        pytest.param(_checkpoint(channel_values={"messages": [HUMAN]}), id="list"),
        pytest.param(_checkpoint(channel_values={"messages": "text"}), id="other"),
        pytest.param(_checkpoint(channel_values={1: "x", "messages": [HUMAN]}), id="non-string-key"),
        pytest.param(_checkpoint(channel_versions={"messages": True}), id="bool-version"),
        pytest.param(_checkpoint(channel_versions={"messages": 7}), id="int-version"),
        pytest.param(_checkpoint(channel_versions={"messages": 2.5}), id="float-version"),
        pytest.param(_checkpoint(channel_values=None), id="channel-values-nil"),
        pytest.param(_checkpoint()[:-3], id="truncated"),
        pytest.param(b"\x81\xaechannel_values\x81\xa1x" + b"\x91" * 200_000 + b"\x90", id="deep-nesting"),
        pytest.param(ormsgpack.packb([1, 2]), id="not-a-map"),
    ],
)
def test_crafted_checkpoints_decode_the_same_both_ways(checkpoint: bytes) -> None:
    fast, full = _both(_row(checkpoint))
    assert fast == full


def test_crafted_rows_are_judged_not_just_equal() -> None:
    """Spot checks that the shared answer is the right one, so equality cannot hide a common mistake."""
    foreign, _ = _both(_row(_checkpoint(versions_seen={"node": {"x": FOREIGN}})))
    assert [p.rule for p in foreign.problems] == ["CK105"]
    snapshot, _ = _both(_row(_checkpoint(channel_values={"messages": _snapshot(b"\xdc\x01\x00" + b"\xc0" * 256)})))
    assert (snapshot.messages, snapshot.snapshot_bytes, snapshot.seed_empty) == (MessagesShape.SNAPSHOT, 259, False)
    empty, _ = _both(_row(_checkpoint(channel_values={"messages": _snapshot(b"\x90")})))
    assert (empty.messages, empty.seed_empty) == (MessagesShape.SNAPSHOT, True)
    deep, _ = _both(_row(b"\x81\xaechannel_values\x81\xa1x" + b"\x91" * 200_000 + b"\x90"))
    assert (deep.messages, [p.rule for p in deep.problems]) == (MessagesShape.UNDECODABLE, ["CK104"])


@pytest.mark.parametrize(
    "metadata",
    [
        b'{"step": NaN, "source": "loop"}',
        b'{"step": "\\ud800"}',
        b"[1, 2]",
        b"\xff\xfe",
        b'{"step": 123456789012345678901234567890}',
        b'{"step": 1, "step": 2}',
        b'{"counters_since_delta_snapshot": {"messages": [true, 1]}}',
        b'{"step": 1.0, "source": 5, "deerflow_checkpoint_channel_mode": ["delta"]}',
        b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b', "step": 1}',
        b"",
        b'{"so\xf5rce": "loop", "step": 2}',  # invalid UTF-8 in a key msgspec skips
        b'{"x": "\xed\xa0\x80", "step": 2}',  # an encoded surrogate in a value msgspec skips
    ],
)
def test_odd_metadata_decodes_the_same_both_ways(metadata: bytes) -> None:
    fast, full = _both(_row(_checkpoint(), metadata))
    assert fast == full


def test_metadata_nested_too_deep_is_reported_not_raised() -> None:
    record, _ = _both(_row(_checkpoint(), b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"))
    assert [p.rule for p in record.problems] == ["CK104"]
    assert not record.metadata_ok
