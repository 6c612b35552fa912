"""Atomic file replacement: readers see the old bytes or the new ones, never a partial file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from deerflow_ckpt.errors import OutputError


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, keeping its mode (and owner where allowed).

    A symlink is followed, so the link keeps pointing at the rewritten target.
    """
    target = Path(os.path.realpath(path))
    try:
        status = target.stat()
    except FileNotFoundError:
        status = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".ckpt-tmp", dir=target.parent)
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
