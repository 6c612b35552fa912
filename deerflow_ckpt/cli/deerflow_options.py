"""Where DeerFlow lives and which config.yaml it reads: shared by every command, and light enough for
migrate-config's pre-commit start-up (no database modules)."""

from __future__ import annotations

from pathlib import Path

import typer

from deerflow_ckpt.cli.console import info, message
from deerflow_ckpt.config.environment import DeerFlowEnvironment, process_environment
from deerflow_ckpt.config.locate import locate_config

DEERFLOW_ROOT_OPTION = typer.Option(
    None,
    "--deerflow-root",
    metavar="DIR",
    help="The DeerFlow checkout or install (a venv or site-packages): its .env and legacy config.yaml places are "
    "DeerFlow's. Default: a checkout containing the working directory.",
    show_default=False,
)


def deerflow_environment(deerflow_root: Path | None, config: Path | None = None) -> DeerFlowEnvironment:
    """The environment DeerFlow would run with (its .env beneath ours), the .env named on stderr; `config`, a
    config named on the command line, finds its checkout when the working directory is in none."""
    environment = process_environment(deerflow_root, config)
    # Names and paths from a file anyone can write: message() escapes them, once, before they reach a terminal.
    if environment.dotenv is not None:
        info(f"ckpt: {environment.describe_dotenv()}")
    if environment.problem is not None:
        message(f"ckpt: warning: {environment.problem}")
    return environment


def default_config(environment: DeerFlowEnvironment) -> Path:
    """config.yaml found the way DeerFlow finds it, named on stderr (for commands given no file)."""
    located = locate_config(None, environment.variables, Path.cwd(), environment.install)
    info(f"ckpt: using {located.path} (found via {located.found_via})")
    return located.path
