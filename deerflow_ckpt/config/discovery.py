"""Which DeerFlow install, which environment, which config.yaml and which checkpoint database, and why: the
one place ckpt decides them, in the order DeerFlow does, each step beside the upstream lines it restates.

Upstream is bytedance/deer-flow at f1f4af99 (paths under `backend/packages/harness/deerflow/` unless said):
- `config/app_config.py:54` `load_dotenv()`: the `.env` found walking up from the config package (section 2);
- `config/runtime_paths.py:7-16` `project_root()` and `19-23` `runtime_home()` (section 3): a relative
  $DEER_FLOW_PROJECT_ROOT is resolved against the process's working directory, so per launch (section 6's);
- `config/app_config.py:364-391` `resolve_config_path()` with `158-162` `_legacy_config_candidates()` (section 4);
  a relative $DEER_FLOW_CONFIG_PATH, likewise, per launch;
- `config/database_config.py:259-268` `sqlite_path`: `Path(sqlite_dir).resolve() / "deerflow.db"`, relative to
  the process's working directory; `runtime/checkpointer/provider.py:124` (`connection_string or "store.db"`),
  `runtime/store/_sqlite_utils.py` and `config/paths.py:471-480` (relative to the home) for the legacy
  `checkpointer:` file (section 5);
- the launchers that set that working directory and environment (section 6): `scripts/serve.sh:315-332`
  (make dev / make start export `DEER_FLOW_PROJECT_ROOT` and `DEER_FLOW_HOME`) and `:467` (the gateway runs
  in `backend/`); `docker/docker-compose.yaml:107-128` (the gateway runs in `/app/backend`, with
  `${DEER_FLOW_HOME}` mounted as `/app/backend/.deer-flow`; compose resolves a relative host path against
  the compose file's directory, `docker/`).

Nothing here opens a database: store/source.py opens the candidates (first checkpoint database wins) and
`passed_over` names the candidates that lost. The facts, for people: docs/deerflow-config.md.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum, StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote

from deerflow_ckpt.config import dotenv_file
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.dsn import is_schema_name
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.fileio import resolved
from deerflow_ckpt.locations import DatabaseLocation, PostgresLocation, SqliteLocation
from deerflow_ckpt.redact import remember_dsn

if TYPE_CHECKING:
    from deerflow_ckpt.config.database import DatabaseSettings

CONFIG_PATH_ENV = "DEER_FLOW_CONFIG_PATH"
PROJECT_ROOT_ENV = "DEER_FLOW_PROJECT_ROOT"
HOME_ENV = "DEER_FLOW_HOME"
CONFIG_NAME = "config.yaml"
SQLITE_FILE_NAME = "deerflow.db"
# checkpointer: type sqlite without a connection_string, relative to DeerFlow's home.
CHECKPOINTER_SQLITE_DEFAULT = "store.db"
# The config package inside a source checkout, and inside an installed site-packages.
SOURCE_PACKAGE = Path("backend", "packages", "harness", "deerflow", "config")
INSTALLED_PACKAGE = Path("deerflow", "config")
# docker/docker-compose.yaml: the gateway's working directory (`cd backend` under working_dir /app) and the
# container path ${DEER_FLOW_HOME} is mounted at (lines 107, 112, 124, 128).
CONTAINER_GATEWAY_DIR = "/app/backend"
CONTAINER_HOME = "/app/backend/.deer-flow"


# -- 1. Where DeerFlow is installed ---------------------------------------------------------------------------


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
        """_legacy_config_candidates (app_config.py:158-162): parents[4] of app_config.py is backend/, then its
        parent, the repository root."""
        parents = self.package.parents
        backend = parents[3] if len(parents) > 3 else parents[-1]
        return backend / CONFIG_NAME, backend.parent / CONFIG_NAME


def find_install(explicit: Path | None, cwd: Path, config: Path | None = None) -> DeerFlowInstall | None:
    """The DeerFlow checkout or install: `--deerflow-root`, else a checkout containing the working directory,
    else one containing the config named on the command line."""
    if explicit is not None:
        root = resolved(Path(explicit).expanduser())
        install = _install_at(root, "--deerflow-root")
        if install is None:
            raise ConfigError(
                f"--deerflow-root {explicit}: no DeerFlow there (looked for {SOURCE_PACKAGE}/ of a checkout, "
                f"{INSTALLED_PACKAGE}/ in site-packages, or lib/python3.*/site-packages/{INSTALLED_PACKAGE}/ of a venv)"
            )
        return install
    places = [(resolved(cwd), "the working directory")]
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


# -- 2. The environment DeerFlow runs with: ours, and the .env its config package loads ----------------------


@dataclass(frozen=True)
class DeerFlowEnvironment:
    variables: Mapping[str, str]
    install: DeerFlowInstall | None
    # The .env DeerFlow would load, or None; and the names of the variables it supplied here.
    dotenv: Path | None = None
    from_dotenv: tuple[str, ...] = ()
    # Where the .env search started: DeerFlow's config package, else the working directory.
    searched_from: Path = Path()
    # Why the .env found was not read (it is then left out), or None.
    problem: str | None = None
    # What DeerFlow's python-dotenv makes of the file that people may not expect (a BOM, unparsable lines).
    notes: tuple[str, ...] = ()

    def describe_dotenv(self) -> str:
        """One line naming the .env and what it supplied (names only: values may be secrets)."""
        if self.dotenv is None:
            return f"no .env found above {self.searched_from}"
        names = ", ".join(f"${name}" for name in self.from_dotenv) or "nothing the environment does not already set"
        return f"{self.dotenv} (DeerFlow loads it) supplies {names}"

    @property
    def checkout(self) -> Path | None:
        """The source checkout's root, where DeerFlow's launchers (make dev, docker compose) live."""
        return self.install.root if self.install is not None and self.install.source_checkout else None


def find_dotenv(start: Path) -> Path | None:
    """python-dotenv's find_dotenv (main.py:332-380 at v1.2.2): the first `.env`, a file or FIFO, from `start`
    up to the filesystem root."""
    for directory in (start, *start.parents):
        candidate = directory / ".env"
        if candidate.is_file() or candidate.is_fifo():
            return candidate
    return None


def deerflow_environment(
    environ: Mapping[str, str], cwd: Path, deerflow_root: Path | None = None, config: Path | None = None
) -> DeerFlowEnvironment:
    """What DeerFlow's process would see, run from this environment with this install (`config`: a config
    named on the command line, whose checkout counts when the working directory is in none).

    app_config.py:54 calls `load_dotenv()` at import: `find_dotenv()` walks up from the calling module's
    directory, the config package; the file is read as python-dotenv 1.2.2 reads it (config/dotenv_file.py)."""
    _remember_passwords(environ)
    install = find_install(deerflow_root, cwd, config)
    start = install.package if install is not None else resolved(cwd)
    unread = DeerFlowEnvironment(dict(environ), install, searched_from=start)
    if dotenv_file.is_disabled(environ):
        return unread
    dotenv = find_dotenv(start)
    if dotenv is None:
        return unread
    if dotenv.is_fifo():
        return _unread(unread, f"{dotenv} is a FIFO: ckpt does not read it (it would wait for a writer)")
    try:
        supplied, parsed = dotenv_file.load(dotenv, environ)
    except (OSError, UnicodeDecodeError) as exc:
        # DeerFlow's load_dotenv fails on it too; a command that needs none of its variables still runs.
        problem = f"cannot read {dotenv}, the .env DeerFlow loads: {exc.__class__.__name__}"
        return _unread(unread, f"{problem}; DeerFlow would fail to start on it too, and its variables are left out")
    _remember_passwords(supplied)
    notes = _dotenv_notes(dotenv, parsed)
    names = tuple(sorted(supplied))
    return DeerFlowEnvironment({**supplied, **environ}, install, dotenv, names, start, None, notes)


def _unread(environment: DeerFlowEnvironment, problem: str) -> DeerFlowEnvironment:
    return DeerFlowEnvironment(environment.variables, environment.install, None, (), environment.searched_from, problem)


def _dotenv_notes(path: Path, parsed: dotenv_file.DotenvFile) -> tuple[str, ...]:
    notes: list[str] = []
    marked = [name for name, _ in parsed.bindings if name.startswith(dotenv_file.BYTE_ORDER_MARK)]
    for name in dict.fromkeys(marked):
        bare = name.lstrip(dotenv_file.BYTE_ORDER_MARK)
        notes.append(
            f"{path} starts with a byte-order mark: DeerFlow's python-dotenv (1.2.2) keeps it in the first name, "
            f"U+FEFF then {bare}, so ${bare} is not set by it (save the file as UTF-8 without BOM)"
        )
    if parsed.unparsable_lines:
        lines = ", ".join(str(line) for line in parsed.unparsable_lines)
        notes.append(f"{path}: python-dotenv could not parse the statements at line {lines} (DeerFlow skips them)")
    return tuple(notes)


def _remember_passwords(variables: Mapping[str, str]) -> None:
    # A resolved $VAR can reach any message (DeerFlow's carried-forward warning quotes it): mask DSN passwords.
    for value in variables.values():
        if "://" in value:
            remember_dsn(value)


def process_environment(deerflow_root: Path | None = None, config: Path | None = None) -> DeerFlowEnvironment:
    """deerflow_environment for this process's own environment and working directory."""
    return deerflow_environment(os.environ, Path.cwd(), deerflow_root, config)


# -- 3. runtime_paths.py: the project root and DeerFlow's home ------------------------------------------------


def _tilde_note(raw: str) -> str:
    return f" (DeerFlow does not expand '~': write the full path, {Path(raw).expanduser()})" if raw[:1] == "~" else ""


@dataclass(frozen=True)
class _Base:
    """A directory a DeerFlow process may run in, for a relative variable: DeerFlow resolves
    $DEER_FLOW_CONFIG_PATH and $DEER_FLOW_PROJECT_ROOT against its own working directory."""

    directory: Path
    # Which launch runs there, for people: "a DeerFlow process started in the working directory".
    launch: str


def _relative_bases(environment: DeerFlowEnvironment, cwd: Path, compose: bool) -> list[_Base]:
    """The working directories of the launches `_launches` models, in its order: ckpt's own (DeerFlow's rule
    evaluated where ckpt runs), make dev's gateway in the checkout's backend/ (serve.sh exports a variable
    already set unchanged, :315-317, then :467 `cd backend`), the checkout's root; with `compose`, the
    compose file's docker/, against which docker compose resolves a relative host path it mounts
    (docker-compose.yaml:109 mounts ${DEER_FLOW_CONFIG_PATH} as /app/backend/config.yaml)."""
    bases = [_Base(resolved(cwd), "a DeerFlow process started in the working directory")]
    checkout = environment.checkout
    if checkout is not None:
        bases.append(_Base(checkout / "backend", "make dev / make start's gateway, which runs in backend/"))
        bases.append(_Base(checkout, "a DeerFlow process started in the checkout's root"))
        if compose:
            bases.append(_Base(checkout / "docker", "docker compose, which mounts it from the compose file's docker/"))
    return bases


def _relative_note(name: str, raw: str, base: _Base) -> str:
    return (
        f"${name} ('{raw}' is relative, and DeerFlow resolves it against its working directory: resolved against "
        f"{base.directory}, for {base.launch})"
    )


def project_root(environment: DeerFlowEnvironment, cwd: Path) -> tuple[Path, str]:
    """runtime_paths.py:7-16: $DEER_FLOW_PROJECT_ROOT resolved (it must exist and be a directory), else the
    working directory. In a source checkout make dev and make start export the checkout's root when it is
    unset (scripts/serve.sh:315-317), so from anywhere in a checkout the root is the checkout's."""
    return _project_roots(environment, cwd)[0]


def _project_roots(environment: DeerFlowEnvironment, cwd: Path) -> list[tuple[Path, str]]:
    """The project root (first) and, for a relative $DEER_FLOW_PROJECT_ROOT, the other directories it names
    for another launch (`Path(value).resolve()` is against the process's working directory,
    runtime_paths.py:10): of the launches' directories, the first holding a config.yaml, else the first."""
    raw = environment.variables.get(PROJECT_ROOT_ENV, "")
    if not raw:
        if environment.checkout is not None:
            return [(environment.checkout, f"the checkout's root, as make dev exports ${PROJECT_ROOT_ENV}")]
        return [(resolved(cwd), "the working directory")]
    if Path(raw).is_absolute():
        return [(_existing_root(raw, resolved(Path(raw)), ""), f"${PROJECT_ROOT_ENV}")]
    candidates: list[tuple[Path, _Base]] = []
    for base in _relative_bases(environment, cwd, compose=False):
        root = resolved(base.directory / raw)
        if all(root != seen for seen, _ in candidates):
            candidates.append((root, base))
    found = [(root, _relative_note(PROJECT_ROOT_ENV, raw, base)) for root, base in candidates if root.is_dir()]
    if found:
        # The root is there to find config.yaml: the first launch whose root holds one, else the first's.
        return sorted(found, key=lambda item: not (item[0] / CONFIG_NAME).is_file())
    # DeerFlow's error as a process started here meets it, and where the other launches looked.
    also = ""
    if len(candidates) > 1:
        elsewhere = ", ".join(f"{root} ({base.launch})" for root, base in candidates[1:])
        also = f" It is relative, and DeerFlow resolves it against its working directory: no directory at {elsewhere}."
    _existing_root(raw, candidates[0][0], also)  # raises: none of them is a directory
    raise AssertionError(candidates)


def _existing_root(raw: str, root: Path, also: str) -> Path:
    if not root.exists():
        raise ConfigError(
            f"{PROJECT_ROOT_ENV} is set to '{raw}', but the resolved path '{root}' does not exist.{_tilde_note(raw)}"
            f"{also}"
        )
    if not root.is_dir():
        raise ConfigError(
            f"{PROJECT_ROOT_ENV} is set to '{raw}', but the resolved path '{root}' is not a directory.{also}"
        )
    return root


def runtime_home(environment: DeerFlowEnvironment, process_dir: Path) -> Path:
    """runtime_paths.py:19-23: $DEER_FLOW_HOME resolved against the process's directory, else
    `<project root>/.deer-flow` (for a process started in `process_dir` without a project root set)."""
    home = environment.variables.get(HOME_ENV)
    if home:
        return resolved(process_dir / home)
    root = environment.variables.get(PROJECT_ROOT_ENV)
    return resolved(process_dir / root / ".deer-flow") if root else resolved(process_dir / ".deer-flow")


# -- 4. app_config.py: which config.yaml ----------------------------------------------------------------------


@dataclass(frozen=True)
class LocatedConfig:
    path: Path
    # How it was found, in words an operator recognises ("$DEER_FLOW_CONFIG_PATH", ...).
    found_via: str
    # Other config.yaml files DeerFlow would read in another launch, for the warning: (path, which launch).
    passed_over: tuple[tuple[Path, str], ...] = ()
    # Found through a relative variable, which DeerFlow resolves against its working directory: found_via says
    # against which directory, and every command says it.
    relative: bool = False

    def warnings(self) -> list[str]:
        return [
            f"{path} also exists (last written {last_written(path)}) and is passed over for {self.path}: {why}"
            for path, why in self.passed_over
        ]


def _legacy_candidates(environment: DeerFlowEnvironment, root: Path, cwd: Path) -> list[tuple[Path, str]]:
    install = environment.install
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


def locate_config(explicit: Path | None, environment: DeerFlowEnvironment, cwd: Path) -> LocatedConfig:
    """resolve_config_path (app_config.py:364-391): the path given, $DEER_FLOW_CONFIG_PATH (relative: against
    the working directory of each launch, _config_from_env), `config.yaml` in the project root, then the legacy
    places beside the install. Raises ConfigError naming every place tried when nothing is found."""
    if explicit is not None:
        from deerflow_ckpt.fileio import config_file_problem

        if (problem := config_file_problem(explicit)) is not None:
            raise ConfigError(f"{explicit}: {problem}")
        return LocatedConfig(explicit, "the command line")
    from_env = environment.variables.get(CONFIG_PATH_ENV, "")
    if from_env:
        return _config_from_env(from_env, environment, cwd)
    roots = _project_roots(environment, cwd)
    (root, root_via), other_roots = roots[0], roots[1:]
    candidates = [(root / CONFIG_NAME, root_via), *_legacy_candidates(environment, root, resolved(cwd))]
    # existing_project_file (runtime_paths.py:34-41) wants a file; the legacy places only need to exist.
    found = [(path, via) for index, (path, via) in enumerate(candidates) if _is_config(path, legacy=index > 0)]
    if not found:
        tried = ", ".join(str(path) for path, _ in candidates)
        raise ConfigError(
            f"`config.yaml` not found (tried {tried}); pass a path, set ${CONFIG_PATH_ENV}, or name the DeerFlow "
            "checkout with --deerflow-root"
        )
    (path, via), losers = found[0], dict(found[1:])
    losers.pop(path, None)
    passed = [(loser, _config_launch(loser)) for loser in losers]
    # A relative project root names another directory for another launch: that launch reads its config.yaml.
    for other, other_via in other_roots:
        if (other / CONFIG_NAME).is_file() and other / CONFIG_NAME != path:
            passed.append((other / CONFIG_NAME, f"{other_via} reads that one"))
    raw_root = environment.variables.get(PROJECT_ROOT_ENV, "")
    relative = path == root / CONFIG_NAME and bool(raw_root) and not Path(raw_root).is_absolute()
    return LocatedConfig(path, via, tuple(passed), relative)


def _config_from_env(raw: str, environment: DeerFlowEnvironment, cwd: Path) -> LocatedConfig:
    """app_config.py:378-382: `Path($DEER_FLOW_CONFIG_PATH)`, which only has to exist; relative, against the
    process's working directory, so the first launch's (_relative_bases) where it exists wins."""
    if Path(raw).is_absolute():
        if not Path(raw).exists():
            raise ConfigError(f"Config file specified by environment variable `{CONFIG_PATH_ENV}` not found at {raw}")
        return LocatedConfig(Path(raw), f"${CONFIG_PATH_ENV}")
    tried: list[tuple[Path, _Base]] = []
    for base in _relative_bases(environment, cwd, compose=True):
        # Resolved, to name it plainly (DeerFlow opens `raw` itself, the same file from its directory).
        path = resolved(base.directory / raw)
        if all(path != seen for seen, _ in tried):
            tried.append((path, base))
    found = [(path, base) for path, base in tried if path.exists()]
    if not found:
        places = ", ".join(f"{path} ({base.launch})" for path, base in tried)
        raise ConfigError(
            f"Config file specified by environment variable `{CONFIG_PATH_ENV}` not found at {raw}{_tilde_note(raw)}. "
            f"It is relative, and DeerFlow resolves it against its working directory: tried {places}"
        )
    (path, base), others = found[0], found[1:]
    passed = tuple((other, f"{other_base.launch} reads that one") for other, other_base in others)
    return LocatedConfig(path, _relative_note(CONFIG_PATH_ENV, raw, base), passed, relative=True)


def _is_config(path: Path, legacy: bool) -> bool:
    return path.exists() if legacy else path.is_file()


def _config_launch(path: Path) -> str:
    if path.parent.name == "backend":
        return (
            f"a DeerFlow process started in {path.parent} without ${PROJECT_ROOT_ENV} (backend's own make dev, "
            "a bare uvicorn) reads that one"
        )
    return f"a DeerFlow process whose project root is {path.parent} reads that one"


# -- 5. database_config.py and the legacy checkpointer: which file, for a process started in a directory ------


def sqlite_file(sqlite_dir: str, process_dir: Path) -> Path:
    """database.sqlite_dir's file for a process started in `process_dir`: DatabaseConfig.sqlite_path
    (database_config.py:259-268), `Path(sqlite_dir).resolve() / "deerflow.db"`."""
    return resolved(process_dir / sqlite_dir / SQLITE_FILE_NAME)


def checkpointer_sqlite_file(connection: str | None, environ: Mapping[str, str], process_dir: Path) -> Path | None:
    """checkpointer: type sqlite's file for a process in `process_dir` (runtime/store/_sqlite_utils.py); None for
    :memory:. A relative path is under DeerFlow's home (runtime_home)."""
    connection = connection or CHECKPOINTER_SQLITE_DEFAULT
    if connection == ":memory:":
        return None
    if connection.startswith("file:"):
        # URIs go to SQLite unchanged: a relative one opens against the process working directory.
        return resolved(process_dir / _uri_path(connection))
    location = Path(connection)
    if location.is_absolute():
        return resolved(location)
    return runtime_home(DeerFlowEnvironment(environ, None), process_dir) / location


def _uri_path(connection: str) -> str:
    path = connection[len("file:") :].split("?", 1)[0].split("#", 1)[0]
    if path.startswith("//"):
        path = path[path.find("/", 2) :] if "/" in path[2:] else "/"
    return unquote(path)


# -- 6. The processes DeerFlow may be running as, and the file each one uses ----------------------------------


@dataclass(frozen=True)
class _Launch:
    """A DeerFlow process: where it runs and the variables it runs with (host paths)."""

    directory: Path
    environment: DeerFlowEnvironment
    why: str


def _launches(environment: DeerFlowEnvironment, cwd: Path, config_path: Path | None) -> list[_Launch]:
    """Started where ckpt runs (DeerFlow's own rule, evaluated here); make dev's gateway in the checkout's
    backend/ with serve.sh's exports, then one started in the checkout's root; beside the config and in its
    backend/ when the checkout is unknown."""
    here = resolved(cwd)
    launches = [_Launch(here, environment, "a DeerFlow process started in the working directory")]
    checkout = environment.checkout
    if checkout is not None:
        exports = {PROJECT_ROOT_ENV: str(checkout), HOME_ENV: str(checkout / "backend" / ".deer-flow")}
        variables = {**exports, **environment.variables}
        launches.append(
            _Launch(
                checkout / "backend",
                DeerFlowEnvironment(variables, environment.install),
                "make dev / make start's gateway, which runs in backend/",
            )
        )
        launches.append(_Launch(checkout, environment, "a DeerFlow process started in the checkout's root"))
    elif config_path is not None:
        config_dir = resolved(config_path).parent
        for directory in (config_dir, config_dir / "backend"):
            launches.append(_Launch(directory, environment, f"a DeerFlow process started in {directory} (a guess)"))
    return launches


def _compose_home(environment: DeerFlowEnvironment, cwd: Path) -> tuple[Path, str] | None:
    """Docker compose's host directory for the container's backend/.deer-flow: $DEER_FLOW_HOME, a relative one
    resolved against the compose file's directory, the checkout's docker/ (docker-compose.yaml:112)."""
    home = environment.variables.get(HOME_ENV)
    if not home:
        return None
    why = f"docker compose's mount of ${HOME_ENV} as the gateway's backend/.deer-flow"
    if Path(home).is_absolute():
        return resolved(Path(home)), why
    checkout = environment.checkout
    if checkout is not None:
        return resolved(checkout / "docker" / home), f"{why} (relative: against the compose file's docker/)"
    return resolved(cwd / home), f"{why} (relative: against the working directory; name the checkout to use docker/)"


def _from_container(container_path: str | None, host_home: Path) -> Path | None:
    """A container path under the mounted home, on the host; None for one outside it."""
    if container_path is None:
        return None
    normal = posixpath.normpath(container_path)
    if normal != CONTAINER_HOME and not normal.startswith(CONTAINER_HOME + "/"):
        return None
    return resolved(host_home / normal[len(CONTAINER_HOME) :].lstrip("/"))


def _container_sqlite_file(sqlite_dir: str) -> str:
    return posixpath.join(CONTAINER_GATEWAY_DIR, sqlite_dir, SQLITE_FILE_NAME)


def _container_checkpointer_file(connection: str | None) -> str | None:
    # In the container DEER_FLOW_HOME is the mount point itself (docker-compose.yaml:128).
    connection = connection or CHECKPOINTER_SQLITE_DEFAULT
    if connection == ":memory:":
        return None
    if connection.startswith("file:"):
        return posixpath.join(CONTAINER_GATEWAY_DIR, _uri_path(connection))
    return posixpath.join(CONTAINER_HOME, connection)


def _candidates(
    file_for: _FileFor, container_file: str | None, environment: DeerFlowEnvironment, cwd: Path, config: Path | None
) -> tuple[list[Path], list[str]]:
    """The files, most likely first: docker compose's when $DEER_FLOW_HOME is set here (an exported home beats a
    file left in the checkout), then each launch's. One line of why each."""
    found: dict[Path, str] = {}
    compose = _compose_home(environment, cwd)
    if compose is not None:
        mounted = _from_container(container_file, compose[0])
        if mounted is not None:
            found[mounted] = f"{compose[1]} ({compose[0]})"
    for launch in _launches(environment, cwd, config):
        path = file_for(launch)
        if path is not None:
            found.setdefault(path, launch.why)
    return list(found), list(found.values())


class _FileFor:
    """The file a launch uses: database.sqlite_dir's, or the legacy checkpointer's."""

    def __init__(self, sqlite_dir: str | None = None, connection: str | None = None) -> None:
        self.sqlite_dir, self.connection = sqlite_dir, connection

    def __call__(self, launch: _Launch) -> Path | None:
        if self.sqlite_dir is not None:
            return sqlite_file(self.sqlite_dir, launch.directory)
        return checkpointer_sqlite_file(self.connection, launch.environment.variables, launch.directory)


class Refusal(Enum):
    """When DeerFlow gives up on settings: loading the file, or starting the process that loaded it."""

    # AppConfig.from_file raises (pydantic rejects a value): nothing of the file is used.
    LOAD = "load"
    # DeerFlow's loader accepts the value; the checkpointer or store provider raises when the process starts.
    STARTUP = "startup"


class RefusedFor(StrEnum):
    """What DeerFlow refuses in the settings that decide where checkpoints go."""

    NO_TYPE = "no type"
    UNKNOWN_TYPE = "unknown type"
    BAD_SCHEMA = "bad schema"
    NOT_A_STRING = "not a string"
    # Refused at startup: the providers raise "... is required for the postgres backend".
    NO_DSN = "no dsn"


@dataclass(frozen=True)
class CheckpointStorage:
    """Where DeerFlow's checkpointer keeps checkpoints under a config's settings: the section that decides (a
    `checkpointer:` section overrides `database:`, runtime/checkpointer/provider.py) and what it names."""

    section: Literal["checkpointer", "database"]
    # Its type or backend as written: "sqlite", "postgres", "memory" (or, refused, what it says).
    kind: str | None
    refused_for: RefusedFor | None = None
    # NOT_A_STRING: the value named, never shown.
    problem: str = ""
    # sqlite: the file each launch uses, and that file inside DeerFlow's container (None: in memory).
    file_for: _FileFor | None = None
    container_file: str | None = None
    # postgres: the DSN, or the $VAR it comes from when that is not set here; the schema (BAD_SCHEMA: the refused one).
    dsn: str | None = None
    unset_reference: str | None = None
    schema: str = ""

    @property
    def refusal(self) -> Refusal | None:
        if self.refused_for is None:
            return None
        return Refusal.STARTUP if self.refused_for is RefusedFor.NO_DSN else Refusal.LOAD


def checkpoint_storage(settings: DatabaseSettings) -> CheckpointStorage:
    """What DeerFlow does with these settings, in its order: the checkpointer: section's type (required, one of
    memory, sqlite or postgres), its schema and connection_string, then database.backend and its fields."""
    # Here, not at the top: with --db, or with no config, the config reader (PyYAML) is never loaded.
    from deerflow_ckpt.config.database import NotAString

    # DatabaseConfig's postgres_url is a str, checked when the file loads whichever section then decides: null or a
    # value that is not a string refuses the whole file.
    url = settings.postgres_url
    under = (
        " (DeerFlow checks database: under a checkpointer: section too)" if settings.checkpointer is not None else ""
    )
    if url is None and settings.postgres_url_reference is None:
        problem = "database.postgres_url is null, not a string: DeerFlow refuses it (Input should be a valid string)"
        return CheckpointStorage("database", settings.backend, RefusedFor.NOT_A_STRING, problem + under)
    if isinstance(url, NotAString):
        return CheckpointStorage("database", settings.backend, RefusedFor.NOT_A_STRING, url.problem + under)
    override = settings.checkpointer
    if override is not None:
        kind = override.kind
        if kind is None:
            return CheckpointStorage("checkpointer", kind, RefusedFor.NO_TYPE)
        if kind not in ("memory", "sqlite", "postgres"):
            return CheckpointStorage("checkpointer", kind, RefusedFor.UNKNOWN_TYPE)
        if override.postgres_schema and not is_schema_name(override.postgres_schema):
            return CheckpointStorage("checkpointer", kind, RefusedFor.BAD_SCHEMA, schema=override.postgres_schema)
        connection = override.connection_string
        if isinstance(connection, NotAString):
            return CheckpointStorage("checkpointer", kind, RefusedFor.NOT_A_STRING, connection.problem)
        if kind == "postgres":
            if not connection:
                return CheckpointStorage("checkpointer", kind, RefusedFor.NO_DSN)
            return CheckpointStorage("checkpointer", kind, dsn=connection, schema=override.postgres_schema or "")
        if kind == "sqlite":
            file_for = _FileFor(connection=connection)
            return CheckpointStorage(
                "checkpointer", kind, file_for=file_for, container_file=_container_checkpointer_file(connection)
            )
        return CheckpointStorage("checkpointer", kind)
    backend = settings.backend
    if backend == "postgres":
        if url is None:
            return CheckpointStorage("database", backend, unset_reference=settings.postgres_url_reference)
        if not url:
            # DatabaseConfig accepts an empty postgres_url; the checkpointer and store providers raise.
            return CheckpointStorage("database", backend, RefusedFor.NO_DSN)
        return CheckpointStorage("database", backend, dsn=url, schema=settings.postgres_schema)
    if backend == "sqlite":
        sqlite_dir = settings.sqlite_dir
        file_for = _FileFor(sqlite_dir=sqlite_dir)
        return CheckpointStorage(
            "database", backend, file_for=file_for, container_file=_container_sqlite_file(sqlite_dir)
        )
    return CheckpointStorage("database", backend)


def file_for_process(storage: CheckpointStorage, variables: Mapping[str, str], process_dir: Path) -> Path | None:
    """The SQLite file `storage` names for one DeerFlow process, started in `process_dir` with `variables`."""
    assert storage.file_for is not None
    return storage.file_for(_Launch(process_dir, DeerFlowEnvironment(variables, None), ""))


def database_location(
    settings: DatabaseSettings, config_path: Path, environment: DeerFlowEnvironment, cwd: Path
) -> DatabaseLocation:
    """The database DeerFlow's checkpointer uses under these settings (checkpoint_storage), with every file a
    launch may use for SQLite; a ConfigError says why there is none."""
    storage = checkpoint_storage(settings)
    if storage.section == "checkpointer":
        via = f"checkpointer: section of {config_path} (it overrides database:)"
        if storage.refused_for is RefusedFor.NO_TYPE:
            raise ConfigError(f"{via} has no type: DeerFlow refuses this config (checkpointer.type: Field required)")
        if storage.refused_for is RefusedFor.UNKNOWN_TYPE:
            raise ConfigError(
                f"{via} has type {storage.kind!r}: DeerFlow refuses this config (memory, sqlite or postgres)"
            )
        if storage.refused_for is RefusedFor.BAD_SCHEMA:
            raise ConfigError(
                f"{via}: postgres_schema {storage.schema!r} is not a plain lowercase PostgreSQL identifier; "
                "DeerFlow refuses this config"
            )
        if storage.refused_for is RefusedFor.NOT_A_STRING:
            raise ConfigError(f"{via}: {storage.problem}")
        if storage.refused_for is RefusedFor.NO_DSN:
            raise ConfigError(f"{via} has type postgres but no connection_string")
    else:
        via = f"database: section of {config_path}"
        if storage.unset_reference is not None:
            raise ConfigError(f"{via}: postgres_url refers to ${storage.unset_reference}, which is not set")
        if storage.refused_for is RefusedFor.NOT_A_STRING:
            raise ConfigError(f"{via}: {storage.problem}")
        if storage.refused_for is RefusedFor.NO_DSN:
            raise ConfigError(f"{via}: database.postgres_url is required for the postgres backend")
    if storage.dsn is not None:
        return PostgresLocation(storage.dsn, storage.schema, via)
    if storage.file_for is not None:
        files, whys = _candidates(storage.file_for, storage.container_file, environment, cwd, config_path)
        if not files:
            raise ConfigError(f"{via} uses an in-memory SQLite checkpointer: nothing is stored on disk")
        return SqliteLocation(files, via, whys)
    if storage.section == "checkpointer":
        raise ConfigError(f"{via} has type {storage.kind!r}: nothing is stored on disk")
    raise ConfigError(f"{via} selects backend {storage.kind!r}: nothing is stored on disk")


def legacy_checkpointer_files(
    settings: DatabaseSettings | None,
    config_path: Path | None,
    environment: DeerFlowEnvironment,
    cwd: Path,
    chosen: Path,
) -> list[Path]:
    """The files a legacy `checkpointer:` section of type sqlite writes, other than `chosen`: the config's
    connection_string when it has such a section, and DeerFlow's default (CHECKPOINTER_SQLITE_DEFAULT, what a
    section without one, current or past, writes), each under DeerFlow's home (resolve_path, paths.py:471-480)
    for every launch `_launches` models, and under the home of the process that wrote `chosen` when `chosen`
    is database.sqlite_dir's file (a process in P writes P/<sqlite_dir>/deerflow.db; its home, with no
    $DEER_FLOW_HOME or $DEER_FLOW_PROJECT_ROOT, is P/.deer-flow)."""
    from deerflow_ckpt.config.database import NotAString

    connections: list[str | None] = [None]
    override = settings.checkpointer if settings is not None else None
    if override is not None and override.kind == "sqlite" and not isinstance(override.connection_string, NotAString):
        connections.insert(0, override.connection_string)
    sqlite_dir = settings.sqlite_dir if settings is not None else None
    writer_home = _writer_home(chosen, sqlite_dir or ".deer-flow/data")
    found: list[Path] = []
    for connection in dict.fromkeys(connection or CHECKPOINTER_SQLITE_DEFAULT for connection in connections):
        files, _ = _candidates(
            _FileFor(connection=connection), _container_checkpointer_file(connection), environment, cwd, config_path
        )
        found += files
        if writer_home is not None and connection != ":memory:" and not connection.startswith("file:"):
            found.append(resolved(writer_home / connection))
    chosen = resolved(chosen)
    return [path for path in dict.fromkeys(found) if path != chosen]


def _writer_home(chosen: Path, sqlite_dir: str) -> Path | None:
    """The home (P/.deer-flow) of the process P whose database.sqlite_dir file `chosen` is, or None when
    `chosen` is not `<sqlite_dir>/deerflow.db` under some directory (or sqlite_dir is absolute)."""
    # Path(".").parts is (): `sqlite_dir: .` (or `./`, `data/..`) is the process's directory itself.
    parts = Path(posixpath.normpath(sqlite_dir)).parts
    if Path(sqlite_dir).is_absolute() or ".." in parts or chosen.name != SQLITE_FILE_NAME:
        return None
    directory = resolved(chosen).parent
    if not parts:
        return directory / ".deer-flow"
    if directory.parts[-len(parts) :] != parts or len(directory.parts) <= len(parts):
        return None
    return directory.parents[len(parts) - 1] / ".deer-flow"


def default_sqlite_location(sqlite_dir: str, environment: DeerFlowEnvironment, cwd: Path) -> SqliteLocation:
    """No config: DeerFlow's default `sqlite_dir` for each launch (a process here, make dev's gateway, docker
    compose's mount), and the working directory's backend/ as a guess."""
    file_for = _FileFor(sqlite_dir=sqlite_dir)
    files, whys = _candidates(file_for, _container_sqlite_file(sqlite_dir), environment, cwd, None)
    guess = sqlite_file(sqlite_dir, resolved(cwd) / "backend")
    if guess not in files:
        files, whys = [*files, guess], [*whys, "a DeerFlow process started in backend/ here (a guess)"]
    return SqliteLocation(files, "DeerFlow's default SQLite locations", whys)


# -- 7. What lost: the candidates after the one chosen that exist too -----------------------------------------


def last_written(path: Path) -> str:
    """The newest modification time of the file and its -wal, in UTC."""
    return _utc(_last_write(path))


def _last_write(path: Path) -> float:
    times = [path.stat().st_mtime]
    wal = Path(f"{path}-wal")
    # An empty -wal is no write: any reader of a WAL database (ckpt included) creates one.
    if wal.is_file() and (status := wal.stat()).st_size > 0:
        times.append(status.st_mtime)
    return max(times)


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def passed_over(location: SqliteLocation, chosen: Path) -> list[str]:
    """A warning for each candidate after `chosen` that exists: the file, its last write, who would use it; and
    a hint when it was written after the chosen one."""
    if chosen not in location.candidates:
        return []
    chosen_write = _last_write(chosen)
    warnings: list[str] = []
    for candidate in location.candidates[location.candidates.index(chosen) + 1 :]:
        if not candidate.is_file():
            continue
        write = _last_write(candidate)
        line = (
            f"{candidate} also exists (last written {_utc(write)}; {location.why(candidate)}) and is passed over "
            f"for {chosen} (last written {_utc(chosen_write)}; {location.why(chosen)})"
        )
        if write > chosen_write:
            line += f"; it was written later: if DeerFlow runs that way, pass --db {candidate}"
        warnings.append(line)
    return warnings


@dataclass(frozen=True)
class Discovery:
    """What discovery found for a database command: the config (None when none was found and none is needed),
    its settings, where its database is, and what was tried on the way."""

    config: LocatedConfig | None
    settings: DatabaseSettings | None
    location: DatabaseLocation | None
    tried: tuple[str, ...] = field(default_factory=tuple)


def discover(
    db_given: bool, config: Path | None, environment: DeerFlowEnvironment, cwd: Path, sqlite_default: str
) -> Discovery:
    """The config and the database location, as DeerFlow finds them (`db_given`: --db names the database, so a
    missing config is no error unless one was asked for)."""
    tried: list[str] = []
    located: LocatedConfig | None = None
    try:
        located = locate_config(config, environment, cwd)
    except ConfigError as exc:
        if config is not None or (not db_given and environment.variables.get(CONFIG_PATH_ENV)):
            raise
        tried.append(str(exc))
    settings = None
    if located is not None:
        # Here: the config's reader (PyYAML, DeerFlow's value rules) loads only when there is a config to read.
        from deerflow_ckpt.config.database import load_database_settings

        settings = load_database_settings(located.path, environment.variables)
    if db_given:
        return Discovery(located, settings, None, tuple(tried))
    if settings is not None and located is not None:
        return Discovery(located, settings, database_location(settings, located.path, environment, cwd))
    return Discovery(None, None, default_sqlite_location(sqlite_default, environment, cwd), tuple(tried))
