"""What each checkpoint stores once its lineage is converted to another mode (`ckpt convert`).

The deep proof folds a lineage's writes down every branch (analysis/replay.py); its fold at a checkpoint is
the message list every read of that checkpoint materialises. Converting keeps those reads and changes only
where the list is stored:

- full: every checkpoint that has a `messages` version stores the whole list, and carries neither delta
  counters nor DeerFlow's mode marker (a full-mode process writes neither).
- delta at cadence K: the counters `(updates, supersteps)` advance as LangGraph's loop advances them (every
  checkpoint is a superstep; `updates` counts the ones that applied a messages write), and a `_DeltaSnapshot`
  is stored where they reach K or the superstep bound, and where LangGraph forces one: a new branch from a
  checkpoint with pending messages writes, a superstep that applied an `Overwrite`, and a lineage's start
  that stores a list (update_state on a new thread, or a start whose parent is gone).

The facts this relies on are in docs/conversion.md.
"""

from __future__ import annotations

from enum import StrEnum

from deerflow_ckpt.analysis.cadence import DEFAULT_SUPERSTEP_BOUND
from deerflow_ckpt.analysis.replay import takes_writes
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.store.messages import HistoryCheckpoint, StoredMessage, serialized_list
from deerflow_ckpt.store.peek import EXT_DELTA_SNAPSHOT


class TargetMode(StrEnum):
    DELTA = "delta"
    FULL = "full"


@dataclass(frozen=True)
class ConversionSettings:
    mode: TargetMode
    # delta: the cadence K every converted lineage is written at.
    snapshot_frequency: int = 10
    superstep_bound: int = DEFAULT_SUPERSTEP_BOUND


@dataclass(frozen=True, slots=True)
class CheckpointTarget:
    """One checkpoint as the target mode stores it."""

    # The serialized `messages` value to store (a _DeltaSnapshot ext or a plain list), or None: none stored.
    messages: bytes | None
    # counters_since_delta_snapshot["messages"] as [updates, supersteps]; None: the key is absent.
    counters: tuple[int, int] | None
    snapshot: bool = False


class Unconvertible(Exception):
    """A checkpoint the target mode cannot store without changing what a read of it materializes."""


@dataclass
class LineagePlanner:
    """Decides, checkpoint by checkpoint in the proof's parent-first order, what the target mode stores."""

    settings: ConversionSettings
    by_id: dict[str, HistoryCheckpoint]
    # Each decided checkpoint's counters, which its children continue from.
    _counters: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    snapshots: int = 0
    lists: int = 0

    def decide(self, checkpoint: HistoryCheckpoint, fold: list[StoredMessage], has_version: bool) -> CheckpointTarget:
        """`fold`: the list every read of the checkpoint materialises; `has_version`: its channel_versions
        names `messages` (a checkpoint before the first message has nothing to store)."""
        if self.settings.mode is TargetMode.FULL:
            target = CheckpointTarget(serialized_list(fold) if has_version else None, None)
            self.lists += target.messages is not None
            return target
        parent = self.by_id.get(checkpoint.parent_id) if checkpoint.parent_id is not None else None
        forced = False
        if parent is None:
            # A thread's first checkpoint starts the counters; a start that stores a list keeps it as the seed.
            updates, supersteps = 0, 1
            forced = checkpoint.stored is not None or checkpoint.parent_id is not None
        else:
            updates, supersteps = self._counters.get(parent.checkpoint_id) or (0, 0)
            supersteps += 1
            takes = takes_writes(parent, checkpoint)
            if parent.writes:
                if takes:
                    updates += 1
                    forced = any(write.overwrite for write in parent.writes)
                else:
                    # A new branch from pending messages writes: LangGraph snapshots so no read replays them.
                    forced = True
        cadence = updates >= self.settings.snapshot_frequency or supersteps >= self.settings.superstep_bound
        if forced and not has_version:
            # LangGraph gives the channel a version here to store the snapshot that stops the walk (a branch
            # started before the first message); a conversion keeps every version as stored, so without one
            # a read would walk on and replay the writes of the branch it left.
            raise Unconvertible(
                f"a branch starts at checkpoint {checkpoint.checkpoint_id} before the messages channel has a "
                "version: delta mode would need a new version there"
            )
        if has_version and (forced or cadence):
            self._counters[checkpoint.checkpoint_id] = None
            self.snapshots += 1
            return CheckpointTarget(snapshot_value(serialized_list(fold)), None, snapshot=True)
        self._counters[checkpoint.checkpoint_id] = (updates, supersteps)
        return CheckpointTarget(None, (updates, supersteps))


def snapshot_value(serialized: bytes) -> bytes:
    """`_DeltaSnapshot(value)` as LangGraph's serializer writes it: ext 7 around the value's msgpack."""
    return ext_value(EXT_DELTA_SNAPSHOT, serialized)


def ext_value(code: int, payload: bytes) -> bytes:
    """A msgpack ext value with the shortest header, as msgpack encoders (ormsgpack included) write one."""
    size = len(payload)
    fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}.get(size)
    if fixed is not None:
        header = bytes((fixed, code))
    elif size < 1 << 8:
        header = bytes((0xC7, size, code))
    elif size < 1 << 16:
        header = b"\xc8" + size.to_bytes(2, "big") + bytes((code,))
    else:
        header = b"\xc9" + size.to_bytes(4, "big") + bytes((code,))
    return header + payload
