"""`ckpt config`: the settings a project file gives, resolved, and where each comes from."""

from __future__ import annotations

from typing import Any

import typer

from deerflow_ckpt.cli import project_options
from deerflow_ckpt.config.project import KEYS
from deerflow_ckpt.exitcodes import ExitCode


def _option_defaults() -> dict[str, Any]:
    """Each key's default, as the first command taking its option declares it (they agree: one option object);
    a default the command works out when it runs (None, with --help's description of it) as that description."""
    from deerflow_ckpt.cli.app import COMMANDS, load_command
    from deerflow_ckpt.commands.show_config import WorkedOut

    by_param = {spec.param: key for key, spec in KEYS.items()}
    defaults: dict[str, Any] = {"select": ["CK"], "extend_select": [], "ignore": []}
    pending = [load_command(name) for name in COMMANDS if name != "config"]
    while pending:
        command = pending.pop(0)
        if command is None:
            continue
        for param in command.params:
            key = by_param.get(param.name or "")
            if key is not None and key not in defaults:
                # Options have show_default, arguments none.
                how = getattr(param, "show_default", None)
                defaults[key] = WorkedOut(how) if param.default is None and isinstance(how, str) else param.default
        pending += getattr(command, "commands", {}).values()
    return defaults


def show_config(ctx: typer.Context) -> None:
    """Print the settings the project's config file gives and where each comes from.

    The file is the nearest .ckpt.toml, or pyproject.toml with a [tool.ckpt] table, from the working
    directory up (or --config-file; none with --isolated). Each line is `key = value  # source`: the
    file and table that set it, or "default". Keys in a command's table ([tool.ckpt.verify-shape])
    apply to that command only; the command line beats every one of them.
    """
    from deerflow_ckpt.commands.show_config import resolved_settings
    from deerflow_ckpt.report.settings_text import render_settings

    project = project_options.project_of(ctx)
    typer.echo(render_settings(project, resolved_settings(project, _option_defaults())), nl=False)
    raise typer.Exit(ExitCode.CLEAN)


def register(app: typer.Typer) -> None:
    app.command("config")(show_config)
