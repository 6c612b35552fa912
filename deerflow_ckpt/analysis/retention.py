"""Retention planning: which checkpoints of a lineage a policy may delete without breaking a read.

A policy names the checkpoints it wants kept; the closure widens that set until every kept checkpoint can
still be read, and keeps what the retention contract protects (docs/retention.md):

- the lineage's newest checkpoint (what DeerFlow reads as the thread), and every checkpoint whose writes no
  child has applied yet (pending writes are state);
- each kept checkpoint's read chain: a checkpoint that stores no messages value is read by replaying the
  writes stored under its ancestors back to the nearest one where the saver's walk stops (its seed);
- branch ancestors as far as storage shows them: a kept checkpoint off the newest checkpoint's chain keeps
  its way back to the checkpoint its branch forked from.

Everything else is deleted, whole rows. A kept checkpoint whose parent goes is re-parented onto its nearest
kept ancestor (no parent when none is kept), so no parent id is left dangling; the closure guarantees such a
checkpoint stores its own value, so its reads stay whole. Deleting older checkpoints of the newest one's
chain costs branch/regenerate from the turns before the cut; the plan counts them, and `only_safe_shapes`
keeps that chain whole.

Pure functions over the records the readers give; nothing here reads or writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.rules import RuleCode
from deerflow_ckpt.store.records import Backend, CheckpointRecord, Lineage, LineageRows, Shape

# Postgres: the saver's walk stops only at a checkpoint whose inline value marks a snapshot (savers 3.1.x;
# 3.2 also stops at any blob at the version, so stopping only here is the reading both agree on).
_POSTGRES_WALK_STOPS = frozenset({Shape.SNAPSHOT, Shape.DANGLING_MARKER, Shape.MARKER_WITHOUT_SNAPSHOT})
_SNAPSHOTS = frozenset({Shape.SNAPSHOT, Shape.SNAPSHOT_AT_VERSION})


class KeepReason(StrEnum):
    """Why a checkpoint stays, in the order a plan reports them (the first that applies)."""

    NEWEST = "newest"  # the lineage's newest checkpoint: what DeerFlow reads as the thread's state
    PENDING_WRITES = "pending_writes"  # writes stored under it that no child applied yet
    POLICY = "policy"  # the policy asked for it
    BRANCH = "branch_ancestor"  # a kept branch's way back to the newest checkpoint's chain
    REPLAY_CHAIN = "replay_chain"  # a kept checkpoint's read replays through it (or starts from it)


@dataclass(frozen=True)
class RetentionPolicy:
    """What the operator asked to keep; a checkpoint any given rule keeps is kept.

    `keep_since` is a checkpoint id boundary (ids sort by write time): ids at or after it are kept.
    `heads_only` keeps each lineage's newest checkpoint. `only_safe_shapes` deletes only what the retention
    contract proves safe: branches off the newest checkpoint's chain (leaf sibling branches, trailing
    duration-only leaves); combined with other rules, a checkpoint goes only where both say it may.
    """

    keep_newest: int | None = None
    keep_since: str | None = None
    heads_only: bool = False
    only_safe_shapes: bool = False

    def asks_for_deletion(self) -> bool:
        return self.keep_newest is not None or self.keep_since is not None or self.heads_only or self.only_safe_shapes

    def describe(self) -> str:
        """The policy as the options spell it."""
        parts: list[str] = []
        if self.keep_newest is not None:
            parts.append(f"--keep-newest {self.keep_newest}")
        if self.keep_since is not None:
            parts.append(f"--keep-since {self.keep_since}")
        if self.heads_only:
            parts.append("--keep-heads-only")
        if self.only_safe_shapes:
            parts.append("--only-safe-shapes")
        return " ".join(parts) or "keep everything"


class BreakKind(StrEnum):
    """What the naive deletion breaks at a kept checkpoint."""

    THREAD = "thread gone"  # the newest checkpoint goes: nothing is left to read
    READ = "read"  # its own read replays through a deleted checkpoint
    NEXT_TURN = "next turn"  # it reads whole, but the walk of a turn written after it passes a deleted one


@dataclass(frozen=True)
class BrokenRead:
    """A checkpoint the naive deletion breaks, how, and the rule verify-shape would then report there (None
    where it reports none: the thread is gone, the break is further up the chain, or only the next turn
    breaks)."""

    checkpoint_id: str
    kind: BreakKind
    rule: RuleCode | None
    detail: str

    @property
    def label(self) -> str:
        """The rule, or what breaks where no rule is reported: how breaks are counted."""
        return str(self.rule) if self.rule is not None else str(self.kind)


@dataclass
class FreedBytes:
    """Rows and stored bytes a set of deleted checkpoints takes with it (blobs: Postgres only)."""

    checkpoints: int = 0
    checkpoint_bytes: int = 0
    writes: int = 0
    write_bytes: int = 0
    blobs: int = 0
    blob_bytes: int = 0

    @property
    def rows(self) -> int:
        return self.checkpoints + self.writes + self.blobs

    @property
    def total_bytes(self) -> int:
        return self.checkpoint_bytes + self.write_bytes + self.blob_bytes

    def add(self, other: FreedBytes) -> None:
        self.checkpoints += other.checkpoints
        self.checkpoint_bytes += other.checkpoint_bytes
        self.writes += other.writes
        self.write_bytes += other.write_bytes
        self.blobs += other.blobs
        self.blob_bytes += other.blob_bytes


@dataclass(frozen=True)
class Reparent:
    """A kept checkpoint whose parent the plan deletes: its parent id becomes `new_parent` (None: a root)."""

    checkpoint_id: str
    old_parent: str
    new_parent: str | None


@dataclass
class LineagePlan:
    thread_id: str
    checkpoint_ns: str
    checkpoints: int
    # Checkpoint ids the policy alone would keep, and what the plan keeps with the reason for each.
    policy_kept: frozenset[str]
    kept: dict[str, KeepReason]
    # Ids the plan deletes, in id order, and the kept checkpoints whose parent goes.
    deleted: tuple[str, ...]
    reparented: tuple[Reparent, ...]
    freed: FreedBytes
    # The longest read chain a kept checkpoint needed beyond the policy: (checkpoint id, links back).
    widest: tuple[str, int] | None
    # Message-writing steps of the newest checkpoint's chain the plan deletes: branch/regenerate from the
    # turns they wrote can no longer find their checkpoint.
    branch_steps_lost: int
    # What keeping only the policy's checkpoints would delete that the plan keeps, and the reads it breaks.
    naive_deleted: tuple[str, ...] = ()
    naive_breaks: tuple[BrokenRead, ...] = ()
    # The rows to delete by full primary key (from the row keys read beside the records), or why the
    # lineage is left whole: its keys are not text, or it changed between the two reads.
    deletion: LineageDeletion | None = None
    skipped: str | None = None
    # Why the plan keeps more than the chains show, when that needs saying (a full-mode thread on Postgres).
    note: str | None = None

    @property
    def widened_by(self) -> int:
        """Checkpoints kept beyond what the policy asked for."""
        return len(self.kept) - len(self.policy_kept & self.kept.keys())


@dataclass
class LineageDeletion:
    """The rows a lineage's plan deletes, each by its full primary key, and what the lineage looked like when
    planned (the script's guard refuses to run if it changed)."""

    # Write rows: (checkpoint_id, task_id, idx); Postgres blobs: (channel, version).
    writes: list[tuple[str, str, int]] = field(default_factory=list)
    blobs: list[tuple[str, str]] = field(default_factory=list)
    # The guard: how many checkpoints and write rows the lineage had, and its greatest checkpoint id.
    guard_checkpoints: int = 0
    guard_newest: str = ""
    guard_writes: int = 0


@dataclass(frozen=True)
class WalkRules:
    """Where the saver's replay walk stops, for one lineage.

    `full_mode`: the deployment runs in full mode (its config says so), where nothing walks: a thread with no
    delta checkpoint is then read from its stored lists alone, on Postgres too.
    """

    backend: Backend
    full_mode: bool = False

    def stops(self, record: CheckpointRecord, full_thread: bool) -> bool:
        """A walk from a descendant stops at `record`, and a read of `record` itself needs no ancestor.

        Nothing before a checkpoint that has no messages version matters to messages. SQLite stops at any
        stored value but a plain list a delta checkpoint stored (CK101): the delta counters after it count back
        to the last snapshot, and verify-shape checks that chain (CK304). Postgres stops only at the snapshot
        marker: DeerFlow's saver 3.1.x seeds its walk only there (3.2 also at any blob at the version).
        """
        if record.messages_version is None:
            return True
        if self.backend is Backend.POSTGRES and not (self.full_mode and full_thread):
            return record.messages in _POSTGRES_WALK_STOPS
        return record.seed and (record.messages in _SNAPSHOTS or not record.delta)


def read_chain(
    graph: LineageGraph, record: CheckpointRecord, rules: WalkRules | None = None, full_thread: bool = False
) -> list[CheckpointRecord]:
    """The ancestors that must stay with `record`, nearest first: where a read of it, or of a child written
    after it, walks to, up to and including where the walk stops (the root at the latest)."""
    rules = rules or WalkRules(graph.backend)
    if rules.stops(record, full_thread):
        return []
    chain: list[CheckpointRecord] = []
    current = record.parent_record
    # At most one pass over the lineage: a cycle of parent ids (CK303) ends the walk there.
    for _ in range(len(graph.records)):
        if current is None:
            break
        chain.append(current)
        if rules.stops(current, full_thread):
            break
        current = current.parent_record
    return chain


def _head_path(graph: LineageGraph) -> set[str]:
    """The newest checkpoint and its ancestors."""
    current: CheckpointRecord | None = graph.head()
    path: set[str] = set()
    while current is not None and current.checkpoint_id not in path:
        path.add(current.checkpoint_id)
        current = current.parent_record
    return path


def _policy_keeps(graph: LineageGraph, policy: RetentionPolicy, head_path: set[str]) -> set[str]:
    """The ids the policy's own rules keep (without the closure or the protected set)."""
    records = graph.records
    if not policy.asks_for_deletion():
        return {record.checkpoint_id for record in records}
    keep: set[str] = set()
    if policy.keep_newest is not None and policy.keep_newest > 0:
        # Records come in checkpoint id order, which is write order.
        keep.update(record.checkpoint_id for record in records[-policy.keep_newest :])
    if policy.keep_since is not None:
        keep.update(record.checkpoint_id for record in records if record.checkpoint_id >= policy.keep_since)
    if policy.heads_only:
        keep.add(graph.head().checkpoint_id)
    if policy.only_safe_shapes:
        only = policy.keep_newest is None and policy.keep_since is None and not policy.heads_only
        keep = set(head_path) if only else keep | head_path
    return keep


def _written(graph: LineageGraph, rows: LineageRows | None) -> set[str]:
    """Checkpoints with write rows stored under them: from the row keys when read (every write, None values
    included), else from the records' counts."""
    if rows is not None:
        return {str(checkpoint_id) for checkpoint_id, _, _ in rows.writes}
    return {r.checkpoint_id for r in graph.records if r.message_write_rows + r.other_write_rows > 0}


def _freed(graph: LineageGraph, deleted: Iterable[str]) -> FreedBytes:
    freed = FreedBytes()
    for checkpoint_id in deleted:
        record = graph.by_id[checkpoint_id]
        freed.checkpoints += 1
        freed.checkpoint_bytes += record.checkpoint_bytes + record.metadata_bytes
        freed.writes += record.message_write_rows + record.other_write_rows
        freed.write_bytes += record.message_write_bytes + record.other_write_bytes
    return freed


def _deletion(
    graph: LineageGraph, rows: LineageRows, kept: Iterable[str], deleted: tuple[str, ...], freed: FreedBytes
) -> LineageDeletion | str:
    """The rows `deleted` takes with it, named by full key, or why the lineage must be left whole."""
    if not rows.text_keys():
        return "its keys are not all text: a script could not name its rows exactly"
    if rows.checkpoints != len(graph.records) or rows.newest != graph.head().checkpoint_id:
        return "it changed while it was read (a writer is active): plan it again"
    # The deleted ids themselves (one string each, shared with the plan), keyed by the rows' equal strings.
    gone = {checkpoint_id: checkpoint_id for checkpoint_id in deleted}
    writes: list[tuple[str, str, int]] = []
    for checkpoint_id, task_id, idx in rows.writes:
        owner = gone.get(checkpoint_id)  # type: ignore[call-overload]
        if owner is not None:
            if type(task_id) is not str or type(idx) is not int:
                return "its write rows' keys are not all text: a script could not name them exactly"
            writes.append((owner, task_id, idx))
    # A blob goes when a deleted checkpoint names its version and no kept one does (Postgres).
    blobs: list[tuple[str, str]] = []
    if rows.blobs:
        kept_versions = {item for cid in kept for item in rows.versions.get(cid, {}).items()}
        gone_versions = {item for cid in deleted for item in rows.versions.get(cid, {}).items()} - kept_versions
        for channel, version, size in rows.blobs:
            if (channel, version) in gone_versions:
                blobs.append((str(channel), str(version)))
                freed.blob_bytes += size
    freed.writes = len(writes)
    freed.blobs = len(blobs)
    return LineageDeletion(
        writes=writes,
        blobs=blobs,
        guard_checkpoints=rows.checkpoints,
        guard_newest=str(rows.newest),
        guard_writes=len(rows.writes),
    )


def _reads_alone(record: CheckpointRecord) -> bool:
    """A read of `record` itself needs no ancestor: it stores its messages value (a plain list a delta
    checkpoint stored counts as none, as its counters reach back to the last snapshot), or has none."""
    if record.messages_version is None:
        return True
    return record.seed and not (record.delta and record.messages not in _SNAPSHOTS)


def _broken_reads(graph: LineageGraph, kept: set[str], rules: WalkRules, full_thread: bool) -> list[BrokenRead]:
    """What deleting everything outside `kept` breaks, with the rule verify-shape would report there."""
    head = graph.head()
    if head.checkpoint_id not in kept:
        detail = "the thread's newest checkpoint goes: DeerFlow finds no state"
        return [BrokenRead(head.checkpoint_id, BreakKind.THREAD, None, detail)]
    broken: list[BrokenRead] = []
    for record in graph.records:
        if record.checkpoint_id not in kept:
            continue
        chain = read_chain(graph, record, rules, full_thread)
        missing = next((link for link in chain if link.checkpoint_id not in kept), None)
        if missing is None:
            continue
        if _reads_alone(record):
            detail = (
                f"it reads whole, but a turn written after it walks past it back to {missing.checkpoint_id}, which "
                "would be deleted (DeerFlow's pinned Postgres saver): that turn loses the history before it"
            )
            broken.append(BrokenRead(record.checkpoint_id, BreakKind.NEXT_TURN, None, detail))
        elif record.parent_id is not None and record.parent_id not in kept:
            detail = f"its read replays from {len(chain)} checkpoint(s) back; its parent would be missing"
            broken.append(BrokenRead(record.checkpoint_id, BreakKind.READ, RuleCode.CK302, detail))
        else:
            detail = (
                f"its read replays through {missing.checkpoint_id}, which would be deleted: the messages written "
                "before it are lost (verify-shape reports the break where the chain ends, CK302)"
            )
            broken.append(BrokenRead(record.checkpoint_id, BreakKind.READ, None, detail))
    return broken


def _keep_branch_ancestors(graph: LineageGraph, kept: dict[str, KeepReason], head_path: set[str]) -> None:
    """Each kept checkpoint off the newest checkpoint's chain keeps its way back to where its branch forked."""
    for checkpoint_id in sorted(kept, reverse=True):
        if checkpoint_id in head_path:
            continue
        for ancestor in graph.ancestors(graph.by_id[checkpoint_id]):
            if ancestor.checkpoint_id in kept and ancestor.checkpoint_id not in head_path:
                break  # its own way back is kept already
            kept.setdefault(ancestor.checkpoint_id, KeepReason.BRANCH)
            if ancestor.checkpoint_id in head_path:
                break


def _keep_read_chains(
    graph: LineageGraph, kept: dict[str, KeepReason], rules: WalkRules, full_thread: bool
) -> tuple[str, int] | None:
    """Every kept checkpoint keeps its read chain; returns the widest addition (checkpoint id, links)."""
    widest: tuple[str, int] | None = None
    # Checkpoints whose onward chain to the walk's stop is kept already: a later walk reaching one is done.
    chain_kept: set[str] = set()
    for checkpoint_id in sorted(kept, reverse=True):
        record = graph.by_id[checkpoint_id]
        added = 0
        for link in read_chain(graph, record, rules, full_thread):
            if link.checkpoint_id in chain_kept:
                break
            if link.checkpoint_id not in kept:
                kept[link.checkpoint_id] = KeepReason.REPLAY_CHAIN
                added += 1
            chain_kept.add(link.checkpoint_id)
        chain_kept.add(checkpoint_id)
        if added and (widest is None or added > widest[1]):
            widest = (checkpoint_id, added)
    return widest


def _reparents(graph: LineageGraph, kept: dict[str, KeepReason], gone: set[str], written: set[str]) -> list[Reparent]:
    """A kept checkpoint whose parent goes is re-parented onto its nearest kept ancestor only across deleted
    checkpoints that hold no writes (copies of one state, such as duration-only links); otherwise it becomes a
    root. Across steps that changed the state, DeerFlow's regenerate walk would pick a wrong earlier state
    without a word; a missing link makes it fall back to its history scan instead."""
    reparented: list[Reparent] = []
    for record in graph.records:
        if record.checkpoint_id not in kept or record.parent_id is None or record.parent_id not in gone:
            continue
        new_parent = None
        for ancestor in graph.ancestors(record):
            if ancestor.checkpoint_id in kept:
                new_parent = ancestor.checkpoint_id
                break
            if ancestor.checkpoint_id in written:
                break
        reparented.append(Reparent(record.checkpoint_id, record.parent_id, new_parent))
    return reparented


def plan_lineage(
    lineage: Lineage,
    backend: Backend,
    policy: RetentionPolicy,
    rows: LineageRows | None = None,
    full_mode: bool = False,
) -> LineagePlan:
    """The plan for one lineage: the policy widened to every read it must keep, and what goes. With the
    lineage's row keys (store/row_keys.py) it also names every row to delete, for a script. `full_mode`: the
    deployment runs in full mode (WalkRules)."""
    graph = LineageGraph(lineage, backend)
    rules = WalkRules(backend, full_mode)
    full_thread = not any(record.delta for record in graph.records)
    head = graph.head()
    head_path = _head_path(graph)
    policy_kept = _policy_keeps(graph, policy, head_path)
    kept: dict[str, KeepReason] = {head.checkpoint_id: KeepReason.NEWEST}
    # Pending writes are state: writes stored under a checkpoint no child has applied yet.
    written = _written(graph, rows)
    for checkpoint_id in sorted(written - graph.children.keys()):
        if checkpoint_id in graph.by_id:
            kept.setdefault(checkpoint_id, KeepReason.PENDING_WRITES)
    for checkpoint_id in sorted(policy_kept):
        kept.setdefault(checkpoint_id, KeepReason.POLICY)
    _keep_branch_ancestors(graph, kept, head_path)
    widest = _keep_read_chains(graph, kept, rules, full_thread)
    deleted = tuple(record.checkpoint_id for record in graph.records if record.checkpoint_id not in kept)
    gone = set(deleted)
    naive_kept = set(policy_kept)
    plan = LineagePlan(
        thread_id=lineage.thread_id,
        checkpoint_ns=lineage.checkpoint_ns,
        checkpoints=len(graph.records),
        policy_kept=frozenset(policy_kept),
        kept=kept,
        deleted=deleted,
        reparented=tuple(_reparents(graph, kept, gone, written)),
        freed=_freed(graph, deleted),
        widest=widest,
        branch_steps_lost=sum(graph.by_id[cid].message_write_rows > 0 for cid in head_path & gone),
        naive_deleted=tuple(sorted(kept.keys() - naive_kept)),
        naive_breaks=tuple(_broken_reads(graph, naive_kept, rules, full_thread)) if naive_kept != kept.keys() else (),
    )
    if full_thread and backend is Backend.POSTGRES and not full_mode and plan.widest is not None:
        plan.note = (
            "a full-mode thread on Postgres keeps its history back to its start: a delta-mode process continuing "
            "it walks past stored lists with DeerFlow's saver 3.1.x (--mode full, or a config in full mode, lets it go)"
        )
    if rows is not None:
        deletion = _deletion(graph, rows, kept, deleted, plan.freed)
        if isinstance(deletion, str):
            plan.skipped = deletion
        else:
            plan.deletion = deletion
    return plan
