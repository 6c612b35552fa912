def configure(trusted_types: tuple[tuple[str, str], ...], flagged_types: tuple[tuple[str, str], ...], /) -> None: ...
def value_summary(data: bytes | memoryview, /) -> tuple[int, int, int] | None: ...
def checkpoint_summary(data: bytes | memoryview, /) -> tuple[int, int, bool, str | None] | None: ...

_MetadataFacts = tuple[int | None, str | None, str | None, int | None, int | None]

def metadata_summary(data: bytes | memoryview, /) -> _MetadataFacts | None: ...
def holds(data: bytes | memoryview | object, needle: bytes, /) -> bool: ...

# The compiled SQLite reader: present only where the build found libsqlite3 (see setup.py).
# (stored rows, messages write rows) for the deep proof, when open_lineages was given its limits; None for a
# lineage past the budget (store/records.py's MessagesRows).
_Handover = tuple[list[tuple[object, ...]], list[tuple[object, ...]]] | None
_Lineage = tuple[object, str, list[object], list[tuple[int, object, object, object, object]], _Handover]

class ReadError(Exception): ...

class LineageStream:
    def __iter__(self) -> LineageStream: ...
    def __next__(self) -> _Lineage: ...
    def close(self) -> None: ...

def open_lineages(
    uri: str,
    checkpoints_sql: str,
    writes_sql: str,
    parameters: tuple[str | bytes, ...],
    shapes: tuple[object, ...],
    record_type: type,
    value_limit: int = 0,
    budget: int = 0,
    row_cost: int = 0,
    /,
) -> LineageStream: ...

# (windows read ahead, reads served from them, pages of those lent in place): the
# read-ahead layer (_readahead.c), over every connection through it in this process so far.
def readahead_counts() -> tuple[int, int, int]: ...

# The layer's VFS name for a connection's URI (`vfs=`), registered on first call; None where it cannot be.
def readahead_vfs() -> str | None: ...
