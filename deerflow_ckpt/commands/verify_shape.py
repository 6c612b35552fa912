"""verify-shape's core: stream a database's lineages through the shape rules into one report."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from deerflow_ckpt.analysis.baseline import (
    Baseline,
    BaselineOutcome,
    baseline_document,
    baseline_entries,
    compare,
    parse_baseline,
)
from deerflow_ckpt.analysis.cadence_verdicts import concurrent_classes, is_provisional, judge_in_time
from deerflow_ckpt.analysis.counts import StoreCounts
from deerflow_ckpt.analysis.epochs import Epoch, FirstEvidence, FirstSink
from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.mode import StatedMode
from deerflow_ckpt.analysis.shape import (
    CONVERSATION_NS,
    Finding,
    LineageResult,
    ShapeSettings,
    check_lineage,
    cross_thread_cadence,
)
from deerflow_ckpt.analysis.timeline import Timeline, build_timeline
from deerflow_ckpt.commands.shares import run_shares, share_selections, without_cycle_collector
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.errors import ConfigError, StoreError
from deerflow_ckpt.fileio import ConfigReadError, read_config_file, write_atomically
from deerflow_ckpt.rule_selection import RuleSelection
from deerflow_ckpt.rules import RuleCode, Severity
from deerflow_ckpt.store.readers import LineageReader, open_reader
from deerflow_ckpt.store.records import Backend
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection
from deerflow_ckpt.store.source import DatabaseChoice, DatabaseTarget, SqliteTarget

if TYPE_CHECKING:
    # The proof's modules load only for --deep: a plain scan's start-up does not pay for them.
    from deerflow_ckpt.analysis.replay import ProofSummary
    from deerflow_ckpt.store.history import SqliteLineageHistories
    from deerflow_ckpt.store.messages import LineageHistory


@dataclass(frozen=True)
class ScanRequest:
    choice: DatabaseChoice
    settings: ShapeSettings
    # Where the expected cadence came from ("--cadence", "config.yaml", or "unknown").
    cadence_source: str
    thread_id: str | None = None
    # --select/--ignore/--severity and the project's: which findings are reported, at which severity.
    rules: RuleSelection = field(default_factory=RuleSelection)
    # The deployment's mode as stated (--mode, or the config that chose the database).
    mode: StatedMode = field(default_factory=StatedMode)


@dataclass(kw_only=True)
class ScanTally(StoreCounts):
    """What a scan counts, for one worker's share of the threads and for the whole database alike."""

    findings: list[Finding] = field(default_factory=list)
    proof: ProofSummary | None = None

    def add(self, other: ScanTally) -> None:
        self.add_counts(other)
        self.findings.extend(other.findings)
        if other.proof is not None:
            if self.proof is None:
                from deerflow_ckpt.analysis.replay import ProofSummary

                self.proof = ProofSummary()
            self.proof.merge(other.proof)


@dataclass(kw_only=True)
class ScanReport(ScanTally):
    database: str
    found_via: str
    backend: Backend
    expected_cadence: int | None
    cadence_source: str
    superstep_bound: int
    # Which cadence was in force when, from every conversation's epochs (None before the scan ends).
    timeline: Timeline | None = None
    # The --since boundary (a checkpoint id: ids sort by write time), if any.
    since: str | None = None
    # Postgres: which saver generation set the tables up (checkpoint_migrations against the saver's known count).
    saver_setup: str | None = None
    # How many processes read the threads, and why that many (--verbose says so).
    processes: int = 1
    processes_why: str = ""
    mode: StatedMode = field(default_factory=StatedMode)

    def mode_conflict(self) -> str | None:
        return self.mode.conflict(self.kinds)

    # --allow-type: the app's own types trusted besides LangGraph's safe ones.
    allowed_types: frozenset[tuple[str, str]] = frozenset()
    # --baseline / --write-baseline: `findings` then holds only the new ones; this says what else was known.
    baseline: BaselineOutcome | None = None

    def count_at_or_above(self, severity: Severity) -> int:
        return sum(1 for finding in self.findings if finding.severity.rank >= severity.rank)

    def rule_counts(self) -> Counter[RuleCode]:
        return Counter(finding.rule for finding in self.findings)


def iter_thread_results(
    reader: LineageReader,
    backend: Backend,
    settings: ShapeSettings,
    selection: ThreadSelection = ALL_THREADS,
    sink: FirstSink | None = None,
) -> Iterator[list[LineageResult]]:
    """Checked lineages, one list per thread (a thread's namespaces arrive together); see check_lineage."""
    current: list[LineageResult] = []
    for lineage in reader.lineages(selection):
        if current and current[0].lineage.thread_id != lineage.thread_id:
            yield current
            current = []
        current.append(check_lineage(LineageGraph(lineage, backend), settings, sink))
    if current:
        yield current


def conversation(results: list[LineageResult]) -> LineageResult:
    """The thread's conversation lineage ('' namespace), or its first one when it has none."""
    return next((result for result in results if result.lineage.checkpoint_ns == CONVERSATION_NS), results[0])


@dataclass(kw_only=True)
class _Share(ScanTally):
    """What one worker found in its range of threads (`proof`: verify-shape --deep's, None without it)."""

    # Conversation CK201/CK202, judged in time once the whole timeline is known.
    provisional: list[Finding] = field(default_factory=list)
    # Conversation epochs without their first-time fronts, which are kept per bounds (all a class asks).
    epochs: list[Epoch] = field(default_factory=list)
    first_evidence: FirstSink = field(default_factory=dict)


def _scan_share(
    target: DatabaseTarget,
    settings: ShapeSettings,
    selection: ThreadSelection,
    on_checkpoints: Callable[[int], None] | None = None,
) -> _Share:
    """One share of the threads; `on_checkpoints` is told how many checkpoints each thread had."""
    with without_cycle_collector():
        return _collect_share(target, settings, selection, on_checkpoints)


def _collect_share(
    target: DatabaseTarget,
    settings: ShapeSettings,
    selection: ThreadSelection,
    on_checkpoints: Callable[[int], None] | None,
) -> _Share:
    # SQLite: the deep proof runs beside the scan, lineage by lineage, from the rows it just read.
    proved_here = target if settings.deep and isinstance(target, SqliteTarget) else None
    reader, backend = open_reader(target, sizes=False, messages_rows=proved_here is not None)
    share = _Share()
    beside = _lineage_prover(proved_here) if proved_here is not None else None
    if beside is not None:
        from deerflow_ckpt.analysis.replay import ProofSummary

        share.proof = ProofSummary()
    try:
        for results in iter_thread_results(reader, backend, settings, selection, share.first_evidence):
            seen = 0
            for result in results:
                seen += len(result.lineage.records)
                for finding in result.findings:
                    (share.provisional if is_provisional(finding) else share.findings).append(finding)
                share.epochs.extend(result.epochs)
                if beside is not None and share.proof is not None:
                    _prove(beside.history(result.lineage), settings, share.proof, share.findings)
            main = conversation(results)
            share.count_thread(len(results), seen, main.kind, main.profile.bounds.inferred)
            if on_checkpoints is not None:
                on_checkpoints(seen)
    finally:
        if beside is not None:
            beside.close()
    if beside is None and settings.deep:
        share.proof = _prove_share(target, settings, selection, share.findings)
    return share


def _lineage_prover(target: SqliteTarget) -> SqliteLineageHistories:
    from deerflow_ckpt.store.history import SqliteLineageHistories

    return SqliteLineageHistories(target)


def _prove(history: LineageHistory, settings: ShapeSettings, summary: ProofSummary, findings: list[Finding]) -> None:
    """Prove one lineage's stored lists; a --since scan reports only what was written since."""
    from deerflow_ckpt.analysis.replay import prove_lineage

    result = prove_lineage(history)
    kept = [f for f in result.findings if settings.since is None or (f.checkpoint_id or "") >= settings.since]
    summary.add(result, differing=len(kept))
    findings.extend(kept)


def _prove_share(
    target: DatabaseTarget, settings: ShapeSettings, selection: ThreadSelection, findings: list[Finding]
) -> ProofSummary:
    """The deep proof of one share's threads (Postgres): a second read-only pass, streamed."""
    from deerflow_ckpt.analysis.replay import ProofSummary
    from deerflow_ckpt.store.history import open_history

    summary = ProofSummary()
    for history in open_history(target).histories(selection):
        _prove(history, settings, summary, findings)
    return summary


def scan(
    request: ScanRequest,
    progress: Callable[[int], None] | None = None,
    jobs: int | None = 1,
    start_method: str | None = None,
) -> ScanReport:
    """Check every lineage of the chosen database; `progress` gets the running checkpoint count.

    With `jobs` > 1 the threads are cut into ranges read by that many processes, each in its own
    read-only transaction (a thread is always read whole by one of them); None lets the store's size and
    the machine decide (commands/shares.auto_jobs). `start_method` picks the multiprocessing start method
    (default: the platform's).
    """
    reader, backend = open_reader(request.choice.target)
    settings = request.settings
    report = ScanReport(
        database=request.choice.target.describe(),
        found_via=request.choice.found_via,
        backend=backend,
        expected_cadence=request.settings.expected_cadence,
        cadence_source=request.cadence_source,
        superstep_bound=settings.superstep_bound,
        since=settings.since,
        mode=request.mode,
        allowed_types=settings.allowed_types,
    )
    if backend is Backend.POSTGRES:
        from deerflow_ckpt.store.postgres import PostgresCheckpointReader
        from deerflow_ckpt.store.savers import describe_setup

        assert isinstance(reader, PostgresCheckpointReader)
        report.saver_setup = describe_setup(reader.applied_migrations())
    epochs: list[Epoch] = []
    provisional: list[Finding] = []
    first_evidence: FirstSink = {}
    thread_ids = None if request.thread_id is None else (request.thread_id,)
    split = share_selections(reader, jobs, thread_ids, settings.since)
    report.processes, report.processes_why = len(split.selections), split.why
    work = functools.partial(_scan_share, request.choice.target, settings)
    for share in run_shares(work, split.selections, progress, start_method):
        report.add(share)
        epochs.extend(share.epochs)
        provisional.extend(share.provisional)
        for bounds, evidence in share.first_evidence.items():
            first_evidence.setdefault(bounds, FirstEvidence()).merge(evidence)
    if request.thread_id is not None and report.threads == 0:
        raise StoreError(f"no checkpoints for thread {request.thread_id!r} in {report.database}")
    report.timeline = build_timeline(epochs, settings.timeline, settings.expected_cadence, first_evidence)
    report.findings.extend(judge_in_time(report.timeline, _by_thread(epochs), _by_thread(provisional), settings.since))
    if settings.expected_cadence is None and report.timeline.current is None:
        disagreement = cross_thread_cadence(report.inferred_cadences, concurrent_classes(report.timeline))
        if disagreement is not None:
            report.findings.append(disagreement)
    if not request.rules.is_default:
        report.findings = request.rules.apply(report.findings)
    return report


def read_baseline(path: Path) -> list[dict[str, Any]]:
    """The recorded entries of a file --write-baseline wrote; ConfigError for anything else."""
    try:
        text = read_config_file(path)
    except ConfigReadError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return parse_baseline(path, text)


def apply_baseline(report: ScanReport, baseline: Baseline | None, write_to: Path | None) -> None:
    """Keep only findings not in `baseline` (read before the scan); --write-baseline records every finding, and
    the run then reads as one given that file (nothing new)."""
    if write_to is not None:
        # Replaced atomically: a reader sees the old file or the new one.
        write_atomically(write_to, baseline_document(report.findings))
        report.baseline = compare(report.findings, baseline_entries(report.findings), str(write_to), written=True)
    elif baseline is not None:
        path, entries = baseline
        report.baseline = compare(report.findings, entries, str(path), written=False)
    else:
        return
    report.findings = report.baseline.new


_Keyed = TypeVar("_Keyed", Epoch, Finding)


def _by_thread(items: list[_Keyed]) -> dict[str, list[_Keyed]]:
    grouped: dict[str, list[_Keyed]] = {}
    for item in items:
        assert item.thread_id is not None
        grouped.setdefault(item.thread_id, []).append(item)
    return grouped
