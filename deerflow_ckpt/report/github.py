"""GitHub Actions output: one workflow command per annotation, and a Markdown block for $GITHUB_STEP_SUMMARY.

Escaping follows @actions/core (actions/toolkit packages/core/src/command.ts) exactly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from deerflow_ckpt.report.annotations import Annotation, CheckpointSpot, FileSpot, severity_counts
from deerflow_ckpt.report.printable import markdown_cell, printable
from deerflow_ckpt.rules import RULES, Severity, rule

COMMAND_BY_SEVERITY = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
# A step summary may hold at most 1 MiB; 500 rows of capped messages stay well below it.
SUMMARY_ROW_CAP = 500
MESSAGE_CELL_LIMIT = 1000
RULE_ORDER = {code: index for index, code in enumerate(RULES)}


def escape_data(text: str) -> str:
    """The message after '::'; '%' first so the escapes themselves are not escaped again."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value: ':' and ',' would otherwise end the value or the property list."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(annotation: Annotation) -> str:
    """One '::error title=…,file=…,line=…::message' line, without its newline."""
    properties = [("title", annotation.title)]
    message = annotation.message
    spot = annotation.where
    if isinstance(spot, FileSpot):
        properties.append(("file", spot.path))
        if spot.line is not None:
            properties.append(("line", str(spot.line)))
    elif isinstance(spot, CheckpointSpot):
        # No file= makes it a run-level annotation, so the message has to say where.
        message = f"{spot.describe()}: {message}"
    rendered = ",".join(f"{key}={escape_property(printable(value, keep_lines=True))}" for key, value in properties)
    data = escape_data(printable(message, keep_lines=True))
    return f"::{COMMAND_BY_SEVERITY[annotation.severity]} {rendered}::{data}"


def workflow_commands(annotations: Sequence[Annotation]) -> str:
    return "".join(workflow_command(annotation) + "\n" for annotation in annotations)


def table_cell(text: str) -> str:
    """A Markdown table cell: escaped so that nothing in it is markup, HTML, a cell or a row break."""
    return markdown_cell(text)


def one_line(text: str) -> str:
    return " ".join(text.split())


def capped(text: str) -> str:
    return text if len(text) <= MESSAGE_CELL_LIMIT else text[: MESSAGE_CELL_LIMIT - 1] + "…"


def location_text(spot: FileSpot | CheckpointSpot | None) -> str:
    if isinstance(spot, FileSpot):
        return spot.path if spot.line is None else f"{spot.path}:{spot.line}"
    if isinstance(spot, CheckpointSpot):
        return spot.describe()
    return "-"


def counts_line(annotations: Sequence[Annotation]) -> str:
    parts = ", ".join(f"{name}: {count}" for name, count in severity_counts(annotations).items())
    return f"**Findings:** {len(annotations)} ({parts})"


def rule_table(annotations: Sequence[Annotation]) -> list[str]:
    """One row per rule and severity, most severe first, then in registry order."""
    counts = Counter((annotation.rule, annotation.severity) for annotation in annotations)
    keys = sorted(counts, key=lambda key: (-key[1].rank, RULE_ORDER[key[0]]))
    lines = ["| Rule | Severity | Title | Count |", "| --- | --- | --- | ---: |"]
    for code, severity in keys:
        lines.append(f"| {code} | {severity.value} | {table_cell(rule(code).title)} | {counts[(code, severity)]} |")
    return lines


def findings_table(annotations: Sequence[Annotation]) -> list[str]:
    """The findings, most severe first so the row cap drops the least severe ones."""
    ordered = sorted(annotations, key=lambda annotation: -annotation.severity.rank)
    lines = ["| Location | Rule | Severity | Message |", "| --- | --- | --- | --- |"]
    for annotation in ordered[:SUMMARY_ROW_CAP]:
        cells = (
            location_text(annotation.where),
            annotation.rule,
            annotation.severity.value,
            capped(annotation.message),
        )
        lines.append("| " + " | ".join(table_cell(cell) for cell in cells) + " |")
    hidden = len(ordered) - SUMMARY_ROW_CAP
    if hidden > 0:
        lines += ["", f"…and {hidden} more findings not shown here (a step summary is limited to 1 MiB)."]
    return lines


def step_summary(command: str, annotations: Sequence[Annotation], headline: str) -> str:
    """Markdown to append to $GITHUB_STEP_SUMMARY; ends with a blank line so summaries stay apart."""
    # The headline names the database (a path, a DSN): escaped as a cell is, so none of it is markup or HTML.
    lines = [f"### ckpt {markdown_cell(one_line(command))}", "", markdown_cell(one_line(headline)), ""]
    lines += [counts_line(annotations), ""]
    if annotations:
        lines += [*rule_table(annotations), "", *findings_table(annotations), ""]
    return "\n".join(lines) + "\n"
