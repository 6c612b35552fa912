"""Shared fixtures: databases built once by real graphs, and Postgres helpers.

* ``built_sqlite`` / ``built_postgres`` (session): the full scenario set, built once, with its manifest.
  ``built_postgres`` lives in a fresh, uniquely named database that is dropped at the end, written by a
  builder process (``python -m fixtures.dbbuilder``), in a serial session as soon as collection shows a test
  naming the fixture will run. SQLite
  databases the real graphs wrote are kept in pytest's cache, keyed by the builder's sources, the
  libraries and the simulated clock's start (it moves on the hour), and each session gets a copy.
* ``built_storage_sqlite`` / ``built_storage_postgres`` (session), or ``built_storage(backend)``: the
  storage scenario for ``inspect storage`` (fixtures/dbbuilder/storage.py) as built and after deletes,
  with its ``StorageManifest``.
* ``pg_database`` / ``pg_schema`` (per test): an empty database or schema of its own.
* ``pg_readonly_role`` (per test): ``make(db) -> dsn`` for a login role that may only SELECT the
  checkpoint tables of that database (or schema).
* ``_no_outside_environment`` (autouse): every test starts without the variables that change what ckpt
  does (``clears_for_tests``); a test that needs one sets it with monkeypatch or ``run_ckpt(env=...)``.

Tests marked ``postgres`` skip when the server at ``CKPT_TEST_PG_DSN`` is unreachable, unless
``CKPT_REQUIRE_POSTGRES=1`` (CI), where they fail loudly instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from psycopg import sql

from fixtures.dbbuilder.build import build, build_postgres, libraries
from fixtures.dbbuilder.clock import default_start_ns
from fixtures.dbbuilder.manifest import Manifest
from fixtures.dbbuilder.runner import BuildOptions
from fixtures.dbbuilder.storage import StorageManifest, build_storage, delete_threads
from fixtures.dbbuilder.storage import default_start_ns as storage_start_ns

# Speed is measured by the benchmarks, never by a test: a busy 2-core machine must not fail a property test on time.
settings.register_profile("ckpt", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ckpt")

BUILDER = Path(__file__).resolve().parents[1] / "fixtures" / "dbbuilder"
DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")

# What changes ckpt's behaviour from the environment: DeerFlow's own variables, the CI runner's, ckpt's,
# libpq's (PGHOST, PGPASSWORD, PGSERVICE... fill in what a DSN leaves out), the terminal conventions rich
# and ckpt follow, and every `$VAR` the fixture configs and tests' configs read (tests/test_isolation.py
# fails when a config reads a name this misses).
OUTSIDE_PREFIXES = ("DEER_FLOW_", "GITHUB_", "CKPT_", "PG")
TEST_CONTROL = frozenset({"CKPT_REQUIRE_POSTGRES", "CKPT_TEST_PG_DSN"})
OUTSIDE_VARIABLES = frozenset(
    {
        "PYTHON_DOTENV_DISABLED",
        "PYTHONIOENCODING",
        *("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "COLORTERM", "TERM", "COLUMNS", "LINES"),
        *("TTY_COMPATIBLE", "TTY_INTERACTIVE"),
        # `$VAR`s the configs read.
        *("DATABASE_URL", "SNAP", "SNAPSHOT_FREQ", "SNAPSHOT_FREQUENCY", "SECRET_TOKEN", "MODE", "LEGACY", "DELTA"),
        *("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "VOLCENGINE_API_KEY", "VAR", "URL", "EMPTY", "MISSING"),
        *("PROVIDER_KEY", "UNSET_PROVIDER_KEY"),
        *("A", "B", "C", "D", "K", "T"),
    }
)


def clears_for_tests(name: str) -> bool:
    """True for a variable no test may inherit from the shell that started pytest."""
    if name in TEST_CONTROL:
        return False
    return name in OUTSIDE_VARIABLES or name.startswith(OUTSIDE_PREFIXES)


@pytest.fixture(autouse=True)
def _no_outside_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # As pre-commit and sqlfluff do: a developer's shell or a CI runner must not change what a test sees.
    for name in [name for name in os.environ if clears_for_tests(name)]:
        monkeypatch.delenv(name)


def admin_dsn() -> str:
    return os.environ.get("CKPT_TEST_PG_DSN", DEFAULT_PG_DSN)


def postgres_required() -> bool:
    return os.environ.get("CKPT_REQUIRE_POSTGRES", "") not in ("", "0")


@cache
def _postgres_problem() -> str | None:
    """None when the server answers; otherwise why not (asked once per session)."""
    try:
        with psycopg.connect(admin_dsn(), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at CKPT_TEST_PG_DSN is unreachable: {exc}".strip()
    return None


def require_postgres() -> None:
    problem = _postgres_problem()
    if problem is None:
        return
    if postgres_required():
        pytest.fail(f"CKPT_REQUIRE_POSTGRES is set and {problem}", pytrace=False)
    pytest.skip(problem)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("postgres") is not None:
        require_postgres()


def dsn_for(dbname: str, base: str | None = None) -> str:
    """The admin DSN pointed at another database (URL form stays a URL, for ``--db``)."""
    base = base or admin_dsn()
    if base.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(base)
        return urlunsplit(parts._replace(path=f"/{dbname}"))
    return psycopg.conninfo.make_conninfo(base, dbname=dbname)


def _admin_exec(query: sql.Composable) -> None:
    with psycopg.connect(admin_dsn(), autocommit=True) as conn:
        conn.execute(query)


def create_database(prefix: str = "ckpt_test") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    _admin_exec(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name


def drop_database(name: str) -> None:
    _admin_exec(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@dataclass(frozen=True)
class BuiltDatabase:
    """A database the builder wrote; ``db`` is what a ``--db`` option takes."""

    backend: str
    db: str  # SQLite path or Postgres DSN (unredacted)
    schema: str | None
    manifest: Manifest
    dbname: str | None = None

    @property
    def path(self) -> Path:
        return Path(self.db)


@cache
def _builder_digest() -> str:
    sources = hashlib.sha256()
    for source in sorted(BUILDER.rglob("*.py")):
        sources.update(source.relative_to(BUILDER).as_posix().encode() + b"\0" + source.read_bytes())
    return sources.hexdigest()


def _fixture_cache(config: pytest.Config) -> Path | None:
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider: every session builds afresh
    return None if cache is None else Path(cache.mkdir("ckpt-sqlite-fixtures"))


def built_sqlite_copy(config: pytest.Config, target: Path, scenarios: list[str] | None = None) -> Manifest:
    """What ``build_sqlite(target, scenarios)`` writes: built by the real graphs, or copied from such a build."""
    start = default_start_ns()
    cache = _fixture_cache(config)
    if cache is None:
        options = BuildOptions(clock_start_ns=start, marker_path=f"{target}.CK105-EXECUTED")
        return build("sqlite", str(target), None, scenarios, options)
    key = hashlib.sha256(json.dumps([_builder_digest(), libraries(), scenarios, start]).encode()).hexdigest()[:24]
    entry = cache / key
    if not (entry / "manifest.json").exists():
        scratch = Path(tempfile.mkdtemp(prefix="building-", dir=cache))
        # The marker path CK105's payload would touch is the entry's own, where it stays after the rename.
        options = BuildOptions(clock_start_ns=start, marker_path=str(entry / "CK105-EXECUTED"))
        build("sqlite", str(scratch / "checkpoints.db"), None, scenarios, options).write(scratch / "manifest.json")
        try:
            scratch.rename(entry)
        except OSError:
            shutil.rmtree(scratch)  # another worker stored the same build first
        # The clock's start moves on the hour: builds a day old are never asked for again.
        for stale in cache.iterdir():
            if stale.stat().st_mtime < time.time() - 86_400:
                shutil.rmtree(stale, ignore_errors=True)
    shutil.copyfile(entry / "checkpoints.db", target)
    return dataclasses.replace(Manifest.read(entry / "manifest.json"), location=str(target))


@pytest.fixture(scope="session")
def built_sqlite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> BuiltDatabase:
    path = tmp_path_factory.mktemp("built-sqlite") / "checkpoints.db"
    return BuiltDatabase("sqlite", str(path), None, built_sqlite_copy(request.config, path))


@dataclass
class _PostgresPrebuild:
    """The full scenario set being written into its own database by a builder process while the first tests
    run: on two cores it takes the one the serial tests leave idle, so little of its 7 s is waited for."""

    process: subprocess.Popen[bytes]
    dbname: str
    directory: Path

    @classmethod
    def start(cls) -> _PostgresPrebuild:
        dbname = create_database("ckpt_fixture")
        directory = Path(tempfile.mkdtemp(prefix="ckpt-prebuild-"))
        repo = BUILDER.parents[1]
        command = [sys.executable, "-m", "fixtures.dbbuilder", "--postgres", dsn_for(dbname)]
        command += ["--manifest", str(directory / "manifest.json"), "--marker", str(directory / "CK105-EXECUTED")]
        # The checkout on the path whatever the interpreter's settings (PYTHONSAFEPATH leaves the cwd out).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p)}
        try:
            with open(directory / "build.log", "wb") as log:
                # Its own process group, so discard() also ends the scenario workers it starts.
                process = subprocess.Popen(
                    command, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
        except OSError:
            drop_database(dbname)
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return cls(process, dbname, directory)

    def result(self) -> BuiltDatabase:
        if self.process.wait() != 0:
            log = (self.directory / "build.log").read_text(errors="replace")
            pytest.fail(f"building the Postgres fixture database failed:\n{log[-4000:]}", pytrace=False)
        manifest = Manifest.read(self.directory / "manifest.json")
        return BuiltDatabase("postgres", dsn_for(self.dbname), None, manifest, self.dbname)

    def discard(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        drop_database(self.dbname)
        shutil.rmtree(self.directory, ignore_errors=True)


_postgres_prebuilds: list[_PostgresPrebuild] = []


@pytest.hookimpl(trylast=True)  # after -k, -m, --deselect and --lf have chosen the tests that will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Only a serial session that will run a test naming the fixture, where the server answers. Tests that ask
    # for it by name (request.getfixturevalue) are not seen here and build it when they need it, as an xdist
    # worker does (each would build one whether or not it ran such a test).
    if config.option.collectonly or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if not any("built_postgres" in getattr(item, "fixturenames", ()) for item in items):
        return
    if _postgres_problem() is not None:
        return
    try:
        _postgres_prebuilds.append(_PostgresPrebuild.start())
    except (psycopg.Error, OSError):
        return  # the fixture tries again, and its error belongs to the tests that need it, not to the session


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A build the session never took (a run stopped early, -x): its processes and database go too.
    while _postgres_prebuilds:
        _postgres_prebuilds.pop().discard()


@pytest.fixture(scope="session")
def built_postgres() -> Iterator[BuiltDatabase]:
    require_postgres()
    prebuild = _postgres_prebuilds.pop() if _postgres_prebuilds else _PostgresPrebuild.start()
    try:
        yield prebuild.result()
    finally:
        prebuild.discard()


@pytest.fixture
def pg_database() -> Iterator[str]:
    """DSN of a fresh, empty database, dropped after the test."""
    require_postgres()
    name = create_database()
    try:
        yield dsn_for(name)
    finally:
        drop_database(name)


@pytest.fixture(scope="session")
def _pg_scratch_database() -> Iterator[str]:
    require_postgres()
    name = create_database("ckpt_scratch")
    try:
        yield dsn_for(name)
    finally:
        drop_database(name)


@pytest.fixture
def pg_schema(_pg_scratch_database: str) -> Iterator[tuple[str, str]]:
    """(dsn, schema): a fresh schema name in a scratch database; the schema is dropped after the test.

    The schema is not created, so a builder or DeerFlow-style setup can create it."""
    schema = f"s_{uuid.uuid4().hex[:12]}"
    try:
        yield _pg_scratch_database, schema
    finally:
        with psycopg.connect(_pg_scratch_database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def grant_select_only(db_dsn: str, role: str, schema: str | None = None) -> None:
    """Let ``role`` connect and SELECT the checkpoint tables, nothing else."""
    target = schema or "public"
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        dbname = conn.info.dbname
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(dbname), sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(target), sql.Identifier(role)))
        for table in CHECKPOINT_TABLES:
            exists = conn.execute("SELECT to_regclass(%s)", (f'"{target}"."{table}"',)).fetchone()
            if exists and exists[0] is not None:
                conn.execute(
                    sql.SQL("GRANT SELECT ON {}.{} TO {}").format(
                        sql.Identifier(target), sql.Identifier(table), sql.Identifier(role)
                    )
                )


@pytest.fixture
def pg_readonly_role() -> Iterator[Callable[..., str]]:
    """``make(db_dsn, schema=None) -> dsn`` logging in as a new SELECT-only role (dropped after)."""
    require_postgres()
    made: list[tuple[str, str]] = []

    def make(db_dsn: str, schema: str | None = None) -> str:
        role = f"ckpt_ro_{uuid.uuid4().hex[:12]}"
        # Server-side trust auth: LOGIN without a password is enough on the test server.
        _admin_exec(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE").format(sql.Identifier(role)))
        made.append((role, db_dsn))
        grant_select_only(db_dsn, role, schema)
        parts = urlsplit(db_dsn)
        if parts.scheme.startswith("postgres"):
            netloc = f"{role}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
            return urlunsplit(parts._replace(netloc=netloc))
        return psycopg.conninfo.make_conninfo(db_dsn, user=role, password="")

    yield make
    for role, db_dsn in made:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        except psycopg.OperationalError:
            pass  # the database is already gone with its grants
        _admin_exec(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.fixture(scope="session")
def built_timelines(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str, str], BuiltDatabase]]:
    """``get(backend, scenario)``: a timeline scenario's own database (timelines.py), built once."""
    built: dict[tuple[str, str], BuiltDatabase] = {}
    databases: list[str] = []

    def get(backend: str, scenario: str) -> BuiltDatabase:
        key = (backend, scenario)
        if key not in built:
            if backend == "sqlite":
                path = tmp_path_factory.mktemp(f"timeline-{scenario}") / "deerflow.db"
                built[key] = BuiltDatabase(
                    "sqlite", str(path), None, built_sqlite_copy(request.config, path, [scenario])
                )
            else:
                require_postgres()
                name = create_database("ckpt_timeline")
                databases.append(name)
                dsn = dsn_for(name)
                built[key] = BuiltDatabase("postgres", dsn, None, build_postgres(dsn, None, [scenario]), name)
        return built[key]

    try:
        yield get
    finally:
        for name in databases:
            drop_database(name)


@dataclass(frozen=True)
class BuiltStorage:
    """The storage scenario (fixtures/dbbuilder/storage.py): `db` as built, `after_deletes` the same store
    after DeerFlow deleted the doomed threads (SQLite: a non-empty freelist; Postgres: dead rows)."""

    backend: str
    db: str  # SQLite path or Postgres DSN (unredacted)
    manifest: StorageManifest
    after_deletes: str
    after_deletes_manifest: StorageManifest

    @property
    def path(self) -> Path:
        return Path(self.db)


def _built_storage_sqlite(config: pytest.Config, directory: Path) -> BuiltStorage:
    """Both SQLite files, built by the real graphs once per clock start (cached as built_sqlite_copy does)."""
    start = storage_start_ns()
    names = ("storage.db", "storage-after-deletes.db")
    cache = _fixture_cache(config)
    key = hashlib.sha256(json.dumps(["storage", _builder_digest(), libraries(), start]).encode()).hexdigest()[:24]
    entry = None if cache is None else cache / key
    if entry is None or not (entry / "after-deletes.json").exists():
        scratch = Path(tempfile.mkdtemp(prefix="building-", dir=cache or directory))
        manifest = build_storage("sqlite", scratch / names[0], start_ns=start)
        shutil.copyfile(scratch / names[0], scratch / names[1])
        deleted = delete_threads("sqlite", scratch / names[1], manifest)
        manifest.write(scratch / "manifest.json")
        deleted.write(scratch / "after-deletes.json")
        if entry is None:
            entry = scratch
        else:
            try:
                scratch.rename(entry)
            except OSError:
                shutil.rmtree(scratch)  # another worker stored the same build first
    paths = [directory / name for name in names]
    for name, path in zip(names, paths, strict=True):
        shutil.copyfile(entry / name, path)
    manifest = dataclasses.replace(StorageManifest.read(entry / "manifest.json"), location=str(paths[0]))
    deleted = dataclasses.replace(StorageManifest.read(entry / "after-deletes.json"), location=str(paths[1]))
    return BuiltStorage("sqlite", str(paths[0]), manifest, str(paths[1]), deleted)


@pytest.fixture(scope="session")
def built_storage_sqlite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> BuiltStorage:
    return _built_storage_sqlite(request.config, tmp_path_factory.mktemp("built-storage"))


@pytest.fixture(scope="session")
def built_storage_postgres() -> Iterator[BuiltStorage]:
    """Two fresh databases, dropped at the end: the scenario as built, and after the deletes."""
    require_postgres()
    names = [create_database("ckpt_storage"), create_database("ckpt_storage_deleted")]
    try:
        start = storage_start_ns()
        dsns = [dsn_for(name) for name in names]
        manifest = build_storage("postgres", dsns[0], start_ns=start)
        build_storage("postgres", dsns[1], start_ns=start)
        deleted = delete_threads("postgres", dsns[1], manifest)
        yield BuiltStorage("postgres", dsns[0], manifest, dsns[1], deleted)
    finally:
        for name in names:
            drop_database(name)


@pytest.fixture
def built_storage(request: pytest.FixtureRequest) -> Callable[[str], BuiltStorage]:
    """``get(backend)``: the storage scenario on "sqlite" or "postgres" (each built once per session)."""

    def get(backend: str) -> BuiltStorage:
        built: BuiltStorage = request.getfixturevalue(f"built_storage_{backend}")
        return built

    return get


# DeerFlow pins the Postgres saver below 3.2 (its lock file: 3.1.1), whose replay walk stops only at a snapshot's
# inline marker: what ckpt writes or plans must hold under that saver too. scripts/test.sh installs it here
# before the tests run, so no test reaches the network.
PINNED_SAVER_DIR = Path(__file__).resolve().parents[1] / ".venv" / "pinned" / "langgraph-checkpoint-postgres-3.1.1"


@pytest.fixture(scope="session")
def pinned_saver() -> Path:
    """A directory holding DeerFlow's pinned Postgres saver, to put first on a probe's PYTHONPATH."""
    if not (PINNED_SAVER_DIR / "langgraph" / "checkpoint" / "postgres" / "__init__.py").exists():
        pytest.fail(f"DeerFlow's pinned Postgres saver is not in {PINNED_SAVER_DIR}: run ./scripts/test.sh")
    return PINNED_SAVER_DIR


@pytest.fixture
def strict_msgpack(monkeypatch: pytest.MonkeyPatch) -> None:
    """LangGraph's loader in strict mode (LANGGRAPH_STRICT_MSGPACK=true): it constructs only allowlisted types."""
    monkeypatch.setenv("LANGGRAPH_STRICT_MSGPACK", "true")
    monkeypatch.setattr("langgraph.checkpoint.serde._msgpack.STRICT_MSGPACK_ENABLED", True)
