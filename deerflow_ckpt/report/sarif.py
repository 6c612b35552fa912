"""SARIF 2.1.0 for code scanning tools: every registry rule, and one result per annotation.

The output is deterministic (no timestamps, no GUIDs) so reruns on the same input diff clean.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from deerflow_ckpt.report.annotations import Annotation, CheckpointSpot, FileSpot
from deerflow_ckpt.report.printable import json_dumps
from deerflow_ckpt.rules import RULES, Rule, RuleCode, Severity

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
LEVEL_BY_SEVERITY = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
RULE_INDEX = {code: index for index, code in enumerate(RULES)}
# Versioned so a change to what the fingerprint covers never matches old alerts by accident.
CHECKPOINT_FINGERPRINT = "ckptCheckpoint/v1"


def rule_name(title: str) -> str:
    """PascalCase from the title, as the SARIF spec's examples name rules."""
    return "".join(word[:1].upper() + word[1:] for word in re.findall(r"[A-Za-z0-9]+", title))


def rule_descriptor(entry: Rule) -> dict[str, Any]:
    return {
        "id": entry.code,
        "name": rule_name(entry.title),
        "shortDescription": {"text": entry.title},
        "fullDescription": {"text": entry.impact},
        "defaultConfiguration": {"level": LEVEL_BY_SEVERITY[entry.severity]},
    }


def artifact_uri(path: str) -> str:
    """Absolute paths as file:// URIs; relative ones as percent-encoded, forward-slash relative URIs."""
    pure = PurePath(path)
    if pure.is_absolute():
        return pure.as_uri()
    # quote() also encodes ':' so a first segment like 'c:x' cannot read as a URI scheme.
    return quote(pure.as_posix())


def file_location(spot: FileSpot) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(spot.path)}}
    if spot.line is not None:
        physical["region"] = {"startLine": spot.line}
    return {"physicalLocation": physical}


def name_segment(text: str) -> str:
    """'%' and '/' encoded, so a '/' inside an id cannot be read as a separator."""
    return text.replace("%", "%25").replace("/", "%2F")


def qualified_name(spot: CheckpointSpot) -> str:
    """thread[/ns][/checkpoint]: a checkpoint always has three parts, the root namespace being the empty middle one."""
    thread = name_segment(spot.thread_id)
    namespace = name_segment(spot.checkpoint_ns)
    if spot.checkpoint_id is not None:
        return f"{thread}/{namespace}/{name_segment(spot.checkpoint_id)}"
    return f"{thread}/{namespace}" if namespace else thread


def checkpoint_location(spot: CheckpointSpot) -> dict[str, Any]:
    logical = {
        "name": spot.checkpoint_id if spot.checkpoint_id is not None else spot.thread_id,
        "fullyQualifiedName": qualified_name(spot),
        "kind": "object",
    }
    return {"logicalLocations": [logical]}


def checkpoint_fingerprint(code: RuleCode, spot: CheckpointSpot) -> str:
    """Consumers cannot hash source lines of a database, so the identity comes from rule and place."""
    parts = (code, spot.thread_id, spot.checkpoint_ns, spot.checkpoint_id or "")
    # surrogateescape: a SQLite key that is not UTF-8 (read losslessly) hashes as its stored bytes.
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def checkpoint_properties(spot: CheckpointSpot) -> dict[str, Any]:
    return {
        "thread_id": spot.thread_id,
        "checkpoint_ns": spot.checkpoint_ns,
        "checkpoint_id": spot.checkpoint_id,
        "step": spot.step,
    }


def result(annotation: Annotation) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "ruleId": annotation.rule,
        "ruleIndex": RULE_INDEX[annotation.rule],
        "level": LEVEL_BY_SEVERITY[annotation.severity],
        "message": {"text": annotation.message},
    }
    spot = annotation.where
    if isinstance(spot, FileSpot):
        entry["locations"] = [file_location(spot)]
    elif isinstance(spot, CheckpointSpot):
        entry["locations"] = [checkpoint_location(spot)]
        entry["partialFingerprints"] = {CHECKPOINT_FINGERPRINT: checkpoint_fingerprint(annotation.rule, spot)}
        entry["properties"] = checkpoint_properties(spot)
    return entry


def to_sarif(annotations: Sequence[Annotation], *, command: str, exit_code: int, version: str) -> str:
    run = {
        "tool": {
            "driver": {
                "name": "ckpt",
                "version": version,
                "rules": [rule_descriptor(entry) for entry in RULES.values()],
            }
        },
        "invocations": [{"executionSuccessful": True, "exitCode": exit_code}],
        "results": [result(annotation) for annotation in annotations],
        "properties": {"command": command},
    }
    document = {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
    return json_dumps(document) + "\n"
