"""What another snapshot cadence K would have cost a lineage (pure: records in, values out).

The what-if replays this lineage's own message writes under another K: a snapshot at every K-th
message-writing step holds every message written so far, framed the way the saver frames it, so for an
append-only thread it matches a database written at that K byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from deerflow_ckpt.analysis.epochs import Epoch
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.stored_bytes import stored_snapshot_bytes
from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.store.peek import array_header_size, ext_header_size
from deerflow_ckpt.store.records import Backend

# The cadences every what-if shows unless the operator picks others (the expected K is always added).
DEFAULT_WHAT_IF = (1, 10, 100, 1000)


@dataclass(frozen=True)
class WhatIfRow:
    # None: full mode, a message list stored instead of snapshots.
    cadence: int | None
    # Snapshots (delta) or message lists (full) the thread would have stored.
    stored_values: int
    retained_bytes: int
    # The most message-writing steps a read would have replayed, and their stored bytes.
    worst_replay_depth: int
    worst_replay_bytes: int


@dataclass(frozen=True)
class ModelCheck:
    """The model against this lineage's own snapshots: equal when its writes only ever append messages."""

    snapshots: int
    modelled_bytes: int
    measured_bytes: int

    @property
    def exact(self) -> bool:
        return self.modelled_bytes == self.measured_bytes


@dataclass(frozen=True)
class WhatIf:
    rows: tuple[WhatIfRow, ...]
    message_writing_steps: int
    # False when a removal or an Overwrite was written: the model keeps every written message.
    append_only: bool
    # None when the lineage stores no snapshot to check the model against.
    check: ModelCheck | None
    # The epoch modelled (its index), from its first checkpoint on; None: the whole lineage.
    epoch: int | None = None


@dataclass(frozen=True)
class _Step:
    """One checkpoint of the lineage, as the what-if replays it."""

    wrote: bool
    items: int
    item_bytes: int
    write_bytes: int
    # The snapshot bytes this checkpoint really stores (0: none), for the model check.
    stored_snapshot: int
    snapshot_step: bool


def what_if_steps(graph: LineageGraph) -> list[_Step]:
    """Each checkpoint of the lineage as the what-if replays it."""
    steps = []
    for record in graph.records:
        parent = record.parent_record
        snapshot_step = graph.is_snapshot_step(record)
        stored = stored_snapshot_bytes(graph, record) if snapshot_step else 0
        if graph.wrote(record) and parent is not None:
            written = (parent.message_write_items, parent.message_item_bytes, parent.message_write_bytes)
            steps.append(_Step(True, *written, stored, snapshot_step))
        else:
            steps.append(_Step(False, 0, 0, 0, stored, snapshot_step))
    return steps


def model_check(steps: Sequence[_Step], backend: Backend, start: int = 0) -> ModelCheck | None:
    """The model's size for each snapshot stored from step `start` on, against the bytes stored there."""
    items = item_bytes = snapshots = modelled = measured = 0
    for index, step in enumerate(steps):
        items += step.items
        item_bytes += step.item_bytes
        if step.snapshot_step and index >= start:
            snapshots += 1
            modelled += snapshot_bytes(items, item_bytes, backend)
            measured += step.stored_snapshot
    return ModelCheck(snapshots, modelled, measured) if snapshots else None


def list_bytes(items: int, item_bytes: int) -> int:
    """A stored msgpack list of `items` messages whose encodings take `item_bytes`."""
    return array_header_size(items) + item_bytes


def snapshot_bytes(items: int, item_bytes: int, backend: Backend) -> int:
    """A `_DeltaSnapshot` of that list as the store measures it: the ext payload inline in a SQLite
    checkpoint, the whole ext value in a Postgres blob."""
    payload = list_bytes(items, item_bytes)
    return payload if backend is Backend.SQLITE else ext_header_size(payload) + payload


def delta_what_if(steps: Sequence[_Step], cadence: int, backend: Backend, start: int = 0) -> WhatIfRow:
    """A snapshot at every `cadence`-th message-writing step from step `start` on (counted as if one were
    taken there), each holding every message written so far."""
    items = item_bytes = 0
    since = replay_bytes = 0
    stored = retained = worst_depth = worst_bytes = 0
    for index, step in enumerate(steps):
        if not step.wrote:
            continue
        items += step.items
        item_bytes += step.item_bytes
        if index < start:
            continue
        since += 1
        replay_bytes += step.write_bytes
        if since >= cadence:
            stored += 1
            retained += snapshot_bytes(items, item_bytes, backend)
            since = replay_bytes = 0
        else:
            worst_depth = max(worst_depth, since)
            worst_bytes = max(worst_bytes, replay_bytes)
    return WhatIfRow(cadence, stored, retained, worst_depth, worst_bytes)


def full_what_if(steps: Sequence[_Step], backend: Backend, start: int = 0) -> WhatIfRow:
    """Full mode from step `start` on: Postgres stores a list blob per new version (each message-writing
    step); SQLite stores the list inline in every checkpoint once there is one, input checkpoints included."""
    items = item_bytes = 0
    written = False
    stored = retained = 0
    for index, step in enumerate(steps):
        if step.wrote:
            items += step.items
            item_bytes += step.item_bytes
            written = True
        if index < start:
            continue
        if step.wrote or (written and backend is Backend.SQLITE):
            stored += 1
            retained += list_bytes(items, item_bytes)
    return WhatIfRow(None, stored, retained, 0, 0)


def what_if_cadences(requested: Iterable[int] | None, expected: int | None, inferred: int | None) -> tuple[int, ...]:
    """The requested cadences (default 1, 10, 100, 1000) plus the expected K, or else the inferred one."""
    chosen = set(DEFAULT_WHAT_IF if requested is None else requested)
    own = expected if expected is not None else inferred
    if own is not None:
        chosen.add(own)
    return tuple(sorted(chosen))


def what_if(graph: LineageGraph, cadences: Iterable[int], epoch: Epoch | None = None) -> WhatIf:
    """Another K for the lineage, or from `epoch`'s first checkpoint on (the messages before it still count)."""
    steps = what_if_steps(graph)
    start = epoch.start if epoch is not None else 0
    rows = [delta_what_if(steps, cadence, graph.backend, start) for cadence in cadences]
    rows.append(full_what_if(steps, graph.backend, start))
    rewrote = any(record.removal_written or record.overwrite_written for record in graph.records[start:])
    written = sum(1 for step in steps[start:] if step.wrote)
    index = epoch.index if epoch is not None else None
    return WhatIf(tuple(rows), written, not rewrote, model_check(steps, graph.backend, start), index)
