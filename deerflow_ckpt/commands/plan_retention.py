"""`plan retention`'s core: every lineage's records and row keys, read side by side, into one retention plan.

Nothing is deleted here or anywhere in ckpt: the plan is data (report/retention_json.py) or a script the
operator reviews and runs (report/retention_sql.py).
"""

from __future__ import annotations

import functools
import heapq
import os
import pickle
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import BinaryIO

from deerflow_ckpt.analysis.mode import ChannelMode, StatedMode
from deerflow_ckpt.analysis.retention import BrokenRead, FreedBytes, LineagePlan, RetentionPolicy, plan_lineage
from deerflow_ckpt.analysis.shape import ThreadKind
from deerflow_ckpt.commands.shares import run_shares, share_selections
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.store.readers import open_reader
from deerflow_ckpt.store.records import Backend, Lineage, LineageRows
from deerflow_ckpt.store.row_keys import lineage_rows, postgres_tables
from deerflow_ckpt.store.selection import ThreadSelection
from deerflow_ckpt.store.source import DatabaseChoice, DatabaseTarget, PostgresTarget
from deerflow_ckpt.store.sqlite_text import stored_bytes


@dataclass(frozen=True)
class RetentionRequest:
    choice: DatabaseChoice
    policy: RetentionPolicy
    # Only these threads (None: every thread).
    thread_ids: tuple[str, ...] | None = None
    # The deployment's mode (--mode, or the config that chose the database): in full mode, threads without a
    # delta checkpoint walk nowhere (analysis/retention.py, WalkRules).
    mode: StatedMode = field(default_factory=StatedMode)
    # How many of the lineages that free the most are kept at hand (the text lists them).
    top: int = 10


# Naive breaks kept at hand as examples, at most.
EXAMPLES = 3


@dataclass(kw_only=True)
class PlanTally:
    """What planning counts, for one worker's share of the threads and for the whole database alike.

    Every lineage the script or the json names is written to a spool file as it is planned (pickled, one after
    another), so memory holds one lineage however many the plan deletes; only the heaviest few, the examples
    and the lineages left whole are kept at hand.
    """

    threads: int = 0
    # Threads with a delta-mode checkpoint in any namespace: the store's word against a stated mode.
    delta_threads: int = 0
    lineages: int = 0
    checkpoints: int = 0
    kept: int = 0
    widened: int = 0
    freed: FreedBytes = field(default_factory=FreedBytes)
    naive_deleted: int = 0
    naive_breaks: Counter[str] = field(default_factory=Counter)
    # Lineages the script changes, the checkpoints it re-parents, the message-writing steps of current chains.
    deleting: int = 0
    reparented: int = 0
    branch_steps_lost: int = 0
    heaviest: list[LineagePlan] = field(default_factory=list)
    examples: list[tuple[LineagePlan, BrokenRead]] = field(default_factory=list)
    skipped: list[LineagePlan] = field(default_factory=list)
    # The spool files of the lineages the plan names, in thread order.
    spools: list[str] = field(default_factory=list)
    # The threads read, when they were named (--thread).
    named_found: set[str] = field(default_factory=set)

    def add(self, other: PlanTally, top: int) -> None:
        self.threads += other.threads
        self.delta_threads += other.delta_threads
        self.lineages += other.lineages
        self.checkpoints += other.checkpoints
        self.kept += other.kept
        self.widened += other.widened
        self.freed.add(other.freed)
        self.naive_deleted += other.naive_deleted
        self.naive_breaks.update(other.naive_breaks)
        self.deleting += other.deleting
        self.reparented += other.reparented
        self.branch_steps_lost += other.branch_steps_lost
        self.heaviest = _heaviest([*self.heaviest, *other.heaviest], top)
        self.examples = [*self.examples, *other.examples][:EXAMPLES]
        self.skipped += other.skipped
        self.spools += other.spools
        self.named_found |= other.named_found

    def count(self, plan: LineagePlan, spool: BinaryIO, top: int) -> None:
        self.lineages += 1
        self.checkpoints += plan.checkpoints
        if plan.skipped is not None:
            self.kept += plan.checkpoints
            self.skipped.append(plan)
            pickle.dump(plan, spool)
            return
        self.kept += len(plan.kept)
        self.widened += plan.widened_by
        self.freed.add(plan.freed)
        self.naive_deleted += len(plan.naive_deleted)
        self.naive_breaks.update(b.label for b in plan.naive_breaks)
        self.examples += [(plan, b) for b in plan.naive_breaks[: EXAMPLES - len(self.examples)]]
        if plan.deletion is not None and (plan.deleted or plan.reparented):
            self.deleting += 1
            self.reparented += len(plan.reparented)
            self.branch_steps_lost += plan.branch_steps_lost
            self.heaviest = _heaviest([*self.heaviest, plan], top)
        if plan.deleted or plan.reparented or plan.naive_breaks:
            pickle.dump(plan, spool)


def _heaviest(plans: list[LineagePlan], top: int) -> list[LineagePlan]:
    """The `top` lineages that free the most, heaviest first (then by key, so every run lists the same)."""
    return heapq.nsmallest(top, plans, key=lambda p: (-p.freed.total_bytes, p.thread_id, p.checkpoint_ns))


@dataclass(kw_only=True)
class RetentionPlan(PlanTally):
    database: str
    found_via: str
    backend: Backend
    policy: RetentionPolicy
    # When the plan was made (UTC, ISO 8601), for the script's header.
    planned_at: str
    # How a script names the checkpoint tables (Postgres: schema-qualified, quoted).
    tables: dict[str, str]
    # The database planned, for the command that runs the script on it (never shown with its password).
    target: DatabaseTarget
    # The deployment's mode as stated, and who stated it.
    mode: StatedMode = field(default_factory=StatedMode)
    # Where the spools are: removed with the plan (or at exit).
    scratch: tempfile.TemporaryDirectory[str] | None = None
    # How many processes read the threads, and why that many (--verbose says so).
    processes: int = 1
    processes_why: str = ""

    @property
    def full_mode_from(self) -> str | None:
        """Who says the deployment runs in full mode (None: nobody does), as the json has always named it."""
        return self.mode.source if self.mode.mode is ChannelMode.FULL else None

    def mode_conflict(self) -> str | None:
        """Why the threads read contradict the stated mode, or None."""
        kinds = Counter({ThreadKind.DELTA: self.delta_threads, ThreadKind.FULL: self.threads - self.delta_threads})
        return self.mode.conflict(kinds)

    def planned_lineages(self) -> Iterator[LineagePlan]:
        """Every lineage the plan changes, leaves whole, or whose naive deletion breaks a read; in key order."""
        for path in self.spools:
            with open(path, "rb") as spool:
                while True:
                    try:
                        yield pickle.load(spool)
                    except EOFError:
                        break

    def deleting_lineages(self) -> Iterator[LineagePlan]:
        """The lineages the script changes."""
        for plan in self.planned_lineages():
            if plan.skipped is None and plan.deletion is not None and (plan.deleted or plan.reparented):
                yield plan


def _rows_by_key(rows: Iterator[LineageRows]) -> Callable[[tuple[str, str]], LineageRows | None]:
    """A lookup of the row keys by lineage key, reading ahead only as far as the asked key: both reads share
    one order, so the buffer holds one lineage (more only where keys that are not text order differently)."""
    buffer: dict[tuple[str, str], LineageRows] = {}

    def take(key: tuple[str, str]) -> LineageRows | None:
        while key not in buffer:
            following = next(rows, None)
            if following is None:
                return None
            present = buffer.get(following.key)
            if present is None:
                buffer[following.key] = following
                if following.text_keys() and _byte_order(following.key) > _byte_order(key):
                    return None  # the asked lineage is gone from the second read
            else:  # a NULL and an empty namespace read as one lineage: their rows are one too, never text
                present.checkpoints += following.checkpoints
                present.writes += following.writes
                present.checkpoint_ns = None
        return buffer.pop(key)

    return take


def _byte_order(key: tuple[str, str]) -> tuple[bytes, bytes]:
    """Where both reads put a lineage of text keys: byte order (SQLite's BINARY, Postgres's "C"), in which a
    SQLite key that is not UTF-8 (read as surrogate escapes) sorts by its stored bytes, unlike in str order."""
    return stored_bytes(key[0]), stored_bytes(key[1])


def _plan_share(
    target: DatabaseTarget,
    policy: RetentionPolicy,
    full_mode: bool,
    top: int,
    scratch: str,
    selection: ThreadSelection,
    progress: Callable[[int], None] | None,
) -> PlanTally:
    """One share of the threads: each lineage planned from its records and its row keys, read side by side."""
    reader, backend = open_reader(target)
    rows_for = _rows_by_key(lineage_rows(target, selection))
    handle, path = tempfile.mkstemp(prefix="share-", suffix=".pickle", dir=scratch)
    tally = PlanTally(spools=[path])
    thread: str | None = None
    seen = 0
    thread_delta = False
    with os.fdopen(handle, "wb") as spool:
        for lineage in reader.lineages(selection):
            if lineage.thread_id != thread:
                if thread is not None and progress is not None:
                    progress(seen)
                thread, seen = lineage.thread_id, 0
                tally.threads += 1
                thread_delta = False
                if selection.thread_id is not None or selection.thread_ids is not None:
                    tally.named_found.add(thread)
            seen += len(lineage.records)
            rows = rows_for((lineage.thread_id, lineage.checkpoint_ns))
            tally.count(_plan(lineage, backend, policy, rows, full_mode), spool, top)
            # Planning linked the records (analysis/lineage.py), which tells delta-mode ones apart.
            if not thread_delta and any(record.delta for record in lineage.records):
                thread_delta = True
                tally.delta_threads += 1
    if thread is not None and progress is not None:
        progress(seen)
    return tally


def _plan(
    lineage: Lineage, backend: Backend, policy: RetentionPolicy, rows: LineageRows | None, full_mode: bool
) -> LineagePlan:
    plan = plan_lineage(lineage, backend, policy, rows, full_mode)
    if rows is None:
        plan.skipped = "it was deleted while it was read: plan it again"
    return plan


def plan_retention(
    request: RetentionRequest, progress: Callable[[int], None] | None = None, jobs: int | None = 1
) -> RetentionPlan:
    """The retention plan for the chosen database; `progress` gets the running checkpoint count."""
    target = request.choice.target
    reader, backend = open_reader(target)
    tables = postgres_tables(target) if isinstance(target, PostgresTarget) else {}
    scratch = tempfile.TemporaryDirectory(prefix="ckpt-plan-")
    plan = RetentionPlan(
        database=target.describe(),
        found_via=request.choice.found_via,
        backend=backend,
        policy=request.policy,
        planned_at=datetime.now(UTC).isoformat(timespec="seconds"),
        tables=tables,
        target=target,
        mode=request.mode,
        scratch=scratch,
    )
    split = share_selections(reader, jobs, request.thread_ids)
    plan.processes, plan.processes_why = len(split.selections), split.why
    full_mode = request.mode.mode is ChannelMode.FULL
    work = functools.partial(_plan_share, target, request.policy, full_mode, request.top, scratch.name)
    for share in run_shares(work, split.selections, progress):
        plan.add(share, request.top)
    missing = [t for t in request.thread_ids or () if t not in plan.named_found]
    if missing:
        raise StoreError(f"no checkpoints for thread {missing[0]!r} in {plan.database}")
    return plan
