"""verify-shape's text report for people: a summary per rule, the thread counts, then every finding."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from deerflow_ckpt.analysis.baseline import BaselineOutcome
from deerflow_ckpt.analysis.mode import all_full, full_store_line
from deerflow_ckpt.analysis.shape import ThreadKind
from deerflow_ckpt.commands.verify_shape import ScanReport
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.report.timeline_text import change_line, in_force_line, unplaced_lines
from deerflow_ckpt.rules import RULES, Severity
from deerflow_ckpt.store.clock import format_time, write_time_ns

# Unprovable lineages named in the text report (json lists more).
_SHOWN_UNPROVABLE = 5
_SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _cadence_line(report: ScanReport) -> str:
    if report.expected_cadence is not None:
        return f"expected cadence K={report.expected_cadence} (from {printable(report.cadence_source)})"
    if report.timeline is not None and report.timeline.current is not None:
        return "expected cadence unknown"
    if all_full(report.kinds):
        return full_store_line(report.kinds)
    inferred = ", ".join(f"K={k} x{n}" for k, n in sorted(report.inferred_cadences.items())) or "none settled"
    return f"expected cadence unknown; inferred per thread: {inferred}"


def _timeline_lines(report: ScanReport) -> list[str]:
    """What is in force and why, then the cadence classes in time order and how each change happened."""
    timeline = report.timeline
    in_force = in_force_line(timeline)
    lines = [in_force] if in_force is not None else []
    if timeline is None or len(timeline.classes) < 2:
        return lines
    classes = ", ".join(
        f"{c.label} {format_time(c.first_time_ns)}..{format_time(c.last_time_ns)} "
        f"({c.threads} thread{'s' if c.threads != 1 else ''})"
        for c in timeline.classes
    )
    lines.append(f"cadences over time: {classes}")
    lines.extend(f"  {change_line(change)}" for change in timeline.changes)
    lines.extend(f"  {line}" for line in unplaced_lines(timeline))
    return lines


def _proof_lines(report: ScanReport) -> list[str]:
    proof = report.proof
    if proof is None:
        return []
    lines = [
        f"deep proof: {proof.proved_lists} stored message lists equal the replay of their writes, "
        f"{proof.differing_lists} differ (CK106), in {proof.lineages} lineages"
    ]
    if proof.started_lists:
        lines.append(f"  {proof.started_lists} stored lists were where a replay had to start (not provable)")
    if proof.unprovable_lineages:
        lines.append(f"  {proof.unprovable_lineages} lineages could not be proven in part; the first:")
        for thread_id, ns, reason in proof.unprovable[:_SHOWN_UNPROVABLE]:
            where = f"thread {thread_id}" + (f" ns {ns}" if ns else "")
            lines.append(f"    {where}: {reason}")
    return lines


def baseline_line(outcome: BaselineOutcome) -> str:
    """What the baseline left out of the report: findings it records, and those it records that are gone."""
    if outcome.written:
        return f"baseline {outcome.file} written: {outcome.known} findings recorded (not shown)"
    return (
        f"baseline {outcome.file}: {outcome.known} known findings not shown, {len(outcome.new)} new, "
        f"{len(outcome.gone)} gone (fixed, or not judged by this scan)"
    )


def render_text(report: ScanReport, console: Console) -> None:
    console.print(Text(printable(f"Scanned {report.database}"), style="bold"))
    console.print(Text(f"  found via {printable(report.found_via)}"))
    if report.saver_setup is not None:
        console.print(f"  tables: {report.saver_setup}")
    console.print(Text(f"  {_cadence_line(report)}; superstep bound {report.superstep_bound}"))
    if report.mode.from_option:
        console.print(Text(f"  deployment mode: {printable(report.mode.describe())}"))
    if (conflict := report.mode_conflict()) is not None:
        console.print(Text(f"  warning: {printable(conflict)}", style="yellow"))
    if report.since is not None:
        console.print(f"  judged: checkpoints written at or after {format_time(write_time_ns(report.since))}")
    for timeline_line in _timeline_lines(report):
        console.print(f"  {timeline_line}")
    kinds = report.kinds
    console.print(
        f"  {report.threads} threads ({kinds[ThreadKind.DELTA]} delta, {kinds[ThreadKind.FULL]} full, "
        f"{kinds[ThreadKind.MIGRATED]} migrated), {report.lineages} lineages, {report.checkpoints} checkpoints"
    )
    for proof_line in _proof_lines(report):
        console.print(f"  {printable(proof_line)}")
    if report.baseline is not None:
        console.print(Text(f"  {printable(baseline_line(report.baseline))}"))
    counts = report.rule_counts()
    if not counts:
        clean = "No storage-shape violations found." if report.baseline is None else "No new storage-shape violations."
        console.print(Text(clean, style="green"))
        return
    summary = Table(title="Findings by rule", title_justify="left", show_edge=False)
    summary.add_column("rule")
    summary.add_column("severity")
    summary.add_column("count", justify="right")
    summary.add_column("meaning")
    # A rule's severity as this run reports it (a project may override the registry's).
    severity_of = {finding.rule: finding.severity for finding in report.findings}
    for code in sorted(counts):
        rule, severity = RULES[code], severity_of[code]
        summary.add_row(
            code,
            Text(severity.value, style=_SEVERITY_STYLE[severity]),
            str(counts[code]),
            rule.title,
        )
    console.print(summary)
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    for finding in sorted(
        report.findings, key=lambda f: (order[f.severity], f.rule, f.thread_id or "", f.checkpoint_id or "")
    ):
        where = "database" if finding.thread_id is None else f"thread {finding.thread_id}"
        if finding.checkpoint_ns:
            where += f" ns {finding.checkpoint_ns}"
        if finding.checkpoint_id:
            where += f" checkpoint {finding.checkpoint_id}"
        if finding.step is not None:
            where += f" (step {finding.step})"
        line = Text()
        line.append(f"{finding.rule} ", style="bold")
        line.append(f"{finding.severity.value}", style=_SEVERITY_STYLE[finding.severity])
        line.append(f" {printable(where)}: {printable(finding.explanation)}")
        console.print(line)
