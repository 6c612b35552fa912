"""Where DeerFlow lives and which config.yaml it reads: shared by every command, and light enough for
migrate-config's pre-commit start-up (no database modules). The decisions are config/discovery.py's; this
module only says them on stderr."""

from __future__ import annotations

from pathlib import Path

import typer

from deerflow_ckpt.cli.console import info, message
from deerflow_ckpt.config.discovery import DeerFlowEnvironment, LocatedConfig, locate_config, process_environment

DEERFLOW_ROOT_OPTION = typer.Option(
    None,
    "--deerflow-root",
    metavar="DIR",
    help="The DeerFlow checkout or install (a venv or site-packages): its .env and legacy config.yaml places are "
    "DeerFlow's.",
    show_default="a checkout containing the working directory",
)


def deerflow_environment(deerflow_root: Path | None, config: Path | None = None) -> DeerFlowEnvironment:
    """The environment DeerFlow would run with (its .env beneath ours), the .env named on stderr; `config`, a
    config named on the command line, finds its checkout when the working directory is in none."""
    environment = process_environment(deerflow_root, config)
    # Names and paths from a file anyone can write: message() escapes them, once, before they reach a terminal.
    if environment.dotenv is not None:
        info(f"ckpt: {environment.describe_dotenv()}")
    for note in environment.notes:
        message(f"ckpt: warning: {note}")
    if environment.problem is not None:
        message(f"ckpt: warning: {environment.problem}")
    return environment


def say_passed_over(located: LocatedConfig) -> None:
    """The other config.yaml files another launch of DeerFlow would read, on stderr."""
    for warning in located.warnings():
        message(f"ckpt: warning: {warning}")


def default_config(environment: DeerFlowEnvironment) -> Path:
    """config.yaml found the way DeerFlow finds it, named on stderr (for commands given no file)."""
    located = locate_config(None, environment, Path.cwd())
    info(f"ckpt: using {located.path} (found via {located.found_via})")
    say_passed_over(located)
    return located.path
