"""Atomic file replacement: readers see the old bytes or the new ones, never a partial file."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from deerflow_ckpt.errors import OutputError

TEMPORARY_SUFFIX = ".ckpt-tmp"
# A temporary file of ours older than this was left by a run that was killed (SIGKILL cannot be caught):
# removed on the next write beside it. Younger ones may belong to a run still writing.
STALE_AFTER_S = 60


class _Terminated(Exception):
    """SIGTERM arrived while a temporary file existed: clean up, then exit as terminated."""


@contextlib.contextmanager
def _terminable() -> Iterator[None]:
    """SIGTERM raises inside the block, so its cleanup runs; outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    except _Terminated:
        raise SystemExit(128 + signal.SIGTERM) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def remove_stale_temporaries(target: Path) -> None:
    """Delete temporary files a killed run left beside `target` (our own pattern, older than a minute)."""
    cutoff = time.time() - STALE_AFTER_S
    for leftover in target.parent.glob(f".{target.name}.*{TEMPORARY_SUFFIX}"):
        with contextlib.suppress(OSError):
            if leftover.is_file() and not leftover.is_symlink() and leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, keeping its mode (and owner where allowed).

    A symlink is followed, so the link keeps pointing at the rewritten target. SIGTERM during the write
    removes the temporary file before exiting; a killed run's leftovers go on the next write.
    """
    target = Path(os.path.realpath(path))
    remove_stale_temporaries(target)
    with _terminable():
        _replace(target, data)


def _replace(target: Path, data: bytes) -> None:
    try:
        status = target.stat()
    except FileNotFoundError:
        status = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMPORARY_SUFFIX, dir=target.parent)
    except OSError as exc:
        raise OutputError(f"cannot write next to {target}: {exc.strerror}") from exc
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        if status is not None:
            os.chmod(temporary, status.st_mode & 0o7777)
            if (status.st_uid, status.st_gid) != (os.getuid(), os.getgid()):
                # Only root may give a file away; anyone else keeps their own ownership.
                with contextlib.suppress(PermissionError):
                    os.chown(temporary, status.st_uid, status.st_gid)
        os.replace(temporary, target)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise OutputError(f"cannot replace {target}: {exc.strerror or exc}") from exc
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _sync_directory(target.parent)


def _sync_directory(directory: Path) -> None:
    # Make the rename itself durable; some filesystems refuse to open a directory, which is fine.
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
