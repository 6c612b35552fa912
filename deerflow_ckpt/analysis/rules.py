"""The rule registry: stable codes, severities and what each finding costs an operator.

This module is the one place rule codes live; reports, SARIF, the README table and tests read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is more severe; --fail-on compares ranks."""
        return {"info": 0, "warning": 1, "error": 2}[self.value]


@dataclass(frozen=True)
class Rule:
    code: str
    severity: Severity
    # Short name, as in the README's rule catalogue.
    title: str
    # What the operator loses, and what to do about it.
    impact: str


RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule(
            "CK101",
            Severity.ERROR,
            "plain message list stored by a delta checkpoint",
            "storage grows back towards O(N^2); find the raw writer that stored the list and stop it",
        ),
        Rule(
            "CK102",
            Severity.ERROR,
            "snapshot marker without a snapshot blob",
            "every read between this checkpoint and the next snapshot crashes; restore the blob from a backup",
        ),
        Rule(
            "CK103",
            Severity.ERROR,
            "empty snapshot although the thread had messages",
            "reads silently lose every earlier message; restore the snapshot from a backup",
        ),
        Rule(
            "CK104",
            Severity.ERROR,
            "undecodable checkpoint, metadata or blob",
            "reads of this checkpoint fail; restore it from a backup",
        ),
        Rule(
            "CK105",
            Severity.ERROR,
            "payload unsafe to load (pickle or a foreign type)",
            "loading it can run arbitrary code; quarantine the thread and start readers with "
            "LANGGRAPH_STRICT_MSGPACK=true",
        ),
        Rule(
            "CK201",
            Severity.ERROR,
            "updates counter at or above the expected cadence",
            "a process with a larger snapshot_frequency wrote here; give every process sharing the "
            "database the same value and restart them",
        ),
        Rule(
            "CK202",
            Severity.WARNING,
            "snapshot intervals contradict the cadence",
            "processes with different snapshot_frequency values wrote here; align them and restart",
        ),
        Rule(
            "CK203",
            Severity.WARNING,
            "supersteps counter at or above the superstep bound",
            "replay depth is unbounded for this channel; check LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT "
            "on every writer",
        ),
        Rule(
            "CK204",
            Severity.WARNING,
            "counters reset with no snapshot stored",
            "a snapshot was removed: reads still work but replay walks back to the previous one",
        ),
        Rule(
            "CK301",
            Severity.ERROR,
            "severed lineage: an extra parentless checkpoint",
            "reads from here on start without the earlier history; re-parent the checkpoint or restore it",
        ),
        Rule(
            "CK302",
            Severity.ERROR,
            "parent id that names no checkpoint",
            "the read walk stops here and the history before it is lost; restore the missing parent",
        ),
        Rule(
            "CK303",
            Severity.ERROR,
            "parent id that does not sort below its child, or a cycle",
            "the SQLite read walk stops silently here; repair the parent link",
        ),
        Rule(
            "CK304",
            Severity.ERROR,
            "message writes missing between the last snapshot and here",
            "pruned writes: reads lose those messages; restore the writes or the pruned checkpoints",
        ),
        Rule(
            "CK305",
            Severity.INFO,
            "fork in a delta thread",
            "materialisation can replay the abandoned sibling's writes; prefer linear delta threads",
        ),
        Rule(
            "CK401",
            Severity.ERROR,
            "full-mode checkpoint after a delta checkpoint",
            "a full-mode process wrote into a delta thread without conversion; run every process in the "
            "same mode, materialize and convert before switching to full",
        ),
    )
}


def rule(code: str) -> Rule:
    return RULES[code]
