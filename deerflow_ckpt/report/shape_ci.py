"""verify-shape findings as CI annotations: database findings carry logical (checkpoint) locations."""

from __future__ import annotations

from deerflow_ckpt.analysis.shape import Finding
from deerflow_ckpt.commands.verify_shape import ScanReport
from deerflow_ckpt.report.annotations import Annotation, CheckpointSpot


def annotation_of(finding: Finding) -> Annotation:
    spot = None
    if finding.thread_id is not None:
        spot = CheckpointSpot(finding.thread_id, finding.checkpoint_ns or "", finding.checkpoint_id, finding.step)
    return Annotation(finding.rule, finding.severity, finding.explanation, spot)


def annotations_of(report: ScanReport) -> list[Annotation]:
    return [annotation_of(finding) for finding in report.findings]


def headline(report: ScanReport) -> str:
    outcome = report.baseline
    known = "" if outcome is None else f" ({outcome.known} in the baseline not shown, {len(outcome.gone)} gone)"
    new = "findings" if outcome is None else "new findings"
    return (
        f"Scanned {report.database}: {report.threads} threads, {report.checkpoints} checkpoints, "
        f"{len(report.findings)} {new}{known}."
    )
