"""Find config.yaml the way DeerFlow's AppConfig.resolve_config_path does.

Order: the path given, `$DEER_FLOW_CONFIG_PATH`, `config.yaml` in the project root
(`$DEER_FLOW_PROJECT_ROOT`, else the working directory), then DeerFlow's legacy places, which sit
relative to where DeerFlow is installed (`backend/config.yaml`, then the repository root's). DeerFlow
never expands `~` in those variables: a path starting with `~` fails there, and is reported so here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from deerflow_ckpt.config.environment import DeerFlowInstall
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.fileio import resolved

CONFIG_PATH_ENV = "DEER_FLOW_CONFIG_PATH"
PROJECT_ROOT_ENV = "DEER_FLOW_PROJECT_ROOT"
CONFIG_NAME = "config.yaml"


@dataclass(frozen=True)
class LocatedConfig:
    path: Path
    # How it was found, in words an operator recognises ("$DEER_FLOW_CONFIG_PATH", ...).
    found_via: str


def _tilde_note(raw: str) -> str:
    return f" (DeerFlow does not expand '~': write the full path, {Path(raw).expanduser()})" if raw[:1] == "~" else ""


def project_root(environ: Mapping[str, str], cwd: Path) -> tuple[Path, str]:
    """DeerFlow's project root: $DEER_FLOW_PROJECT_ROOT resolved (relative to the working directory), else it."""
    raw = environ.get(PROJECT_ROOT_ENV, "")
    if not raw:
        return resolved(cwd), "the working directory"
    root = resolved(cwd / raw)
    if not root.exists():
        raise ConfigError(
            f"{PROJECT_ROOT_ENV} is set to '{raw}', but the resolved path '{root}' does not exist.{_tilde_note(raw)}"
        )
    if not root.is_dir():
        raise ConfigError(f"{PROJECT_ROOT_ENV} is set to '{raw}', but the resolved path '{root}' is not a directory.")
    return root, f"${PROJECT_ROOT_ENV}"


def _legacy_candidates(install: DeerFlowInstall | None, root: Path, cwd: Path) -> list[tuple[Path, str]]:
    if install is not None:
        backend, repository = install.legacy_configs()
        return [(backend, f"DeerFlow's legacy place in {install.found_via}"), (repository, "DeerFlow's legacy place")]
    # Where DeerFlow is installed is unknown: guess a checkout's backend/ at the project root or here.
    guess = "(a guess: name the checkout with --deerflow-root)"
    guessed = [
        (directory / "backend" / CONFIG_NAME, f"backend/ under {directory} {guess}") for directory in (root, cwd)
    ]
    if cwd.name == "backend":
        guessed.append((cwd.parent / CONFIG_NAME, f"the directory above backend/ {guess}"))
    return list({path: (path, via) for path, via in guessed}.values())


def locate_config(
    explicit: Path | None, environ: Mapping[str, str], cwd: Path, install: DeerFlowInstall | None = None
) -> LocatedConfig:
    """Resolve config.yaml as DeerFlow does; raises ConfigError naming every place tried when nothing is found."""
    if explicit is not None:
        from deerflow_ckpt.fileio import config_file_problem

        if (problem := config_file_problem(explicit)) is not None:
            raise ConfigError(f"{explicit}: {problem}")
        return LocatedConfig(explicit, "the command line")
    from_env = environ.get(CONFIG_PATH_ENV, "")
    if from_env:
        path = cwd / from_env
        if not path.is_file():
            raise ConfigError(
                f"Config file specified by environment variable `{CONFIG_PATH_ENV}` not found at {from_env}"
                f"{_tilde_note(from_env)}"
            )
        return LocatedConfig(path, f"${CONFIG_PATH_ENV}")
    root, root_via = project_root(environ, cwd)
    candidates = [(root / CONFIG_NAME, root_via), *_legacy_candidates(install, root, resolved(cwd))]
    for path, via in candidates:
        if path.is_file():
            return LocatedConfig(path, via)
    tried = ", ".join(str(path) for path, _ in candidates)
    raise ConfigError(
        f"`config.yaml` not found (tried {tried}); pass a path, set ${CONFIG_PATH_ENV}, or name the DeerFlow "
        "checkout with --deerflow-root"
    )
