"""Per-checkpoint summaries of pending-write rows, shared by the SQLite and Postgres readers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deerflow_ckpt.store.peek import (
    OVERWRITE_TYPE,
    REMOVE_MESSAGE_TYPE,
    ExtValue,
    InertDecoder,
    UndecodableError,
    array_header_size,
)
from deerflow_ckpt.store.records import CheckpointRecord, Problem

MESSAGES_CHANNEL = "messages"
# Serializer type tags that carry no code: JsonPlusSerializer.dumps_typed's inert outputs.
INERT_TYPES = frozenset({"null", "bytes", "bytearray", "empty"})


@dataclass(slots=True)
class WriteSummary:
    message_rows: int = 0
    message_tasks: set[str] = field(default_factory=set)
    message_bytes: int = 0
    message_items: int = 0
    message_item_bytes: int = 0
    other_rows: int = 0
    other_bytes: int = 0
    overwrite: bool = False
    removal: bool = False
    problems: list[Problem] = field(default_factory=list)

    def apply_to(self, record: CheckpointRecord) -> None:
        record.message_write_rows = self.message_rows
        record.message_write_tasks = len(self.message_tasks)
        record.message_write_bytes = self.message_bytes
        record.message_write_items = self.message_items
        record.message_item_bytes = self.message_item_bytes
        record.other_write_rows = self.other_rows
        record.other_write_bytes = self.other_bytes
        record.overwrite_written = self.overwrite
        record.removal_written = self.removal
        record.problems.extend(self.problems)


def _named_types(value: Any) -> list[tuple[str | None, str | None]]:
    """The (module, name) of `value` if it is an ext, or of each ext in it if it is a list."""
    if type(value) is ExtValue:
        return [(value.module, value.name)]
    if type(value) is list:
        return [(item.module, item.name) for item in value if type(item) is ExtValue]
    return []


def check_typed_bytes(
    kind: str | None, data: bytes | None, where: str, problems: list[Problem], decoder: InertDecoder | None = None
) -> Any:
    """Inertly decode one serialized value, recording pickle, foreign types and garbage as problems."""
    if kind == "msgpack" and data is not None:
        decoder = decoder or InertDecoder()
        try:
            value = decoder.decode(data)
        except UndecodableError as exc:
            problems.append(Problem("CK104", f"{where} is not decodable msgpack ({exc})"))
            return None
        if decoder.untrusted:
            for named in decoder.untrusted_types():
                problems.append(
                    Problem("CK105", f"{where} names {named.describe()}, outside LangChain/LangGraph (unsafe to load)")
                )
        return value
    if kind == "pickle":
        problems.append(Problem("CK105", f"{where} is serialized with pickle (loading it runs arbitrary code)"))
        return None
    if kind in INERT_TYPES or data is None:
        return None
    if kind == "json":
        import json

        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            problems.append(Problem("CK104", f"{where} is not valid JSON ({exc})"))
            return None
    shown = repr(kind) if len(repr(kind)) <= 40 else repr(kind)[:37] + "..."
    problems.append(Problem("CK104", f"{where} has unknown serializer type {shown}"))
    return None


def add_write(
    summary: WriteSummary,
    task_id: str,
    channel: str,
    kind: str | None,
    data: bytes | None,
    decoder: InertDecoder | None = None,
) -> None:
    """Fold one write row into its checkpoint's summary."""
    size = len(data) if data is not None else 0
    problems: list[Problem] = []
    value = check_typed_bytes(kind, data, "this write", problems, decoder)
    if problems:
        # Name the write only when there is something to say: this runs once per write row.
        where = f"write {channel!r} of task {task_id}"
        summary.problems.extend(Problem(p.rule, p.detail.replace("this write", where, 1)) for p in problems)
    if channel != MESSAGES_CHANNEL:
        summary.other_rows += 1
        summary.other_bytes += size
        return
    summary.message_rows += 1
    summary.message_tasks.add(task_id)
    summary.message_bytes += size
    # A list write adds its elements to the channel; anything else (one message, an ext) is one item.
    if type(value) is list:
        summary.message_items += len(value)
        summary.message_item_bytes += size - array_header_size(len(value))
    else:
        summary.message_items += 1
        summary.message_item_bytes += size
    types = _named_types(value)
    if OVERWRITE_TYPE in types:
        summary.overwrite = True
    if REMOVE_MESSAGE_TYPE in types:
        summary.removal = True
