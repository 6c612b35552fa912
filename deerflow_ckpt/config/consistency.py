"""Across config files: every config that points at one checkpoint database must agree with the others.

DeerFlow stores neither the channel mode nor the cadence in checkpoints, so processes that share a
database and disagree write the same threads differently. Files are grouped by the database identity
their checkpointer would use; inside a group the effective mode must match, and among delta-mode files
the effective cadence must match too (in full mode the cadence changes nothing on disk).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from deerflow_ckpt.config.identity import DatabaseIdentity
from deerflow_ckpt.config.keys import CHANNEL_MODE_KEY
from deerflow_ckpt.config.lint import CheckpointFacts, Finding, Setting
from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.rules import RuleCode


@dataclass(frozen=True)
class SharedDatabase:
    identity: DatabaseIdentity
    # The files whose checkpointer writes there, in command-line order.
    paths: tuple[str, ...]


@dataclass(frozen=True)
class Consistency:
    databases: tuple[SharedDatabase, ...]
    # (path, finding): a CK510 located in that file.
    findings: tuple[tuple[str, Finding], ...]
    # (path, why the file takes no part in the comparison).
    left_out: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class _Member:
    path: str
    facts: CheckpointFacts


def check_consistency(files: Sequence[tuple[str, CheckpointFacts | None]]) -> Consistency:
    groups: dict[tuple[str, ...], list[_Member]] = {}
    identities: dict[tuple[str, ...], DatabaseIdentity] = {}
    left_out: list[tuple[str, str]] = []
    for path, facts in files:
        if facts is None:
            left_out.append((path, "DeerFlow cannot load it or stops at startup"))
        elif isinstance(facts.database, DatabaseIdentity):
            identities.setdefault(facts.database.key, facts.database)
            groups.setdefault(facts.database.key, []).append(_Member(path, facts))
        else:
            left_out.append((path, facts.database.reason))
    findings: list[tuple[str, Finding]] = []
    for key, members in groups.items():
        identity = identities[key]
        findings += _disagreements(identity, members, _mode_of, "channel mode", CHANNEL_MODE_KEY)
        in_delta = [member for member in members if member.facts.mode.value == "delta"]
        findings += _disagreements(identity, in_delta, _cadence_of, "effective cadence", "snapshot_frequency")
    databases = tuple(SharedDatabase(identities[key], tuple(m.path for m in group)) for key, group in groups.items())
    return Consistency(databases, tuple(findings), tuple(left_out))


def _mode_of(facts: CheckpointFacts) -> Setting:
    return facts.mode


def _cadence_of(facts: CheckpointFacts) -> Setting:
    return facts.cadence


def _where(setting: Setting) -> str:
    line = f", line {setting.line}" if setting.line is not None else ""
    return f"{setting.origin}{line}"


def _disagreements(
    identity: DatabaseIdentity,
    members: list[_Member],
    setting_of: Callable[[CheckpointFacts], Setting],
    label: str,
    key: str,
) -> list[tuple[str, Finding]]:
    known = [(member.path, setting_of(member.facts)) for member in members if setting_of(member.facts).known]
    if len({setting.value for _, setting in known}) < 2:
        return []
    findings = []
    for path, setting in known:
        by_value: dict[object, list[str]] = {}
        for other_path, other in known:
            if other.value != setting.value:
                by_value.setdefault(other.value, []).append(f"{other_path} ({_where(other)})")
        others = "; ".join(f"{value} in {' and '.join(places)}" for value, places in by_value.items())
        message = (
            f"the {label} is {setting.value} here ({_where(setting)}), but {others}; these configs share "
            f"{identity.display}, and every process writing there must use the same {key} (DeerFlow does not "
            "store it in the checkpoints)"
        )
        findings.append((path, Finding(RuleCode.CK510, setting.line, message)))
    return findings
