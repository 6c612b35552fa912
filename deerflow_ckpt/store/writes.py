"""What a checkpoint's pending-write rows add to its record, shared by the SQLite and Postgres readers."""

from __future__ import annotations

from typing import Any

from deerflow_ckpt.native import OVERWRITE_FLAG, REMOVAL_FLAG, value_summary
from deerflow_ckpt.rules import RuleCode
from deerflow_ckpt.store.json_peek import JsonJudge
from deerflow_ckpt.store.peek import (
    OVERWRITE_TYPE,
    REMOVE_MESSAGE_TYPE,
    ExtValue,
    InertDecoder,
    UndecodableError,
    UnjudgeableError,
    array_header_size,
)
from deerflow_ckpt.store.records import CheckpointRecord, Problem

MESSAGES_CHANNEL = "messages"
# Serializer type tags that carry no code: JsonPlusSerializer.dumps_typed's inert outputs.
INERT_TYPES = frozenset({"null", "bytes", "bytearray", "empty"})


def _named_types(value: Any) -> list[tuple[str | None, str | None]]:
    """The (module, name) of `value` if it is an ext, or of each ext in it if it is a list."""
    if type(value) is ExtValue:
        return [(value.module, value.name)]
    if type(value) is list:
        return [(item.module, item.name) for item in value if type(item) is ExtValue]
    return []


# The words of every finding on a value ckpt could decode only part of the way (RULES[CK105]).
UNJUDGEABLE = "cannot be judged: treat as untrusted"


def check_typed_bytes(
    kind: str | None, data: bytes | None, where: str, problems: list[Problem], decoder: InertDecoder | None = None
) -> Any:
    """Judge one serialized value as LangGraph's loads_typed would read it, by its serializer type: msgpack
    and json decoded inertly (the types they would construct named, garbage and pickle recorded as problems),
    bytes, bytearray, null and empty left as the inert bytes they are, any other type unreadable."""
    if kind == "msgpack" and data is not None:
        decoder = decoder or InertDecoder()
        value = None
        try:
            value = decoder.decode(data)
        except UnjudgeableError as exc:
            problems.append(
                Problem(RuleCode.CK105, f"{where} holds {exc}: {UNJUDGEABLE} (LangGraph's loader follows them)")
            )
        except UndecodableError as exc:
            problems.append(Problem(RuleCode.CK104, f"{where} is not decodable msgpack ({exc})"))
        # Also when decoding failed: LangGraph's loader calls each ext hook it meets before the error.
        for named in decoder.untrusted_types():
            problems.append(
                Problem(
                    RuleCode.CK105,
                    f"{where} names {named.describe()}, which LangGraph's default loader would import and call "
                    "(its strict mode allows only its safe types)",
                    named.allowable,
                )
            )
        return value
    if kind == "pickle":
        problems.append(Problem(RuleCode.CK105, f"{where} is serialized with pickle (loading it runs arbitrary code)"))
        return None
    if kind in INERT_TYPES or data is None:
        return None
    if kind == "json":
        return _check_json(data, where, problems)
    shown = repr(kind) if len(repr(kind)) <= 40 else repr(kind)[:37] + "..."
    problems.append(Problem(RuleCode.CK104, f"{where} has unknown serializer type {shown}"))
    return None


def _check_json(data: bytes, where: str, problems: list[Problem]) -> Any:
    """A json-typed value: the LangChain objects LangGraph's loader revives from it, judged like msgpack types."""
    judge = JsonJudge()
    value = None
    try:
        value = judge.decode(data)
    except UnjudgeableError as exc:
        problems.append(Problem(RuleCode.CK105, f"{where} is {exc}: {UNJUDGEABLE}"))
    except UndecodableError as exc:
        problems.append(Problem(RuleCode.CK104, f"{where} is not valid JSON ({exc})"))
    # Also when decoding failed: LangGraph's reviver builds each object it meets before the error.
    for key in sorted(set(judge.unjudged)):
        problems.append(
            Problem(
                RuleCode.CK105,
                f"{where} is json holding an object whose {key!r} is itself a JSON object or array, which LangGraph's "
                f"loader revives before reading it: {UNJUDGEABLE}",
            )
        )
    for version, name in judge.untrusted_names():
        if version == 1:
            how = "which LangGraph's loader revives and calls even in strict mode (it guards msgpack only)"
        else:
            how = "which LangGraph's loader calls wherever its allowed_json_modules admit it"
        problems.append(Problem(RuleCode.CK105, f"{where} is json naming {name}, {how}"))
    for name in sorted(set(judge.refused)):
        problems.append(
            Problem(
                RuleCode.CK104, f"{where} is json holding a not_implemented {name}, on which LangGraph's loader fails"
            )
        )
    return value


def check_stored_bytes(
    kind: str | None, data: bytes | memoryview | None, where: str, problems: list[Problem], decoder: InertDecoder
) -> None:
    """Judge a stored value whose decoded form nobody reads: the compiled judge first, Python where it abstains."""
    judge = value_summary if kind == "msgpack" and not decoder.deep else None
    if judge is not None and data is not None and judge(data) is not None:
        return
    check_typed_bytes(kind, bytes(data) if data is not None else None, where, problems, decoder)


class WriteFolder:
    """Folds the write rows of one lineage into its records, straight onto each checkpoint's counts.

    Rows must come in (checkpoint_id, task_id, idx) order, as both readers fetch them: a task's rows are
    then adjacent, so distinct message-writing tasks are counted without a set per checkpoint.
    """

    __slots__ = ("_by_id", "_counted_checkpoint", "_counted_task", "_decoder", "_judge")

    def __init__(self, records: list[CheckpointRecord], decoder: InertDecoder, native: bool = True) -> None:
        self._by_id = {record.checkpoint_id: record for record in records}
        self._decoder = decoder
        # The compiled judge keeps no snapshot payload, so deep decoding (and `native=False`, tests) goes without.
        self._judge = value_summary if native and not decoder.deep else None
        # The last (checkpoint, task) counted as writing messages.
        self._counted_checkpoint: str | None = None
        self._counted_task: str | None = None

    def add(self, checkpoint_id: str, task_id: Any, channel: Any, kind: str | None, data: bytes | None) -> None:
        """Fold one write row; rows of checkpoints not in the lineage are dropped.

        `task_id` and `channel` are the stored values, text in every saver's schema; they are only compared
        and shown, so another type is never converted on the per-row path.
        """
        record = self._by_id.get(checkpoint_id)
        if record is None:
            return
        size = len(data) if data is not None else 0
        # The compiled judge vouches for clean msgpack; anything it cannot vouch for is decoded in Python.
        summary = self._judge(data) if kind == "msgpack" and data is not None and self._judge is not None else None
        if summary is not None:
            is_list, items, flags = summary
            items = items if is_list else 1
        else:
            is_list, items, flags = judge_in_python(record, task_id, channel, kind, data, self._decoder)
        if channel != MESSAGES_CHANNEL:
            record.other_write_rows += 1
            record.other_write_bytes += size
            return
        record.message_write_rows += 1
        if task_id != self._counted_task or checkpoint_id != self._counted_checkpoint:
            self._counted_checkpoint, self._counted_task = checkpoint_id, task_id
            record.message_write_tasks += 1
        record.message_write_bytes += size
        _add_items(record, size, is_list, items, flags)


def _add_items(record: CheckpointRecord, size: int, is_list: int, items: int, flags: int) -> None:
    """What a messages write holds: a list adds its elements to the channel, anything else one item."""
    record.message_write_items += items
    record.message_item_bytes += size - array_header_size(items) if is_list else size
    if flags & OVERWRITE_FLAG:
        record.overwrite_written = True
    if flags & REMOVAL_FLAG:
        record.removal_written = True


def judge_in_python(
    record: CheckpointRecord, task_id: Any, channel: Any, kind: str | None, data: bytes | None, decoder: InertDecoder
) -> tuple[int, int, int]:
    """The Python judge: problems onto the record, and the value summarized as value_summary does."""
    problems: list[Problem] = []
    value = check_typed_bytes(kind, data, "this write", problems, decoder)
    if problems:
        # Name the write only when there is something to say: this runs once per write row.
        where = f"write {str(channel)!r} of task {task_id}"
        record.problems.extend(Problem(p.rule, p.detail.replace("this write", where, 1), p.allowable) for p in problems)
    types = _named_types(value)
    flags = OVERWRITE_FLAG if OVERWRITE_TYPE in types else 0
    flags |= REMOVAL_FLAG if REMOVE_MESSAGE_TYPE in types else 0
    if type(value) is list:
        return 1, len(value), flags
    return 0, 1, flags


def fold_contents(
    record: CheckpointRecord, task_id: Any, channel: Any, kind: str | None, data: bytes | None, decoder: InertDecoder
) -> None:
    """The part of WriteFolder.add the compiled SQLite reader leaves to Python: a write it counted but
    could not judge is decoded here, and what it holds is added to the record."""
    summary = judge_in_python(record, task_id, channel, kind, data, decoder)
    if channel == MESSAGES_CHANNEL:
        _add_items(record, len(data) if data is not None else 0, *summary)
