"""The inert msgpack peek: it names types, and imports or calls none of them."""

from __future__ import annotations

import sys

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES

from deerflow_ckpt.store import peek

SERDE = jsonplus.JsonPlusSerializer()


def test_ext_codes_match_langgraph() -> None:
    for name in ("CONSTRUCTOR_SINGLE_ARG", "CONSTRUCTOR_POS_ARGS", "CONSTRUCTOR_KW_ARGS", "METHOD_SINGLE_ARG",
                 "PYDANTIC_V1", "PYDANTIC_V2", "NUMPY_ARRAY", "DELTA_SNAPSHOT"):  # fmt: skip
        assert getattr(peek, f"EXT_{name}") == getattr(jsonplus, f"EXT_{name}")


def test_exactly_langgraph_strict_types_are_trusted() -> None:
    """The trusted list is the installed LangGraph's strict-mode list, no more and no less."""
    assert peek.SAFE_TYPES == SAFE_MSGPACK_TYPES
    assert peek.SAFE_METHODS == SAFE_MSGPACK_METHODS
    for module, name in SAFE_MSGPACK_TYPES:
        assert peek.NamedType(peek.EXT_CONSTRUCTOR_POS_ARGS, module, name, None).trusted
    for module, name, method in SAFE_MSGPACK_METHODS:
        assert peek.NamedType(peek.EXT_METHOD_SINGLE_ARG, module, name, method).trusted


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("langchain_core.callbacks.file", "FileCallbackHandler"),
        ("langchain_core.utils.utils", "guard_import"),
        ("langgraph.checkpoint.serde.jsonplus", "JsonPlusSerializer"),
        ("langchain", "anything"),
    ],
)
def test_callables_in_trusted_packages_are_not_trusted(module: str, name: str) -> None:
    for code in (peek.EXT_CONSTRUCTOR_SINGLE_ARG, peek.EXT_CONSTRUCTOR_KW_ARGS, peek.EXT_PYDANTIC_V2):
        assert not peek.NamedType(code, module, name, None).trusted


def test_real_messages_decode_to_trusted_ext_values() -> None:
    kind, data = SERDE.dumps_typed([HumanMessage(content="hi", id="h1"), AIMessage(content="yo", id="a1")])
    assert kind == "msgpack"
    decoder = peek.InertDecoder()
    value = decoder.decode(data)
    assert [(v.module, v.name) for v in value] == [
        ("langchain_core.messages.human", "HumanMessage"),
        ("langchain_core.messages.ai", "AIMessage"),
    ]
    assert decoder.untrusted_types() == []


def test_foreign_type_is_named_never_imported_or_called(tmp_path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "pwned"
    payload = ormsgpack.packb(("ckpt_never_imported_module", "system", [f"touch {marker}"]))
    data = ormsgpack.packb({"a": [ormsgpack.Ext(peek.EXT_CONSTRUCTOR_POS_ARGS, payload)]})
    decoder = peek.InertDecoder()
    value = decoder.decode(data)
    assert isinstance(value["a"][0], peek.ExtValue)
    assert [t.describe() for t in decoder.untrusted_types()] == ["ckpt_never_imported_module.system"]
    assert "ckpt_never_imported_module" not in sys.modules
    assert not marker.exists()


def test_method_other_than_fromisoformat_is_untrusted() -> None:
    payload = ormsgpack.packb(("datetime", "datetime", "2020-01-01", "fromtimestamp"))
    decoder = peek.InertDecoder()
    decoder.decode(ormsgpack.packb(ormsgpack.Ext(peek.EXT_METHOD_SINGLE_ARG, payload)))
    assert [t.describe() for t in decoder.untrusted_types()] == ["datetime.datetime.fromtimestamp"]


def test_snapshot_payload_is_always_walked_and_kept_only_when_deep() -> None:
    """LangGraph's loader constructs every message of a snapshot: a foreign type in it is always named."""
    inner = ormsgpack.packb(("evil", "thing", []))
    listing = ormsgpack.packb([ormsgpack.Ext(peek.EXT_CONSTRUCTOR_POS_ARGS, inner)])
    data = ormsgpack.packb({"messages": ormsgpack.Ext(peek.EXT_DELTA_SNAPSHOT, listing)})
    shallow, deep = peek.InertDecoder(deep=False), peek.InertDecoder(deep=True)
    snapshot = shallow.decode(data)["messages"]
    assert snapshot.code == peek.EXT_DELTA_SNAPSHOT and snapshot.payload is None
    assert [t.describe() for t in shallow.untrusted_types()] == ["evil.thing"]
    assert deep.decode(data)["messages"].payload is not None
    assert [t.describe() for t in deep.untrusted_types()] == ["evil.thing"]
    with pytest.raises(peek.UndecodableError):
        shallow.decode(ormsgpack.packb({"messages": ormsgpack.Ext(peek.EXT_DELTA_SNAPSHOT, b"\xc1garbage")}))


@pytest.mark.parametrize(
    "data",
    [b"\xc1", b"\xdd\xff\xff\xff\xff", b"\x91" * 200_000 + b"\x90"],
    ids=["never-used-byte", "huge-array-header", "deep-nesting"],
)
def test_garbage_raises_undecodable(data: bytes) -> None:
    with pytest.raises(peek.UndecodableError):
        peek.InertDecoder().decode(data)


def test_ext_nesting_is_capped() -> None:
    data = ormsgpack.packb([])
    for _ in range(peek.MAX_EXT_DEPTH + 2):
        data = ormsgpack.packb(ormsgpack.Ext(peek.EXT_CONSTRUCTOR_POS_ARGS, data))
    with pytest.raises(peek.UndecodableError):
        peek.InertDecoder().decode(data)


@pytest.mark.parametrize(
    ("head", "snapshot", "empty", "listing"),
    [
        (b"\xd4\x07\x90", True, True, False),
        (b"\xc7\x10\x07\x91", True, False, False),
        (b"\xc8\x01\x00\x07", True, False, False),
        (b"\xc9\x00\x00\x01\x00\x07", True, False, False),
        (b"\x92\xc7", False, False, True),
        (b"\xdc\x00\x10", False, False, True),
        (b"\xc7\x10\x05", False, False, False),
    ],
)
def test_blob_heads(head: bytes, snapshot: bool, empty: bool, listing: bool) -> None:
    assert peek.head_is_snapshot(head) is snapshot
    assert peek.head_is_empty_snapshot(head) is empty
    assert peek.head_is_list(head) is listing
