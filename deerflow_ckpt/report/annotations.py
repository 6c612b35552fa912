"""One finding as every CI format sees it: a registry rule, a severity, a message and where it is.

Commands turn their own results into annotations; the GitHub and SARIF renderers read only these.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.rules import RuleCode, Severity, rule


@dataclass(frozen=True)
class FileSpot:
    """A place in a config file; line is 1-based, None for the whole file."""

    path: str
    line: int | None = None


@dataclass(frozen=True)
class CheckpointSpot:
    """A place in a checkpoint database: the thread, its namespace and, where known, the checkpoint."""

    thread_id: str
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None
    step: int | None = None

    def describe(self) -> str:
        parts = [f"thread {self.thread_id}"]
        if self.checkpoint_ns:
            parts.append(f"namespace {self.checkpoint_ns}")
        if self.checkpoint_id is not None:
            parts.append(f"checkpoint {self.checkpoint_id}")
        if self.step is not None:
            parts.append(f"step {self.step}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Annotation:
    rule: RuleCode
    # Usually the rule's severity; a command may raise or lower it for one finding.
    severity: Severity
    message: str
    where: FileSpot | CheckpointSpot | None = None

    @property
    def title(self) -> str:
        return f"{self.rule} {rule(self.rule).title}"


class _Graded(Protocol):
    @property
    def severity(self) -> Severity: ...


def severity_counts(findings: Iterable[_Graded]) -> dict[str, int]:
    """Findings (annotations, or a command's own findings) per severity, zeros included, most severe first."""
    counts = Counter(finding.severity for finding in findings)
    return {severity.value: counts.get(severity, 0) for severity in Severity}


def at_or_above(annotations: Iterable[Annotation], threshold: Severity) -> int:
    return sum(1 for annotation in annotations if annotation.severity.rank >= threshold.rank)
