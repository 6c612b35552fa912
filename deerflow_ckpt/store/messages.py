"""Message lists read inertly, for the deep proof: each message's id, type and stored bytes, nothing built.

LangGraph serializes a message as ext 5 (a pydantic v2 model): the payload is the array
[module, class name, field map, method]. The proof compares a message by its id and its payload bytes,
which are the same bytes wherever the same message object was serialized (in the write that added it and
in every snapshot or full-mode list that holds it). Anything the proof cannot follow exactly, because
LangGraph would convert it or assign it a random id on load, is `Unprovable`, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.native import holds
from deerflow_ckpt.store.lean import ext_header
from deerflow_ckpt.store.peek import EXT_CONSTRUCTOR_KW_ARGS, EXT_DELTA_SNAPSHOT, EXT_PYDANTIC_V1, EXT_PYDANTIC_V2

# langchain_core's RemoveMessage, and the id that removes every message (REMOVE_ALL_MESSAGES).
REMOVE_MESSAGE = ("langchain_core.messages.modifier", "RemoveMessage")
REMOVE_ALL_ID = "__remove_all__"
# The task id of writes that are not a task's: graph input and Command(update=...) (langgraph's NULL_TASK_ID).
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
# langgraph.types.Overwrite: a write that replaces the channel's value instead of going through the reducer.
OVERWRITE = ("langgraph.types", "Overwrite")
# langchain_core's ToolMessage: a tool's output, counted apart by `inspect storage`.
TOOL_MESSAGE = ("langchain_core.messages.tool", "ToolMessage")
# Bytes every serialized ToolMessage holds (its module's name, whatever the str header): a value without
# them holds none, which one substring search (C speed; the longest such name skips fastest) says before
# any item is read.
TOOL_MESSAGE_MARKER = TOOL_MESSAGE[0].encode()
# The ext codes whose payload is [module, class name, fields, ...]: pydantic v2 and v1 models, keyword
# constructors.
_MODEL_EXT_CODES = frozenset((EXT_PYDANTIC_V2, EXT_PYDANTIC_V1, EXT_CONSTRUCTOR_KW_ARGS))


class Unprovable(Exception):
    """The stored bytes cannot be followed exactly; the message says why."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: str | None
    # The class name ("AIMessage"); RemoveMessage marks a removal in a write.
    kind: str
    # The message's stored bytes (the whole ext value): equal bytes, equal message.
    payload: bytes

    @property
    def removes(self) -> bool:
        return self.kind == REMOVE_MESSAGE[1]


@dataclass(slots=True)
class StoredList:
    """A stored message list, kept as its msgpack array: an intact one is proven by comparing bytes with
    the fold's messages laid end to end, and only a list that differs (or starts a fold) is read item by
    item. Past a lineage's byte budget it is kept as references to the lineage's cached messages instead."""

    data: bytes | None
    snapshot: bool
    where: str
    items: tuple[StoredMessage, ...] | None = None

    def messages(self, cache: MessageCache) -> tuple[StoredMessage, ...]:
        if self.items is not None:
            return self.items
        items = _list_items(self.data or b"", self.where)
        if items is None:
            raise Unprovable(f"{self.where} is not a message list")
        # A stored list went through the reducer, which gave every message an id; Overwrite values did not.
        return cache.messages(items, self.where, ids_required=False)

    def compact(self, cache: MessageCache) -> None:
        """Keep the messages (shared with the rest of the lineage) and drop the bytes, if they read."""
        try:
            self.items = self.messages(cache)
        except Unprovable:
            return
        self.data = None

    def size(self) -> int:
        return len(self.data) if self.data is not None else 0

    def equals(self, messages: list[StoredMessage]) -> bool:
        """The same messages as the fold, byte for byte."""
        if self.data is not None:
            return _laid_end_to_end(self.data, messages)
        assert self.items is not None
        # Equal bytes are one cached object: list equality tries identity first.
        return len(self.items) == len(messages) and messages == list(self.items)


def _array_header(count: int) -> bytes:
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def serialized_list(messages: list[StoredMessage]) -> bytes:
    """The msgpack array of these messages, as a serializer writes a list: a header, then each value."""
    return _array_header(len(messages)) + b"".join(message.payload for message in messages)


def _laid_end_to_end(data: bytes, messages: list[StoredMessage]) -> bool:
    """`data == serialized_list(messages)`, compared in place: a list holding one huge message is not copied."""
    header = _array_header(len(messages))
    if not data.startswith(header):
        return False
    at = len(header)
    for message in messages:
        if not data.startswith(message.payload, at):
            return False
        at += len(message.payload)
    return at == len(data)


@dataclass(slots=True)
class MessageWrite:
    """One stored `messages` write, in the order LangGraph applies a superstep's writes."""

    task_id: str
    task_path: str
    idx: int
    # The value LangGraph hands the reducer, or the whole new value of an Overwrite.
    items: tuple[StoredMessage, ...]
    overwrite: bool = False


@dataclass(slots=True)
class HistoryCheckpoint:
    """What the proof needs of one checkpoint: its link, its stored list, the writes stored under it."""

    checkpoint_id: str
    parent_id: str | None
    # metadata["source"]: an "input" checkpoint starts a run, so its parent's pending writes are not in it.
    source: str | None = None
    step: int | None = None
    # The list stored here (a snapshot or a full-mode list); None when this checkpoint stores none.
    stored: StoredList | None = None
    writes: list[MessageWrite] = field(default_factory=list)
    # Why this checkpoint's stored list or writes cannot be followed (the first reason found).
    unprovable: str | None = None
    # Why the writes stored under it cannot be followed (the first reason found).
    writes_unprovable: str | None = None
    # Several tasks wrote messages and the store keeps no task_path to order them by.
    order_unknown: bool = False
    # The writes under it belong to more than one superstep (set by the proof from its children's steps).
    spans_supersteps: bool = False


@dataclass(frozen=True, slots=True)
class LineageHistory:
    thread_id: str
    checkpoint_ns: str
    checkpoints: list[HistoryCheckpoint]
    # The messages read so far in this lineage; stored lists are read through it, and only when needed.
    cache: MessageCache = field(default_factory=lambda: MessageCache())


class _Fields(msgspec.Struct):
    """The message fields the proof reads; the rest (content, tool calls) is skipped, not built."""

    id: Any = None


class _Model(msgspec.Struct, array_like=True):
    """An ext 5 payload: [module, class name, fields, method] (the method is optional)."""

    module: str
    name: str
    fields: _Fields
    method: Any = None


class _ChannelValues(msgspec.Struct):
    """A checkpoint's channel values, each left as raw msgpack; every other key is skipped unparsed."""

    channel_values: dict[str, msgspec.Raw] = {}


# A list's items, each one value's raw bytes (a message is one ext value): nothing is built.
_items = msgspec.msgpack.Decoder(list[msgspec.Raw])
_model = msgspec.msgpack.Decoder(_Model)
_channel_values = msgspec.msgpack.Decoder(_ChannelValues)
_arguments = msgspec.msgpack.Decoder(dict[str, msgspec.Raw])
_NIL = b"\xc0"


def _message(raw: bytes, where: str, ids_required: bool) -> StoredMessage:
    # The ext's payload is read in place (msgspec's Ext would copy it: a huge message twice in memory).
    header = ext_header(raw)
    if header is None or header[0] != EXT_PYDANTIC_V2:
        # A dict, tuple or string LangGraph converts to a message with a new id; a foreign ext it constructs.
        raise Unprovable(f"{where} holds a value that is not a serialized LangChain message")
    try:
        model = _model.decode(memoryview(raw)[header[1] :])
    except (msgspec.DecodeError, RecursionError):
        raise Unprovable(f"{where} holds a message whose fields cannot be read") from None
    module, name, message_id = model.module, model.name, model.fields.id
    if not module.startswith("langchain_core.messages") or name.endswith("Chunk"):
        raise Unprovable(f"{where} holds a {name}, which LangGraph converts on load")
    if message_id is not None and type(message_id) is not str:
        raise Unprovable(f"{where} holds a message whose id is not text")
    if message_id is None and ids_required:
        raise Unprovable(f"{where} holds a message without an id (LangGraph assigns a random one on load)")
    return StoredMessage(message_id, name, raw)


class MessageCache:
    """Messages already read in this lineage, by their bytes: every snapshot repeats the ones before it, and
    the same bytes give the same StoredMessage object, so comparing two lists mostly compares identities."""

    __slots__ = ("_known", "_large")

    def __init__(self) -> None:
        self._known: dict[bytes, StoredMessage] = {}
        # The keys longer than _FOUND_IN_PLACE, by hash.
        self._large: dict[int, list[bytes]] = {}

    def messages(self, raws: Sequence[Any], where: str, ids_required: bool) -> tuple[StoredMessage, ...]:
        """The messages of these stored values (bytes, msgspec.Raw, or a view of bytes for a long one)."""
        known = self._known
        out = []
        for raw in raws:
            key: bytes | None
            if len(raw) <= _FOUND_IN_PLACE:
                key = bytes(raw)  # bytes(bytes) is the object itself
                found = known.get(key)
            else:
                key, found = self._find(raw)
            if found is None or (ids_required and found.id is None):
                key = key if key is not None else bytes(raw)
                found = _message(key, where, ids_required)
                known[key] = found
                if len(key) > _FOUND_IN_PLACE and key not in (large := self._large.setdefault(hash(key), [])):
                    large.append(key)
            out.append(found)
        return tuple(out)

    def _find(self, raw: bytes | memoryview) -> tuple[bytes | None, StoredMessage | None]:
        """(the cached key, its message) for a long value met before, else (None, None): found in place, where
        a copy of it would be as large. A view hashes as its bytes; startswith compares them as memcmp does
        (== on a view goes byte by byte)."""
        for key in self._large.get(hash(raw), ()):
            if len(key) == len(raw) and key.startswith(raw):
                return key, self._known[key]
        return None, None


# A stored value longer than this is looked up in place rather than by a copy of its bytes: a huge message
# read again from a snapshot is found without being copied.
_FOUND_IN_PLACE = 1 << 20


def _hashable(data: bytes | memoryview, items: list[msgspec.Raw]) -> Sequence[msgspec.Raw | memoryview]:
    """The items of the array `data`, each long one as a view of its bytes object (the items lie end to end
    after the header): a view of bytes hashes as its bytes, where a msgspec.Raw does not hash."""
    if type(data) is bytes and len(data) <= _FOUND_IN_PLACE:
        return items  # no item is longer than the array holding it
    lengths = [len(item) for item in items]
    if not lengths or max(lengths) <= _FOUND_IN_PLACE:
        return items
    if type(data) is not bytes and not (isinstance(data, memoryview) and type(data.obj) is bytes):
        data = bytes(data)
    view = memoryview(data)
    at = len(view) - sum(lengths)
    out: list[msgspec.Raw | memoryview] = []
    for item, length in zip(items, lengths, strict=True):
        out.append(view[at : at + length] if length > _FOUND_IN_PLACE else item)
        at += length
    return out


def _list_items(data: bytes | memoryview, where: str) -> Sequence[msgspec.Raw | memoryview] | None:
    """The items of a msgpack array; None when the value is not an array."""
    try:
        return _hashable(data, _items.decode(data))
    except msgspec.ValidationError:
        return None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise Unprovable(f"{where} is not decodable msgpack ({exc})") from None


def names_type(raw: bytes | memoryview | msgspec.Raw, kind: tuple[str, str]) -> bool:
    """`raw` is one ext value naming the type `kind` (module, class name): its name read, nothing built."""
    header = ext_header(raw)
    if header is None or header[0] not in _MODEL_EXT_CODES:
        return False
    try:
        model = _model.decode(memoryview(raw)[header[1] :])
    except (msgspec.DecodeError, RecursionError):  # msgspec.ValidationError is a DecodeError
        return False
    return (model.module, model.name) == kind


def tool_outputs(data: bytes | memoryview | msgspec.Raw) -> tuple[int, int]:
    """(ToolMessage items, their bytes) in a `messages` value: a list, a snapshot of one, or one message (a
    write of a single value). Each item's type is read inertly from its ext payload's class name."""
    if not holds(data, TOOL_MESSAGE_MARKER):
        return 0, 0
    header = ext_header(data)
    if header is not None and header[0] == EXT_DELTA_SNAPSHOT:
        data = memoryview(data)[header[1] :]
    try:
        items: list[Any] = _items.decode(data)
    except msgspec.ValidationError:
        items = [data]
    except (msgspec.DecodeError, RecursionError):
        return 0, 0
    count = size = 0
    for raw in items:
        if names_type(raw, TOOL_MESSAGE):
            count += 1
            size += len(memoryview(raw))
    return count, size


def stored_list(data: bytes | memoryview, where: str) -> StoredList:
    """A snapshot's list (the array inside the ext) or a plain stored list, left unread."""
    header = ext_header(data)
    if header is not None and header[0] == EXT_DELTA_SNAPSHOT:
        return StoredList(bytes(memoryview(data)[header[1] :]), True, where)
    return StoredList(bytes(data), False, where)


def checkpoint_messages(data: bytes | memoryview, where: str) -> StoredList | None:
    """The list a whole serialized checkpoint stores under channel_values["messages"], if any (the slow path
    for checkpoints the lean reader does not take)."""
    try:
        values = _channel_values.decode(data).channel_values
    except (msgspec.DecodeError, RecursionError) as exc:
        raise Unprovable(f"the checkpoint cannot be read ({exc})") from None
    raw = values.get("messages")
    return None if raw is None else stored_list(raw, where)


def message_write(
    task_id: str, task_path: str, idx: int, data: bytes | memoryview, where: str, cache: MessageCache
) -> MessageWrite:
    """One `messages` write row's value, as the reducer receives it (a list, or one message)."""
    items = _list_items(data, where)
    if items is not None:
        return MessageWrite(task_id, task_path, idx, cache.messages(items, where, ids_required=True))
    header = ext_header(data)
    if header is not None and header[0] == EXT_CONSTRUCTOR_KW_ARGS:
        return _overwrite(task_id, task_path, idx, memoryview(data)[header[1] :], where, cache)
    return MessageWrite(task_id, task_path, idx, cache.messages([bytes(data)], where, ids_required=True))


def _overwrite(
    task_id: str, task_path: str, idx: int, payload: memoryview, where: str, cache: MessageCache
) -> MessageWrite:
    """langgraph.types.Overwrite(value): the channel's new value, as it is."""
    try:
        parts = _items.decode(payload)
        module, name = msgspec.msgpack.decode(parts[0], type=str), msgspec.msgpack.decode(parts[1], type=str)
        arguments = _arguments.decode(parts[2])
    except (msgspec.DecodeError, RecursionError, IndexError):
        raise Unprovable(f"{where} holds a value whose fields cannot be read") from None
    if (module, name) != OVERWRITE:
        raise Unprovable(f"{where} holds a {name}, which is not a message")
    raw = arguments.get("value")
    replacement = bytes(raw) if raw is not None else _NIL
    if replacement == _NIL:
        return MessageWrite(task_id, task_path, idx, (), overwrite=True)
    items = _list_items(replacement, where)
    raws: Sequence[Any] = [replacement] if items is None else items
    return MessageWrite(task_id, task_path, idx, cache.messages(raws, where, ids_required=False), overwrite=True)
