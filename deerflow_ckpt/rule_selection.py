"""Which rules a run reports, and at which severity: --select, --extend-select, --ignore and --severity.

Codes are matched by prefix, as ruff matches them (`CK2` names CK201-CK207, `CK` every rule). A rule is
reported when its most specific selecting prefix is more specific than its most specific ignoring one (a tie
ignores it), and its severity is the one of the most specific override naming it, else the registry's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.errors import ConfigError, did_you_mean
from deerflow_ckpt.rules import RULES, RuleCode, Severity

EVERY_RULE = "CK"
# The codes a refusal names, from the registry: a rule added at either end moves it.
CODE_RANGE = f"{min(RULES)}-{max(RULES)}"


class UnknownCode(ConfigError):
    """A selector or override names no rule (the message says where it was written)."""


def rule_prefix(text: str, where: str) -> str:
    """`text` as an upper-case code prefix naming at least one rule; UnknownCode otherwise."""
    prefix = text.strip().upper()
    if prefix and any(code.startswith(prefix) for code in RULES):
        return prefix
    # A near miss of a whole code (CK2055, CK502x) is a typo worth naming; a short prefix is a guess.
    hint = did_you_mean(prefix, list(RULES)) if len(prefix) >= len(RuleCode.CK101) else ""
    raise UnknownCode(f"{where}: unknown rule code {text!r}{hint}; codes are {CODE_RANGE}, or a prefix such as CK2")


def severity_named(text: str, where: str) -> Severity:
    try:
        return Severity(text.strip().lower())
    except ValueError:
        names = ", ".join(severity.value for severity in Severity)
        raise ConfigError(f"{where}: unknown severity {text!r}; expected one of {names}") from None


def _specificity(code: str, prefixes: Iterable[str]) -> int:
    """The length of the longest prefix naming `code`, or -1 when none does."""
    return max((len(prefix) for prefix in prefixes if code.startswith(prefix)), default=-1)


class _GradedProtocol(Protocol):
    """A finding: its rule, and itself at another severity."""

    @property
    def rule(self) -> RuleCode: ...

    def graded(self, severity: Severity) -> _GradedProtocol: ...


_Graded = TypeVar("_Graded", bound=_GradedProtocol)


@dataclass(frozen=True)
class RuleSelection:
    select: tuple[str, ...] = (EVERY_RULE,)
    ignore: tuple[str, ...] = ()
    # (prefix, severity) overrides; the most specific prefix naming a rule decides.
    severity: tuple[tuple[str, Severity], ...] = ()

    def enabled(self, code: RuleCode) -> bool:
        chosen = _specificity(code, self.select)
        return chosen >= 0 and chosen > _specificity(code, self.ignore)

    def severity_of(self, code: RuleCode) -> Severity:
        best, severity = -1, RULES[code].severity
        for prefix, override in self.severity:
            if code.startswith(prefix) and len(prefix) >= best:
                best, severity = len(prefix), override
        return severity

    @property
    def is_default(self) -> bool:
        return self == RuleSelection()

    def apply(self, findings: Sequence[_Graded]) -> list[_Graded]:
        """The findings of enabled rules, each at its effective severity (via the finding's `graded`)."""
        # graded() returns the finding's own type: the Protocol cannot say so without Self on each class.
        return [
            finding.graded(self.severity_of(finding.rule))  # type: ignore[misc]
            for finding in findings
            if self.enabled(finding.rule)
        ]


@dataclass(frozen=True)
class SelectionLayer:
    """What one source says (the project file's top, a command's table, the command line), checked."""

    # None: this layer does not choose; a choice replaces the earlier layers' selections and ignores.
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severity: tuple[tuple[str, Severity], ...] = ()


def resolve_selection(layers: Sequence[SelectionLayer]) -> RuleSelection:
    """The selection `layers` make, the lowest precedence first: a later --select states the whole choice,
    --extend-select and --ignore add to what is before them, and a later override of one prefix wins."""
    select: list[str] = [EVERY_RULE]
    ignore: list[str] = []
    severity: list[tuple[str, Severity]] = []
    for layer in layers:
        if layer.select is not None:
            select, ignore = list(layer.select), []
        select += layer.extend_select
        ignore += layer.ignore
        severity += layer.severity
    return RuleSelection(tuple(dict.fromkeys(select)), tuple(dict.fromkeys(ignore)), tuple(severity))
