"""The compiled fast path of the inert judge (_inert.c), configured from store/peek.py's tables.

Each summary is either a certain "well formed, names only trusted types" with the few facts a scan
needs, or None, and then the caller decodes through peek.InertDecoder, which judges and reports the
value as it always has. Without a C compiler at install time the module is absent and every caller
takes the Python path; CKPT_NATIVE=0 in the environment makes every caller take it as if it were.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from deerflow_ckpt.store.peek import OVERWRITE_TYPE, REMOVE_MESSAGE_TYPE, SAFE_TYPES

# value_summary's flag bits, in the order configure() receives the types.
OVERWRITE_FLAG = 1
REMOVAL_FLAG = 2

# checkpoint_summary's kinds of messages value.
MESSAGES_ABSENT = 0
MESSAGES_LIST = 1
MESSAGES_SNAPSHOT = 2
MESSAGES_OTHER = 3

ValueSummary = tuple[int, int, int]  # (is_list, items, flags)
CheckpointSummary = tuple[int, int, bool, str | None]  # (kind, count, empty, messages_version)
# (step, source, mode marker, updates, supersteps), each None unless an int or (source, mode) a str.
MetadataSummary = tuple[int | None, str | None, str | None, int | None, int | None]

ValueJudge = Callable[[bytes | memoryview], ValueSummary | None]
CheckpointJudge = Callable[[bytes | memoryview], CheckpointSummary | None]
MetadataReader = Callable[[bytes | memoryview], MetadataSummary | None]


SWITCH_ENV = "CKPT_NATIVE"


def _load_compiled() -> tuple[ModuleType | None, str | None]:
    """The configured extension, or None and why every caller takes the Python path."""
    if os.environ.get(SWITCH_ENV, "").strip() == "0":
        return None, f"{SWITCH_ENV}=0"
    try:
        from deerflow_ckpt.native import _inert
    except ImportError:  # installed without a C compiler
        return None, "the C extension is not built"
    _inert.configure(tuple(sorted(SAFE_TYPES)), (OVERWRITE_TYPE, REMOVE_MESSAGE_TYPE))
    return _inert, None


_compiled, PYTHON_ONLY_BECAUSE = _load_compiled()
value_summary: ValueJudge | None = _compiled.value_summary if _compiled else None
checkpoint_summary: CheckpointJudge | None = _compiled.checkpoint_summary if _compiled else None
metadata_summary: MetadataReader | None = _compiled.metadata_summary if _compiled else None


def _holds(data: Any, needle: bytes) -> bool:
    """The Python reference for holds: `needle in bytes(data)` (a bytes object is searched without a copy)."""
    return needle in (data if type(data) is bytes else bytes(data))


# Whether a needle occurs in a contiguous bytes-like value (msgspec.Raw included): memmem where compiled.
holds: Callable[[Any, bytes], bool] = _compiled.holds if _compiled else _holds
AVAILABLE = _compiled is not None
# The compiled SQLite reader (_inert_sqlite.c), built only where libsqlite3's header was found. Its
# lineages are (thread_id, checkpoint_ns, records, deferred writes): a record is a finished
# CheckpointRecord, or (raw row, write counts) for record_from_row; a deferred write is
# (record index, task_id, channel, type, value), counted but left to Python to judge.
open_lineages: Callable[..., Any] | None = getattr(_compiled, "open_lineages", None)
ReadError: type[Exception] = getattr(_compiled, "ReadError", RuntimeError)
# How the read-ahead layer (_readahead.c) served its pages: (windows read, reads served from
# them, pages of those lent in place), over every connection through it so far. None where it is not built.
readahead_counts: Callable[[], tuple[int, int, int]] | None = getattr(_compiled, "readahead_counts", None)
# The layer's VFS name (registered on first call), for a Python connection's URI; None where it cannot be.
readahead_vfs: Callable[[], str | None] | None = getattr(_compiled, "readahead_vfs", None)
