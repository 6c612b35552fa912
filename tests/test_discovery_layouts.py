"""Deployments found as DeerFlow finds them: real directory trees, ckpt run in them, and DeerFlow's path rules
restated below (from bytedance/deer-flow at f1f4af99) as the oracle each answer is compared with.

The four layouts operators run (make dev's exported root, an exported DEER_FLOW_HOME beating a stale file,
compose's relative home, a launch from the root), a stale candidate named with its last write time, and a
`.env` saved with a byte-order mark.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import pytest

from deerflow_ckpt.config.discovery import SOURCE_PACKAGE
from fixtures.dbbuilder.build import build_sqlite
from tests.cli import run_ckpt

# Each builds a tree and runs ckpt in it several times: about a second.
pytestmark = pytest.mark.slow

# -- DeerFlow's rules, restated (paths under backend/packages/harness/deerflow/ unless said) ------------------


def deerflow_project_root(cwd: Path, env: dict[str, str]) -> Path:
    """config/runtime_paths.py:7-16 project_root(): $DEER_FLOW_PROJECT_ROOT resolved, else the working directory."""
    raw = env.get("DEER_FLOW_PROJECT_ROOT")
    return (cwd / raw).resolve() if raw else cwd.resolve()


def deerflow_config_path(cwd: Path, env: dict[str, str], checkout: Path) -> Path | None:
    """config/app_config.py:364-391 resolve_config_path() with no argument: $DEER_FLOW_CONFIG_PATH, then
    existing_project_file(("config.yaml",)) (runtime_paths.py:34-41), then _legacy_config_candidates()
    (app_config.py:158-162: parents[4] of app_config.py, backend/, then the repository root)."""
    if env.get("DEER_FLOW_CONFIG_PATH"):
        return cwd / env["DEER_FLOW_CONFIG_PATH"]
    project = deerflow_project_root(cwd, env) / "config.yaml"
    if project.is_file():
        return project
    for legacy in (checkout / "backend" / "config.yaml", checkout / "config.yaml"):
        if legacy.exists():
            return legacy
    return None


def deerflow_sqlite_path(cwd: Path, sqlite_dir: str) -> Path:
    """config/database_config.py:259-268 sqlite_path: Path(sqlite_dir).resolve() / "deerflow.db", so relative to
    the process's working directory."""
    return (cwd / sqlite_dir).resolve() / "deerflow.db"


def make_dev(checkout: Path, env: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """scripts/serve.sh:315-322 exports DEER_FLOW_PROJECT_ROOT (the checkout) and DEER_FLOW_HOME
    (backend/.deer-flow) unless set, and :467 starts the gateway with `cd backend`."""
    exports = {"DEER_FLOW_PROJECT_ROOT": str(checkout), "DEER_FLOW_HOME": str(checkout / "backend" / ".deer-flow")}
    return checkout / "backend", {**exports, **env}


def compose_host_database(checkout: Path, home: str, sqlite_dir: str) -> Path:
    """docker/docker-compose.yaml:107 (`cd backend` under working_dir /app, :124), :112 (${DEER_FLOW_HOME} mounted
    at /app/backend/.deer-flow): the container's file on the host. Compose resolves a relative host path against
    the compose file's directory, docker/."""
    container = PurePosixPath("/app/backend", sqlite_dir, "deerflow.db")
    inside = container.relative_to("/app/backend/.deer-flow")
    host_home = Path(home) if Path(home).is_absolute() else checkout / "docker" / home
    return (host_home / inside).resolve()


# -- the trees ------------------------------------------------------------------------------------------------

OLD = 1_700_000_000  # 2023-11-14 22:13:20 UTC: the last write of a file left behind


def utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@pytest.fixture(scope="module")
def checkpoint_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small SQLite checkpoint database written by real graphs (copied into each layout)."""
    path = tmp_path_factory.mktemp("layouts-db") / "deerflow.db"
    build_sqlite(path, ["clean-delta"], turns=4, message_bytes=64)
    return path


def place_db(source: Path, target: Path, written: float | None = None) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    if written is not None:
        os.utime(target, (written, written))
    return target


def checkout(root: Path, cadence: int = 100) -> Path:
    """A DeerFlow source checkout: its config package (where its .env search starts) and the root's config."""
    (root / SOURCE_PACKAGE).mkdir(parents=True)
    (root / "docker").mkdir()
    (root / "config.yaml").write_text(
        f"database:\n  backend: sqlite\n  checkpoint_delta:\n    snapshot_frequency: {cadence}\n"
    )
    return root


def scan(cwd: Path, env: dict[str, str] | None = None) -> tuple[dict[str, object], str]:
    code, out, err = run_ckpt("verify-shape", "--format", "json", cwd=cwd, env=env or {})
    assert code in (0, 1), err
    return json.loads(out), err


def chosen(document: dict[str, object]) -> str:
    database = document["database"]
    assert isinstance(database, dict)
    return str(database["description"])


# -- the four layouts -----------------------------------------------------------------------------------------


def test_make_dev_exported_root_beats_backend_config_from_backend(tmp_path: Path, checkpoint_db: Path) -> None:
    root = checkout(tmp_path / "deer-flow", cadence=100)
    backend_config = root / "backend" / "config.yaml"
    backend_config.write_text("database:\n  backend: sqlite\n  checkpoint_delta:\n    snapshot_frequency: 7\n")
    os.utime(backend_config, (OLD, OLD))
    gateway_dir, gateway_env = make_dev(root, {})
    database = place_db(checkpoint_db, deerflow_sqlite_path(gateway_dir, ".deer-flow/data"))
    # DeerFlow's gateway under make dev reads the root's config (K=100), not backend's (K=7).
    assert deerflow_config_path(gateway_dir, gateway_env, root) == root / "config.yaml"
    document, err = scan(root / "backend")
    settings = document["settings"]
    assert isinstance(settings, dict) and settings["expected_cadence"] == 100
    assert str(settings["cadence_source"]).startswith(f"{root / 'config.yaml'}, "), settings
    assert chosen(document) == f"SQLite {database}"
    assert f"warning: {backend_config} also exists (last written {utc(OLD)}) and is passed over" in err, err
    # The same tree, the process started in backend/ without make dev: DeerFlow reads backend's, and so
    # does ckpt when told the project root is backend/.
    assert deerflow_config_path(gateway_dir, {}, root) == backend_config
    document, _ = scan(root / "backend", {"DEER_FLOW_PROJECT_ROOT": str(root / "backend")})
    assert document["settings"]["expected_cadence"] == 7  # type: ignore[index]


def test_an_exported_home_beats_a_stale_file_in_the_checkout(tmp_path: Path, checkpoint_db: Path) -> None:
    root = checkout(tmp_path / "deer-flow")
    home = tmp_path / "srv" / "deer-flow-home"
    stale = place_db(checkpoint_db, root / "backend" / ".deer-flow" / "data" / "deerflow.db", written=OLD)
    live = place_db(checkpoint_db, compose_host_database(root, str(home), ".deer-flow/data"))
    assert live == home / "data" / "deerflow.db"
    for cwd in (root, root / "backend", tmp_path):
        document, err = scan(cwd, {"DEER_FLOW_HOME": str(home), "DEER_FLOW_CONFIG_PATH": str(root / "config.yaml")})
        assert chosen(document) == f"SQLite {live}", (cwd, err)
        assert "docker compose's mount of $DEER_FLOW_HOME" in str(document["database"]["found_via"])  # type: ignore[index]
        # The stale file is named, with when it was last written.
        assert f"warning: {stale} also exists (last written {utc(OLD)};" in err, (cwd, err)
        assert f"passed over for {live} (last written {utc(live.stat().st_mtime)};" in err


def test_compose_resolves_a_relative_home_against_the_compose_files_directory(
    tmp_path: Path, checkpoint_db: Path
) -> None:
    root = checkout(tmp_path / "deer-flow")
    live = place_db(checkpoint_db, compose_host_database(root, "./dfhome", ".deer-flow/data"))
    assert live == root / "docker" / "dfhome" / "data" / "deerflow.db"
    for cwd in (root, root / "backend", root / "docker"):
        document, err = scan(cwd, {"DEER_FLOW_HOME": "./dfhome"})
        assert chosen(document) == f"SQLite {live}", (cwd, err)
    # From outside, the checkout around the config named is the compose file's.
    elsewhere = tmp_path / "ops"
    elsewhere.mkdir()
    args = ("verify-shape", "--format", "json", "--config", str(root / "config.yaml"))
    code, out, err = run_ckpt(*args, cwd=elsewhere, env={"DEER_FLOW_HOME": "./dfhome"})
    assert code in (0, 1) and chosen(json.loads(out)) == f"SQLite {live}", err


def test_a_process_started_from_the_root_uses_the_roots_file(tmp_path: Path, checkpoint_db: Path) -> None:
    root = checkout(tmp_path / "deer-flow")
    backend_db = place_db(checkpoint_db, root / "backend" / ".deer-flow" / "data" / "deerflow.db", written=OLD)
    root_db = place_db(checkpoint_db, deerflow_sqlite_path(root, ".deer-flow/data"))
    assert root_db == root / ".deer-flow" / "data" / "deerflow.db"
    document, err = scan(root)
    assert chosen(document) == f"SQLite {root_db}"
    assert "a DeerFlow process started in the working directory" in str(document["database"]["found_via"])  # type: ignore[index]
    assert f"warning: {backend_db} also exists (last written {utc(OLD)}; make dev / make start's gateway" in err, err
    assert "written later" not in err
    # From backend/, make dev's gateway's file is the one; the root's is named.
    document, err = scan(root / "backend")
    assert chosen(document) == f"SQLite {backend_db}"
    assert f"warning: {root_db} also exists" in err
    assert f"it was written later: if DeerFlow runs that way, pass --db {root_db}" in err, err


# -- .env with a byte-order mark ------------------------------------------------------------------------------


def test_a_dotenv_with_a_bom_does_not_set_its_first_name(tmp_path: Path) -> None:
    # python-dotenv 1.2.2 (DeerFlow's backend/uv.lock) opens .env as utf-8, keeping U+FEFF in the first key
    # (src/dotenv/main.py:60-73 opens it, parser.py:69-71 reads it whole, at v1.2.2); 1.2.4 strips it.
    # DeerFlow then finds no $SNAP.
    root = checkout(tmp_path / "deer-flow")
    (root / "config.yaml").write_text("database:\n  checkpoint_delta:\n    snapshot_frequency: $SNAP\n")
    (root / ".env").write_bytes("SNAP=250\nMODE=delta\n".encode("utf-8-sig"))
    code, out, err = run_ckpt("lint-config", cwd=root)
    assert code == 1 and "Environment variable SNAP not found for config value $SNAP" in out, out
    assert (
        "starts with a byte-order mark" in err
        and "keeps it in the first name, U+FEFF then SNAP, so $SNAP is not set" in err
    ), err
    # Saved without the mark, the same file sets $SNAP.
    (root / ".env").write_text("SNAP=250\nMODE=delta\n")
    code, out, err = run_ckpt("lint-config", cwd=root)
    assert code == 0 and "supplies $MODE, $SNAP" in err and "byte-order" not in err, (out, err)


# -- the legacy checkpointer's files, named by inspect storage -------------------------------------------------


def deerflow_home(cwd: Path, env: dict[str, str]) -> Path:
    """config/runtime_paths.py:19-23 runtime_home(): $DEER_FLOW_HOME resolved, else <project root>/.deer-flow."""
    home = env.get("DEER_FLOW_HOME")
    return (cwd / home).resolve() if home else deerflow_project_root(cwd, env) / ".deer-flow"


def deerflow_legacy_checkpointer_file(cwd: Path, env: dict[str, str], connection_string: str | None) -> Path:
    """runtime/checkpointer/provider.py:124 (and async_provider.py:123, runtime/store/provider.py:119):
    `config.connection_string or "store.db"`, through runtime/store/_sqlite_utils.py:10-19 to
    config/paths.py:471-480 resolve_path(): a relative path is under the home (Paths.base_dir, :153-161)."""
    path = Path(connection_string or "store.db")
    return path if path.is_absolute() else (deerflow_home(cwd, env) / path).resolve()


def legacy_files(cwd: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    code, out, err = run_ckpt("inspect", "storage", "--format", "json", "--no-channels", *args, cwd=cwd, env=env or {})
    assert code == 0, err
    return [entry["path"] for entry in json.loads(out)["legacy_files"]]


def test_the_legacy_checkpointer_files_named_are_where_deerflow_writes_them(
    tmp_path: Path, checkpoint_db: Path
) -> None:
    root = checkout(tmp_path / "deer-flow")
    gateway_dir, gateway_env = make_dev(root, {})
    place_db(checkpoint_db, deerflow_sqlite_path(gateway_dir, ".deer-flow/data"))
    # A `checkpointer: {type: sqlite}` without connection_string, once, under make dev: its file is the
    # home's store.db, one level above the data directory, not beside deerflow.db.
    store = place_db(checkpoint_db, deerflow_legacy_checkpointer_file(gateway_dir, gateway_env, None))
    assert store == root / "backend" / ".deer-flow" / "store.db"
    beside = place_db(checkpoint_db, root / "backend" / ".deer-flow" / "data" / "store.db")
    assert legacy_files(root / "backend") == [str(store)]
    # config.example.yaml's commented example names checkpoints.db: a config that still carries it has
    # DeerFlow write its checkpoints there (the file chosen), and the one inspected with --db names it.
    (root / "config.yaml").write_text(
        "database:\n  backend: sqlite\ncheckpointer:\n  type: sqlite\n  connection_string: checkpoints.db\n"
    )
    named = deerflow_legacy_checkpointer_file(gateway_dir, gateway_env, "checkpoints.db")
    place_db(checkpoint_db, named)
    database = root / "backend" / ".deer-flow" / "data" / "deerflow.db"
    assert legacy_files(root / "backend", "--db", str(database)) == [str(named), str(store)]
    # The chosen file is the config's own: only the default's file is another one.
    assert legacy_files(root / "backend") == [str(store)]
    assert str(beside) not in legacy_files(root / "backend", "--db", str(database))


def test_a_copied_deerflow_home_names_its_store_db(tmp_path: Path, checkpoint_db: Path) -> None:
    # A process started in `copy` with no variables: database.sqlite_dir's default puts deerflow.db in
    # copy/.deer-flow/data, the legacy default store.db in its home copy/.deer-flow.
    copy = tmp_path / "copy"
    database = place_db(checkpoint_db, deerflow_sqlite_path(copy, ".deer-flow/data"))
    store = place_db(checkpoint_db, deerflow_legacy_checkpointer_file(copy, {}, None))
    elsewhere = tmp_path / "ops"
    elsewhere.mkdir()
    assert legacy_files(elsewhere, "--db", str(database)) == [str(store)]
    # A file not under a sqlite_dir of DeerFlow's has no home of DeerFlow's beside it.
    loose = place_db(checkpoint_db, tmp_path / "loose" / "deerflow.db")
    place_db(checkpoint_db, loose.with_name("store.db"))
    assert legacy_files(elsewhere, "--db", str(loose)) == []


@pytest.mark.parametrize("sqlite_dir", [".", "./", "data/.."])
def test_a_sqlite_dir_of_the_working_directory_names_its_homes_store_db(
    tmp_path: Path, checkpoint_db: Path, sqlite_dir: str
) -> None:
    # `sqlite_dir: .` puts deerflow.db in the process's working directory P itself, and the legacy default
    # store.db in its home P/.deer-flow (no variables set), as for any other relative sqlite_dir.
    copy = tmp_path / "copy"
    database = place_db(checkpoint_db, deerflow_sqlite_path(copy, sqlite_dir))
    assert database == copy / "deerflow.db"
    store = place_db(checkpoint_db, deerflow_legacy_checkpointer_file(copy, {}, None))
    config = tmp_path / "configs" / "config.yaml"
    config.parent.mkdir()
    config.write_text(f"database:\n  backend: sqlite\n  sqlite_dir: '{sqlite_dir}'\n")
    elsewhere = tmp_path / "ops"
    elsewhere.mkdir()
    assert legacy_files(elsewhere, "--config", str(config), "--db", str(database)) == [str(store)]


# -- relative DEER_FLOW_CONFIG_PATH and DEER_FLOW_PROJECT_ROOT: against the process's working directory ----------


def settings_of(document: dict[str, object]) -> dict[str, object]:
    settings = document["settings"]
    assert isinstance(settings, dict)
    return settings


def test_a_relative_config_path_is_resolved_where_each_launch_runs(tmp_path: Path, checkpoint_db: Path) -> None:
    # app_config.py:378-382 takes `Path(os.getenv("DEER_FLOW_CONFIG_PATH"))` as it is: relative, it names a
    # file under the process's working directory, ckpt's no more than any other. `../config.yaml` is what a
    # make dev user writes for the gateway, which runs in backend/.
    root = checkout(tmp_path / "deer-flow", cadence=100)
    env = {"DEER_FLOW_CONFIG_PATH": "../config.yaml"}
    gateway_dir, gateway_env = make_dev(root, env)
    place_db(checkpoint_db, deerflow_sqlite_path(gateway_dir, ".deer-flow/data"))
    assert deerflow_config_path(gateway_dir, gateway_env, root).resolve() == root / "config.yaml"  # type: ignore[union-attr]
    # Started in the root, DeerFlow looks for tmp_path/config.yaml: nothing there, so ckpt takes make dev's
    # and says against which directory it resolved the variable.
    assert not deerflow_config_path(root, env, root).exists()  # type: ignore[union-attr]
    for cwd in (root, root / "backend"):
        document, err = scan(cwd, env)
        assert settings_of(document)["expected_cadence"] == 100, (cwd, err)
        assert str(settings_of(document)["cadence_source"]).startswith(f"{root / 'config.yaml'}, ")
        assert (
            "'../config.yaml' is relative, and DeerFlow resolves it against its working directory: resolved against "
            f"{root / 'backend'}" in err
        ), err
    # A file where a process started in the root would look: that launch's, the first, wins; make dev's
    # is named as passed over.
    beside = tmp_path / "config.yaml"
    beside.write_text("database:\n  backend: sqlite\n  checkpoint_delta:\n    snapshot_frequency: 7\n")
    assert deerflow_config_path(root, env, root).resolve() == beside  # type: ignore[union-attr]
    document, err = scan(root, env)
    assert settings_of(document)["expected_cadence"] == 7
    assert f"resolved against {root}, for a DeerFlow process started in the working directory" in err, err
    assert f"warning: {root / 'config.yaml'} also exists" in err and "make dev / make start's gateway" in err, err
    # Nowhere: DeerFlow's error, with every directory tried and whose it is.
    code, _, err = run_ckpt("lint-config", cwd=root, env={"DEER_FLOW_CONFIG_PATH": "conf/missing.yaml"})
    assert code == 2 and "not found at conf/missing.yaml" in err, err
    for tried in (root, root / "backend", root / "docker"):
        assert str(tried / "conf" / "missing.yaml") in err, err


def test_a_relative_project_root_is_resolved_where_each_launch_runs(tmp_path: Path, checkpoint_db: Path) -> None:
    # runtime_paths.py:9-10: `Path(os.getenv("DEER_FLOW_PROJECT_ROOT")).resolve()`, against the process's
    # working directory; serve.sh:315-316 exports a value already set unchanged, so make dev's gateway
    # (backend/) resolves `../deploy` to the checkout's deploy/.
    root = checkout(tmp_path / "deer-flow", cadence=100)
    deploy = root / "deploy"
    deploy.mkdir()
    (deploy / "config.yaml").write_text(
        "database:\n  backend: sqlite\n  checkpoint_delta:\n    snapshot_frequency: 42\n"
    )
    env = {"DEER_FLOW_PROJECT_ROOT": "../deploy"}
    gateway_dir, gateway_env = make_dev(root, env)
    place_db(checkpoint_db, deerflow_sqlite_path(gateway_dir, ".deer-flow/data"))
    assert deerflow_project_root(gateway_dir, gateway_env) == deploy
    assert deerflow_config_path(gateway_dir, gateway_env, root) == deploy / "config.yaml"
    assert not deerflow_project_root(root, env).exists()  # started in the root, DeerFlow fails
    for cwd in (root, root / "backend"):
        document, err = scan(cwd, env)
        assert settings_of(document)["expected_cadence"] == 42, (cwd, err)
        assert (
            "'../deploy' is relative, and DeerFlow resolves it against its working directory: resolved against "
            f"{root / 'backend'}" in err
        ), err
    # `..`: a directory from anywhere. Started in the root DeerFlow's root is tmp_path, which holds no
    # config.yaml (its legacy places come next: backend/config.yaml); make dev's is the checkout, which does.
    backend_config = root / "backend" / "config.yaml"
    backend_config.write_text("database:\n  backend: sqlite\n  checkpoint_delta:\n    snapshot_frequency: 7\n")
    env = {"DEER_FLOW_PROJECT_ROOT": ".."}
    gateway_dir, gateway_env = make_dev(root, env)
    assert deerflow_config_path(gateway_dir, gateway_env, root) == root / "config.yaml"
    assert deerflow_config_path(root, env, root) == backend_config
    document, err = scan(root, env)
    assert settings_of(document)["expected_cadence"] == 100, err
    assert f"resolved against {root / 'backend'}, for make dev / make start's gateway" in err, err
    assert f"warning: {backend_config} also exists" in err, err
    # Nowhere a directory: DeerFlow's error for a process started here, and where make dev's would look.
    code, _, err = run_ckpt("lint-config", cwd=root, env={"DEER_FLOW_PROJECT_ROOT": "missing"})
    assert code == 2 and f"the resolved path '{root / 'missing'}' does not exist" in err, err
    assert f"no directory at {root / 'backend' / 'missing'} (make dev / make start's gateway" in err, err
