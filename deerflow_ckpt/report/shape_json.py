"""verify-shape's JSON document (versioned): the database, the settings, a summary and every finding."""

from __future__ import annotations

import json
from typing import Any

from deerflow_ckpt.analysis.rules import Severity, rule
from deerflow_ckpt.analysis.shape import Finding
from deerflow_ckpt.report.annotations import severity_counts
from deerflow_ckpt.scan import ScanReport

JSON_SCHEMA_VERSION = 1


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


def to_json(report: ScanReport, fail_on: Severity, exit_code: int) -> str:
    by_severity = severity_counts(report.findings)
    document = {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": "verify-shape",
        "database": {
            "description": report.database,
            "backend": report.backend.value,
            "found_via": report.found_via,
        },
        "settings": {
            "expected_cadence": report.expected_cadence,
            "cadence_source": report.cadence_source,
            "superstep_bound": report.superstep_bound,
            "fail_on": fail_on.value,
        },
        "summary": {
            "threads": report.threads,
            "lineages": report.lineages,
            "checkpoints": report.checkpoints,
            "delta_threads": report.kinds.get("delta", 0),
            "full_threads": report.kinds.get("full", 0),
            "migrated_threads": report.kinds.get("migrated", 0),
            "inferred_cadences": {str(k): n for k, n in sorted(report.inferred_cadences.items())},
            "by_rule": dict(sorted(report.rule_counts().items())),
            "by_severity": by_severity,
        },
        "findings": [finding_to_dict(finding) for finding in report.findings],
        "exit_code": exit_code,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
