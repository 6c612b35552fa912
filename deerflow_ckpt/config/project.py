"""The project's ckpt settings: `[tool.ckpt]` in pyproject.toml, or a `.ckpt.toml`, found as ruff finds its own.

From the working directory up, the first directory holding a `.ckpt.toml`, or a `pyproject.toml` with a
`[tool.ckpt]` table, decides (in one directory `.ckpt.toml` wins); `--config-file` names the file instead,
`--isolated` reads none. Each key is a long option's name with `_` for `-` (`fail_on = "warning"`); a key at
the top applies to every command taking that option, a `[tool.ckpt.<command>]` table (`verify-shape`, `inspect`,
...) to one command and beats the top. The command line beats both. `tomllib` is imported only when a file is
read, so a project without one pays nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.errors import ConfigError, did_you_mean
from deerflow_ckpt.fileio import NO_SUCH_FILE

PYPROJECT = "pyproject.toml"
DOTFILE = ".ckpt.toml"
SEVERITY_TABLE = "severity"


@dataclass(frozen=True)
class Key:
    """One settable option: its key, the command-line parameter it sets, and the TOML type it takes."""

    param: str
    kind: type  # str, int or list (of str)
    # Relative paths are relative to the file's directory, as ruff reads its own paths.
    path: bool = False
    # Merged with the command line rather than replaced by it (rule selection: cli/project_options.py).
    merged: bool = False


KEYS: dict[str, Key] = {
    "db": Key("db", str, path=True),
    "schema": Key("schema", str),
    "config": Key("config", str, path=True),
    "deerflow_root": Key("deerflow_root", str, path=True),
    "cadence": Key("cadence", int),
    "max_supersteps": Key("max_supersteps", int),
    "clock_skew": Key("clock_skew", str),
    "rolling_window": Key("rolling_window", str),
    "network_timeout": Key("network_timeout", str),
    "statement_timeout": Key("statement_timeout", str),
    "jobs": Key("jobs", int),
    "format": Key("output_format", str),
    "fail_on": Key("fail_on", str),
    "color": Key("color", str),
    "sqlite_base": Key("sqlite_base", str, path=True),
    "assume_set": Key("assume_set", list),
    # The form LangGraph's allowlist takes, as --allow-type does: ["app.models:Itinerary"].
    "allowed_types": Key("allow_types", list),
    "select": Key("select", list, merged=True),
    "extend_select": Key("extend_select", list, merged=True),
    "ignore": Key("ignore", list, merged=True),
}
# The commands a [tool.ckpt.<command>] table may name (cli/app.py's COMMANDS; tests check they agree).
COMMAND_TABLES = ("migrate-config", "lint-config", "verify-shape", "inspect", "convert", "plan")


@dataclass(frozen=True)
class ProjectConfig:
    """A project file's settings, checked; `path` None when no file applies (none found, or --isolated)."""

    path: Path | None = None
    # How it was chosen: "found from <dir>", "--config-file", "--isolated", "none found".
    found_via: str = "none found"
    values: Mapping[str, Any] = field(default_factory=dict)
    commands: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # [tool.ckpt.severity] (or [severity] in .ckpt.toml): code or prefix -> severity name.
    severity: Mapping[str, str] = field(default_factory=dict)
    # Read from [tool.ckpt] (a pyproject.toml, or a --config-file in that form) rather than a .ckpt.toml's top.
    pyproject_form: bool = False

    def table(self, command: str | None = None) -> str:
        """Where a key of `command`'s table (or the top) is written, for messages: `pyproject.toml [tool.ckpt]`."""
        prefix = "tool.ckpt" if self.pyproject_form else ""
        name = ".".join(part for part in (prefix, command) if part)
        return f"{self.path} [{name}]" if name else f"{self.path}"

    def for_command(self, command: str) -> dict[str, tuple[Any, str]]:
        """key -> (value, where it is written) for `command`: its table's keys beat the top's."""
        chosen = {key: (value, self.table()) for key, value in self.values.items()}
        chosen.update({key: (value, self.table(command)) for key, value in self.commands.get(command, {}).items()})
        return chosen


def find_project_file(start: Path) -> Path | None:
    """The nearest `.ckpt.toml`, or `pyproject.toml` holding `[tool.ckpt]`, from `start` up."""
    for directory in (start, *start.parents):
        dotfile = directory / DOTFILE
        if dotfile.is_file():
            return dotfile
        pyproject = directory / PYPROJECT
        # The text test spares tomllib for the many pyproject.toml files that say nothing about ckpt.
        if pyproject.is_file() and b"tool.ckpt" in _read(pyproject) and "ckpt" in _parse(pyproject).get("tool", {}):
            return pyproject
    return None


def load_project_config(config_file: Path | None, isolated: bool, cwd: Path) -> ProjectConfig:
    """The settings that apply to a run: --isolated none, --config-file that file, else the nearest one."""
    if isolated:
        if config_file is not None:
            raise ConfigError("--isolated reads no project config: it cannot go with --config-file")
        return ProjectConfig(found_via="--isolated")
    if config_file is not None:
        path, via = config_file, "--config-file"
    else:
        found = find_project_file(cwd)
        if found is None:
            return ProjectConfig()
        path, via = found, f"found from {cwd}"
    document = _parse(path)
    # A pyproject.toml, or any file in its form (`tool` is no key of the .ckpt.toml form).
    pyproject_form = path.name == PYPROJECT or "tool" in document
    if pyproject_form:
        tool = document.get("tool", {})
        if not isinstance(tool, dict) or "ckpt" not in tool:
            raise ConfigError(f"{path}: no [tool.ckpt] table")
        document = tool["ckpt"]
        if not isinstance(document, dict):
            raise ConfigError(f"{path}: tool.ckpt must be a table")
    return _checked(document, path, via, pyproject_form)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        # The wording every command uses for a file that is not there.
        raise ConfigError(f"{path}: {NO_SUCH_FILE}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a TOML file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


def _parse(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(_read(path).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _checked(document: dict[str, Any], path: Path, via: str, pyproject_form: bool) -> ProjectConfig:
    project = ProjectConfig(path, via, pyproject_form=pyproject_form)
    values = _checked_values(document, project, None)
    commands: dict[str, dict[str, Any]] = {}
    for command in COMMAND_TABLES:
        table = document.get(command)
        if table is not None:
            if not isinstance(table, dict):
                raise ConfigError(f"{project.table()}: {command} must be a table of settings")
            commands[command] = _checked_values(table, project, command)
    severity = document.get(SEVERITY_TABLE, {})
    if not isinstance(severity, dict) or not all(isinstance(value, str) for value in severity.values()):
        raise ConfigError(f'{project.table()}: {SEVERITY_TABLE} must be a table of code = "severity"')
    return ProjectConfig(path, via, values, commands, dict(severity), pyproject_form)


def _checked_values(table: dict[str, Any], project: ProjectConfig, command: str | None) -> dict[str, Any]:
    """The table's settings, type-checked, relative paths resolved; unknown keys refused with a suggestion."""
    where = project.table(command)
    known = set(KEYS) | ({SEVERITY_TABLE, *COMMAND_TABLES} if command is None else set())
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(f"{where}: unknown key {key!r}{did_you_mean(key, sorted(known))}")
        if key not in KEYS:
            continue  # a nested table, checked by the caller
        spec = KEYS[key]
        if not _is_kind(value, spec.kind):
            kind = {str: "a string", int: "an integer", list: "a list of strings"}[spec.kind]
            raise ConfigError(f"{where}: {key} must be {kind}, got {value!r}")
        if spec.path and project.path is not None and "://" not in value:
            value = str(project.path.parent / Path(value).expanduser())
        values[key] = value
    return values


def _is_kind(value: Any, kind: type) -> bool:
    if kind is list:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))
