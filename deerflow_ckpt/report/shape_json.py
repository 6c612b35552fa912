"""verify-shape's JSON document (versioned): the database, the settings, a summary and every finding."""

from __future__ import annotations

from typing import Any

from deerflow_ckpt.analysis.baseline import BaselineOutcome
from deerflow_ckpt.analysis.shape import Finding, ThreadKind
from deerflow_ckpt.analysis.timeline import TimelineSettings
from deerflow_ckpt.commands.verify_shape import ScanReport
from deerflow_ckpt.report.annotations import severity_counts
from deerflow_ckpt.report.printable import json_dumps
from deerflow_ckpt.report.timeline_json import timeline_to_dict
from deerflow_ckpt.rules import Severity, rule
from deerflow_ckpt.store.clock import format_time, write_time_ns

# 2: settings.since/clock_skew_seconds/rolling_window_seconds and the timeline object.
# 3: settings.deep and the proof object (null without --deep).
# 4: settings.allowed_types and the baseline object (null without --baseline / --write-baseline).
JSON_SCHEMA_VERSION = 4


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "severity": finding.severity.value,
        "title": rule(finding.rule).title,
        "thread_id": finding.thread_id,
        "checkpoint_ns": finding.checkpoint_ns,
        "checkpoint_id": finding.checkpoint_id,
        "step": finding.step,
        "message": finding.message,
        "impact": rule(finding.rule).impact,
    }


def _since_time(boundary: str) -> str | None:
    written = write_time_ns(boundary)
    return None if written is None else format_time(written)


def _proof_to_dict(report: ScanReport) -> dict[str, Any] | None:
    proof = report.proof
    if proof is None:
        return None
    return {
        "lineages": proof.lineages,
        "proved_lists": proof.proved_lists,
        "differing_lists": proof.differing_lists,
        "started_lists": proof.started_lists,
        "unprovable_lineages": proof.unprovable_lineages,
        "unprovable": [
            {"thread_id": thread_id, "checkpoint_ns": ns, "reason": reason}
            for thread_id, ns, reason in proof.unprovable
        ],
    }


def _baseline_to_dict(outcome: BaselineOutcome | None) -> dict[str, Any] | None:
    if outcome is None:
        return None
    return {
        "file": outcome.file,
        "written": outcome.written,
        "recorded": outcome.recorded,
        "known": outcome.known,
        "new": len(outcome.new),
        "gone": len(outcome.gone),
        "gone_findings": outcome.gone,
    }


def to_json(report: ScanReport, fail_on: Severity, exit_code: int) -> str:
    by_severity = severity_counts(report.findings)
    timeline_settings = report.timeline.settings if report.timeline is not None else TimelineSettings()
    document = {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": "verify-shape",
        "database": {
            "description": report.database,
            "backend": report.backend.value,
            "found_via": report.found_via,
            "saver_setup": report.saver_setup,
        },
        "settings": {
            "expected_cadence": report.expected_cadence,
            "cadence_source": report.cadence_source,
            "superstep_bound": report.superstep_bound,
            "since": report.since,
            "since_written_at": None if report.since is None else _since_time(report.since),
            "clock_skew_seconds": timeline_settings.clock_skew_ns / 1e9,
            "rolling_window_seconds": timeline_settings.rolling_window_ns / 1e9,
            "fail_on": fail_on.value,
            "deep": report.proof is not None,
            "mode": None if report.mode.mode is None else report.mode.mode.value,
            "mode_source": report.mode.source,
            "allowed_types": [f"{module}:{name}" for module, name in sorted(report.allowed_types)],
        },
        "timeline": timeline_to_dict(report.timeline),
        "summary": {
            "threads": report.threads,
            "lineages": report.lineages,
            "checkpoints": report.checkpoints,
            "delta_threads": report.kinds[ThreadKind.DELTA],
            "full_threads": report.kinds[ThreadKind.FULL],
            "migrated_threads": report.kinds[ThreadKind.MIGRATED],
            "mode_conflict": report.mode_conflict(),
            "inferred_cadences": {str(k): n for k, n in sorted(report.inferred_cadences.items())},
            "by_rule": dict(sorted(report.rule_counts().items())),
            "by_severity": by_severity,
        },
        "proof": _proof_to_dict(report),
        "baseline": _baseline_to_dict(report.baseline),
        "findings": [finding_to_dict(finding) for finding in report.findings],
        "exit_code": exit_code,
    }
    return json_dumps(document) + "\n"
