"""What a store's storage facts mean for an operator (pure): growth per day or hour, the rate it is
written at, and whether compaction would help. ckpt only advises: it never runs VACUUM.

The SQLite thresholds are upstream DeerFlow's automatic compaction rule (a freelist of at least 64 MiB
and at least 10% of the file, on a file of at most 2 GiB); see docs/storage-model.md, "Storage and
compaction".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from deerflow_ckpt.store.storage import Bucket, LargeValue, PostgresDatabase, Relation, SqliteFiles

HOUR_NS = 3_600 * 10**9
DAY_NS = 24 * HOUR_NS
WEEK_NS = 7 * DAY_NS
# A store written over fewer days than this is charted by the hour.
DAYS_FOR_DAILY = 3
MIB = 1024 * 1024
VACUUM_FREELIST_BYTES = 64 * MIB
VACUUM_FREELIST_SHARE = 0.10
AUTO_VACUUM_LARGEST = 2 * 1024 * MIB
# SQLite's default wal_autocheckpoint, which neither DeerFlow nor the saver changes.
WAL_AUTOCHECKPOINT_PAGES = 1000
# Frames not copied back this many times the autocheckpoint: a reader keeps the WAL from being checkpointed.
WAL_STUCK_FACTOR = 10
# A snapshot this many transactions old holds back what VACUUM may remove.
OLD_XMIN_AGE = 10_000_000


class Urgency(StrEnum):
    ACT = "act"  # worth doing now
    WATCH = "watch"  # not yet, or only a warning sign
    FINE = "fine"


@dataclass(frozen=True)
class Advice:
    urgency: Urgency
    subject: str
    message: str


@dataclass(frozen=True)
class Growth:
    """Bytes and checkpoints written per day (or hour, on a young store), oldest first, gaps filled."""

    unit_ns: int
    buckets: tuple[Bucket, ...]

    @property
    def unit(self) -> str:
        return "day" if self.unit_ns == DAY_NS else "hour"


@dataclass(frozen=True)
class Rate:
    """Bytes written over the last week of the store's history (or all of it, when younger)."""

    window_ns: int
    bytes: int
    checkpoints: int

    @property
    def bytes_per_week(self) -> float:
        return self.bytes * WEEK_NS / self.window_ns if self.window_ns else 0.0


def fold(buckets: Iterable[Bucket], unit_ns: int | None = None) -> Growth:
    """The fine buckets summed into days (hours when the store spans fewer than DAYS_FOR_DAILY days)."""
    fine = sorted(buckets, key=lambda bucket: bucket.start_ns)
    if unit_ns is None:
        span = fine[-1].start_ns - fine[0].start_ns if fine else 0
        unit_ns = DAY_NS if span >= DAYS_FOR_DAILY * DAY_NS else HOUR_NS
    sums: dict[int, tuple[int, int]] = {}
    for bucket in fine:
        start = bucket.start_ns - bucket.start_ns % unit_ns
        checkpoints, written = sums.get(start, (0, 0))
        sums[start] = (checkpoints + bucket.checkpoints, written + bucket.bytes)
    if not sums:
        return Growth(unit_ns, ())
    first, last = min(sums), max(sums)
    filled = (Bucket(start, *sums.get(start, (0, 0))) for start in range(first, last + unit_ns, unit_ns))
    return Growth(unit_ns, tuple(filled))


def recent_rate(growth: Growth) -> Rate | None:
    """What the last 7 days of the history wrote (the whole history when it is shorter)."""
    if not growth.buckets:
        return None
    end = growth.buckets[-1].start_ns + growth.unit_ns
    start = max(growth.buckets[0].start_ns, end - WEEK_NS)
    window = [bucket for bucket in growth.buckets if bucket.start_ns >= start]
    return Rate(end - start, sum(b.bytes for b in window), sum(b.checkpoints for b in window))


def merge_copies(values: Iterable[LargeValue]) -> list[LargeValue]:
    """One row per file: values of one thread, namespace, table and channel that hold a file of the same
    kind and size are copies of it (every Postgres messages version repeats an image the thread holds),
    kept with the earliest checkpoint; largest total first."""
    merged: dict[tuple[str, str, str, str, str, int], LargeValue] = {}
    for value in values:
        key = (value.thread_id, value.checkpoint_ns, value.stored_in, value.channel, value.looks_like, value.bytes)
        seen = merged.get(key)
        if seen is None:
            merged[key] = value
            continue
        first = min(filter(None, (seen.checkpoint_id, value.checkpoint_id)), default=None)
        merged[key] = replace(seen, copies=seen.copies + value.copies, checkpoint_id=first)
    return sorted(merged.values(), key=lambda value: (-value.bytes * value.copies, value.thread_id, value.channel))


def sqlite_advice(files: SqliteFiles) -> list[Advice]:
    """Whether a VACUUM is worth it and what it needs, and whether the WAL is being checkpointed."""
    advice = []
    free, used = files.freelist_bytes, files.used_bytes
    total = files.page_count * files.page_size
    share = free / total if total else 0.0
    need = f"it needs about {human_bytes(used)} free beside the file and as much again in SQLite's temp directory"
    if files.free_disk_bytes is not None:
        need += f" ({human_bytes(files.free_disk_bytes)} free on the database's file system)"
    if free >= VACUUM_FREELIST_BYTES and share >= VACUUM_FREELIST_SHARE:
        auto = (
            "DeerFlow's automatic compaction would run it after the next thread delete"
            if total <= AUTO_VACUUM_LARGEST
            else "the file is over 2 GiB, so DeerFlow's automatic compaction leaves it to an operator"
        )
        advice.append(
            Advice(
                Urgency.ACT,
                "VACUUM",
                f"worth it: the freelist holds {human_bytes(free)} ({share:.0%} of the file), which a VACUUM "
                f"returns to the disk; {need}; {auto}",
            )
        )
    elif free:
        advice.append(
            Advice(
                Urgency.WATCH,
                "VACUUM",
                f"not yet: the freelist holds {human_bytes(free)} ({share:.0%} of the file), and SQLite reuses it "
                f"for new rows; worth it from {human_bytes(VACUUM_FREELIST_BYTES)} and {VACUUM_FREELIST_SHARE:.0%} "
                "of the file",
            )
        )
    else:
        advice.append(Advice(Urgency.FINE, "VACUUM", "nothing to free: the freelist is empty"))
    advice.extend(_wal_advice(files))
    return advice


def _wal_advice(files: SqliteFiles) -> list[Advice]:
    if files.wal_frames is None or files.wal_backfilled is None:
        return []
    behind = files.wal_frames - files.wal_backfilled
    if behind > WAL_STUCK_FACTOR * WAL_AUTOCHECKPOINT_PAGES:
        return [
            Advice(
                Urgency.ACT,
                "WAL",
                f"not being checkpointed: {behind:,} frames wait to be copied into the database (autocheckpoint at "
                f"{WAL_AUTOCHECKPOINT_PAGES:,}); a long-lived reader, or a writer with autocheckpoint off, holds it",
            )
        ]
    live = 32 + files.wal_frames * (files.page_size + 24)
    if files.wal_bytes is not None and files.wal_bytes > 4 * max(live, WAL_AUTOCHECKPOINT_PAGES * files.page_size):
        return [
            Advice(
                Urgency.WATCH,
                "WAL",
                f"the -wal file is {human_bytes(files.wal_bytes)} but holds {files.wal_frames:,} frames: it kept "
                "the size of an earlier burst; SQLite gives the space back when the last connection closes",
            )
        ]
    return []


def postgres_advice(database: PostgresDatabase, relations: Iterable[Relation]) -> list[Advice]:
    """Dead rows per table and whether autovacuum keeps up; what holds VACUUM back."""
    advice = []
    if database.autovacuum is False:
        advice.append(Advice(Urgency.ACT, "autovacuum", "off on this server: dead rows stay until someone runs VACUUM"))
    for relation in relations:
        if relation.dead_rows is None:
            continue
        total = relation.rows + relation.dead_rows
        share = relation.dead_rows / total if total else 0.0
        trigger = _autovacuum_trigger(database, relation.rows)
        if trigger is not None and relation.dead_rows > trigger and relation.last_autovacuum is None:
            advice.append(
                Advice(
                    Urgency.ACT,
                    relation.name,
                    f"{relation.dead_rows:,} dead rows ({share:.0%}), above autovacuum's trigger ({trigger:,}) and "
                    "never autovacuumed: VACUUM makes the space reusable (VACUUM FULL or pg_repack returns it to "
                    "the disk, under a lock)",
                )
            )
        elif share >= 0.2:
            advice.append(
                Advice(Urgency.WATCH, relation.name, f"{relation.dead_rows:,} dead rows ({share:.0%} of the table)")
            )
    if database.oldest_xmin_age is not None and database.oldest_xmin_age >= OLD_XMIN_AGE:
        advice.append(
            Advice(
                Urgency.ACT,
                "VACUUM",
                f"a session holds a snapshot {database.oldest_xmin_age:,} transactions old: VACUUM cannot remove "
                "rows deleted since (look for idle-in-transaction sessions, slots or prepared transactions)",
            )
        )
    return advice


def _autovacuum_trigger(database: PostgresDatabase, live_rows: int) -> int | None:
    if database.vacuum_threshold is None or database.vacuum_scale_factor is None:
        return None
    return int(database.vacuum_threshold + database.vacuum_scale_factor * max(live_rows, 0))


def human_bytes(count: float) -> str:
    """1,234 B, 12.3 KiB, 4.5 MiB, 6.7 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")
