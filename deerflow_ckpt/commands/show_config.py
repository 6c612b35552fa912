"""`ckpt config`'s core: every setting a project file can give, its resolved value and where it came from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow_ckpt.config.project import COMMAND_TABLES, KEYS, SEVERITY_TABLE, ProjectConfig
from deerflow_ckpt.dataclass import dataclass

DEFAULT = "default"


@dataclass(frozen=True)
class WorkedOut:
    """A default the command works out when it runs, in its --help's words: --jobs's "one per 15,000
    checkpoints, ...", --db's "from config.yaml"."""

    how: str


@dataclass(frozen=True)
class Setting:
    # `fail_on`, `verify-shape.format`, `severity.CK205`.
    key: str
    # A WorkedOut when the command decides at run time; None: not set, and nothing says how it is decided.
    value: Any
    source: str


def resolved_settings(project: ProjectConfig, defaults: Mapping[str, Any]) -> list[Setting]:
    """Every key at the top (the file's value, else the options' default), then each command table's and
    each severity override the file sets."""
    settings = [
        Setting(key, project.values[key], project.table())
        if key in project.values
        else Setting(key, defaults.get(key), DEFAULT)
        for key in KEYS
    ]
    for command in COMMAND_TABLES:
        for key, value in project.commands.get(command, {}).items():
            settings.append(Setting(f"{command}.{key}", value, project.table(command)))
    for code, severity in project.severity.items():
        settings.append(Setting(f"{SEVERITY_TABLE}.{code}", severity, project.table(SEVERITY_TABLE)))
    return settings
