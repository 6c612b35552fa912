"""The project config on the command line: --config-file and --isolated, the option defaults a project file
sets (click's default_map, so the command line still wins), and the rule-selection options.

The file itself is config/project.py; which rules a run reports is rule_selection.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import typer

from deerflow_ckpt.config.project import KEYS, SEVERITY_TABLE, ProjectConfig, load_project_config
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.rule_selection import RuleSelection, SelectionLayer, resolve_selection, rule_prefix, severity_named

# Where the group keeps the run's project config for its command (ctx.meta is shared along the context chain).
_META_KEY = "deerflow_ckpt.project"

_CODES = "Codes or prefixes (CK2), repeatable or comma-separated"
SELECT_OPTION = typer.Option(
    [], "--select", metavar="CODE", help=f"Report only these rules. {_CODES}.", show_default=False
)
EXTEND_SELECT_OPTION = typer.Option(
    [], "--extend-select", metavar="CODE", help=f"Report these rules too. {_CODES}.", show_default=False
)
IGNORE_OPTION = typer.Option(
    [], "--ignore", metavar="CODE", help=f"Do not report these rules. {_CODES}.", show_default=False
)
SEVERITY_OPTION = typer.Option(
    [],
    "--severity",
    metavar="CODE=SEVERITY",
    help="Report a rule (or prefix) at another severity: error, warning or info; it decides --fail-on too. Repeatable.",
    show_default=False,
)


def load_into(ctx: Any, config_file: Path | None, isolated: bool) -> ProjectConfig:
    """The run's project config, read once and kept for the command (see `project_of`)."""
    project = ctx.meta.get(_META_KEY)
    if project is None:
        project = load_project_config(config_file, isolated, Path.cwd())
        ctx.meta[_META_KEY] = project
    assert isinstance(project, ProjectConfig)
    return project


def project_of(ctx: Any) -> ProjectConfig:
    """The project config the group read for this run (none when a command is called outside `ckpt`)."""
    project = ctx.meta.get(_META_KEY)
    return project if isinstance(project, ProjectConfig) else ProjectConfig()


def given_via(ctx: Any, param: str, option: str) -> str:
    """`option`, or the project file's table when the value came from it (click's DEFAULT_MAP source)."""
    source = ctx.get_parameter_source(param)
    if source is not None and source.name == "DEFAULT_MAP":
        key = next(key for key, spec in KEYS.items() if spec.param == param)
        return f"{option} from {project_of(ctx).for_command(ctx.find_root().invoked_subcommand or '')[key][1]}"
    return option


def default_map(command: Any, project: ProjectConfig, table: str, ctx: Any) -> dict[str, Any]:
    """click's default_map for `command` (and its subcommands): the project's values for the options it takes,
    each checked by the option itself so a bad value names the file and key."""
    settings = {
        KEYS[key].param: (key, value, where)
        for key, (value, where) in project.for_command(table).items()
        if not KEYS[key].merged
    }
    defaults: dict[str, Any] = {}
    for param in command.get_params(ctx):
        if param.name in settings:
            key, value, where = settings[param.name]
            try:
                param.process_value(ctx, value)
            except typer.BadParameter as exc:
                # The key names what is wrong; click's "Invalid value for '--format'" would name an option not given.
                raise ConfigError(f"{where}: {key}: {exc.message}") from None
            defaults[param.name] = value
    for name, sub in getattr(command, "commands", {}).items():
        defaults[name] = default_map(sub, project, table, ctx)
    return defaults


def _prefixes(values: Iterable[str], where: str) -> tuple[str, ...]:
    return tuple(rule_prefix(part, where) for value in values for part in value.split(",") if part.strip())


def _overrides(pairs: Iterable[tuple[str, str]], where: str) -> tuple[tuple[str, Any], ...]:
    return tuple((rule_prefix(code, where), severity_named(severity, where)) for code, severity in pairs)


def _file_layer(values: dict[str, tuple[Any, str]], severity: Sequence[tuple[str, str]], where: str) -> SelectionLayer:
    select = values.get("select")
    return SelectionLayer(
        select=None if select is None else _prefixes(select[0], f"{select[1]}: select"),
        extend_select=_prefixes(*_pair(values, "extend_select")),
        ignore=_prefixes(*_pair(values, "ignore")),
        severity=_overrides(severity, f"{where}: {SEVERITY_TABLE}"),
    )


def _pair(values: dict[str, tuple[Any, str]], key: str) -> tuple[list[str], str]:
    value, where = values.get(key, ([], ""))
    return value, f"{where}: {key}"


def rule_selection(
    ctx: Any,
    command: str,
    select: list[str],
    extend_select: list[str],
    ignore: list[str],
    severity: list[str],
) -> RuleSelection:
    """The rules `command` reports: the project file's top, its [tool.ckpt.<command>] table, then the command line."""
    project = project_of(ctx)
    top = {key: (value, project.table()) for key, value in project.values.items()}
    table = {key: (value, project.table(command)) for key, value in project.commands.get(command, {}).items()}
    layers = [_file_layer(top, list(project.severity.items()), project.table()), _file_layer(table, [], "")]
    pairs = []
    for given in severity:
        code, sep, level = given.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected CODE=SEVERITY (CK205=error), got {given!r}", param_hint="--severity")
        pairs.append((code, level))
    layers.append(
        SelectionLayer(
            select=_prefixes(select, "--select") if select else None,
            extend_select=_prefixes(extend_select, "--extend-select"),
            ignore=_prefixes(ignore, "--ignore"),
            severity=_overrides(pairs, "--severity"),
        )
    )
    return resolve_selection(layers)
