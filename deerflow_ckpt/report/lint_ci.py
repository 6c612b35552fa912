"""lint-config findings as CI annotations: each one located at its file and line."""

from __future__ import annotations

from deerflow_ckpt.commands.lint_config import LintReport
from deerflow_ckpt.config.lint import Finding
from deerflow_ckpt.report.annotations import Annotation, FileSpot, severity_counts


def full_message(finding: Finding) -> str:
    """The message, then DeerFlow's own log line verbatim when it logs one for this case."""
    if finding.deerflow_warning is None:
        return finding.message
    return f"{finding.message}. DeerFlow logs: {finding.deerflow_warning}"


def annotations_of(report: LintReport) -> list[Annotation]:
    return [
        Annotation(finding.rule, finding.severity, full_message(finding), FileSpot(name, finding.line))
        for name, finding in report.all_findings()
    ]


# What every format says was checked: no output claims a file loads, since DeerFlow's other sections
# (a missing sandbox:, max_recursion_limit: 0) are never read.
CHECKED_BRIEFLY = "YAML, $VAR references, database: and checkpointer: only"


def checked_sentence(files: int) -> str:
    """What lint-config verified, for the text report's last line."""
    one = files == 1
    return (
        f"Checked: the YAML and $VAR references of {'the whole file' if one else 'each whole file'}, and "
        f"{'its' if one else 'their'} database: and checkpointer: sections. DeerFlow's other sections (sandbox:, "
        f"models: and the rest) are not checked, so this does not say whether DeerFlow loads {'it' if one else 'them'}."
    )


def headline(report: LintReport) -> str:
    counts = severity_counts(annotations_of(report))
    parts = ", ".join(f"{severity}: {count}" for severity, count in counts.items())
    return f"Linted {len(report.files)} config file(s) ({CHECKED_BRIEFLY}): {parts}."
