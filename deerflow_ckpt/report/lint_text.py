"""lint-config's text report: `path:line: rule severity: message` per finding, the checkpoint databases
the files point at, a count, and what was checked (never that a file loads). Colour only marks rule codes
and severities.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from deerflow_ckpt.commands.lint_config import LintReport
from deerflow_ckpt.config.lint import Finding, Setting
from deerflow_ckpt.report.annotations import Annotation, severity_counts
from deerflow_ckpt.report.lint_ci import checked_sentence
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.rules import Severity

_SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
INDENT = "    "


def finding_text(name: str, finding: Finding) -> Text:
    # A file's name and what its values say are escaped: neither may start a line of its own (report/printable.py).
    where = printable(name) if finding.line is None else f"{printable(name)}:{finding.line}"
    line = Text(f"{where}: ")
    line.append(finding.rule, style="bold")
    line.append(" ")
    line.append(finding.severity.value, style=_SEVERITY_STYLE[finding.severity])
    line.append(f": {printable(finding.message)}")
    if finding.deerflow_warning is not None:
        line.append(f"\n{INDENT}DeerFlow logs: {printable(finding.deerflow_warning)}")
    return line


def _setting(setting: Setting) -> str:
    value = setting.value if setting.known else "unknown"
    line = f", line {setting.line}" if setting.line is not None else ""
    return printable(f"{value} ({setting.origin}{line})")


def render_text(report: LintReport, annotations: list[Annotation], console: Console) -> None:
    """Findings, the databases the files point at, files left out of the comparison, then a count and what
    was checked."""
    sections: list[list[Text | str]] = [
        [finding_text(name, finding) for name, finding in report.all_findings()],
        database_lines(report),
        left_out_lines(report),
        [summary_line(len(report.files), annotations), checked_sentence(len(report.files))],
    ]
    for index, lines in enumerate(section for section in sections if section):
        if index:
            console.print()
        for line in lines:
            console.print(line)


def database_lines(report: LintReport) -> list[Text | str]:
    databases = report.consistency.databases
    if not databases:
        return []
    sqlite = any(shared.identity.kind == "sqlite" for shared in databases)
    based = f" (relative sqlite_dir resolved against {printable(str(report.base))})" if sqlite else ""
    lines: list[Text | str] = [Text(f"Checkpoint databases{based}:", style="bold")]
    facts = {linted.name: linted.lint.facts for linted in report.files}
    for shared in databases:
        lines.append(f"  {printable(shared.identity.display)}")
        for path in shared.paths:
            entry = facts[path]
            assert entry is not None
            lines.append(f"{INDENT}{printable(path)}: mode {_setting(entry.mode)}, cadence {_setting(entry.cadence)}")
    return lines


def left_out_lines(report: LintReport) -> list[Text | str]:
    left_out = report.consistency.left_out
    if not left_out or len(report.files) < 2:
        return []
    heading = Text("Not compared with other files:", style="bold")
    return [heading, *(f"  {printable(path)}: {printable(why)}" for path, why in left_out)]


def summary_line(files: int, annotations: list[Annotation]) -> Text:
    noun = "file" if files == 1 else "files"
    if not annotations:
        return Text(f"{files} config {noun}: no findings.", style="green")
    counts = severity_counts(annotations)
    text = Text(f"{files} config {noun}: ")
    parts = [(_count(count, severity), _SEVERITY_STYLE[Severity(severity)]) for severity, count in counts.items()]
    for index, (part, style) in enumerate(parts):
        if index:
            text.append(", ")
        text.append(part, style=style)
    text.append(".")
    return text


def _count(count: int, severity: str) -> str:
    plural = "" if count == 1 or severity == Severity.INFO else "s"
    return f"{count} {severity}{plural}"
