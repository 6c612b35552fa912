"""Bounded work: every wait on the server ends, and no worker outlives a signal, tested the way the attacks were made.

12: a Postgres peer that stalls before streaming starts. A real TCP proxy on loopback forwards to the test
server and stops forwarding server bytes at a chosen point (after N bytes of a connection, or once the
client sent a given statement), keeping both connections open as a broken middlebox does; every command
must end within --network-timeout of silence, with one line, having closed what it opened.

13: SIGTERM (or SIGINT) to a `--jobs 2` scan of a 3,000-thread store ends the workers too, whether they
wait behind the stalled proxy or scan; the main process exits 143 (130), and a worker whose main process
is killed outright exits by itself. Processes are watched through /proc.

8, 9: the same for inspect storage's own workers, with --jobs 1, for a second signal during the cleanup
and for a signal to a worker forked but not yet initialised.

4: a loop of real symbolic links as sqlite_dir, --deerflow-root or --sqlite-base is a one-line error (exit 2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from fixtures.dbbuilder.bulk import build_bulk_postgres
from tests.cli import CkptRun, run_ckpt
from tests.conftest import admin_dsn, create_database, drop_database, dsn_for, require_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # each stalled run waits out a 3 s network timeout

CKPT = [sys.executable, "-m", "deerflow_ckpt"]
PASSWORD = "s3cret-pw"
THREADS = 3000
# The first thread the builder writes; the others are SQL copies of its rows under other ids.
FIRST_THREAD = "bulk-000000"
# What a stalled command may take at most: 3 s of silence, a second to cancel, and starting up.
BOUND_S = 30
# Server bytes of one connection after which the proxy stalls, as in the attack: the connection is set up
# (410 bytes on the test server) and a few queries answered, but no cursor has streamed.
ISSUE_BYTES = 1200


class StallingProxy:
    """A TCP proxy on 127.0.0.1 to the test server that forwards client bytes always and server bytes until
    it stalls: after `after_bytes` server bytes of a connection, or once the client sent `after_client_sends`
    on it. Stalled, it reads nothing more from the server and keeps both sockets open. It stops by itself
    after `lifetime` seconds (or on close()), closing everything."""

    def __init__(
        self, after_bytes: int | None = None, after_client_sends: bytes | None = None, lifetime: float = 120
    ) -> None:
        parts = urlsplit(admin_dsn())
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.after_bytes = after_bytes
        self.after_client_sends = after_client_sends
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.stalls = 0  # connections that stalled
        self.stalled_closes = 0  # stalled connections the client closed
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        threading.Thread(target=self._accept, daemon=True).start()

    def dsn(self, dbname: str) -> str:
        """A DSN through the proxy, with a password (trust auth ignores it) that must never be printed."""
        user = urlsplit(admin_dsn()).username or "postgres"
        return f"postgresql://{user}:{PASSWORD}@127.0.0.1:{self.port}/{dbname}"

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.upstream)
            except OSError:
                return
            with self._lock:
                self._sockets += [client, server]
            stalled = threading.Event()
            threading.Thread(target=self._client_to_server, args=(client, server, stalled), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(server, client, stalled), daemon=True).start()

    def _stall(self, stalled: threading.Event) -> None:
        if not stalled.is_set():
            stalled.set()
            with self._lock:
                self.stalls += 1

    def _client_to_server(self, client: socket.socket, server: socket.socket, stalled: threading.Event) -> None:
        while True:
            try:
                data = client.recv(65536)
            except OSError:
                return
            if not data:
                with self._lock:
                    self.stalled_closes += stalled.is_set()
                with contextlib.suppress(OSError):
                    server.shutdown(socket.SHUT_RDWR)  # a proxy passes the close on: the server ends the session
                return
            if self.after_client_sends is not None and self.after_client_sends in data:
                self._stall(stalled)  # before forwarding: not a byte of the answer gets through
            try:
                server.sendall(data)
            except OSError:
                return

    def _server_to_client(self, server: socket.socket, client: socket.socket, stalled: threading.Event) -> None:
        forwarded = 0
        while not self._closing.is_set():
            if stalled.is_set():
                self._closing.wait(0.1)
                continue
            try:
                data = server.recv(65536)
            except OSError:
                return
            if not data:
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RDWR)
                return
            if self.after_bytes is not None and forwarded + len(data) >= self.after_bytes:
                data = data[: self.after_bytes - forwarded]
                self._stall(stalled)
            forwarded += len(data)
            try:
                client.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self._closing.set()
        self._timer.cancel()
        self.listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@contextlib.contextmanager
def stalling_proxy(after_bytes: int | None = None, after_client_sends: bytes | None = None) -> Iterator[StallingProxy]:
    proxy = StallingProxy(after_bytes, after_client_sends)
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture(scope="module")
def many_threads() -> Iterator[str]:
    """The database name of a 3,000-thread store: one thread written by the real graph through
    PostgresSaver, its rows copied by SQL under 2,999 other thread ids."""
    require_postgres()
    name = create_database("ckpt_waits")
    try:
        dsn = dsn_for(name)
        build_bulk_postgres(dsn, threads=1, turns=12, cadence=3, message_bytes=200, jobs=1)
        copies = THREADS - 1
        with psycopg.connect(dsn, autocommit=True) as connection:
            for table, columns in (
                ("checkpoints", "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"),
                ("checkpoint_blobs", "checkpoint_ns, channel, version, type, blob"),
                ("checkpoint_writes", "checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob"),
            ):
                connection.execute(
                    f"INSERT INTO {table} (thread_id, {columns}) SELECT thread_id || '-' || g, {columns} "
                    f"FROM {table}, generate_series(1, {copies}) g"
                )
            connection.execute("ANALYZE")
            counted = connection.execute("SELECT count(DISTINCT thread_id) FROM checkpoints").fetchone()
        assert counted == (THREADS,)
        yield name
    finally:
        drop_database(name)


def _eventually(condition: Callable[[], bool], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def _database_sessions(dbname: str) -> int:
    with psycopg.connect(admin_dsn(), autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,)
        ).fetchone()
    return int(row[0]) if row else 0


# -- 12: every wait on the server ends after --network-timeout --------------------------------------------

COMMANDS = {
    "verify-shape": ["verify-shape", "--jobs", "2"],
    "plan retention": ["plan", "retention", "--keep-newest", "2", "--jobs", "2"],
    "inspect summary": ["inspect", "summary"],
    "inspect thread": ["inspect", "thread", FIRST_THREAD],
    "inspect storage": ["inspect", "storage"],
}


def _stalled_run(proxy: StallingProxy, dbname: str, args: list[str]) -> tuple[str, float]:
    """Run `ckpt args` through the proxy as a real process: its stderr and how long it took."""
    started = time.monotonic()
    result = run_ckpt(*args, "--db", proxy.dsn(dbname), "--network-timeout", "3", process=True, timeout=90)
    elapsed = time.monotonic() - started
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("ckpt: error")]
    assert len(errors) == 1, result.stderr
    assert PASSWORD not in result.output
    assert proxy.stalls >= 1  # the stall happened, and the run ended anyway
    return errors[0], elapsed


@pytest.mark.parametrize("command", COMMANDS)
def test_a_proxy_stalled_before_streaming_ends_every_command(many_threads: str, command: str) -> None:
    """The attack: the proxy stops forwarding after 1,200 bytes of a connection."""
    with stalling_proxy(after_bytes=ISSUE_BYTES) as proxy:
        error, elapsed = _stalled_run(proxy, many_threads, COMMANDS[command])
    assert elapsed < BOUND_S
    assert "no data from the server for 3 s (--network-timeout)" in error


@pytest.mark.parametrize(
    ("command", "statement"),
    [
        # The scans' server-side cursors: in the worker processes for verify-shape and plan retention.
        ("verify-shape", b"DECLARE"),
        ("plan retention", b"DECLARE"),
        ("plan retention", b'"ckpt_keys_checkpoints"'),
        ("inspect summary", b"DECLARE"),
        ("inspect thread", b"DECLARE"),
        # The stored-message history that --deep reads (store/history.py).
        ("inspect thread --deep", b'"h_checkpoints"'),
        # inspect storage's own queries, early and late: the catalog, the savepoint, the aggregates.
        ("inspect storage", b"pg_settings"),
        ("inspect storage", b"pg_database_size"),
        ("inspect storage", b"jsonb_each"),
        ("inspect storage", b"threads_meta"),
    ],
)
def test_a_stall_at_any_statement_ends_the_command(many_threads: str, command: str, statement: bytes) -> None:
    args = [*COMMANDS[command.removesuffix(" --deep")], *(["--deep"] if command.endswith("--deep") else [])]
    with stalling_proxy(after_client_sends=statement) as proxy:
        error, elapsed = _stalled_run(proxy, many_threads, args)
    assert elapsed < BOUND_S
    assert "no data from the server for 3 s (--network-timeout)" in error


def test_a_stall_while_connecting_ends_within_the_network_timeout(many_threads: str) -> None:
    """The server's first byte (no SSL) and nothing more: connect_timeout is cut to --network-timeout."""
    with stalling_proxy(after_bytes=1) as proxy:
        error, elapsed = _stalled_run(proxy, many_threads, COMMANDS["verify-shape"])
    assert elapsed < 3 + 6  # 3 s, not the 10 s connect_timeout
    assert "cannot connect to" in error and "no answer from the server within 3 s" in error


@pytest.mark.parametrize("statement", [b"DECLARE", b"FETCH"])
def test_a_timed_out_read_closes_its_connection_and_leaves_no_thread(many_threads: str, statement: bytes) -> None:
    """In process, so only ckpt's own close can end the connection: the DECLARE stalls in the reading
    thread, the first FETCH in the prefetching thread."""
    from deerflow_ckpt.store.deadline import NetworkTimeout
    from deerflow_ckpt.store.postgres import PostgresCheckpointReader
    from deerflow_ckpt.store.source import PostgresTimeouts, postgres_target

    with stalling_proxy(after_client_sends=statement) as proxy:
        target = postgres_target(proxy.dsn(many_threads), "")
        target = dataclasses.replace(target, timeouts=PostgresTimeouts(network=2.0))
        started = time.monotonic()
        with pytest.raises(NetworkTimeout, match=r"no data from the server for 2 s \(--network-timeout\)"):
            for _ in PostgresCheckpointReader(target).lineages():
                pass
        assert time.monotonic() - started < 2 + 5
        assert proxy.stalls == 1
        assert _eventually(lambda: proxy.stalled_closes == 1), "the stalled connection was left open"
        assert _eventually(lambda: _database_sessions(many_threads) == 0), "the server still holds the session"
    assert not [thread for thread in threading.enumerate() if thread.name == "ckpt-prefetch"]


# -- 13: a signal to the main process ends its workers ----------------------------------------------------


def _children(pid: int) -> set[int]:
    """Live processes whose parent is `pid`, read from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid and fields[0] != "Z":
                    found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """The process exists and is no zombie (os.kill(pid, 0) alone counts a zombie as alive)."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state != "Z"


@contextlib.contextmanager
def scan_with_two_workers(args: list[str], dsn: str) -> Iterator[tuple[subprocess.Popen[bytes], set[int]]]:
    """`ckpt args` started as a real process, and the PIDs of its two workers once both run; whatever is
    left of them is killed afterwards."""
    process = subprocess.Popen([*CKPT, *args, "--db", dsn], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline and process.poll() is None:
            workers |= _children(process.pid)
            time.sleep(0.01)
        assert len(workers) == 2, f"the workers never started: {workers}"
        yield process, workers
    finally:
        process.kill()
        process.communicate()
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _outcome(process: subprocess.Popen[bytes], workers: set[int]) -> tuple[int, list[int]]:
    """The exit code of the main process, and its workers still alive a few seconds after it ended."""
    code = process.wait(timeout=10)
    _eventually(lambda: not any(_alive(pid) for pid in workers))
    return code, sorted(pid for pid in workers if _alive(pid))


@pytest.mark.parametrize(
    ("command", "signum"),
    [("verify-shape", signal.SIGTERM), ("verify-shape", signal.SIGINT), ("plan retention", signal.SIGTERM)],
)
def test_a_signal_ends_workers_waiting_behind_a_stalled_proxy(many_threads: str, command: str, signum: int) -> None:
    """The attack: the workers' cursors stall (the main process has no DECLARE), the timeout is far off."""
    args = [*COMMANDS[command], "--network-timeout", "120"]
    with (
        stalling_proxy(after_client_sends=b"DECLARE") as proxy,
        scan_with_two_workers(args, proxy.dsn(many_threads)) as (process, workers),
    ):
        assert _eventually(lambda: proxy.stalls >= 2, within=30), "the workers never reached their DECLARE"
        process.send_signal(signum)
        assert _outcome(process, workers) == (128 + signum, [])
        assert process.stderr is not None and "Traceback" not in process.stderr.read().decode()


def test_sigterm_mid_scan_ends_the_workers(many_threads: str) -> None:
    """No proxy: SIGTERM once both workers are reading from the server."""
    with scan_with_two_workers(COMMANDS["verify-shape"], dsn_for(many_threads)) as (process, workers):
        assert _eventually(lambda: _database_sessions(many_threads) >= 2, within=30)
        process.send_signal(signal.SIGTERM)
        assert _outcome(process, workers) == (143, [])


def test_workers_exit_when_the_main_process_is_killed(many_threads: str) -> None:
    """SIGKILL cannot be caught: the workers, stalled behind the proxy, see their parent gone and exit."""
    args = [*COMMANDS["verify-shape"], "--network-timeout", "120"]
    with (
        stalling_proxy(after_client_sends=b"DECLARE") as proxy,
        scan_with_two_workers(args, proxy.dsn(many_threads)) as (process, workers),
    ):
        assert _eventually(lambda: proxy.stalls >= 2, within=30)
        process.kill()
        assert _outcome(process, workers) == (-signal.SIGKILL, [])


def test_psycopg_is_a_version_the_deadline_was_tested_with() -> None:
    """store/deadline.py overrides psycopg's Connection.wait and drives its wait generators, which psycopg does
    not document: it was measured on psycopg 3.3 only (3.3.9; pyproject.toml pins >=3.3,<3.4). Another version
    must be measured again (the stalling-proxy tests here) before the pin moves."""
    from importlib.metadata import version

    installed = tuple(int(part) for part in version("psycopg").split(".")[:2])
    assert installed == (3, 3), f"psycopg {version('psycopg')} is not a version store/deadline.py was tested with"


# -- 4: a loop of symbolic links in any path an operator or a config names is a one-line error ---------------

DELTA_CONFIG = (
    "database:\n  backend: sqlite\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: 10\n"
)


def _looping_link(where: Path, name: str) -> Path:
    """A real symbolic link that points at itself."""
    link = where / name
    link.symlink_to(name)
    return link


def _one_line_loop_error(result: CkptRun) -> None:
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("ckpt: ")]
    assert len(errors) == 1 and "is a loop of symbolic links" in errors[0], result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [["verify-shape"], ["inspect", "summary"], ["inspect", "storage"], ["lint-config"]])
def test_a_looping_sqlite_dir_is_a_one_line_error(tmp_path: Path, command: list[str]) -> None:
    """sqlite_dir: loopdir, where loopdir -> loopdir: DeerFlow's Path(sqlite_dir).resolve() cannot end."""
    loop = _looping_link(tmp_path, "loopdir")
    config = tmp_path / "config.yaml"
    config.write_text(DELTA_CONFIG + f"  sqlite_dir: {loop}\n")
    _one_line_loop_error(
        run_ckpt(*command, "--config" if command != ["lint-config"] else "--", str(config), cwd=tmp_path, process=True)
    )


@pytest.mark.parametrize("command", [["verify-shape"], ["inspect", "storage"], ["lint-config"]])
def test_a_looping_deerflow_root_is_a_one_line_error(tmp_path: Path, command: list[str]) -> None:
    """--deerflow-root r1, where r1 -> r2 and r2 -> r1."""
    (tmp_path / "r1").symlink_to("r2")
    (tmp_path / "r2").symlink_to("r1")
    config = tmp_path / "config.yaml"
    config.write_text(DELTA_CONFIG)
    args = [*command, "--deerflow-root", str(tmp_path / "r1")]
    args += [str(config)] if command == ["lint-config"] else ["--config", str(config)]
    _one_line_loop_error(run_ckpt(*args, cwd=tmp_path, process=True))


def test_lint_configs_sqlite_base_may_not_loop(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(DELTA_CONFIG)
    loop = _looping_link(tmp_path, "base")
    _one_line_loop_error(run_ckpt("lint-config", "--sqlite-base", str(loop), str(config), cwd=tmp_path, process=True))


def test_path_resolve_is_called_only_in_fileio_resolved() -> None:
    """Path.resolve() raises RuntimeError on a symbolic-link loop (Python 3.11): every call goes through
    fileio.resolved, which makes it a one-line error. Ruff's banned-api cannot see a method of an instance."""
    import ast

    package = Path(__file__).resolve().parents[1] / "deerflow_ckpt"
    calls = []
    for source in package.rglob("*.py"):
        tree = ast.parse(source.read_text(), str(source))
        allowed: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and source.name == "fileio.py" and node.name == "resolved":
                allowed |= {id(inner) for inner in ast.walk(node)}
        calls += [
            f"{source.relative_to(package)}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "resolve"
            and id(node) not in allowed
        ]
    assert calls == [], f"call fileio.resolved instead: {calls}"


# -- 8, 9: inspect storage's workers, --jobs 1, a second signal, a signal while forking --------------------


SQLITE_THREADS = 3000


@pytest.fixture(scope="module")
def big_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3,000-thread SQLite store (about 300 MB): one thread written by the real graph, its rows copied by SQL."""
    import sqlite3

    from fixtures.dbbuilder.bulk import build_bulk_sqlite

    path = tmp_path_factory.mktemp("big") / "deerflow.db"
    build_bulk_sqlite(path, threads=1, turns=12, cadence=3, message_bytes=200, jobs=1)
    with sqlite3.connect(path) as connection:
        for table in ("checkpoints", "writes"):
            columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})") if row[1] != "thread_id"]
            listed = ", ".join(columns)
            connection.execute(
                f"WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {SQLITE_THREADS - 1}) "
                f"INSERT INTO {table} (thread_id, {listed}) SELECT thread_id || '-' || n, {listed} FROM {table}, g"
            )
    return path


# inspect storage with SPLIT_BYTES lowered in the real process, so a test-sized store is split over 2 workers.
SPLIT_STORAGE = [
    sys.executable,
    "-c",
    "import sys; import deerflow_ckpt.store.storage_sqlite as s; s.SPLIT_BYTES = 1; "
    "from deerflow_ckpt.cli.app import main; sys.argv[0] = 'ckpt'; main()",
    "inspect",
    "storage",
]


@contextlib.contextmanager
def _started_with_workers(command: list[str], count: int) -> Iterator[tuple[subprocess.Popen[bytes], set[int]]]:
    env = {**os.environ, "CKPT_NATIVE": "0"}  # the Python path: the workers scan for seconds
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(workers) < count and time.monotonic() < deadline and process.poll() is None:
            workers |= _children(process.pid)
            time.sleep(0.01)
        assert len(workers) == count, f"the workers never started: {workers}"
        yield process, workers
    finally:
        # The workers first: one left behind holds the stderr pipe open, and communicate() would wait on it.
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.kill()
        process.communicate()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_inspect_storages_workers(big_sqlite: Path, signum: int) -> None:
    """inspect storage reads a store over SPLIT_BYTES with 2 worker processes: a signal ends them too."""
    with _started_with_workers([*SPLIT_STORAGE, "--db", str(big_sqlite)], 2) as (process, workers):
        time.sleep(0.1)
        assert all(_alive(pid) for pid in workers), "the workers ended before the signal: the store is too small"
        process.send_signal(signum)
        code = process.wait(timeout=10)
        assert _eventually(lambda: not any(_alive(pid) for pid in workers), within=3)
        assert code == 128 + signum
        assert process.stderr is not None and "Traceback" not in process.stderr.read().decode()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_jobs_1_exits_128_plus_the_signal(big_sqlite: Path, signum: int) -> None:
    """--jobs 1 reads in the main process: a signal still ends it with 143 (130), not -15 or click's Aborted!."""
    env = {**os.environ, "CKPT_NATIVE": "0"}
    command = [*CKPT, "verify-shape", "--jobs", "1", "--db", str(big_sqlite)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert process.stderr is not None
    assert b"scanning" in process.stderr.readline()
    time.sleep(0.5)  # into the scan (seconds long on the Python path)
    assert process.poll() is None, "the scan ended before the signal"
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=10)
    assert process.returncode == 128 + signum, stderr
    assert "Aborted" not in stderr.decode() and "Traceback" not in stderr.decode()


def test_a_second_signal_during_the_cleanup_still_ends_the_workers(big_sqlite: Path) -> None:
    """SIGSTOP the workers so SIGTERM cannot end them within the grace, then signal the main process twice:
    the second signal lands during the join, and the SIGKILL must still come."""
    command = [*CKPT, "verify-shape", "--jobs", "2", "--db", str(big_sqlite)]
    with _started_with_workers(command, 2) as (process, workers):
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # into the 2 s grace
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=15)
        assert _eventually(lambda: not any(_alive(pid) for pid in workers), within=3)
        assert code == 143
        assert process.stderr is not None and "Traceback" not in process.stderr.read().decode()


def test_workers_start_with_the_ending_signals_blocked() -> None:
    """A worker forked while the main process's interrupting handler is installed must not run it: a signal
    sent before _init_worker is held, then ends the worker with the default action."""
    script = (
        "import os, signal, time\n"
        "from deerflow_ckpt.commands import worker_pool\n"
        "def probe():\n"
        "    return signal.getsignal(signal.SIGINT) is signal.SIG_DFL, "
        "signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])\n"
        "with worker_pool.worker_pool(1, 'fork') as pool:\n"
        "    print(*pool.submit(probe).result())\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]


def test_a_signal_while_forking_is_held_for_the_child() -> None:
    """SIGINT sent to a worker between its fork and _init_worker (simulated: the initializer's first act is
    to signal itself while still blocked) ends it by the default action, never by raising Interrupted."""
    script = (
        "import os, signal\n"
        "from deerflow_ckpt.commands import worker_pool\n"
        "real = worker_pool._init_worker\n"
        "def early(counter):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    real(counter)\n"
        "worker_pool._init_worker = early\n"
        "try:\n"
        "    with worker_pool.worker_pool(1, 'fork') as pool:\n"
        "        pool.submit(os.getpid).result()\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "BrokenProcessPool" in result.stdout, result.stdout + result.stderr
    assert "Interrupted" not in result.stderr, result.stderr
