"""The rule registry: stable codes, severities and what each finding costs an operator.

This module is the one place rule codes live; reports, SARIF, docs/rules.md's table and tests read it.
"""

from __future__ import annotations

from enum import StrEnum

from deerflow_ckpt.dataclass import dataclass


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is more severe; --fail-on compares ranks."""
        return {"info": 0, "warning": 1, "error": 2}[self.value]


class RuleCode(StrEnum):
    """Every rule's stable code; a str, so reports and JSON show it as written."""

    CK101 = "CK101"
    CK102 = "CK102"
    CK103 = "CK103"
    CK104 = "CK104"
    CK105 = "CK105"
    CK106 = "CK106"
    CK201 = "CK201"
    CK202 = "CK202"
    CK203 = "CK203"
    CK204 = "CK204"
    CK205 = "CK205"
    CK206 = "CK206"
    CK207 = "CK207"
    CK301 = "CK301"
    CK302 = "CK302"
    CK303 = "CK303"
    CK304 = "CK304"
    CK305 = "CK305"
    CK306 = "CK306"
    CK401 = "CK401"
    CK500 = "CK500"
    CK501 = "CK501"
    CK502 = "CK502"
    CK503 = "CK503"
    CK504 = "CK504"
    CK505 = "CK505"
    CK506 = "CK506"
    CK507 = "CK507"
    CK508 = "CK508"
    CK509 = "CK509"
    CK510 = "CK510"
    CK511 = "CK511"
    CK512 = "CK512"
    CK513 = "CK513"


@dataclass(frozen=True)
class Rule:
    code: RuleCode
    severity: Severity
    # Short name, as in docs/rules.md's rule catalogue.
    title: str
    # What the operator loses, and what to do about it.
    impact: str

    @property
    def about_config(self) -> bool:
        """CK5xx rules judge config files; CK1xx-CK4xx judge checkpoint databases."""
        return self.code.startswith("CK5")


RULES: dict[RuleCode, Rule] = {
    rule.code: rule
    for rule in (
        Rule(
            RuleCode.CK101,
            Severity.ERROR,
            "plain message list stored by a delta checkpoint",
            "storage grows back towards O(N^2); find the raw writer that stored the list and stop it",
        ),
        Rule(
            RuleCode.CK102,
            Severity.ERROR,
            "snapshot marker without a snapshot blob",
            "every read between this checkpoint and the next snapshot crashes; restore the blob from a backup",
        ),
        Rule(
            RuleCode.CK103,
            Severity.ERROR,
            "empty snapshot although the thread had messages",
            "reads silently lose every earlier message; restore the snapshot from a backup",
        ),
        Rule(
            RuleCode.CK104,
            Severity.ERROR,
            "undecodable checkpoint, metadata or blob",
            "reads of this checkpoint fail; restore it from a backup",
        ),
        Rule(
            RuleCode.CK105,
            Severity.ERROR,
            "payload unsafe to load (pickle or a foreign type)",
            "loading it can run arbitrary code; quarantine the thread and start readers with "
            "LANGGRAPH_STRICT_MSGPACK=true (json-typed payloads are revived even so)",
        ),
        Rule(
            RuleCode.CK106,  # verify-shape --deep: a stored list is not the fold of the writes before it
            Severity.ERROR,
            "stored list differs from the replay of its writes",
            "readers at and after this checkpoint see a different conversation than the one written; restore "
            "the thread from a backup taken before the first divergence (verify-shape --deep)",
        ),
        Rule(
            RuleCode.CK201,
            Severity.ERROR,
            "updates counter at or above the expected cadence",
            "a process with a larger snapshot_frequency wrote here; give every process sharing the "
            "database the same value and restart them",
        ),
        Rule(
            RuleCode.CK202,
            Severity.WARNING,
            "snapshot intervals contradict the cadence",
            "processes with different snapshot_frequency values wrote here; align them and restart",
        ),
        Rule(
            RuleCode.CK203,
            Severity.WARNING,
            "supersteps counter at or above the superstep bound",
            "replay depth is unbounded for this channel; check LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT "
            "on every writer",
        ),
        Rule(
            RuleCode.CK204,
            Severity.WARNING,
            "counters reset with no snapshot stored",
            "a snapshot was removed: reads still work but replay walks back to the previous one",
        ),
        Rule(
            RuleCode.CK205,
            Severity.INFO,
            "cadence changed cleanly",
            "history before the change is judged at the cadence then in force; nothing to do if the change was "
            "deliberate",
        ),
        Rule(
            RuleCode.CK206,
            Severity.WARNING,
            "rolling cadence change: both cadences wrote for a while",
            "threads written by both cadences in the window have mixed history but read correctly; finish "
            "restarts promptly, and check no process still runs the old value",
        ),
        Rule(
            RuleCode.CK207,
            Severity.ERROR,
            "old cadence still written after a change",
            "a process sharing the database was not restarted with the new snapshot_frequency; find every "
            "gateway, worker and pod that still runs the old value and restart it",
        ),
        Rule(
            RuleCode.CK301,
            Severity.ERROR,
            "severed lineage: an extra parentless checkpoint",
            "reads from here on start without the earlier history; re-parent the checkpoint or restore it",
        ),
        Rule(
            RuleCode.CK302,
            Severity.ERROR,
            "parent id that names no checkpoint",
            "the read walk stops here and the history before it is lost; restore the missing parent",
        ),
        Rule(
            RuleCode.CK303,
            Severity.ERROR,
            "parent id that does not sort below its child, or a cycle",
            "the SQLite read walk stops silently here; repair the parent link",
        ),
        Rule(
            RuleCode.CK304,
            Severity.ERROR,
            "message writes missing between the last snapshot and here",
            "pruned writes: reads lose those messages; restore the writes or the pruned checkpoints",
        ),
        Rule(
            RuleCode.CK305,
            Severity.INFO,
            "fork in a delta thread",
            "materialisation can replay the abandoned sibling's writes; prefer linear delta threads",
        ),
        Rule(
            RuleCode.CK306,
            Severity.INFO,
            "history cut at a stored value",
            "reads from here on are whole; history and branching before it are gone "
            "(old history deleted, no parent link kept)",
        ),
        Rule(
            RuleCode.CK401,
            Severity.ERROR,
            "full-mode checkpoint after a delta checkpoint",
            "a full-mode process wrote into a delta thread without conversion; run every process in the "
            "same mode, materialize and convert before switching to full",
        ),
        # Config rules: what DeerFlow makes of config.yaml (lint-config, migrate-config).
        Rule(
            RuleCode.CK500,
            Severity.ERROR,
            "config DeerFlow cannot load",
            "DeerFlow refuses to start with this file; fix the value or syntax the message names",
        ),
        Rule(
            RuleCode.CK501,
            Severity.WARNING,
            "deprecated flat cadence key",
            "DeerFlow carries it forward with a warning on every load; run ckpt migrate-config",
        ),
        Rule(
            RuleCode.CK502,
            Severity.ERROR,
            "both cadence keys set with different values",
            "the nested key wins and the legacy cadence is silently dropped; keep the value you mean under "
            "checkpoint_delta",
        ),
        Rule(
            RuleCode.CK503,
            Severity.ERROR,
            "checkpoint_delta is not a mapping",
            "DeerFlow rejects the section and ignores the legacy key; make checkpoint_delta a mapping",
        ),
        Rule(
            RuleCode.CK504,
            Severity.ERROR,
            "cadence DeerFlow reads differently than written",
            "YAML 1.1 reads a boolean as 1 (a snapshot on every write, worse than full mode), 010 as 8 and 1:30 "
            "as 90; write the plain integer you mean",
        ),
        Rule(
            RuleCode.CK505,
            Severity.WARNING,
            "unknown key DeerFlow ignores",
            "the setting has no effect (a misspelt snapshot_frequency leaves the default 10); fix the key name",
        ),
        Rule(
            RuleCode.CK506,
            Severity.WARNING,
            "checkpoint_delta set in full mode",
            "the cadence is ignored while checkpoint_channel_mode is full; remove it or switch to delta",
        ),
        Rule(
            RuleCode.CK507,
            Severity.WARNING,
            "legacy checkpointer section overrides database",
            "checkpoints go where checkpointer: says, not where database: says; remove the section or make them agree",
        ),
        Rule(
            RuleCode.CK508,
            Severity.WARNING,
            "duplicate key",
            "PyYAML silently keeps the last value; keep one key",
        ),
        Rule(
            RuleCode.CK509,
            Severity.INFO,
            "value read from an environment variable",
            "DeerFlow resolves it at load time; check it in the environment every process runs with",
        ),
        Rule(
            RuleCode.CK511,
            Severity.WARNING,
            "the next start's config-upgrade replaces the cadence",
            "make dev/start runs make config-upgrade, which adds the example's nested cadence beside the legacy "
            "key; run ckpt migrate-config before the next start",
        ),
        Rule(
            RuleCode.CK512,
            Severity.WARNING,
            "config-upgrade replaced the cadence",
            "the .bak make config-upgrade left holds another cadence; carry it back with "
            "ckpt migrate-config --restore-from-backup and restart",
        ),
        Rule(
            RuleCode.CK513,
            Severity.ERROR,
            "checkpoint setting DeerFlow accepts but cannot start with",
            "DeerFlow's loader accepts it, and the process stops at startup when it builds its checkpointer; set the "
            "value the message names",
        ),
        Rule(
            RuleCode.CK510,
            Severity.ERROR,
            "configs sharing a database disagree",
            "processes write the same checkpoints with different mode or cadence; give every config the same "
            "values and restart them",
        ),
    )
}


def rule(code: RuleCode) -> Rule:
    return RULES[code]
