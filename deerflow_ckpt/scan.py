"""verify-shape's core: stream a database's lineages through the shape rules into one report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from deerflow_ckpt.analysis.lineage import LineageGraph
from deerflow_ckpt.analysis.rules import Severity
from deerflow_ckpt.analysis.shape import (
    CONVERSATION_NS,
    Finding,
    LineageResult,
    ShapeSettings,
    check_lineage,
    cross_thread_cadence,
)
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.store.records import Backend, Lineage
from deerflow_ckpt.store.source import DatabaseChoice, DatabaseTarget, SqliteTarget


class LineageReader(Protocol):
    def lineages(self, thread_id: str | None = None) -> Iterator[Lineage]: ...


def open_reader(target: DatabaseTarget) -> tuple[LineageReader, Backend]:
    """The read-only reader for a target; drivers are imported only here."""
    if isinstance(target, SqliteTarget):
        from deerflow_ckpt.store.sqlite import SqliteCheckpointReader

        return SqliteCheckpointReader(target), Backend.SQLITE
    from deerflow_ckpt.store.postgres import PostgresCheckpointReader

    return PostgresCheckpointReader(target), Backend.POSTGRES


@dataclass(frozen=True)
class ScanRequest:
    choice: DatabaseChoice
    settings: ShapeSettings
    # Where the expected cadence came from ("--cadence", "config.yaml", or "unknown").
    cadence_source: str
    thread_id: str | None = None


@dataclass
class ScanReport:
    database: str
    found_via: str
    backend: Backend
    expected_cadence: int | None
    cadence_source: str
    superstep_bound: int
    threads: int = 0
    lineages: int = 0
    checkpoints: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    inferred_cadences: Counter[int] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)

    def count_at_or_above(self, severity: Severity) -> int:
        return sum(1 for finding in self.findings if finding.severity.rank >= severity.rank)

    def rule_counts(self) -> Counter[str]:
        return Counter(finding.rule for finding in self.findings)


def iter_thread_results(
    reader: LineageReader, backend: Backend, settings: ShapeSettings, thread_id: str | None = None
) -> Iterator[list[LineageResult]]:
    """Checked lineages, one list per thread (a thread's namespaces arrive together)."""
    current: list[LineageResult] = []
    for lineage in reader.lineages(thread_id):
        if current and current[0].lineage.thread_id != lineage.thread_id:
            yield current
            current = []
        current.append(check_lineage(LineageGraph(lineage, backend), settings))
    if current:
        yield current


def conversation(results: list[LineageResult]) -> LineageResult:
    """The thread's conversation lineage ('' namespace), or its first one when it has none."""
    return next((result for result in results if result.lineage.checkpoint_ns == CONVERSATION_NS), results[0])


def scan(request: ScanRequest, progress: Callable[[int], None] | None = None) -> ScanReport:
    """Check every lineage of the chosen database; `progress` gets the running checkpoint count."""
    reader, backend = open_reader(request.choice.target)
    report = ScanReport(
        database=request.choice.target.describe(),
        found_via=request.choice.found_via,
        backend=backend,
        expected_cadence=request.settings.expected_cadence,
        cadence_source=request.cadence_source,
        superstep_bound=request.settings.superstep_bound,
    )
    for results in iter_thread_results(reader, backend, request.settings, request.thread_id):
        report.threads += 1
        for result in results:
            report.lineages += 1
            report.checkpoints += len(result.lineage.records)
            report.findings.extend(result.findings)
        main = conversation(results)
        report.kinds[main.kind] += 1
        inferred = main.profile.bounds.inferred
        if inferred is not None:
            report.inferred_cadences[inferred] += 1
        if progress is not None:
            progress(report.checkpoints)
    if request.thread_id is not None and report.threads == 0:
        raise StoreError(f"no checkpoints for thread {request.thread_id!r} in {report.database}")
    if request.settings.expected_cadence is None:
        disagreement = cross_thread_cadence(report.inferred_cadences)
        if disagreement is not None:
            report.findings.append(disagreement)
    return report
