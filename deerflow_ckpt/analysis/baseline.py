"""verify-shape's baseline: today's findings recorded by a stable fingerprint, so a CI gate fails only on new ones.

A finding at a checkpoint is fingerprinted by where it is (rule, thread, namespace, checkpoint id): stored
checkpoints keep their ids, so the fingerprint survives new writes and new ckpt wording. Where the id is
none (database-level findings) or moves as a thread grows (CK202 mixed writers and the timeline's cadence
verdicts point at the latest evidence, CK304 at the last short checkpoint), the checkpoint id is replaced
by a hash of the message with its numbers masked, so a count that grows keeps the fingerprint.
The file counts fingerprints: two findings of one rule at one checkpoint are two entries.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from deerflow_ckpt.analysis.shape import Finding
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.rules import RuleCode

BASELINE_SCHEMA_VERSION = 1
# A baseline file and the entries read from it.
Baseline = tuple[Path, list[dict[str, Any]]]
BASELINE_COMMAND = "verify-shape"
# Rules whose reported checkpoint is the latest (or longest) evidence, which later writes can move.
_MOVING_RULES = frozenset({RuleCode.CK202, RuleCode.CK304})
_NUMBERS = re.compile(r"\d+")


def fingerprint(finding: Finding) -> str:
    """A stable hex id for the finding (see the module docstring)."""
    if finding.checkpoint_id is not None and finding.rule not in _MOVING_RULES:
        spot = ["checkpoint", finding.checkpoint_id]
    else:
        spot = ["content", _NUMBERS.sub("#", finding.message)]
    key = [str(finding.rule), finding.thread_id, finding.checkpoint_ns, *spot]
    import hashlib  # only a run with a baseline hashes: a plain scan's start-up does not load it

    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:24]


def _entry(finding: Finding) -> dict[str, Any]:
    """One recorded finding: the fingerprint, and where and what it was, for a reviewer of the file."""
    return {
        "fingerprint": fingerprint(finding),
        "rule": str(finding.rule),
        "thread_id": finding.thread_id,
        "checkpoint_ns": finding.checkpoint_ns,
        "checkpoint_id": finding.checkpoint_id,
        "message": finding.message,
    }


def baseline_entries(findings: list[Finding]) -> list[dict[str, Any]]:
    return sorted((_entry(f) for f in findings), key=lambda e: (e["fingerprint"], e["message"]))


def baseline_document(findings: list[Finding]) -> bytes:
    entries = baseline_entries(findings)
    document = {"schema_version": BASELINE_SCHEMA_VERSION, "command": BASELINE_COMMAND, "findings": entries}
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def parse_baseline(path: Path, text: bytes) -> list[dict[str, Any]]:
    """The recorded entries of a file --write-baseline wrote, from its bytes; ConfigError for anything else."""
    try:
        document = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a ckpt baseline (not JSON: {exc})") from None
    if not isinstance(document, dict) or document.get("command") != BASELINE_COMMAND:
        raise ConfigError(f"{path}: not a ckpt baseline (write one with verify-shape --write-baseline)")
    if document.get("schema_version") != BASELINE_SCHEMA_VERSION:
        raise ConfigError(
            f"{path}: baseline schema_version {document.get('schema_version')!r}, this ckpt reads "
            f"{BASELINE_SCHEMA_VERSION}: write it again with --write-baseline"
        )
    entries = document.get("findings")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("fingerprint"), str) for e in entries
    ):
        raise ConfigError(f"{path}: not a ckpt baseline (findings must be a list of objects with a fingerprint)")
    return entries


@dataclass
class BaselineOutcome:
    """A scan's findings against a baseline: the new ones are reported, the known ones only counted."""

    file: str
    # True when this run wrote the file (--write-baseline) and compared against what it wrote.
    written: bool
    recorded: int
    new: list[Finding] = field(default_factory=list)
    known: int = 0
    # Recorded entries no finding of this scan matched: fixed, or outside what this scan judged.
    gone: list[dict[str, Any]] = field(default_factory=list)


def compare(findings: list[Finding], entries: list[dict[str, Any]], file: str, written: bool) -> BaselineOutcome:
    """Split `findings` into new and known by fingerprint count; what is left of the baseline is gone."""
    remaining = Counter(entry["fingerprint"] for entry in entries)
    outcome = BaselineOutcome(file=file, written=written, recorded=len(entries))
    for finding in findings:
        key = fingerprint(finding)
        if remaining[key] > 0:
            remaining[key] -= 1
            outcome.known += 1
        else:
            outcome.new.append(finding)
    for entry in entries:
        if remaining[entry["fingerprint"]] > 0:
            remaining[entry["fingerprint"]] -= 1
            outcome.gone.append(entry)
    return outcome
