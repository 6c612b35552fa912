"""Retention planning: which checkpoints of a lineage a policy may delete without breaking a read.

A policy names the checkpoints it wants kept; the closure widens that set until every kept checkpoint can
still be read. A read of a delta checkpoint replays the writes stored under its ancestors back to the
nearest one that stores a value for `messages` (its seed: a snapshot, or a list), so every kept
checkpoint keeps that chain, the seed included, and the writes stored under each link. Besides the
policy, a lineage's newest checkpoint and every checkpoint whose writes no child has applied yet (pending
writes are state) are kept. Everything else is deleted: whole rows, never rewritten.

The closure never needs a checkpoint older than the nearest seed, so a kept chain may start at a seed
whose parent goes: reads of it are whole, but history listing and branching stop there (the plan says
so per lineage). Pure functions over the records the readers give; nothing here reads or writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.rules import RuleCode
from deerflow_ckpt.store.records import Backend, CheckpointRecord, Lineage


class KeepReason(StrEnum):
    """Why a checkpoint stays, in the order a plan reports them (the first that applies)."""

    NEWEST = "newest"  # the lineage's newest checkpoint: what DeerFlow reads as the thread's state
    PENDING_WRITES = "pending_writes"  # writes stored under it that no child applied yet
    POLICY = "policy"  # the policy asked for it
    REPLAY_CHAIN = "replay_chain"  # a kept checkpoint's read replays through it (or starts from it)


@dataclass(frozen=True)
class RetentionPolicy:
    """What the operator asked to keep; a checkpoint any given rule keeps is kept.

    `keep_since` is a checkpoint id boundary (ids sort by write time): ids at or after it are kept.
    `only_safe_shapes` limits deletion to branches the newest checkpoint does not descend from.
    """

    keep_newest: int | None = None
    keep_since: str | None = None
    heads_only: bool = False
    only_safe_shapes: bool = False

    def asks_for_deletion(self) -> bool:
        return self.keep_newest is not None or self.keep_since is not None or self.heads_only or self.only_safe_shapes


@dataclass(frozen=True)
class BrokenRead:
    """A checkpoint the naive deletion keeps whose read it breaks, and the rule verify-shape would report."""

    checkpoint_id: str
    rule: RuleCode
    detail: str


@dataclass(frozen=True)
class FreedBytes:
    """Rows and stored bytes a set of deleted checkpoints takes with it."""

    checkpoints: int = 0
    checkpoint_bytes: int = 0
    writes: int = 0
    write_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return self.checkpoint_bytes + self.write_bytes


@dataclass(frozen=True)
class LineagePlan:
    thread_id: str
    checkpoint_ns: str
    checkpoints: int
    # Checkpoint ids the policy alone would keep, and what the plan keeps with the reason for each.
    policy_kept: frozenset[str]
    kept: dict[str, KeepReason]
    # Ids the plan deletes, oldest first, and what they free.
    deleted: tuple[str, ...]
    freed: FreedBytes
    # The kept checkpoints whose parent the plan deletes (each stores a seed: its reads stay whole).
    cut_at: tuple[str, ...]
    # The longest chain a kept checkpoint's read needed beyond the policy: (checkpoint id, links back).
    widest: tuple[str, int] | None
    # What keeping only the policy's checkpoints would delete that the plan keeps, and the reads it breaks.
    naive_deleted: tuple[str, ...] = ()
    naive_breaks: tuple[BrokenRead, ...] = ()

    @property
    def widened_by(self) -> int:
        """Checkpoints kept beyond what the policy asked for."""
        return len(self.kept) - len(self.policy_kept & self.kept.keys())


def _policy_keeps(graph: LineageGraph, policy: RetentionPolicy) -> set[str]:
    """The ids the policy's own rules keep (without the closure or the protected set)."""
    records = graph.records
    if not policy.asks_for_deletion():
        return {record.checkpoint_id for record in records}
    keep: set[str] = set()
    rules = 0
    if policy.keep_newest is not None:
        rules += 1
        newest = sorted(record.checkpoint_id for record in records)
        keep.update(newest[-policy.keep_newest :] if policy.keep_newest > 0 else [])
    if policy.keep_since is not None:
        rules += 1
        keep.update(record.checkpoint_id for record in records if record.checkpoint_id >= policy.keep_since)
    if policy.heads_only:
        rules += 1
        keep.update(record.checkpoint_id for record in graph.heads())
    if policy.only_safe_shapes:
        # Only branches off the newest checkpoint's chain may go: its whole chain stays.
        on_path = _newest_path(graph)
        if rules == 0:
            return on_path
        # Combined with other rules, a checkpoint goes only where both say it may.
        keep |= on_path
    return keep


def _newest_path(graph: LineageGraph) -> set[str]:
    head = graph.head()
    return {head.checkpoint_id, *(record.checkpoint_id for record in graph.ancestors(head))}


def _read_chain(graph: LineageGraph, record: CheckpointRecord) -> list[CheckpointRecord]:
    """The ancestors a read of `record` replays through, nearest first, ending at its seed (or the root).

    A checkpoint storing its own value needs none; otherwise the walk runs parent by parent to the first
    that stores one, as LangGraph's delta history walk does.
    """
    if graph.stores_seed(record):
        return []
    chain: list[CheckpointRecord] = []
    for ancestor in graph.ancestors(record):
        chain.append(ancestor)
        if graph.stores_seed(ancestor):
            break
    return chain


def _has_pending_writes(graph: LineageGraph, record: CheckpointRecord) -> bool:
    wrote = record.message_write_rows + record.other_write_rows > 0
    return wrote and record.checkpoint_id not in graph.children


def _freed(graph: LineageGraph, deleted: Iterable[str]) -> FreedBytes:
    checkpoints = checkpoint_bytes = writes = write_bytes = 0
    for checkpoint_id in deleted:
        record = graph.by_id[checkpoint_id]
        checkpoints += 1
        checkpoint_bytes += record.checkpoint_bytes + record.metadata_bytes
        writes += record.message_write_rows + record.other_write_rows
        write_bytes += record.message_write_bytes + record.other_write_bytes
    return FreedBytes(checkpoints, checkpoint_bytes, writes, write_bytes)


def _broken_reads(graph: LineageGraph, kept: set[str]) -> list[BrokenRead]:
    """The kept checkpoints whose reads need a checkpoint outside `kept`, with the rule verify-shape reports."""
    broken: list[BrokenRead] = []
    for record in graph.records:
        if record.checkpoint_id not in kept:
            continue
        chain = _read_chain(graph, record)
        missing = next((link for link in chain if link.checkpoint_id not in kept), None)
        if missing is None:
            continue
        parent_gone = record.parent_id is not None and record.parent_id not in kept
        rule = RuleCode.CK302 if parent_gone else RuleCode.CK304
        detail = f"its read replays from {len(chain)} checkpoint(s) back; {missing.checkpoint_id} would be deleted" + (
            "; its parent would be missing" if parent_gone else "; the writes stored there would be lost"
        )
        broken.append(BrokenRead(record.checkpoint_id, rule, detail))
    return broken


def plan_lineage(lineage: Lineage, backend: Backend, policy: RetentionPolicy) -> LineagePlan:
    """The plan for one lineage: the policy widened to every read it must keep, and what goes."""
    graph = LineageGraph(lineage, backend)
    policy_kept = _policy_keeps(graph, policy)
    kept: dict[str, KeepReason] = {}
    head = graph.head()
    kept[head.checkpoint_id] = KeepReason.NEWEST
    for record in graph.records:
        if _has_pending_writes(graph, record):
            kept.setdefault(record.checkpoint_id, KeepReason.PENDING_WRITES)
    for checkpoint_id in sorted(policy_kept):
        kept.setdefault(checkpoint_id, KeepReason.POLICY)
    # Every kept checkpoint's read chain stays; a chain only ever adds ancestors, each visited once.
    widest: tuple[str, int] | None = None
    for checkpoint_id in sorted(kept, reverse=True):
        record = graph.by_id[checkpoint_id]
        added = 0
        for link in _read_chain(graph, record):
            if link.checkpoint_id in kept:
                break
            kept[link.checkpoint_id] = KeepReason.REPLAY_CHAIN
            added += 1
        if added and (widest is None or added > widest[1]):
            widest = (checkpoint_id, added)
    deleted = tuple(sorted(record.checkpoint_id for record in graph.records if record.checkpoint_id not in kept))
    gone = set(deleted)
    cut_at = tuple(
        record.checkpoint_id
        for record in graph.records
        if record.checkpoint_id in kept and record.parent_id is not None and record.parent_id in gone
    )
    naive_kept = set(policy_kept)
    naive_deleted = tuple(sorted(kept.keys() - naive_kept))
    return LineagePlan(
        thread_id=lineage.thread_id,
        checkpoint_ns=lineage.checkpoint_ns,
        checkpoints=len(graph.records),
        policy_kept=frozenset(policy_kept),
        kept=kept,
        deleted=deleted,
        freed=_freed(graph, deleted),
        cut_at=cut_at,
        widest=widest,
        naive_deleted=naive_deleted,
        naive_breaks=tuple(_broken_reads(graph, naive_kept)) if naive_kept else (),
    )
