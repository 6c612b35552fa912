"""Message lists read inertly, for the deep proof: each message's id, type and stored bytes, nothing built.

LangGraph serializes a message as ext 5 (a pydantic v2 model): the payload is the array
[module, class name, field map, method]. The proof compares a message by its id and its payload bytes,
which are the same bytes wherever the same message object was serialized (in the write that added it and
in every snapshot or full-mode list that holds it). Anything the proof cannot follow exactly, because
LangGraph would convert it or assign it a random id on load, is `Unprovable`, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from deerflow_ckpt.store.peek import EXT_CONSTRUCTOR_KW_ARGS, EXT_DELTA_SNAPSHOT, EXT_PYDANTIC_V2

# langchain_core's RemoveMessage, and the id that removes every message (REMOVE_ALL_MESSAGES).
REMOVE_MESSAGE = ("langchain_core.messages.modifier", "RemoveMessage")
REMOVE_ALL_ID = "__remove_all__"
# langgraph.types.Overwrite: a write that replaces the channel's value instead of going through the reducer.
OVERWRITE = ("langgraph.types", "Overwrite")


class Unprovable(Exception):
    """The stored bytes cannot be followed exactly; the message says why."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: str | None
    # The class name ("AIMessage"); RemoveMessage marks a removal in a write.
    kind: str
    # The ext payload as stored: equal bytes, equal message.
    payload: bytes

    @property
    def removes(self) -> bool:
        return self.kind == REMOVE_MESSAGE[1]


@dataclass(frozen=True, slots=True)
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
    stored: tuple[StoredMessage, ...] | None = None
    snapshot: bool = False
    writes: list[MessageWrite] = field(default_factory=list)
    # Why this checkpoint's stored list or writes cannot be followed (the first reason found).
    unprovable: str | None = None
    # Several tasks wrote messages here and the store keeps no task_path to order them by.
    order_unknown: bool = False


@dataclass(frozen=True, slots=True)
class LineageHistory:
    thread_id: str
    checkpoint_ns: str
    checkpoints: list[HistoryCheckpoint]


class _Ext:
    __slots__ = ("code", "data")

    def __init__(self, code: int, data: memoryview) -> None:
        self.code = code
        self.data = bytes(data)


def _ext_hook(code: int, data: memoryview) -> _Ext:
    return _Ext(code, data)


class _Fields(msgspec.Struct):
    """The message fields the proof reads; the rest (content, tool calls) is skipped, not built."""

    id: Any = None


_value = msgspec.msgpack.Decoder(ext_hook=_ext_hook)
_model = msgspec.msgpack.Decoder(tuple[str, str, msgspec.Raw, msgspec.Raw])
_model_short = msgspec.msgpack.Decoder(tuple[str, str, msgspec.Raw])
_fields = msgspec.msgpack.Decoder(_Fields)


def _decode(data: bytes | memoryview, what: str) -> Any:
    try:
        return _value.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise Unprovable(f"{what} is not decodable msgpack ({exc})") from None


def _message(item: Any, where: str, ids_required: bool) -> StoredMessage:
    if type(item) is not _Ext or item.code != EXT_PYDANTIC_V2:
        raise Unprovable(f"{where} holds a value LangGraph converts to a message on load (a new id each time)")
    try:
        try:
            module, name, raw_fields, _ = _model.decode(item.data)
        except msgspec.ValidationError:
            module, name, raw_fields = _model_short.decode(item.data)
        message_id = _fields.decode(raw_fields).id
    except (msgspec.DecodeError, RecursionError):
        raise Unprovable(f"{where} holds a message whose fields cannot be read") from None
    if not module.startswith("langchain_core.messages") or name.endswith("Chunk"):
        raise Unprovable(f"{where} holds a {name}, which LangGraph converts on load")
    if message_id is not None and type(message_id) is not str:
        raise Unprovable(f"{where} holds a message whose id is not text")
    if message_id is None and ids_required:
        raise Unprovable(f"{where} holds a message without an id (LangGraph assigns a random one on load)")
    return StoredMessage(message_id, name, item.data)


def _messages(value: Any, where: str, ids_required: bool) -> tuple[StoredMessage, ...]:
    items = value if type(value) is list else [value]
    return tuple(_message(item, where, ids_required) for item in items)


def stored_list(data: bytes | memoryview, where: str) -> tuple[tuple[StoredMessage, ...], bool]:
    """The messages a snapshot or a plain stored list holds, and whether it was a snapshot."""
    return _stored_value(_decode(data, where), where)


def checkpoint_messages(data: bytes | memoryview, where: str) -> tuple[tuple[StoredMessage, ...], bool] | None:
    """The list a whole serialized checkpoint stores under channel_values["messages"], if any (the slow path
    for checkpoints the lean reader does not take)."""
    checkpoint = _decode(data, "the checkpoint")
    values = checkpoint.get("channel_values") if type(checkpoint) is dict else None
    if type(values) is not dict:
        raise Unprovable("the checkpoint has no channel_values map")
    if "messages" not in values:
        return None
    return _stored_value(values["messages"], where)


def _stored_value(value: Any, where: str) -> tuple[tuple[StoredMessage, ...], bool]:
    snapshot = type(value) is _Ext and value.code == EXT_DELTA_SNAPSHOT
    if snapshot:
        value = _decode(value.data, where)
    if type(value) is not list:
        raise Unprovable(f"{where} is not a message list")
    # A stored list went through the reducer, which gave every message an id; Overwrite values did not.
    return _messages(value, where, ids_required=False), snapshot


def message_write(task_id: str, task_path: str, idx: int, data: bytes | memoryview, where: str) -> MessageWrite:
    """One `messages` write row's value, as the reducer receives it."""
    value = _decode(data, where)
    if type(value) is _Ext and value.code == EXT_CONSTRUCTOR_KW_ARGS:
        try:
            module, name, arguments = msgspec.msgpack.decode(value.data, ext_hook=_ext_hook)[:3]
        except (msgspec.DecodeError, RecursionError, ValueError, TypeError):
            raise Unprovable(f"{where} holds a value whose fields cannot be read") from None
        if (module, name) == OVERWRITE and type(arguments) is dict:
            replacement = arguments.get("value")
            items = () if replacement is None else _messages(replacement, where, ids_required=False)
            return MessageWrite(task_id, task_path, idx, items, overwrite=True)
    return MessageWrite(task_id, task_path, idx, _messages(value, where, ids_required=True))
