"""Where ckpt writes files: a regular file is replaced atomically (readers see the old bytes or the new ones,
never a partial file); a pipe, a device or a socket named as output is written to as a stream."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from deerflow_ckpt.errors import CkptError, ConfigError, OutputError
from deerflow_ckpt.exitcodes import signalled

TEMPORARY_SUFFIX = ".ckpt-tmp"
# A temporary file of ours older than this was left by a run that was killed (SIGKILL cannot be caught):
# removed on the next write beside it. Younger ones may belong to a run still writing.
STALE_AFTER_S = 60


# A config.yaml is a few hundred KB at most (DeerFlow's example is 128 KB): anything larger is refused.
MAX_CONFIG_BYTES = 16 * 1024 * 1024


class ConfigReadError(Exception):
    """A config file that cannot be read; the message says why, without the path: callers print
    "PATH: message", the one wording every command uses for a file it cannot read."""


NO_SUCH_FILE = "no such file"
IS_A_DIRECTORY = "is a directory, not a config file"
NOT_REGULAR = "is not a regular file (a device, FIFO or socket), not a config file"
SYMLINK_LOOP = "is a loop of symbolic links"


def resolved(path: Path, error: type[CkptError] = ConfigError) -> Path:
    """`path.resolve()`, with a loop of symbolic links an `error` naming the path (Python 3.11 raises a
    RuntimeError for one, later versions an OSError)."""
    try:
        return path.resolve()
    except RuntimeError:
        raise error(f"{path}: {SYMLINK_LOOP}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{path}: {SYMLINK_LOOP}") from None
        raise


def config_file_problem(path: Path) -> str | None:
    """Why `path` is no config file, in read_config_file's words, or None when it is a regular file."""
    if path.is_file():
        return None
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return SYMLINK_LOOP
    if path.is_dir():
        return IS_A_DIRECTORY
    return NOT_REGULAR if path.exists() else NO_SUCH_FILE


def read_config_file(path: Path) -> bytes:
    """A config file's bytes: a regular file of at most MAX_CONFIG_BYTES, opened without blocking on a FIFO."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigReadError(NO_SUCH_FILE) from None
    except IsADirectoryError:
        raise ConfigReadError(IS_A_DIRECTORY) from None
    except OSError as exc:
        raise ConfigReadError(SYMLINK_LOOP if exc.errno == errno.ELOOP else exc.strerror or str(exc)) from None
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        if stat.S_ISDIR(status.st_mode):
            raise ConfigReadError(IS_A_DIRECTORY)
        raise ConfigReadError(NOT_REGULAR)
    with os.fdopen(descriptor, "rb") as stream:
        data = stream.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigReadError(f"is larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MB, more than any config.yaml")
    return data


class _Terminated(Exception):
    """SIGTERM arrived while a temporary file existed: clean up, then exit as terminated."""


@contextlib.contextmanager
def terminable() -> Iterator[None]:
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
        raise SystemExit(signalled(signal.SIGTERM)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _current_bytes(target: Path) -> bytes | None:
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None


def remove_stale_temporaries(target: Path) -> None:
    """Delete temporary files a killed run left beside `target` (our own pattern, older than a minute)."""
    cutoff = time.time() - STALE_AFTER_S
    for leftover in target.parent.glob(f".{target.name}.*{TEMPORARY_SUFFIX}"):
        with contextlib.suppress(OSError):
            if leftover.is_file() and not leftover.is_symlink() and leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def write_atomically(path: Path, data: bytes | Iterable[bytes], expected: bytes | None = None) -> None:
    """Replace `path` with `data` (or its chunks, written as they come), keeping its mode, owner (where allowed)
    and extended attributes.

    A symlink is followed, so the link keeps pointing at the rewritten target. Refused: a file whose mode
    denies this user writing (even to root), a file owned by someone else (unless root, who keeps the
    owner), and a file with other hard links (a rename would leave them on the old bytes). With
    `expected`, the file must still hold those bytes just before the rename (a concurrent edit wins).
    SIGTERM during the write removes the temporary file; a killed run's leftovers go on the next write.
    """
    target = Path(os.path.realpath(path))
    try:
        status: os.stat_result | None = target.stat()
    except FileNotFoundError:
        status = None
    if status is not None:
        _refuse_unsafe_rewrite(target, status)
    remove_stale_temporaries(target)
    with terminable():
        _replace(target, data, status, expected)


def _refuse_unsafe_rewrite(target: Path, status: os.stat_result) -> None:
    uid = os.geteuid()
    # Root may write anything: it still respects a mode that denies writing to the file's own owner.
    if status.st_uid == uid or uid == 0:
        writable = bool(status.st_mode & stat.S_IWUSR)
    elif status.st_gid in os.getgroups() or status.st_gid == os.getegid():
        writable = bool(status.st_mode & stat.S_IWGRP)
    else:
        writable = bool(status.st_mode & stat.S_IWOTH)
    if not writable:
        raise OutputError(
            f"cannot rewrite {target}: its mode {stat.filemode(status.st_mode)} does not let you write it"
        )
    if status.st_uid != uid and uid != 0:
        raise OutputError(f"cannot rewrite {target}: it belongs to another user, and a rewrite would make it yours")
    if status.st_nlink > 1:
        raise OutputError(
            f"cannot rewrite {target}: it has {status.st_nlink} hard links, which a rewrite would leave on the old "
            "bytes; edit it in place by hand"
        )


def _copy_extended_attributes(source: Path, destination: str) -> None:
    """xattrs (POSIX ACLs among them) onto the new file, where the system has and allows them."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(source)
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.setxattr(destination, name, os.getxattr(source, name))


def _replace(
    target: Path, data: bytes | Iterable[bytes], status: os.stat_result | None, expected: bytes | None
) -> None:
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMPORARY_SUFFIX, dir=target.parent)
    except OSError as exc:
        raise OutputError(f"cannot write next to {target}: {exc.strerror}") from exc
    try:
        with os.fdopen(handle, "wb") as stream:
            for chunk in (data,) if isinstance(data, bytes) else data:
                stream.write(chunk)
            stream.flush()
            os.fsync(stream.fileno())
        if status is not None:
            os.chmod(temporary, status.st_mode & 0o7777)
            if (status.st_uid, status.st_gid) != (os.getuid(), os.getgid()):
                # Only root may give a file away; anyone else keeps their own ownership.
                with contextlib.suppress(PermissionError):
                    os.chown(temporary, status.st_uid, status.st_gid)
            _copy_extended_attributes(target, temporary)
        if expected is not None and _current_bytes(target) != expected:
            raise OutputError(f"{target} changed while ckpt was working on it; nothing written, run it again")
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


# Directories whose entries name this process's open descriptors (/dev/stdout links into them).
_DESCRIPTOR_DIRECTORIES = ("/proc/self/fd", "/dev/fd")


def _named_descriptor(path: Path) -> int | None:
    """The open descriptor `path` names (/dev/stdout, /dev/fd/N from `>(cmd)`, /proc/self/fd/N, or a link to
    one), or None: such a name is the descriptor itself, whatever it is open on."""
    directories = {os.path.realpath(directory) for directory in _DESCRIPTOR_DIRECTORIES if os.path.isdir(directory)}
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        parent, name = os.path.split(current)
        if name.isdigit() and os.path.realpath(parent) in directories:
            return int(name)
        if not os.path.islink(current):
            return None
        current = os.path.normpath(os.path.join(parent, os.readlink(current)))
    return None


# The descriptors this process was handed, open and inheritable when it started, with the file each was open
# on: the only ones a name such as /dev/fd/N writes to. One ckpt opened itself (a multiprocessing arena, a
# database) is never inheritable, so a report written there would be lost.
_inherited: dict[int, tuple[int, int]] = {}


def remember_inherited_descriptors() -> None:
    """Record the descriptors open and inheritable now; called first thing when ckpt starts."""
    names: list[str] = []
    for directory in _DESCRIPTOR_DIRECTORIES:
        with contextlib.suppress(OSError):
            names = os.listdir(directory)
            break
    _inherited.clear()
    for name in names:
        with contextlib.suppress(OSError, ValueError):
            descriptor = int(name)
            if os.get_inheritable(descriptor):
                status = os.fstat(descriptor)
                _inherited[descriptor] = (status.st_dev, status.st_ino)


def _inherited_duplicate(path: Path, descriptor: int) -> int:
    """A duplicate of `descriptor` if ckpt was handed it at start-up and it is still open on the same file."""
    refused = OutputError(
        f"cannot write {path}: descriptor {descriptor} was not handed to ckpt when it started "
        "(-o /dev/fd/N writes only to one its caller opened, such as >(cmd)'s)"
    )
    if descriptor not in _inherited:
        raise refused
    try:
        duplicate = os.dup(descriptor)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: descriptor {descriptor} is not open") from exc
    status = os.fstat(duplicate)
    if (status.st_dev, status.st_ino) != _inherited[descriptor]:
        os.close(duplicate)
        raise refused
    return duplicate


def _stream_kind_problem(status: os.stat_result, descriptor_named: bool) -> str | None:
    """Why an opened `-o` target is no stream to write a report into, or None: a FIFO, a character device, a
    socket (connected, or the write fails), and through a named descriptor a regular file (`> out`) too."""
    mode = status.st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode):
        return None
    if descriptor_named and stat.S_ISREG(mode):
        return None
    if stat.S_ISBLK(mode):
        return "it is a block device; write the report to a file"
    if stat.S_ISDIR(mode):
        return "it is a directory"
    return "it changed into something else while ckpt opened it; nothing written"


def _checked_stream(path: Path, descriptor: int, descriptor_named: bool = False) -> int:
    """`descriptor` if what it is open on (by fstat, after the open: no swap between a check and the open)
    takes a report as a stream; otherwise closed and refused."""
    problem = _stream_kind_problem(os.fstat(descriptor), descriptor_named)
    if problem is not None:
        os.close(descriptor)
        raise OutputError(f"cannot write {path}: {problem}")
    return descriptor


def write_output(path: Path, chunks: Iterable[bytes]) -> None:
    """A report to `path`: into the inherited descriptor it names, or the FIFO, character device or socket it
    is (written as a stream, the node left in place), or else to a regular file replaced atomically. A block
    device or a directory is refused: a report is never a disk's or a directory's new content."""
    descriptor = _named_descriptor(path)
    if descriptor is not None:
        _stream(path, _checked_stream(path, _inherited_duplicate(path, descriptor), descriptor_named=True), chunks)
        return
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    if mode is None or stat.S_ISREG(mode):
        write_atomically(path, chunks)
    elif stat.S_ISDIR(mode):
        raise OutputError(f"cannot write {path}: it is a directory")
    elif stat.S_ISBLK(mode):
        raise OutputError(f"cannot write {path}: it is a block device; write the report to a file")
    elif stat.S_ISSOCK(mode):
        _stream(path, _connected_socket(path), chunks)
    else:
        # A FIFO or a character device: opened as `>` opens it (a FIFO waits for its reader), never created.
        try:
            opened = os.open(path, os.O_WRONLY | os.O_NOCTTY)
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
        _stream(path, _checked_stream(path, opened), chunks)


def _connected_socket(path: Path) -> int:
    """A descriptor of a stream connection to the Unix socket at `path` (what `socat - UNIX:path` writes to)."""
    import socket  # only a report sent to a socket needs it

    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(path))
    except OSError as exc:
        connection.close()
        raise OutputError(f"cannot write {path}: a socket that takes no stream connection ({exc.strerror})") from exc
    return connection.detach()


def _stream(path: Path, descriptor: int, chunks: Iterable[bytes]) -> None:
    """`chunks` written to `descriptor` as they come, then the descriptor closed. A reader that left raises
    BrokenPipeError, which ends the run as `| head` does."""
    with os.fdopen(descriptor, "wb") as stream:
        for chunk in chunks:
            with _writing(path):
                stream.write(chunk)
        with _writing(path):
            stream.flush()


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A failed write as the one-line OutputError; only a closed pipe stays what it is."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
