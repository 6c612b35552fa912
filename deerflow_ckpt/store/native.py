"""The compiled fast path of the inert judge (_inert.c), configured from peek.py's tables.

Each summary is either a certain "well formed, names only trusted types" with the few facts a scan
needs, or None, and then the caller decodes through peek.InertDecoder, which judges and reports the
value as it always has. Without a C compiler at install time the module is absent and every caller
takes the Python path.
"""

from __future__ import annotations

from collections.abc import Callable

from deerflow_ckpt.store.peek import OVERWRITE_TYPE, REMOVE_MESSAGE_TYPE, TRUSTED_PACKAGES

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


def _load_compiled() -> tuple[ValueJudge | None, CheckpointJudge | None, MetadataReader | None]:
    try:
        from deerflow_ckpt.store import _inert
    except ImportError:  # installed without a C compiler
        return None, None, None
    _inert.configure(TRUSTED_PACKAGES, (OVERWRITE_TYPE, REMOVE_MESSAGE_TYPE))
    return _inert.value_summary, _inert.checkpoint_summary, _inert.metadata_summary


value_summary, checkpoint_summary, metadata_summary = _load_compiled()
AVAILABLE = value_summary is not None
