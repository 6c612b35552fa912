"""Find config.yaml the way DeerFlow's AppConfig.resolve_config_path does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from deerflow_ckpt.errors import ConfigError

CONFIG_PATH_ENV = "DEER_FLOW_CONFIG_PATH"
PROJECT_ROOT_ENV = "DEER_FLOW_PROJECT_ROOT"
CONFIG_NAME = "config.yaml"


@dataclass(frozen=True)
class LocatedConfig:
    path: Path
    # How it was found, in words an operator recognises ("$DEER_FLOW_CONFIG_PATH", ...).
    found_via: str


def _project_root(environ: Mapping[str, str], cwd: Path) -> tuple[Path, str]:
    raw = environ.get(PROJECT_ROOT_ENV, "")
    if not raw:
        return cwd, "the working directory"
    root = Path(raw).expanduser().resolve()
    if not root.exists():
        raise ConfigError(f"{PROJECT_ROOT_ENV} is set to {raw!r}, but the resolved path '{root}' does not exist.")
    if not root.is_dir():
        raise ConfigError(f"{PROJECT_ROOT_ENV} is set to {raw!r}, but the resolved path '{root}' is not a directory.")
    return root, f"${PROJECT_ROOT_ENV}"


def locate_config(explicit: Path | None, environ: Mapping[str, str], cwd: Path) -> LocatedConfig:
    """Resolve config.yaml: explicit path, $DEER_FLOW_CONFIG_PATH, project root, then backend/.

    Raises ConfigError naming every place tried when nothing is found.
    """
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file not found at {explicit}")
        return LocatedConfig(explicit, "the command line")
    from_env = environ.get(CONFIG_PATH_ENV, "")
    if from_env:
        path = Path(from_env).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file specified by ${CONFIG_PATH_ENV} not found at {path}")
        return LocatedConfig(path, f"${CONFIG_PATH_ENV}")
    root, root_via = _project_root(environ, cwd)
    # DeerFlow's legacy candidates sit in the monorepo: backend/config.yaml, then the repository root.
    candidates = [
        (root / CONFIG_NAME, root_via),
        (root / "backend" / CONFIG_NAME, f"backend/ under {root_via}"),
    ]
    if root.name == "backend":
        candidates.append((root.parent / CONFIG_NAME, f"the repository root above {root_via}"))
    for path, via in candidates:
        if path.is_file():
            return LocatedConfig(path, via)
    tried = ", ".join(str(path) for path, _ in candidates)
    raise ConfigError(f"`config.yaml` not found (tried {tried}); pass a path or set ${CONFIG_PATH_ENV}")
