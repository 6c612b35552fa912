"""What a lineage stores, by kind: stored column lengths, as DeerFlow's benchmark counts them."""

from __future__ import annotations

from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.store.records import Backend, CheckpointRecord, MessagesShape


@dataclass(frozen=True)
class StorageBytes:
    """Stored column lengths by kind, as DeerFlow's benchmark counts them.

    On SQLite a snapshot is inline in the checkpoint column: its payload counts as `snapshots` and
    the rest of the row (ext header included) as `checkpoints`. On Postgres every blob other than a
    snapshot, the full-mode message lists among them, counts as `other_blobs`.
    """

    snapshots: int = 0
    message_writes: int = 0
    checkpoints: int = 0
    other_writes: int = 0
    other_blobs: int = 0

    @property
    def total(self) -> int:
        return self.snapshots + self.message_writes + self.checkpoints + self.other_writes + self.other_blobs

    def __add__(self, other: StorageBytes) -> StorageBytes:
        return StorageBytes(
            self.snapshots + other.snapshots,
            self.message_writes + other.message_writes,
            self.checkpoints + other.checkpoints,
            self.other_writes + other.other_writes,
            self.other_blobs + other.other_blobs,
        )


def stored_snapshot_bytes(graph: LineageGraph, record: CheckpointRecord) -> int:
    """Snapshot bytes this row stores itself: a Postgres copy at its parent's version stores none."""
    if record.messages is not MessagesShape.SNAPSHOT:
        return 0
    if graph.backend is Backend.POSTGRES and not graph.is_snapshot_step(record):
        return 0
    return record.snapshot_bytes


def storage_bytes(graph: LineageGraph) -> StorageBytes:
    snapshots = message_writes = checkpoints = other_writes = other_blobs = 0
    inline = graph.backend is Backend.SQLITE
    for record in graph.records:
        snapshot = stored_snapshot_bytes(graph, record)
        snapshots += snapshot
        message_writes += record.message_write_bytes
        other_writes += record.other_write_bytes
        other_blobs += record.other_blob_bytes
        checkpoints += record.checkpoint_bytes + record.metadata_bytes - (snapshot if inline else 0)
    return StorageBytes(snapshots, message_writes, checkpoints, other_writes, other_blobs)
