"""Inert msgpack decoding of checkpoint bytes: imports nothing named in a blob, constructs nothing.

LangGraph's serializer turns msgpack ext values into objects by importing `module` and calling `name`,
so a crafted checkpoint can run code on load. Here every ext becomes a plain `ExtValue` recording
its code and the type it names; the scanner judges those names instead of trusting them.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from deerflow_ckpt.dataclass import dataclass

# LangGraph's ext codes (langgraph.checkpoint.serde.jsonplus EXT_*); a test pins them to the library.
EXT_CONSTRUCTOR_SINGLE_ARG = 0
EXT_CONSTRUCTOR_POS_ARGS = 1
EXT_CONSTRUCTOR_KW_ARGS = 2
EXT_METHOD_SINGLE_ARG = 3
EXT_PYDANTIC_V1 = 4
EXT_PYDANTIC_V2 = 5
EXT_NUMPY_ARRAY = 6
EXT_DELTA_SNAPSHOT = 7
_NAMED_TYPE_CODES = frozenset(
    {
        EXT_CONSTRUCTOR_SINGLE_ARG,
        EXT_CONSTRUCTOR_POS_ARGS,
        EXT_CONSTRUCTOR_KW_ARGS,
        EXT_METHOD_SINGLE_ARG,
        EXT_PYDANTIC_V1,
        EXT_PYDANTIC_V2,
    }
)
# Nesting of ext values inside ext payloads; real checkpoints use three or four levels. LangGraph's loader
# follows far deeper chains (it recurses until Python's recursion limit), so a value nested past this is
# not garbage but a value ckpt cannot judge: UnjudgeableError, reported as untrusted (CK105).
MAX_EXT_DEPTH = 32

# The types LangGraph constructs when its loader runs in strict mode (LANGGRAPH_STRICT_MSGPACK=true):
# the only ones ckpt trusts. Any other type a payload names, whatever its package, is reported (CK105),
# since LangGraph's default loader would import and call it. tests/test_peek.py compares this list with
# the installed LangGraph's, so a new LangGraph cannot widen or narrow it unnoticed.
SAFE_TYPES = frozenset(
    {
        *(("datetime", name) for name in ("datetime", "date", "time", "timedelta", "timezone")),
        ("uuid", "UUID"),
        ("decimal", "Decimal"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("collections", "deque"),
        *(("ipaddress", f"IPv{v}{kind}") for v in (4, 6) for kind in ("Address", "Interface", "Network")),
        *((module, name) for module in ("pathlib", "pathlib._local") for name in ("Path", "PosixPath", "WindowsPath")),
        ("zoneinfo", "ZoneInfo"),
        ("re", "compile"),
        ("langchain_core.messages.base", "BaseMessage"),
        ("langchain_core.messages.base", "BaseMessageChunk"),
        *(
            (f"langchain_core.messages.{module}", f"{kind}{suffix}")
            for module, kind in (
                ("human", "HumanMessage"),
                ("ai", "AIMessage"),
                ("system", "SystemMessage"),
                ("chat", "ChatMessage"),
                ("tool", "ToolMessage"),
                ("function", "FunctionMessage"),
            )
            for suffix in ("", "Chunk")
        ),
        ("langchain_core.messages.modifier", "RemoveMessage"),
        ("langchain_core.documents.base", "Document"),
        *(
            ("langgraph.types", name)
            for name in ("Send", "TimeoutPolicy", "Interrupt", "Command", "StateSnapshot", "PregelTask", "Overwrite")
        ),
        ("langgraph.store.base", "Item"),
        ("langgraph.store.base", "GetOp"),
    }
)
# Method calls LangGraph's strict loader allows (ext code 3: module, type, argument, method).
SAFE_METHODS = frozenset({("datetime", "datetime", "fromisoformat")})
OVERWRITE_TYPE = ("langgraph.types", "Overwrite")
REMOVE_MESSAGE_TYPE = ("langchain_core.messages.modifier", "RemoveMessage")


_new_tuple = tuple.__new__  # builds an ExtValue without NamedTuple's Python-level __new__


# ormsgpack's unpackb and its option that keeps keys of any type: imported at the first value the Python path
# decodes (the compiled judge reads without them, and the import costs a small store's run about 2 ms).
_unpackb: Any = None
_NON_STR_KEYS: Any = None


def _load_unpackb() -> Any:
    global _unpackb, _NON_STR_KEYS
    import ormsgpack

    _NON_STR_KEYS = ormsgpack.OPT_NON_STR_KEYS
    _unpackb = ormsgpack.unpackb
    return _unpackb


class UndecodableError(ValueError):
    """Bytes that are not the msgpack LangGraph writes."""


class UnjudgeableError(UndecodableError):
    """A value decoded only part of the way (nested past the judge's depth limit): what lies beyond is not
    known, and LangGraph's loader may construct it."""


class ExtValue(NamedTuple):
    """An ext value left undecoded: what it would construct, never the object itself.

    A tuple rather than a dataclass: one is built per ext value on the scan's hot path.
    """

    code: int
    module: str | None
    name: str | None
    method: str | None
    # Snapshots only: the inertly decoded list when decoding deeply, else None.
    payload: Any
    size: int
    # Snapshots only: the payload is an empty msgpack array.
    empty: bool = False


@dataclass(frozen=True, slots=True)
class NamedType:
    code: int
    module: str | None
    name: str | None
    method: str | None

    def describe(self) -> str:
        target = f"{self.module}.{self.name}" if self.module else f"ext code {self.code}"
        return f"{target}.{self.method}" if self.method else target

    @property
    def trusted(self) -> bool:
        """True when LangGraph may construct it without running foreign code."""
        if self.code == EXT_METHOD_SINGLE_ARG:
            return (self.module, self.name, self.method) in SAFE_METHODS
        if self.code not in _NAMED_TYPE_CODES or self.module is None or self.name is None:
            return False
        return (self.module, self.name) in SAFE_TYPES

    @property
    def allowable(self) -> tuple[str, str] | None:
        """The (module, name) an allowlist can trust: LangGraph's allowed_msgpack_modules admits constructors
        (codes 0-2, 4, 5) by that pair and never a method call (code 3) beyond its own safe ones."""
        if self.code == EXT_METHOD_SINGLE_ARG or self.code not in _NAMED_TYPE_CODES:
            return None
        return None if self.module is None or self.name is None else (self.module, self.name)


# --allow-type / allowed_types: "module:Name", LangGraph's allowlist entry ("module", "Name") written as one word.
_ALLOWED_TYPE = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<name>[A-Za-z_]\w*)", re.ASCII)


def parse_allowed_type(text: str) -> tuple[str, str]:
    """`module:Name` as the (module, name) pair LangGraph's allowlist holds; ValueError for any other form."""
    match = _ALLOWED_TYPE.fullmatch(text)
    if match is None:
        raise ValueError(f'expected module:Name (as in LangGraph\'s allowlist entry ("module", "Name")), got {text!r}')
    return match["module"], match["name"]


class InertDecoder:
    """Decodes msgpack with an ext hook that records type names and never imports anything.

    Snapshot payloads are walked for foreign types and garbage like any value; their decoded message
    list is kept only when `deep` is set (it is the largest value in a database).
    """

    __slots__ = ("_depth", "_too_deep", "_trusted", "deep", "untrusted")

    def __init__(self, deep: bool = True) -> None:
        self.deep = deep
        self.untrusted: list[NamedType] = []
        self._trusted: set[tuple[int, str | None, str | None, str | None]] = set()
        self._depth = 0
        self._too_deep = False

    def decode(self, data: bytes | memoryview) -> Any:
        """Decode one value; `untrusted` then lists the foreign types it names (reset on each call).

        Raises UnjudgeableError for ext values nested past MAX_EXT_DEPTH, UndecodableError for garbage.
        """
        self.untrusted = []
        self._depth = 0
        self._too_deep = False
        try:
            unpackb = _unpackb or _load_unpackb()
            return unpackb(data, ext_hook=self._hook, option=_NON_STR_KEYS)
        except (ValueError, TypeError, RecursionError) as exc:
            # ormsgpack wraps what the hook raised as "ext_hook failed": the flag says why.
            if self._too_deep:
                raise UnjudgeableError(f"ext values nested deeper than {MAX_EXT_DEPTH} levels") from None
            raise UndecodableError(str(exc) or type(exc).__name__) from None

    def untrusted_types(self) -> list[NamedType]:
        return sorted(set(self.untrusted), key=NamedType.describe)

    def _hook(self, code: int, data: bytes) -> ExtValue:
        if self._depth >= MAX_EXT_DEPTH:
            self._too_deep = True
            raise ValueError(f"ext values nested deeper than {MAX_EXT_DEPTH}")
        self._depth += 1
        try:
            payload = _unpackb(data, ext_hook=self._hook, option=_NON_STR_KEYS)  # loaded by decode
        finally:
            self._depth -= 1
        if code == EXT_DELTA_SNAPSHOT:
            # Walked either way (LangGraph's loader constructs every message in it); kept only when deep.
            kept = payload if self.deep else None
            return ExtValue(code, None, None, None, kept, len(data), data == b"\x90")
        module = name = method = None
        if code in _NAMED_TYPE_CODES and type(payload) is list and len(payload) >= 2:
            module, name = payload[0], payload[1]
            if type(module) is not str:
                module = None
            if type(name) is not str:
                name = None
            if code == EXT_METHOD_SINGLE_ARG and len(payload) >= 4 and type(payload[3]) is str:
                method = payload[3]
        key = (code, module, name, method)
        if key not in self._trusted:
            named = NamedType(code, module, name, method)
            if named.trusted:
                self._trusted.add(key)
            else:
                self.untrusted.append(named)
        return _new_tuple(ExtValue, (code, module, name, method, None, len(data), False))


def head_is_snapshot(head: bytes) -> bool:
    """True when msgpack bytes start with an ext header of type 7 (a `_DeltaSnapshot`)."""
    if not head:
        return False
    marker = head[0]
    # fixext 1/2/4/8/16: type byte follows the marker
    if 0xD4 <= marker <= 0xD8:
        return len(head) > 1 and head[1] == EXT_DELTA_SNAPSHOT
    offsets = {0xC7: 2, 0xC8: 3, 0xC9: 5}  # ext 8/16/32: type byte after the length
    offset = offsets.get(marker)
    return offset is not None and len(head) > offset and head[offset] == EXT_DELTA_SNAPSHOT


def head_is_empty_snapshot(head: bytes) -> bool:
    """`d4 07 90`: fixext1 of type 7 holding an empty msgpack array."""
    return head[:3] == b"\xd4\x07\x90"


def array_header_size(items: int) -> int:
    """Bytes of the msgpack header of an array of `items` elements (fixarray, array 16, array 32)."""
    return 1 if items < 16 else 3 if items < 1 << 16 else 5


def ext_header_size(payload: int) -> int:
    """Bytes of the msgpack header of an ext value whose payload is `payload` bytes long."""
    if payload in (1, 2, 4, 8, 16):
        return 2  # fixext: marker and type
    return 3 if payload < 1 << 8 else 4 if payload < 1 << 16 else 6


def head_is_list(head: bytes) -> bool:
    """True when msgpack bytes start with an array header (a plain message list)."""
    return bool(head) and (0x90 <= head[0] <= 0x9F or head[0] in (0xDC, 0xDD))
