"""The environment a DeerFlow process sees: ckpt's own, with the `.env` DeerFlow loads beneath it.

DeerFlow's config package calls python-dotenv's `load_dotenv()` when it is imported: the first `.env`
found walking up from that package's directory is read, its `${VAR}` references interpolated, and
its variables added where the environment does not already set them (the environment wins, even
when empty). ckpt reads the same file with the same library and never exports or prints a value.

Where DeerFlow is installed decides both that walk and its fallback config.yaml places, so it can
be named (`--deerflow-root`); otherwise a DeerFlow checkout around the working directory is used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.fileio import resolved
from deerflow_ckpt.redact import remember_dsn

# python-dotenv's switch: load_dotenv() does nothing when it is set to one of these.
DOTENV_DISABLED_ENV = "PYTHON_DOTENV_DISABLED"
_DISABLED_VALUES = frozenset({"1", "true", "t", "yes", "y"})
# The config package inside a source checkout, and inside an installed site-packages.
SOURCE_PACKAGE = Path("backend", "packages", "harness", "deerflow", "config")
INSTALLED_PACKAGE = Path("deerflow", "config")


@dataclass(frozen=True)
class DeerFlowInstall:
    """Where DeerFlow's code is: a source checkout (`root/backend/...`) or an installed package."""

    root: Path
    # The directory of DeerFlow's config package (app_config.py): .env and legacy configs hang off it.
    package: Path
    source_checkout: bool
    # How it was found, for people: "--deerflow-root", "the checkout around the working directory".
    found_via: str

    def legacy_configs(self) -> tuple[Path, Path]:
        """DeerFlow's fallback config.yaml places: four levels above app_config.py, then one more."""
        parents = self.package.parents
        backend = parents[3] if len(parents) > 3 else parents[-1]
        return backend / "config.yaml", backend.parent / "config.yaml"


@dataclass(frozen=True)
class DeerFlowEnvironment:
    variables: Mapping[str, str]
    install: DeerFlowInstall | None
    # The .env DeerFlow would load, or None; and the names of the variables it supplied here.
    dotenv: Path | None
    from_dotenv: tuple[str, ...]
    # Where the .env search started: DeerFlow's config package, else the working directory.
    searched_from: Path
    # Why the .env found was not read (it is then left out), or None.
    problem: str | None = None

    def describe_dotenv(self) -> str:
        """One line naming the .env and what it supplied (names only: values may be secrets)."""
        if self.dotenv is None:
            return f"no .env found above {self.searched_from}"
        names = ", ".join(f"${name}" for name in self.from_dotenv) or "nothing the environment does not already set"
        return f"{self.dotenv} (DeerFlow loads it) supplies {names}"


def find_install(explicit: Path | None, cwd: Path, config: Path | None = None) -> DeerFlowInstall | None:
    """The DeerFlow checkout or install: `--deerflow-root`, else a checkout containing the working directory,
    else one containing the config named on the command line."""
    if explicit is not None:
        root = Path(explicit).expanduser().resolve()
        install = _install_at(root, "--deerflow-root")
        if install is None:
            raise ConfigError(
                f"--deerflow-root {explicit}: no DeerFlow there (looked for {SOURCE_PACKAGE}/ of a checkout, "
                f"{INSTALLED_PACKAGE}/ in site-packages, or lib/python3.*/site-packages/{INSTALLED_PACKAGE}/ of a venv)"
            )
        return install
    places = [(cwd.resolve(), "the working directory")]
    if config is not None:
        places.append((resolved(config).parent, "the config"))
    for start, what in places:
        for directory in (start, *start.parents):
            if (directory / SOURCE_PACKAGE).is_dir():
                return DeerFlowInstall(directory, directory / SOURCE_PACKAGE, True, f"the checkout around {what}")
    return None


def _install_at(root: Path, via: str) -> DeerFlowInstall | None:
    if (root / SOURCE_PACKAGE).is_dir():
        return DeerFlowInstall(root, root / SOURCE_PACKAGE, True, via)
    if (root / INSTALLED_PACKAGE).is_dir():
        return DeerFlowInstall(root, root / INSTALLED_PACKAGE, False, via)
    for site_packages in sorted(root.glob("lib/python3*/site-packages")):
        if (site_packages / INSTALLED_PACKAGE).is_dir():
            return DeerFlowInstall(root, site_packages / INSTALLED_PACKAGE, False, via)
    return None


def find_dotenv(start: Path) -> Path | None:
    """python-dotenv's find_dotenv from `start`: the first `.env` (a file or FIFO) up to the root."""
    for directory in (start, *start.parents):
        candidate = directory / ".env"
        if candidate.is_file() or candidate.is_fifo():
            return candidate
    return None


def _dotenv_values(path: Path) -> dict[str, str | None]:
    # Imported on demand: only commands that look for a config need it.
    from dotenv.main import DotEnv

    # load_dotenv's own reading: UTF-8, ${VAR} interpolated with the environment winning (override=False).
    try:
        return dict(DotEnv(path, encoding="utf-8", interpolate=True, override=False).dict())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}, the .env DeerFlow loads: {exc.__class__.__name__}") from None


def deerflow_environment(
    environ: Mapping[str, str], cwd: Path, deerflow_root: Path | None = None, config: Path | None = None
) -> DeerFlowEnvironment:
    """What DeerFlow's process would see, run from this environment with this install (`config`: a config
    named on the command line, whose checkout counts when the working directory is in none)."""
    _remember_passwords(environ)
    install = find_install(deerflow_root, cwd, config)
    start = install.package if install is not None else cwd.resolve()
    if environ.get(DOTENV_DISABLED_ENV, "").strip().casefold() in _DISABLED_VALUES:
        return DeerFlowEnvironment(dict(environ), install, None, (), start)
    dotenv = find_dotenv(start)
    if dotenv is None:
        return DeerFlowEnvironment(dict(environ), install, None, (), start)
    if dotenv.is_fifo():
        problem = f"{dotenv} is a FIFO: ckpt does not read it (it would wait for a writer)"
        return DeerFlowEnvironment(dict(environ), install, None, (), start, problem)
    try:
        values = _dotenv_values(dotenv)
    except ConfigError as exc:
        # DeerFlow's load_dotenv fails on it too; a command that needs none of its variables still runs.
        problem = f"{exc}; DeerFlow would fail to start on it too, and its variables are left out here"
        return DeerFlowEnvironment(dict(environ), install, None, (), start, problem)
    supplied = {name: value for name, value in values.items() if value is not None and name not in environ}
    _remember_passwords(supplied)
    return DeerFlowEnvironment({**supplied, **environ}, install, dotenv, tuple(sorted(supplied)), start)


def _remember_passwords(variables: Mapping[str, str]) -> None:
    # A resolved $VAR can reach any message (DeerFlow's carried-forward warning quotes it): mask DSN passwords.
    for value in variables.values():
        if "://" in value:
            remember_dsn(value)


def process_environment(deerflow_root: Path | None = None, config: Path | None = None) -> DeerFlowEnvironment:
    """deerflow_environment for this process's own environment and working directory."""
    return deerflow_environment(os.environ, Path.cwd(), deerflow_root, config)
