"""The parent/child structure of one lineage and the storage facts that depend on a checkpoint's parent.

Chains are followed through parent ids, never inferred from id order: branches interleave, and ids
are monotonic only within one process.
"""

from __future__ import annotations

from collections.abc import Iterator

from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.store.records import (
    Backend,
    CheckpointRecord,
    Lineage,
    Shape,
)

# Shapes that mean "a value is stored at this version": the read walk stops here.
_SEED_SHAPES = frozenset(
    {
        Shape.SNAPSHOT,
        Shape.LIST,
        Shape.OTHER,
        Shape.SNAPSHOT_AT_VERSION,
        Shape.DANGLING_MARKER,
        Shape.MARKER_WITHOUT_SNAPSHOT,
    }
)
_SNAPSHOT_SHAPES = frozenset({Shape.SNAPSHOT, Shape.SNAPSHOT_AT_VERSION})
# Shapes only a delta writer produces (Postgres's inline marker, or a _DeltaSnapshot).
_DELTA_SHAPES = frozenset({Shape.SNAPSHOT, Shape.DANGLING_MARKER, Shape.MARKER_WITHOUT_SNAPSHOT})


@dataclass
class LineageGraph:
    lineage: Lineage
    backend: Backend
    by_id: dict[str, CheckpointRecord] = field(init=False)
    children: dict[str, list[CheckpointRecord]] = field(init=False)

    def __post_init__(self) -> None:
        records = self.lineage.records
        self.by_id = by_id = {record.checkpoint_id: record for record in records}
        children: dict[str, list[CheckpointRecord]] = {}
        self.children = children
        snapshot = Shape.SNAPSHOT
        # Linked and judged once here: the rules ask these of every checkpoint several times.
        for record in records:
            parent_id = record.parent_id
            parent = by_id.get(parent_id) if parent_id is not None else None
            record.parent_record = parent
            messages = record.messages
            record.delta = record.uses_delta or messages in _DELTA_SHAPES
            record.seed = messages in _SEED_SHAPES
            if parent is None:
                record.wrote = False
                record.snapshot_step = messages is snapshot
                continue
            siblings = children.get(parent.checkpoint_id)
            if siblings is None:
                children[parent.checkpoint_id] = [record]
            else:
                siblings.append(record)
            # Only what the reader stored about the parent, so its place in the list does not matter.
            record.wrote = parent.message_write_rows > 0
            record.snapshot_step = messages is snapshot and not (
                parent.messages in _SNAPSHOT_SHAPES
                and record.messages_version is not None
                and parent.messages_version == record.messages_version
            )

    @property
    def records(self) -> list[CheckpointRecord]:
        return self.lineage.records

    def parent(self, record: CheckpointRecord) -> CheckpointRecord | None:
        return record.parent_record

    def roots(self) -> list[CheckpointRecord]:
        return [record for record in self.records if record.parent_id is None]

    def heads(self) -> list[CheckpointRecord]:
        return [record for record in self.records if record.checkpoint_id not in self.children]

    def head(self) -> CheckpointRecord:
        """The newest checkpoint (max id), which DeerFlow reads as the thread's state."""
        return self.records[-1]

    def ancestors(self, record: CheckpointRecord) -> Iterator[CheckpointRecord]:
        """The parents of `record`, nearest first; stops at a missing parent or a cycle."""
        seen = {record.checkpoint_id}
        current = self.parent(record)
        while current is not None and current.checkpoint_id not in seen:
            seen.add(current.checkpoint_id)
            yield current
            current = self.parent(current)

    # -- storage facts ---------------------------------------------------------------------------

    def wrote(self, record: CheckpointRecord) -> bool:
        """The step that produced `record` wrote messages: a messages write is stored under its parent."""
        return record.wrote

    def stores_seed(self, record: CheckpointRecord) -> bool:
        """The read walk stops at `record`: a value for messages is stored at its version."""
        return record.seed

    def is_delta(self, record: CheckpointRecord) -> bool:
        """DeerFlow's delta test (marker or counters), or a shape only a delta writer stores."""
        return record.delta

    def same_version_as_parent(self, record: CheckpointRecord) -> bool:
        parent = self.parent(record)
        return (
            parent is not None
            and record.messages_version is not None
            and (parent.messages_version == record.messages_version)
        )

    def is_snapshot_step(self, record: CheckpointRecord) -> bool:
        """A snapshot physically stored by this step, not a raw writer's copy of its parent's."""
        return record.snapshot_step

    def stores_list_here(self, record: CheckpointRecord) -> bool:
        """A plain list stored by this step rather than carried over from its parent.

        On Postgres a version's blob serves every later checkpoint at that version, so only a new
        version stores anything. On SQLite each row holds its own bytes: only a copy of the parent's
        list at the same version (an input checkpoint, a raw writer's copy) is not new.
        """
        if record.messages is not Shape.LIST:
            return False
        if self.backend is Backend.POSTGRES:
            return not self.same_version_as_parent(record)
        parent = self.parent(record)
        copied = parent is not None and parent.messages is Shape.LIST
        return not (copied and self.same_version_as_parent(record))
