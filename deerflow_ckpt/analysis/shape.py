"""Storage-shape rules over one lineage: pure functions from records to findings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from enum import StrEnum

from deerflow_ckpt.analysis.cadence import DEFAULT_SUPERSTEP_BOUND, CadenceProfile, cadence_profile
from deerflow_ckpt.analysis.epochs import Epoch, FirstSink, lineage_epochs
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.timeline import TimelineSettings
from deerflow_ckpt.dataclass import dataclass, field, replace
from deerflow_ckpt.rules import RuleCode, Severity, rule
from deerflow_ckpt.store.clock import write_time_ns
from deerflow_ckpt.store.records import (
    CheckpointRecord,
    Lineage,
    Shape,
)

CONVERSATION_NS = ""


@dataclass(frozen=True)
class Finding:
    rule: RuleCode
    severity: Severity
    thread_id: str | None
    checkpoint_ns: str | None
    checkpoint_id: str | None
    step: int | None
    message: str

    @property
    def explanation(self) -> str:
        """The one-line message followed by what the operator loses and should do."""
        return f"{self.message}; {rule(self.rule).impact}"

    def graded(self, severity: Severity) -> Finding:
        """This finding at a project's severity (rule_selection.py)."""
        return self if severity is self.severity else replace(self, severity=severity)


@dataclass(frozen=True)
class ShapeSettings:
    # The cadence every writer should use (--cadence or config); None means infer it.
    expected_cadence: int | None = None
    superstep_bound: int = DEFAULT_SUPERSTEP_BOUND
    # Judge only checkpoints whose id sorts at or after this one (store.clock.boundary_id of --since).
    since: str | None = None
    timeline: TimelineSettings = field(default_factory=TimelineSettings)
    # verify-shape --deep: also prove every stored message list against the replay of its writes.
    deep: bool = False
    # --allow-type: the app's own (module, name) types CK105 trusts besides LangGraph's safe ones (none by default).
    allowed_types: frozenset[tuple[str, str]] = frozenset()


class ThreadKind(StrEnum):
    DELTA = "delta"
    FULL = "full"
    MIGRATED = "migrated"  # full-mode history with stored messages, continued in delta mode


@dataclass
class LineageResult:
    lineage: Lineage
    graph: LineageGraph
    profile: CadenceProfile
    findings: list[Finding] = field(default_factory=list)
    # Cadence epochs of a conversation lineage (empty for subgraph namespaces, which carry their own K).
    epochs: list[Epoch] = field(default_factory=list)

    @property
    def kind(self) -> ThreadKind:
        graph = self.graph
        records = graph.records  # in checkpoint_id order: everything before the first delta one is full
        first_delta = next((index for index, record in enumerate(records) if record.delta), None)
        if first_delta is None:
            return ThreadKind.FULL
        seeded_before = any(graph.stores_list_here(record) for record in records[:first_delta])
        return ThreadKind.MIGRATED if seeded_before else ThreadKind.DELTA


def _finding(code: RuleCode, record: CheckpointRecord | None, lineage: Lineage, message: str) -> Finding:
    return Finding(
        rule=code,
        severity=rule(code).severity,
        thread_id=lineage.thread_id,
        checkpoint_ns=lineage.checkpoint_ns,
        checkpoint_id=record.checkpoint_id if record is not None else None,
        step=record.step if record is not None else None,
        message=message,
    )


def _undecodable(record: CheckpointRecord) -> bool:
    """CK104 already says it: a blob that cannot be decoded is not also reported as a wrong shape."""
    return any(problem.rule == RuleCode.CK104 for problem in record.problems)


def _step(record: CheckpointRecord) -> str:
    return f"step {record.step}" if record.step is not None else "this checkpoint"


def allow_hint(named: tuple[str, str]) -> str:
    """How to trust a type that is the app's own: the flag, the config key, and LangGraph's allowlist entry."""
    module, name = named
    return (
        f"if {module}.{name} is the app's own type, trust it with --allow-type {module}:{name} "
        f'(allowed_types = ["{module}:{name}"]; LangGraph\'s allowed_msgpack_modules entry ("{module}", "{name}"))'
    )


class _LineageChecker:
    def __init__(self, graph: LineageGraph, profile: CadenceProfile, settings: ShapeSettings) -> None:
        self.graph = graph
        self.profile = profile
        self.settings = settings
        self.lineage = graph.lineage
        self.findings: list[Finding] = []
        self.severed_roots: set[str] = set()
        self.broken_links: set[str] = set()
        self.since = settings.since

    def add(self, code: RuleCode, record: CheckpointRecord | None, message: str) -> None:
        self.findings.append(_finding(code, record, self.lineage, message))

    def judged(self, record: CheckpointRecord) -> bool:
        """Written at or after --since (ids sort by write time); everything is judged without it, and so is
        a checkpoint whose id tells no write time."""
        since = self.since
        return since is None or record.checkpoint_id >= since or write_time_ns(record.checkpoint_id) is None

    def run(self) -> list[Finding]:
        self.check_decoding()
        self.check_lineage()
        self.check_message_storage()
        self.check_counters()
        self.check_cadence()
        self.check_pruned_writes()
        self.check_forks()
        self.check_mode_changes()
        return self.findings

    def check_decoding(self) -> None:
        """CK104/CK105: what the store found while reading each row."""
        for record in self.graph.records:
            if record.problems and self.judged(record):
                for problem in record.problems:
                    if problem.allowable is None:
                        self.add(problem.rule, record, problem.detail)
                    elif problem.allowable not in self.settings.allowed_types:
                        self.add(problem.rule, record, f"{problem.detail}; {allow_hint(problem.allowable)}")

    def check_lineage(self) -> None:
        """CK301 severed lineage, CK302 missing parent (CK306 at a stored value), CK303 misordered parent or cycle."""
        graph = self.graph
        for record in graph.records:
            if record.parent_id is None:
                continue
            if record.parent_id not in graph.by_id:
                self.broken_links.add(record.checkpoint_id)
                if not self.judged(record):
                    continue
                if graph.stores_seed(record):
                    # Reads stop at a stored value anyway: only the history before it is gone (a retention cut).
                    detail = (
                        f"parent {record.parent_id} is gone; this checkpoint stores the messages value reads start from"
                    )
                    self.add(RuleCode.CK306, record, detail)
                else:
                    self.add(RuleCode.CK302, record, f"parent {record.parent_id} names no checkpoint in this lineage")
            elif record.parent_id >= record.checkpoint_id:
                self.broken_links.add(record.checkpoint_id)
                if not self.judged(record):
                    continue
                cycle = any(a.checkpoint_id == record.checkpoint_id for a in _walk_with_cycle(graph, record))
                shape = "forms a cycle" if cycle else "does not sort below its child"
                self.add(RuleCode.CK303, record, f"parent {record.parent_id} {shape}")
        roots = graph.roots()
        if len(roots) < 2:
            return
        first = min(roots, key=lambda record: record.checkpoint_id)
        for root in roots:
            starts_thread = root is first and (root.step is None or root.step < 0 or root.source == "update")
            if starts_thread or root.seed or not root.delta:
                continue
            self.severed_roots.add(root.checkpoint_id)
            if not self.judged(root):
                continue
            self.add(
                RuleCode.CK301,
                root,
                f"parentless checkpoint at {_step(root)} stores no messages: later reads start from it "
                "without the earlier history",
            )

    def check_message_storage(self) -> None:
        """CK101 plain lists in delta checkpoints, CK102 markers without snapshots, CK103 empty snapshots."""
        graph = self.graph
        since = self.since
        for record in graph.records:
            if since is not None and record.checkpoint_id < since and not self.judged(record):  # cheap test first
                continue
            if record.messages is Shape.DANGLING_MARKER:
                self.add(RuleCode.CK102, record, "snapshot marker true, but no blob is stored at its messages version")
            elif record.messages is Shape.MARKER_WITHOUT_SNAPSHOT and not _undecodable(record):
                self.add(RuleCode.CK102, record, "snapshot marker true, but the blob at its version is not a snapshot")
            if record.messages is Shape.LIST and record.delta and record.metadata_ok and graph.stores_list_here(record):
                self.add(RuleCode.CK101, record, f"delta checkpoint at {_step(record)} stores a plain message list")
            if record.snapshot_step and record.seed_empty and self._had_messages_unremoved(record):
                self.add(
                    RuleCode.CK103,
                    record,
                    f"snapshot at {_step(record)} holds no messages, though earlier steps wrote some and no "
                    "removal or Overwrite came between",
                )

    def _had_messages_unremoved(self, record: CheckpointRecord) -> bool:
        """Earlier history had messages, and nothing since could legitimately have emptied it."""
        graph = self.graph
        had_messages = False
        for ancestor in graph.ancestors(record):
            if ancestor.overwrite_written or ancestor.removal_written:
                return False
            if ancestor.message_write_rows > 0:
                had_messages = True
            if ancestor.seed:
                return had_messages or not ancestor.seed_empty
        return had_messages

    def check_counters(self) -> None:
        """CK201 updates at or above K, CK203 supersteps at or above the bound, CK204 reset with no snapshot."""
        graph = self.graph
        expected = self.settings.expected_cadence if self._cadence_applies() else None
        bound = self.settings.superstep_bound
        over_cadence = [
            r for r in graph.records if expected is not None and (r.updates or 0) >= expected and self.judged(r)
        ]
        if over_cadence and expected is not None:
            first, top = over_cadence[0], max(r.updates or 0 for r in over_cadence)
            self.add(
                RuleCode.CK201,
                first,
                f"updates counter reaches {top} without a snapshot (first at {_step(first)}, "
                f"{len(over_cadence)} checkpoints at or above the expected cadence {expected})",
            )
        over_bound = [r for r in graph.records if (r.supersteps or 0) >= bound and self.judged(r)]
        if over_bound:
            first, top = over_bound[0], max(r.supersteps or 0 for r in over_bound)
            self.add(
                RuleCode.CK203,
                first,
                f"supersteps counter reaches {top} without a snapshot (first at {_step(first)}, "
                f"{len(over_bound)} checkpoints at or above the bound {bound})",
            )
        for record in graph.records:
            parent = record.parent_record
            stripped = (
                record.updates is None
                and record.supersteps is None
                and parent is not None
                and record.delta
                and parent.delta
                and not record.seed
                and record.readable
                and parent.metadata_ok
            )
            if stripped and self.judged(record):
                self.add(RuleCode.CK204, record, f"counters reset at {_step(record)} but no snapshot is stored there")

    def _cadence_applies(self) -> bool:
        # The configured cadence is the conversation graph's; subgraph namespaces carry their own.
        return self.lineage.checkpoint_ns == CONVERSATION_NS

    def check_cadence(self) -> None:
        """CK202: intervals that contradict the expected K, or each other (mixed writers)."""
        expected = self.settings.expected_cadence if self._cadence_applies() else None
        if expected is not None:
            off = [
                e
                for e in self.profile.snapshots
                if not e.trigger.forced and e.counter_interval != expected and self.judged(e.record)
            ]
            if off:
                intervals = ", ".join(str(e.counter_interval) for e in off[:8]) + (", ..." if len(off) > 8 else "")
                plural = "s" if len(off) > 1 else ""
                self.add(
                    RuleCode.CK202,
                    off[0].record,
                    f"{len(off)} cadence snapshot{plural} closed intervals other than the expected cadence "
                    f"{expected} (message-writing steps: {intervals}; first at {_step(off[0].record)})",
                )
            return
        bounds = self.profile.bounds
        if bounds.contradictory:
            assert bounds.lower_at is not None and bounds.upper_at is not None
            cadence_events = [e for e in self.profile.snapshots if not e.trigger.forced and self.judged(e.record)]
            if not cadence_events:
                return
            # Point at the longest interval: where a smaller-K writer took over from a larger-K one.
            longest = max(cadence_events, key=lambda e: (e.counter_interval, e.record.checkpoint_id))
            self.add(
                RuleCode.CK202,
                longest.record,
                f"mixed writers: a snapshot at {_step(longest.record)} closed {longest.counter_interval} writes, "
                f"another at {_step(bounds.upper_at)} closed {bounds.upper}; the counters need K >= "
                f"{bounds.lower} (at {_step(bounds.lower_at)})",
            )

    def check_pruned_writes(self) -> None:
        """CK304: the counters record more message writes than the chain back to the last snapshot holds."""
        graph = self.graph
        # Message-writing tasks on the chain since the counters last reset; None where that is unknown.
        since_reset: dict[str, int | None] = {}
        broken = self.broken_links | self.severed_roots
        short: list[tuple[CheckpointRecord, int]] = []
        for record in graph.records:
            parent = record.parent_record
            if record.checkpoint_id in broken or not record.readable:
                since_reset[record.checkpoint_id] = None
                continue
            if parent is None:
                since_reset[record.checkpoint_id] = 0
                continue
            resets = parent.snapshot_step or not parent.delta or parent.updates is None
            below = 0 if resets and parent.readable else since_reset.get(parent.checkpoint_id)
            found = None if below is None else below + parent.message_write_tasks
            since_reset[record.checkpoint_id] = found
            short_here = found is not None and record.updates is not None and record.delta and record.updates > found
            if short_here and self.judged(record):
                assert found is not None
                short.append((record, found))
        if short:
            first, (last, found) = short[0][0], short[-1]
            assert last.updates is not None
            self.add(
                RuleCode.CK304,
                last,
                f"counters at {_step(last)} record {last.updates} message writes since the last snapshot, but "
                f"only {found} are stored on the chain (first short at {_step(first)})",
            )

    def check_forks(self) -> None:
        """CK305: a delta checkpoint continued by more than one child; reported at each later branch."""
        graph = self.graph
        forked = {parent_id for parent_id, children in graph.children.items() if len(children) > 1}
        for record in graph.records if forked else ():
            if record.checkpoint_id not in forked:
                continue
            children = [c for c in graph.children[record.checkpoint_id] if c.checkpoint_id not in self.broken_links]
            if len(children) < 2 or not (record.delta or any(c.delta for c in children)):
                continue
            for branch in sorted(children, key=lambda c: c.checkpoint_id)[1:]:
                if not self.judged(branch):
                    continue
                self.add(
                    RuleCode.CK305,
                    branch,
                    f"branch at {_step(branch)} forks from {_step(record)} ({record.checkpoint_id})",
                )

    def check_mode_changes(self) -> None:
        """CK401: a full-mode checkpoint whose parent is a delta checkpoint."""
        graph = self.graph
        for record in graph.records:
            parent = record.parent_record
            changed = not record.delta and parent is not None and parent.delta
            if changed and record.readable and parent is not None and parent.metadata_ok and self.judged(record):
                self.add(
                    RuleCode.CK401,
                    record,
                    f"full-mode checkpoint at {_step(record)} continues a delta checkpoint",
                )


def _walk_with_cycle(graph: LineageGraph, record: CheckpointRecord) -> Iterable[CheckpointRecord]:
    """Parents of `record` until one repeats (yielding the repeat) or the chain ends."""
    seen: set[str] = set()
    current = record.parent_record
    while current is not None:
        yield current
        if current.checkpoint_id in seen:
            return
        seen.add(current.checkpoint_id)
        current = current.parent_record


def check_lineage(graph: LineageGraph, settings: ShapeSettings, sink: FirstSink | None = None) -> LineageResult:
    """Every storage-shape rule over one lineage; `sink` keeps the epochs' first-time fronts (epochs.py)."""
    profile = cadence_profile(graph, settings.superstep_bound)
    result = LineageResult(graph.lineage, graph, profile)
    result.findings = _LineageChecker(graph, profile, settings).run()
    if graph.lineage.checkpoint_ns == CONVERSATION_NS:
        result.epochs = lineage_epochs(graph, profile, sink)
    return result


def cross_thread_cadence(inferred: Counter[int], concurrent: str | None = None) -> Finding | None:
    """CK202 at database level, with no expected K: conversations that settled on different cadences,
    and cadence classes that wrote side by side (`concurrent`, from the timeline)."""
    parts = []
    if len(inferred) >= 2:
        spread = ", ".join(f"K={k} ({n} thread{'s' if n > 1 else ''})" for k, n in sorted(inferred.items()))
        parts.append(f"threads disagree on the cadence: {spread}")
    if concurrent is not None:
        parts.append(concurrent)
    if not parts:
        return None
    return Finding(
        rule=RuleCode.CK202,
        severity=rule(RuleCode.CK202).severity,
        thread_id=None,
        checkpoint_ns=None,
        checkpoint_id=None,
        step=None,
        message="; ".join(parts),
    )
