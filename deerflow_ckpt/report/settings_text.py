"""`ckpt config`'s text: which project file applies, then one `key = value  # source` line per setting."""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import Enum
from pathlib import Path

from deerflow_ckpt.commands.show_config import Setting, WorkedOut
from deerflow_ckpt.config.project import ProjectConfig
from deerflow_ckpt.redact import redact
from deerflow_ckpt.report.printable import printable


def _toml(value: object) -> str:
    """The value as TOML writes it (a JSON string is a TOML basic string); a default the command works out, in
    parentheses as --help shows it; `(not set)` for None."""
    if value is None:
        return "(not set)"
    if isinstance(value, WorkedOut):
        return f"({value.how})"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, Path):
        value = str(value)
    return json.dumps(value, ensure_ascii=False)


def render_settings(project: ProjectConfig, settings: Sequence[Setting]) -> str:
    head = "none" if project.path is None else str(project.path)
    lines = [f"# project config: {printable(head)} ({printable(project.found_via)})"]
    # A project file may name a DSN with its password (db = "postgresql://u:pw@h/db"): shown masked.
    assignments = [printable(redact(f"{setting.key} = {_toml(setting.value)}")) for setting in settings]
    width = max(len(assignment) for assignment in assignments)
    for assignment, setting in zip(assignments, settings, strict=True):
        lines.append(f"{assignment.ljust(width)}  # {printable(setting.source)}")
    return "\n".join(lines) + "\n"
