"""Where a checkpoint store's bytes are, as read from it: files, pages, relations, channels, write times,
large values that look like base64 images or documents, and the threads the app no longer knows.

These are the facts `ckpt inspect storage` reports (commands/inspect_storage.py); the readers are
store/storage_sqlite.py and store/storage_postgres.py. Every figure comes from sizes the database keeps
(file sizes, PRAGMAs, dbstat, the Postgres catalog and statistics views, row counts, stored column
lengths): no value is decoded with LangGraph's serializer, and only the per-channel pass
(`StorageRequest.channels`) and the large-value peek read value bytes at all.
"""

from __future__ import annotations

from enum import StrEnum

from deerflow_ckpt.dataclass import dataclass, field

# Values at least this long are peeked at for base64 images and documents.
LARGE_VALUE_BYTES = 64 * 1024


class StoredIn(StrEnum):
    """Where a channel's bytes are stored."""

    CHECKPOINTS = "checkpoints"  # SQLite: inline in each checkpoint; Postgres: inline JSONB primitives
    BLOBS = "blobs"  # Postgres checkpoint_blobs: one row per (channel, version)
    WRITES = "writes"  # pending writes: SQLite writes, Postgres checkpoint_writes


@dataclass(frozen=True)
class StorageRequest:
    # The N heaviest threads are listed, with their growth.
    top: int = 10
    # Read checkpoint values for bytes by channel and the large-value peek (the one pass that reads blobs).
    channels: bool = True
    large_value_bytes: int = LARGE_VALUE_BYTES


@dataclass(frozen=True)
class SqliteFiles:
    """The database file and its companions, and what SQLite says about its pages (one read transaction)."""

    database_bytes: int
    wal_bytes: int | None  # None: no -wal file
    shm_bytes: int | None
    page_size: int
    page_count: int
    freelist_count: int
    # From the -shm wal-index header when it is readable and consistent: frames in the WAL, and how many of
    # them a checkpoint has copied back into the database.
    wal_frames: int | None
    wal_backfilled: int | None
    # Free space on the database's file system (what a VACUUM needs beside the file).
    free_disk_bytes: int | None
    # dbstat was available: relation sizes are exact, else estimated from stored lengths.
    dbstat: bool

    @property
    def freelist_bytes(self) -> int:
        return self.freelist_count * self.page_size

    @property
    def used_bytes(self) -> int:
        return (self.page_count - self.freelist_count) * self.page_size


@dataclass(frozen=True)
class PostgresDatabase:
    database_bytes: int
    # Server settings that decide whether dead rows are cleaned up (None: not readable).
    autovacuum: bool | None
    vacuum_threshold: int | None
    vacuum_scale_factor: float | None
    # The age in transactions of the oldest snapshot a session holds (it keeps VACUUM from removing rows).
    oldest_xmin_age: int | None
    # When this database's statistics were last reset (pg_stat_database.stats_reset, ISO-8601 UTC): what they
    # counted before is gone. None when never (a copy made with CREATE DATABASE ... TEMPLATE starts empty).
    stats_reset: str | None = None


class DeadRowsSource(StrEnum):
    """Where a Postgres table's dead rows were read."""

    PGSTATTUPLE = "pgstattuple"  # pgstattuple_approx: exact, from the pages themselves
    STATISTICS = "statistics"  # pg_stat_all_tables.n_dead_tup, where the statistics are current


@dataclass(frozen=True)
class Relation:
    """A table with its indexes: `bytes` is the whole (SQLite: its b-tree and its indexes' b-trees;
    Postgres: heap, TOAST and indexes), `index_bytes` and `toast_bytes` the parts of it."""

    name: str
    bytes: int
    rows: int
    # False when the size is estimated (SQLite without dbstat: stored lengths plus a share of the pages).
    exact: bool = True
    index_bytes: int = 0
    toast_bytes: int = 0
    # None when not known: `dead_rows_unknown` says why (Postgres statistics reset, restored or stale).
    dead_rows: int | None = None
    # False when `rows` is the statistics' estimate (Postgres, no SELECT privilege on the table); else counted.
    rows_exact: bool = True
    # Postgres: what the statistics say (n_live_tup), whatever `rows` is; None without a statistics entry.
    statistics_rows: int | None = None
    dead_rows_source: DeadRowsSource | None = None
    dead_rows_unknown: str | None = None
    # ISO-8601 UTC times, None when never.
    last_vacuum: str | None = None
    last_autovacuum: str | None = None
    last_analyze: str | None = None
    last_autoanalyze: str | None = None


# ChannelBytes.part of the messages channel's ToolMessage items (the rest of the channel is the row without).
TOOL_OUTPUTS = "tool outputs"


@dataclass(frozen=True)
class ChannelBytes:
    stored_in: StoredIn
    channel: str
    # Stored values (for the TOOL_OUTPUTS part: ToolMessage items).
    values: int
    # Bytes as stored (Postgres: after compression; an inline JSONB value's share of its checkpoint's stored
    # size) and before compression (its text; equal on SQLite).
    bytes: int
    raw_bytes: int
    # A part of the channel counted on its own (TOOL_OUTPUTS), or None for the channel (without its parts).
    part: str | None = None

    @property
    def label(self) -> str:
        return self.channel if self.part is None else f"{self.channel}: {self.part}"


@dataclass(frozen=True)
class LargeValue:
    """A value that looks like a base64 image or document, found by its signature without decoding it."""

    thread_id: str
    checkpoint_ns: str
    stored_in: StoredIn
    channel: str
    # What the signature says: "data-uri image/png", "png", "jpeg", "gif", "webp", "pdf", "zip".
    looks_like: str
    bytes: int
    # How many stored values hold it (SQLite copies a channel's value into every checkpoint).
    copies: int = 1
    # The first checkpoint holding it, or the write's checkpoint.
    checkpoint_id: str | None = None
    # A digest of the base64 text (blake2b, 16 bytes, hex): equal digests, the same file.
    digest: str = ""


@dataclass(frozen=True)
class Bucket:
    """Checkpoints and bytes written in one slice of time (start in ns since the epoch, UTC)."""

    start_ns: int
    checkpoints: int
    bytes: int


@dataclass
class WriteTimes:
    """What a store (or one thread) wrote, by the UTC hour its checkpoint ids were minted in
    (store/clock.py), and what no id dates. Every checkpoint is in an hour or counted as untimed."""

    # Hours that wrote something, oldest first (a write's hour is its checkpoint id's).
    hours: list[Bucket] = field(default_factory=list)
    # Checkpoints whose id is no canonical UUIDv6, with their bytes and those of the writes under such ids.
    untimed_checkpoints: int = 0
    untimed_bytes: int = 0
    # Postgres blobs no checkpoint names (no checkpoint's channel_versions holds their version).
    unnamed_blob_rows: int = 0
    unnamed_blob_bytes: int = 0


@dataclass(frozen=True)
class ThreadBytes:
    thread_id: str
    checkpoints: int
    bytes: int
    first_ns: int | None = None
    last_ns: int | None = None


@dataclass(frozen=True)
class AppThreads:
    """DeerFlow's `threads_meta` beside the checkpoints: the threads it no longer knows."""

    table: str
    # Checkpoint threads that have an app row.
    known: int
    # Checkpoint threads with no app row, heaviest first, and their total bytes.
    orphans: tuple[ThreadBytes, ...]
    orphan_bytes: int
    # App rows with no checkpoints at all.
    app_only: int


@dataclass(frozen=True)
class LegacyFile:
    """A file of a legacy `checkpointer:` section (store.db by default) and its companions; sizes None when a
    file is absent."""

    path: str
    bytes: int
    wal_bytes: int | None = None
    shm_bytes: int | None = None

    @property
    def total_bytes(self) -> int:
        return self.bytes + (self.wal_bytes or 0) + (self.shm_bytes or 0)


@dataclass
class StorageFacts:
    database: str
    backend: str
    sqlite: SqliteFiles | None = None
    postgres: PostgresDatabase | None = None
    relations: list[Relation] = field(default_factory=list)
    # None when the per-channel pass was skipped (--no-channels).
    channels: list[ChannelBytes] | None = None
    # Checkpoint bytes outside any channel value (versions, versions seen, ids, framing) and metadata bytes.
    checkpoint_rest_bytes: int | None = None
    metadata_bytes: int = 0
    large_values: list[LargeValue] = field(default_factory=list)
    # What was written by the hour, for the store and each of the heaviest threads.
    growth: WriteTimes = field(default_factory=WriteTimes)
    heaviest: list[ThreadBytes] = field(default_factory=list)
    # Each heaviest thread's write times, by its place in `heaviest` (shown ids of keys that are not text can
    # coincide with a text id).
    heaviest_growth: dict[int, WriteTimes] = field(default_factory=dict)
    app: AppThreads | None = None
    # The files a legacy `checkpointer:` section writes other than this database, those that exist.
    legacy_files: list[LegacyFile] = field(default_factory=list)
    # Why the rows were not read at all (a missing privilege): bytes by thread, channel and time are unknown.
    rows_unread: str | None = None
    # Why a part could not be read (a missing privilege, dbstat not compiled in), for the report to say.
    notes: list[str] = field(default_factory=list)

    def growth_of(self, thread_id: str) -> WriteTimes | None:
        """The write times of the first heaviest thread shown as `thread_id` (for tests and tools)."""
        place = next((i for i, thread in enumerate(self.heaviest) if thread.thread_id == thread_id), None)
        return None if place is None else self.heaviest_growth.get(place)
