"""The compiled judge (native/_inert.c) may only ever agree with the Python inert decoder, or abstain.

Whenever it returns a summary, the Python decoder must decode the same bytes with no problem and derive
the same summary; whenever Python finds a problem, the compiled judge must return None. Hypothesis
generates LangGraph-shaped values (trusted and foreign ext types, snapshots, odd scalars, non-string keys)
and damages their bytes; crafted cases pin the edges of msgpack and UTF-8 one by one.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import ormsgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deerflow_ckpt import native
from deerflow_ckpt.store import peek
from deerflow_ckpt.store.metadata import metadata_in_python
from deerflow_ckpt.store.peek import InertDecoder, UndecodableError
from deerflow_ckpt.store.records import CheckpointRecord, MessagesShape, Shape
from deerflow_ckpt.store.sqlite import record_from_row
from deerflow_ckpt.store.writes import WriteFolder

OPTIONS = ormsgpack.OPT_NON_STR_KEYS
MODULES = [
    "langchain_core.messages.ai",
    "langchain_core.messages.modifier",
    "langgraph.types",
    "langgraph",
    "langchain",
    "langchain_core_evil.messages",  # a trusted package's name as a prefix: not trusted
    "langchainx",
    "os",
    "datetime",  # trusted by Python's stdlib list only: the compiled judge abstains
    "",
]
NAMES = ["AIMessage", "RemoveMessage", "Overwrite", "system", "datetime", "FileCallbackHandler", ""]
# (module, name) pairs LangGraph's strict loader constructs: the only ones either judge trusts.
TRUSTED_PAIRS = [
    ("langchain_core.messages.ai", "AIMessage"),
    ("langchain_core.messages.human", "HumanMessage"),
    ("langchain_core.messages.tool", "ToolMessage"),
    ("langchain_core.messages.modifier", "RemoveMessage"),
    ("langgraph.types", "Overwrite"),
]
CODES = [0, 1, 2, 3, 4, 5, 6, 8, 127]  # ormsgpack.Ext cannot build negative codes: crafted below

CASE_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_compiled_judge_is_built() -> None:
    """CI must test the compiled path: a missing C compiler would otherwise leave only the slow one."""
    assert native.AVAILABLE, "deerflow_ckpt.native._inert was not built (is gcc installed?)"


def _python_summary(data: bytes) -> tuple[int, int, int] | None:
    """What value_summary must say, derived with the Python decoder (None: Python finds a problem)."""
    decoder = InertDecoder(deep=False)
    try:
        value = decoder.decode(data)
    except UndecodableError:
        return None
    if decoder.untrusted:
        return None
    items = [value] if type(value) is not list else value
    names = {(item.module, item.name) for item in items if type(item) is peek.ExtValue}
    flags = (native.OVERWRITE_FLAG if peek.OVERWRITE_TYPE in names else 0) | (
        native.REMOVAL_FLAG if peek.REMOVE_MESSAGE_TYPE in names else 0
    )
    return (1, len(value), flags) if type(value) is list else (0, 0, flags)


def _assert_agrees(data: bytes) -> tuple[int, int, int] | None:
    assert native.value_summary is not None
    compiled = native.value_summary(data)
    if compiled is not None:
        assert compiled == _python_summary(data), data[:80]
    return compiled


def _named_ext(code: int, module: Any, name: Any, *rest: Any) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb([module, name, *rest], option=OPTIONS))


def _message(module: str = "langchain_core.messages.ai", name: str = "AIMessage", text: str = "hi") -> ormsgpack.Ext:
    return _named_ext(peek.EXT_PYDANTIC_V2, module, name, {"content": text, "id": None}, "model_validate_json")


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.binary(max_size=40)
)


def _ext_of(children: st.SearchStrategy[Any]) -> st.SearchStrategy[ormsgpack.Ext]:
    named = st.builds(
        lambda code, module, name, rest: _named_ext(code, module, name, *rest),
        st.sampled_from(CODES),
        st.sampled_from(MODULES) | scalars,
        st.sampled_from(NAMES) | scalars,
        st.lists(children, max_size=3),
    )
    raw = st.builds(ormsgpack.Ext, st.sampled_from([*CODES, peek.EXT_DELTA_SNAPSHOT]), st.binary(max_size=12))
    snapshot = st.builds(
        lambda items: ormsgpack.Ext(peek.EXT_DELTA_SNAPSHOT, ormsgpack.packb(items, option=OPTIONS)),
        st.lists(children, max_size=3),
    )
    return named | raw | snapshot


values = st.recursive(
    scalars | st.builds(_message, st.sampled_from(MODULES), st.sampled_from(NAMES), st.text(max_size=20)),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
        | st.dictionaries(st.integers(-3, 3) | st.none() | st.booleans(), children, max_size=2)
        | _ext_of(children)
    ),
    max_leaves=12,
)


def _damage(data: bytes, position: int, kind: int, byte: int) -> bytes:
    """One byte-level fault: flip, truncate, insert, append garbage or cut at the first byte."""
    at = position % (len(data) + 1)
    if kind == 0 and data:
        at = min(at, len(data) - 1)
        return data[:at] + bytes([data[at] ^ (byte or 1)]) + data[at + 1 :]
    if kind == 1:
        return data[:at]
    if kind == 2:
        return data[:at] + bytes([byte]) + data[at:]
    if kind == 3:
        return data + bytes([byte])
    return data[:1]


@pytest.mark.slow
@CASE_SETTINGS
@given(values)
def test_summaries_of_generated_values_match_python(value: Any) -> None:
    _assert_agrees(ormsgpack.packb(value, option=OPTIONS))


@pytest.mark.slow
@CASE_SETTINGS
@given(values, st.integers(0, 10_000), st.integers(0, 4), st.integers(0, 255))
def test_summaries_of_damaged_values_match_python(value: Any, position: int, kind: int, byte: int) -> None:
    _assert_agrees(_damage(ormsgpack.packb(value, option=OPTIONS), position, kind, byte))


@CASE_SETTINGS
@given(st.binary(max_size=64))
def test_summaries_of_random_bytes_match_python(data: bytes) -> None:
    _assert_agrees(data)


@pytest.mark.slow
@CASE_SETTINGS
@given(st.lists(st.tuples(st.sampled_from(TRUSTED_PAIRS), st.text()).map(lambda p: _message(*p[0], p[1])), max_size=5))
def test_clean_message_writes_take_the_compiled_path(messages: list[ormsgpack.Ext]) -> None:
    """Only-trusted, string-keyed writes are what LangGraph stores: the judge must vouch for them."""
    compiled = _assert_agrees(ormsgpack.packb(messages))
    assert compiled is not None
    assert compiled[:2] == (1, len(messages))


def _string(payload: bytes) -> bytes:
    return (b"\xd9" + bytes([len(payload)]) if len(payload) < 256 else b"\xda" + struct.pack(">H", len(payload))) + (
        payload
    )


@pytest.mark.parametrize(
    ("data", "vouched"),
    [
        pytest.param(_string("é€😀".encode()), True, id="valid-utf8"),
        pytest.param(_string(b"a" * 300 + "€".encode()), True, id="long-ascii-then-multibyte"),
        pytest.param(_string(b"\xc3\x28"), False, id="bad-continuation"),
        pytest.param(_string(b"\xed\xa0\x80"), False, id="surrogate"),
        pytest.param(_string(b"\xc0\xaf"), False, id="overlong-2"),
        pytest.param(_string(b"\xe0\x80\xaf"), False, id="overlong-3"),
        pytest.param(_string(b"\xf0\x80\x80\xaf"), False, id="overlong-4"),
        pytest.param(_string(b"\xf4\x90\x80\x80"), False, id="above-u10ffff"),
        pytest.param(_string(b"\xf5\x80\x80\x80"), False, id="f5-lead"),
        pytest.param(_string(b"abcdefg\xe2\x82"), False, id="truncated-sequence-at-end"),
        pytest.param(_string(b"abcdefgh\x80"), False, id="lone-continuation-after-a-word"),
        pytest.param(b"\xa1", False, id="str-shorter-than-header"),
        pytest.param(b"\xdb\xff\xff\xff\xff", False, id="str32-longer-than-data"),
        pytest.param(b"\xdd\xff\xff\xff\xff\xc0", False, id="array32-claims-4g-items"),
        pytest.param(b"\xdf\xff\xff\xff\xff", False, id="map32-claims-4g-pairs"),
        pytest.param(b"\x90\x90", False, id="trailing-bytes"),
        pytest.param(b"\xc1", False, id="reserved-marker"),
        pytest.param(b"", False, id="empty"),
        pytest.param(b"\x91" * 60 + b"\xc0", True, id="nesting-60"),
        pytest.param(b"\x91" * 65 + b"\xc0", False, id="nesting-65"),
        pytest.param(b"\x91" * 5000 + b"\xc0", False, id="nesting-5000"),
        pytest.param(b"\x81\x01\xc0", False, id="int-key"),
        pytest.param(
            ormsgpack.packb(_named_ext(3, "datetime", "datetime", "2026", "fromisoformat")),
            False,
            id="method-ext-abstains",
        ),
        pytest.param(ormsgpack.packb(_message("langgraph")), False, id="bare-package-module"),
        pytest.param(ormsgpack.packb(_message("langchain_core.messages.ai")), True, id="trusted-pair"),
        pytest.param(
            ormsgpack.packb(_message("langchain_core.callbacks.file", "FileCallbackHandler")),
            False,
            id="trusted-package-other-type",
        ),
        pytest.param(ormsgpack.packb(_message("langchain_core_evil.x")), False, id="package-prefix-trap"),
        pytest.param(ormsgpack.packb(ormsgpack.Ext(5, b"")), False, id="empty-payload"),
        pytest.param(b"\xd6\xff\x00\x00\x00\x01", False, id="negative-ext-code"),
        pytest.param(
            ormsgpack.packb(ormsgpack.Ext(5, ormsgpack.packb(["langgraph.types", "Overwrite"]) + b"\xc0")),
            False,
            id="payload-trailing-bytes",
        ),
        pytest.param(
            ormsgpack.packb(ormsgpack.Ext(5, ormsgpack.packb(["langgraph.types"]))), False, id="payload-too-short"
        ),
        pytest.param(ormsgpack.packb(ormsgpack.Ext(7, b"\xc1garbage")), False, id="snapshot-payload-undecodable"),
        pytest.param(
            ormsgpack.packb(ormsgpack.Ext(7, ormsgpack.packb([_message()]))), True, id="snapshot-payload-trusted"
        ),
        pytest.param(
            ormsgpack.packb(ormsgpack.Ext(7, ormsgpack.packb([_message("os", "system")]))),
            False,
            id="snapshot-payload-foreign",
        ),
    ],
)
def test_crafted_edges(data: bytes, vouched: bool) -> None:
    compiled = _assert_agrees(data)
    assert (compiled is not None) == vouched


def test_nested_ext_depth_is_capped() -> None:
    shallow: Any = "leaf"
    for _ in range(8):
        shallow = _message(text="x") if shallow == "leaf" else _named_ext(5, "langgraph.types", "Send", shallow)
    assert _assert_agrees(ormsgpack.packb(shallow)) is not None
    deep: Any = "leaf"
    for _ in range(9):
        deep = _named_ext(5, "langgraph.types", "Send", deep)
    assert _assert_agrees(ormsgpack.packb(deep)) is None
    assert _python_summary(ormsgpack.packb(deep)) is not None  # Python alone decides it: it is clean


def test_flags_name_overwrite_and_removal() -> None:
    removal = _message("langchain_core.messages.modifier", "RemoveMessage")
    overwrite = _named_ext(5, "langgraph.types", "Overwrite", [])
    assert _assert_agrees(ormsgpack.packb([_message(), removal])) == (1, 2, native.REMOVAL_FLAG)
    assert _assert_agrees(ormsgpack.packb(overwrite)) == (0, 0, native.OVERWRITE_FLAG)
    # Only the value itself and its items count: a removal nested deeper is not a removal write.
    assert _assert_agrees(ormsgpack.packb([[removal]])) == (1, 1, 0)


# -- checkpoints: record_from_row through the compiled judge against the full inert decode -------------


def _checkpoint(channel_values: Any, versions: Any, extra: dict[str, Any]) -> bytes:
    mapping = {"v": 4, "id": "c1", "channel_values": channel_values, "channel_versions": versions, **extra}
    return ormsgpack.packb(mapping, option=OPTIONS)


messages_values = st.one_of(
    st.lists(st.builds(_message, st.sampled_from(MODULES), st.sampled_from(NAMES)), max_size=3),
    st.builds(lambda items: ormsgpack.Ext(7, ormsgpack.packb(items)), st.lists(st.integers(-5, 5), max_size=2)),
    values,
)
channel_values = st.dictionaries(st.sampled_from(["__start__", "branch:to:x", "other"]), values, max_size=3).flatmap(
    lambda others: st.one_of(st.just(others), messages_values.map(lambda messages: {**others, "messages": messages}))
)
versions = st.dictionaries(st.sampled_from(["__start__", "messages"]), st.text(max_size=6) | values, max_size=2)


def _records(data: bytes) -> tuple[CheckpointRecord, CheckpointRecord]:
    row = ("t", "", "c1", None, "msgpack", data, b'{"step": 1, "source": "loop"}')
    fast = record_from_row(row, InertDecoder(deep=False))
    full = record_from_row(row, InertDecoder(deep=False), lean=False)
    return fast, full


@pytest.mark.slow
@CASE_SETTINGS
@given(channel_values, versions, st.dictionaries(st.text(max_size=6), values, max_size=2))
def test_generated_checkpoints_classify_as_the_full_decode_does(values_: Any, versions_: Any, extra: Any) -> None:
    fast, full = _records(_checkpoint(values_, versions_, extra))
    assert fast == full


@pytest.mark.slow
@CASE_SETTINGS
@given(channel_values, versions, st.integers(0, 10_000), st.integers(0, 4), st.integers(0, 255))
def test_damaged_checkpoints_classify_as_the_full_decode_does(
    values_: Any, versions_: Any, position: int, kind: int, byte: int
) -> None:
    fast, full = _records(_damage(_checkpoint(values_, versions_, {}), position, kind, byte))
    assert fast == full


@pytest.mark.parametrize(
    ("mapping", "shape", "vouched"),
    [
        pytest.param(
            {"channel_values": {"messages": [_message()]}, "channel_versions": {"messages": "2"}},
            Shape.LIST,
            True,
            id="list",
        ),
        pytest.param({"channel_values": {"messages": ormsgpack.Ext(7, b"\x90")}}, Shape.SNAPSHOT, True, id="snapshot"),
        pytest.param({"channel_values": {}}, Shape.ABSENT, True, id="absent"),
        pytest.param({"channel_values": {"messages": None}}, Shape.OTHER, True, id="nil-is-other"),
        pytest.param({"v": 4}, Shape.ABSENT, True, id="no-channel-values"),
        pytest.param(
            {"channel_values": {"messages": [], "x": 1}, "channel_versions": {"messages": 3}},
            Shape.LIST,
            False,
            id="int-version-abstains",
        ),
        pytest.param({"channel_values": {}, "channel_versions": []}, Shape.ABSENT, False, id="versions-not-a-map"),
    ],
)
def test_crafted_checkpoints(mapping: dict[str, Any], shape: MessagesShape, vouched: bool) -> None:
    data = ormsgpack.packb(mapping, option=OPTIONS)
    assert native.checkpoint_summary is not None
    assert (native.checkpoint_summary(data) is not None) == vouched
    fast, full = _records(data)
    assert fast == full
    assert full.messages == shape


def test_repeated_channel_values_key_abstains() -> None:
    """Python keeps the last of repeated keys; the compiled judge leaves such rows to it."""
    first = ormsgpack.packb({"messages": []})
    last = ormsgpack.packb({"messages": ormsgpack.Ext(7, b"\x90")})
    data = b"\x82\xaechannel_values" + first + b"\xaechannel_values" + last
    assert native.checkpoint_summary is not None
    assert native.checkpoint_summary(data) is None
    fast, full = _records(data)
    assert fast == full
    assert full.messages == Shape.SNAPSHOT


# -- writes: WriteFolder with and without the compiled judge ------------------------------------------


@pytest.mark.slow
@CASE_SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["messages", "other"]), values), min_size=1, max_size=4))
def test_folded_writes_are_the_same_with_and_without_the_compiled_judge(writes: list[tuple[str, Any]]) -> None:
    def fold(use_native: bool) -> CheckpointRecord:
        record = CheckpointRecord("t", "", "c1", None, 1, "loop", "delta", 1, 1, Shape.ABSENT, None)
        folder = WriteFolder([record], InertDecoder(deep=False), native=use_native)
        for index, (channel, value) in enumerate(writes):
            folder.add("c1", f"task{index % 2}", channel, "msgpack", ormsgpack.packb(value, option=OPTIONS))
        return record

    assert fold(True) == fold(False)


# -- metadata: the compiled JSON reader against json.loads --------------------------------------------

METADATA_KEYS = ["step", "source", "deerflow_checkpoint_channel_mode", "counters_since_delta_snapshot", "parents"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**20), max_value=10**20) | st.floats() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
counters = st.dictionaries(st.sampled_from(["messages", "other"]), st.lists(json_values, max_size=3) | json_values)
metadata_objects = st.dictionaries(
    st.sampled_from(METADATA_KEYS) | st.text(max_size=6),
    json_values | counters,
    max_size=6,
)


def _metadata_text(mapping: dict[str, Any], ascii_only: bool, spaced: bool) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(mapping, ensure_ascii=ascii_only, separators=separators).encode("utf-8", "surrogatepass")


def _assert_metadata_agrees(raw: bytes) -> Any:
    assert native.metadata_summary is not None
    compiled = native.metadata_summary(raw)
    if compiled is not None:
        problems: list[Any] = []
        assert metadata_in_python(raw, False, problems) == compiled, raw[:120]
        assert problems == []
    row = ("t", "", "c1", None, "msgpack", ormsgpack.packb({"channel_values": {}}), raw)
    assert record_from_row(row, InertDecoder(deep=False)) == record_from_row(row, InertDecoder(deep=False), lean=False)
    return compiled


@pytest.mark.slow
@CASE_SETTINGS
@given(metadata_objects, st.booleans(), st.booleans())
def test_generated_metadata_reads_as_json_loads_does(mapping: dict[str, Any], ascii_only: bool, spaced: bool) -> None:
    _assert_metadata_agrees(_metadata_text(mapping, ascii_only, spaced))


@pytest.mark.slow
@CASE_SETTINGS
@given(metadata_objects, st.integers(0, 10_000), st.integers(0, 4), st.integers(0, 255))
def test_damaged_metadata_reads_as_json_loads_does(
    mapping: dict[str, Any], position: int, kind: int, byte: int
) -> None:
    _assert_metadata_agrees(_damage(_metadata_text(mapping, False, True), position, kind, byte))


@CASE_SETTINGS
@given(st.binary(max_size=40) | st.text(alphabet='{}[]":,0123456789.-eE \\tnulrsfa', max_size=40).map(str.encode))
def test_random_metadata_text_reads_as_json_loads_does(raw: bytes) -> None:
    _assert_metadata_agrees(raw)


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        pytest.param(
            b'{"source": "loop", "step": 4, "parents": {}, "counters_since_delta_snapshot": {"messages": [1, 5]},'
            b' "deerflow_checkpoint_channel_mode": "delta"}',
            (4, "loop", "delta", 1, 5),
            id="deerflow",
        ),
        pytest.param(b' \t\r\n{"step": -0}\n', (0, None, None, None, None), id="whitespace-and-minus-zero"),
        pytest.param(b'{"step": 123456789012345678}', (123456789012345678, None, None, None, None), id="18-digits"),
        pytest.param(b'{"step": 1234567890123456789}', None, id="19-digits-abstain"),
        pytest.param(
            b'{"step": 1.0, "source": 5, "deerflow_checkpoint_channel_mode": ["delta"]}',
            (None, None, None, None, None),
            id="wrong-types-read-as-none",
        ),
        pytest.param(
            b'{"counters_since_delta_snapshot": {"messages": [true, 1, "x"]}}',
            (None, None, None, None, 1),
            id="bool-counter",
        ),
        pytest.param(
            b'{"counters_since_delta_snapshot": {"messages": [1]}}', (None, None, None, None, None), id="one-counter"
        ),
        pytest.param(b'{"counters_since_delta_snapshot": [1, 2]}', (None, None, None, None, None), id="counters-list"),
        pytest.param(b'{"source": "l\\u006fop"}', None, id="escaped-source-abstains"),
        pytest.param(b'{"st\\u0065p": 3}', None, id="escaped-key-abstains"),
        pytest.param(b'{"x": "\\ud800", "step": 2}', (2, None, None, None, None), id="lone-surrogate-escape-skipped"),
        pytest.param(b'{"x": "a\\qb"}', None, id="bad-escape"),
        pytest.param(b'{"x": "a\x01b"}', None, id="raw-control-character"),
        pytest.param(b'{"step": NaN}', None, id="nan"),
        pytest.param(b'{"step": 01}', None, id="leading-zero"),
        pytest.param(b'{"step": 1.}', None, id="bare-point"),
        pytest.param(b'{"step": -}', None, id="bare-minus"),
        pytest.param(b'{"step": 1, "step": 2}', None, id="repeated-step"),
        pytest.param(b'{"step": 1} x', None, id="trailing-text"),
        pytest.param(b"\xef\xbb\xbf{}", None, id="byte-order-mark"),
        pytest.param(b'{"x": "\xc3\xa9\xf0\x9f\x98\x80"}', (None, None, None, None, None), id="utf8"),
        pytest.param(b'{"x": "\xed\xa0\x80"}', None, id="utf8-surrogate"),
        pytest.param(b'{"x": ' + b"[" * 70 + b"]" * 70 + b"}", None, id="nesting-70"),
        pytest.param(b'{"x": ' + b"[" * 60 + b"]" * 60 + b"}", (None, None, None, None, None), id="nesting-60"),
        pytest.param(b"[1]", None, id="not-an-object"),
        pytest.param(b"", None, id="empty"),
        pytest.param(b"{,}", None, id="lone-comma"),
        pytest.param(b'{"a": 1,}', None, id="trailing-comma"),
    ],
)
def test_crafted_metadata(raw: bytes, read: Any) -> None:
    assert _assert_metadata_agrees(raw) == read


# -- holds: the substring test the storage scan runs before it reads any item ------------------------------


@CASE_SETTINGS
@given(st.binary(max_size=300), st.binary(max_size=12), st.integers(min_value=0, max_value=300))
def test_holds_answers_as_bytes_contains(data: bytes, needle: bytes, at: int) -> None:
    """memmem over any bytes-like value (msgspec.Raw included) agrees with `needle in bytes(data)`, with the
    needle planted at every position too; the Python reference is what runs without the extension."""
    import msgspec

    planted = data[:at] + needle + data[at:]
    for haystack in (data, planted, planted[: len(planted) // 2]):
        expected = needle in haystack
        assert native.holds(haystack, needle) is expected
        assert native.holds(memoryview(haystack), needle) is expected
        assert native._holds(memoryview(haystack), needle) is expected
        raw = msgspec.msgpack.decode(msgspec.msgpack.encode(haystack), type=msgspec.Raw)
        assert native.holds(raw, needle) is (needle in msgspec.msgpack.encode(haystack))


def test_holds_is_the_compiled_one() -> None:
    assert native.holds is not native._holds and type(native.holds).__name__ == "builtin_function_or_method"
