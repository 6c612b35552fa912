"""Plain typed values the store hands to analysis: one record per checkpoint, grouped per lineage."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.rules import RuleCode

DELTA_MODE = "delta"


class Backend(StrEnum):
    SQLITE = "sqlite"
    POSTGRES = "postgres"


class MessagesShape(StrEnum):
    """What a checkpoint physically stores for the `messages` channel."""

    ABSENT = "absent"  # no value here: a delta non-snapshot step, or nothing written yet
    SNAPSHOT = "snapshot"  # a _DeltaSnapshot (SQLite: ext 7 inline; Postgres: marker + ext 7 blob)
    LIST = "list"  # a plain message list (full mode, a migration seed, or a stuffed list)
    # Postgres only: no marker, but the blob at this checkpoint's version is an earlier step's snapshot.
    SNAPSHOT_AT_VERSION = "snapshot_at_version"
    DANGLING_MARKER = "dangling_marker"  # Postgres: marker true, no blob at the version
    MARKER_WITHOUT_SNAPSHOT = "marker_without_snapshot"  # Postgres: marker true, blob is not a snapshot
    OTHER = "other"  # any other value
    UNDECODABLE = "undecodable"


class Shape:
    """MessagesShape's members as plain class attributes, for the per-checkpoint paths.

    An enum member lookup runs Python code on 3.11 (about 100 ns); this is an ordinary attribute read.
    """

    ABSENT = MessagesShape.ABSENT
    SNAPSHOT = MessagesShape.SNAPSHOT
    LIST = MessagesShape.LIST
    SNAPSHOT_AT_VERSION = MessagesShape.SNAPSHOT_AT_VERSION
    DANGLING_MARKER = MessagesShape.DANGLING_MARKER
    MARKER_WITHOUT_SNAPSHOT = MessagesShape.MARKER_WITHOUT_SNAPSHOT
    OTHER = MessagesShape.OTHER
    UNDECODABLE = MessagesShape.UNDECODABLE


@dataclass(frozen=True, slots=True)
class Problem:
    """Something found while reading one checkpoint, to become a finding in analysis."""

    rule: RuleCode
    detail: str
    # CK105 for a constructor naming one type: the (module, name) an operator may trust with --allow-type.
    allowable: tuple[str, str] | None = None


@dataclass(slots=True)
class CheckpointRecord:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    step: int | None
    source: str | None
    # DeerFlow's marker, metadata["deerflow_checkpoint_channel_mode"] (absence means full).
    mode_marker: str | None
    # counters_since_delta_snapshot["messages"] = [updates, supersteps]; None when absent.
    updates: int | None
    supersteps: int | None
    messages: MessagesShape
    # channel_versions["messages"]: equal to the parent's when this step stored nothing new.
    messages_version: str | None
    # The stored snapshot or list holds no message at all.
    seed_empty: bool = False
    # Writes stored under this checkpoint (they produce its children).
    message_write_rows: int = 0
    message_write_tasks: int = 0
    message_write_bytes: int = 0
    # The messages those writes carry, and their bytes without each write's list framing: what a
    # snapshot or full-mode list holding them would store.
    message_write_items: int = 0
    message_item_bytes: int = 0
    other_write_rows: int = 0
    other_write_bytes: int = 0
    overwrite_written: bool = False
    removal_written: bool = False
    # Stored sizes, counted as DeerFlow's benchmark does (lengths of the stored columns).
    checkpoint_bytes: int = 0
    metadata_bytes: int = 0
    snapshot_bytes: int = 0
    other_blob_bytes: int = 0
    problems: list[Problem] = field(default_factory=list)
    # False when the metadata could not be read: mode and counters are then unknown, not absent.
    metadata_ok: bool = True
    # The parent in the same lineage, linked by analysis.lineage.LineageGraph (None: parentless or missing).
    parent_record: CheckpointRecord | None = None
    # Facts that depend on the parent, set once by LineageGraph (see its methods of the same names).
    delta: bool = False
    seed: bool = False
    snapshot_step: bool = False
    wrote: bool = False

    @property
    def readable(self) -> bool:
        """Both metadata and checkpoint were decoded, so shape rules can judge this checkpoint."""
        return self.metadata_ok and self.messages is not Shape.UNDECODABLE

    @property
    def uses_delta(self) -> bool:
        """DeerFlow's checkpoint_metadata_uses_delta: the marker, or a messages counter."""
        return self.mode_marker == DELTA_MODE or self.updates is not None or self.supersteps is not None

    @property
    def wrote_messages_below(self) -> bool:
        """True when a messages write is stored under this checkpoint (its child applied it)."""
        return self.message_write_rows > 0


@dataclass(frozen=True, slots=True)
class Lineage:
    """Every checkpoint of one (thread_id, checkpoint_ns), in checkpoint_id order."""

    thread_id: str
    checkpoint_ns: str
    records: list[CheckpointRecord]
    # verify-shape --deep on SQLite: the rows its proof reads, handed over by the compiled reader, which read
    # them already (store/history.py, SqliteLineageHistories); None when the proof reads them itself.
    messages_rows: MessagesRows | None = field(default=None, repr=False, compare=False)


class MessagesRows:
    """A lineage's rows as the deep proof selects them (store/history.py), handed over once: the stored rows
    (checkpoint_id, type, checkpoint bytes or None, size or None) and the messages writes (checkpoint_id, task_id,
    task_path, idx, type, value bytes or None, size or None), in the proof's order."""

    __slots__ = ("_rows",)

    def __init__(self, stored: list[tuple[Any, ...]], writes: list[tuple[Any, ...]]) -> None:
        self._rows: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] | None = (stored, writes)

    def take(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] | None:
        """The rows, the first time; None after (the proof lets each row go as it reads it)."""
        rows, self._rows = self._rows, None
        return rows


def key_text(value: object) -> str:
    """A key column's value as text: itself when it is text, else a typed form (`x'6869'` for a BLOB,
    `NULL`, the number): the savers' schema allows a BLOB thread_id, and reports need text."""
    if type(value) is str:
        return value
    if isinstance(value, bytes):
        return f"x'{value.hex()}'"
    if value is None:
        return "NULL"
    return repr(value)


def text_lineage(
    thread_id: object, checkpoint_ns: object, records: list[CheckpointRecord], messages_rows: MessagesRows | None = None
) -> Lineage:
    """The lineage with its keys as text (key_text); the readers give its records text ids already."""
    if type(thread_id) is not str or type(checkpoint_ns) is not str:
        thread_id, checkpoint_ns = key_text(thread_id), key_text(checkpoint_ns)
        for record in records:
            record.thread_id, record.checkpoint_ns = thread_id, checkpoint_ns
    assert type(thread_id) is str and type(checkpoint_ns) is str
    return Lineage(thread_id, checkpoint_ns, records, messages_rows)


@dataclass
class LineageRows:
    """The rows of one (thread_id, checkpoint_ns) as stored (store/row_keys.py reads them): raw key values, so a
    retention script can name them."""

    thread_id: object
    checkpoint_ns: object
    # How many checkpoints, the greatest id (byte order), and whether every id is text.
    checkpoints: int = 0
    newest: object = None
    ids_are_text: bool = True
    # (checkpoint_id, task_id, idx) of every write row, orphans included.
    writes: list[tuple[object, object, object]] = field(default_factory=list)
    # Postgres: checkpoint id -> {channel: version}, and (channel, version, bytes) of every blob row.
    versions: dict[str, dict[str, str]] = field(default_factory=dict)
    blobs: list[tuple[object, object, int]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        """The lineage's key as the readers give it (records.key_text; a NULL namespace reads as '')."""
        return key_text(self.thread_id), key_text(self.checkpoint_ns) if self.checkpoint_ns is not None else ""

    def text_keys(self) -> bool:
        """The lineage's own key and its checkpoint ids are text (write rows are checked where they are named)."""
        return type(self.thread_id) is str and type(self.checkpoint_ns) is str and self.ids_are_text

    def add_checkpoint(self, checkpoint_id: object) -> None:
        self.checkpoints += 1
        if type(checkpoint_id) is not str:
            self.ids_are_text = False
        elif self.newest is None or checkpoint_id > self.newest:  # type: ignore[operator]
            self.newest = checkpoint_id
