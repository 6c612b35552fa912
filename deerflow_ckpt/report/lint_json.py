"""lint-config's JSON document (versioned): what was checked, every file with its verdicts on its YAML
and its checkpoint sections and its checkpoint database, mode and cadence, the databases files share,
and every finding. Passwords never appear: databases are named by identity.

No field says a file loads: DeerFlow's other sections are not checked (docs/deerflow-config.md).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from deerflow_ckpt import __version__
from deerflow_ckpt.commands.lint_config import LintedFile, LintReport
from deerflow_ckpt.config.identity import DatabaseIdentity
from deerflow_ckpt.config.lint import Finding, Setting
from deerflow_ckpt.report.annotations import severity_counts
from deerflow_ckpt.report.printable import json_dumps
from deerflow_ckpt.rules import Severity, rule

# 2: a file's "loads" became "yaml_valid" and "database_valid"; "checked" names what they cover.
JSON_SCHEMA_VERSION = 2
# What lint-config verifies in every file; nothing else (sandbox:, models:, ...) is read.
CHECKED = {"whole_file": ["yaml", "variables"], "sections": ["database", "checkpointer"]}


def finding_to_dict(name: str, finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "severity": finding.severity.value,
        "title": rule(finding.rule).title,
        "path": name,
        "line": finding.line,
        "message": finding.message,
        "deerflow_warning": finding.deerflow_warning,
        "impact": rule(finding.rule).impact,
    }


def _setting(setting: Setting) -> dict[str, Any]:
    return {"value": setting.value, "line": setting.line, "origin": setting.origin, "default": setting.default}


def _database(identity: DatabaseIdentity) -> dict[str, Any]:
    return {"kind": identity.kind, "display": identity.display}


def file_to_dict(linted: LintedFile) -> dict[str, Any]:
    lint = linted.lint
    facts = lint.facts
    entry: dict[str, Any] = {"path": linted.name, "yaml_valid": lint.yaml_valid, "database_valid": lint.database_valid}
    if facts is None:
        return entry
    if isinstance(facts.database, DatabaseIdentity):
        entry["checkpoint_database"] = _database(facts.database)
    else:
        entry["checkpoint_database"] = None
        entry["unlocated"] = facts.database.reason
    entry["channel_mode"] = _setting(facts.mode)
    entry["cadence"] = _setting(facts.cadence)
    return entry


def to_json(report: LintReport, fail_on: Severity, exit_code: int) -> str:
    findings = report.all_findings()
    by_severity = severity_counts(finding for _, finding in findings)
    consistency = report.consistency
    document = {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": "lint-config",
        "tool": {"name": "ckpt", "version": __version__},
        "settings": {"fail_on": fail_on.value, "sqlite_base": str(report.base)},
        "checked": CHECKED,
        "files": [file_to_dict(linted) for linted in report.files],
        "databases": [{**_database(shared.identity), "paths": list(shared.paths)} for shared in consistency.databases],
        "left_out": [{"path": path, "reason": reason} for path, reason in consistency.left_out],
        "summary": {
            "files": len(report.files),
            "by_rule": dict(sorted(Counter(finding.rule for _, finding in findings).items())),
            "by_severity": by_severity,
        },
        "findings": [finding_to_dict(name, finding) for name, finding in findings],
        "exit_code": exit_code,
    }
    return json_dumps(document) + "\n"
