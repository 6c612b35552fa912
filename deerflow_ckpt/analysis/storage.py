"""What a store's storage facts mean for an operator (pure): growth per day or hour, the rate it is
written at, and whether compaction would help. ckpt only advises: it never runs VACUUM.

The SQLite thresholds are upstream DeerFlow's automatic compaction rule (a freelist of at least 64 MiB
and at least 10% of the file, on a file of at most 2 GiB); see docs/storage-model.md, "Storage and
compaction".
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum

from deerflow_ckpt.dataclass import dataclass, replace
from deerflow_ckpt.store.clock import HOUR_NS, from_datetime, hour_start_ns, to_datetime
from deerflow_ckpt.store.storage import (
    Bucket,
    LargeValue,
    PostgresDatabase,
    Relation,
    SqliteFiles,
    WriteTimes,
)

DAY_NS = 24 * HOUR_NS
WEEK_NS = 7 * DAY_NS
# A store written over fewer days than this is charted by the hour, fewer than DAYS_FOR_WEEKLY by the
# day, fewer than DAYS_FOR_MONTHLY by the week, else by the month: at most about 160 rows whatever the ids say.
DAYS_FOR_DAILY = 3
DAYS_FOR_WEEKLY = 92
DAYS_FOR_MONTHLY = 731
# Write times before this, or more than a day after the run, are no real write's: a forged or damaged id.
EARLIEST_PLAUSIBLE_NS = from_datetime(datetime(2015, 1, 1, tzinfo=UTC))
LATEST_PLAUSIBLE_AFTER_NOW_NS = DAY_NS
# A store whose last write is older than this is idle: the rate says when it was last written.
IDLE_NS = DAY_NS
# A rate per week is said only from at least this much history: a store first written minutes ago would have
# those minutes stretched to a week (354 KiB written in one second read as +58 MiB/week).
MIN_RATE_HISTORY_NS = DAY_NS
MIB = 1024 * 1024
VACUUM_FREELIST_BYTES = 64 * MIB
VACUUM_FREELIST_SHARE = 0.10
AUTO_VACUUM_LARGEST = 2 * 1024 * MIB
# SQLite's default wal_autocheckpoint, which neither DeerFlow nor the saver changes.
WAL_AUTOCHECKPOINT_PAGES = 1000
# Frames not copied back this many times the autocheckpoint: a reader keeps the WAL from being checkpointed.
WAL_STUCK_FACTOR = 10
# A -wal file this many times what an autocheckpoint lets it hold kept the size of an earlier burst.
WAL_BURST_FACTOR = 4
# A WAL file's header, and each frame's header before its page.
WAL_HEADER_BYTES = 32
WAL_FRAME_HEADER_BYTES = 24
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


class Unit(StrEnum):
    """A growth bucket: UTC hours, days, ISO weeks (from Monday) or calendar months."""

    HOUR = "hour"
    DAY = "day"
    WEEK = "week"
    MONTH = "month"


def unit_start(unix_ns: int, unit: Unit) -> int:
    """The start of the bucket of `unit` that `unix_ns` falls in."""
    if unit is Unit.HOUR:
        return hour_start_ns(unix_ns)
    if unit is Unit.DAY:
        return unix_ns - unix_ns % DAY_NS
    if unit is Unit.WEEK:
        # The Unix epoch was a Thursday: three days after a Monday.
        return unix_ns - (unix_ns + 3 * DAY_NS) % WEEK_NS
    moment = to_datetime(unix_ns)
    return from_datetime(datetime(moment.year, moment.month, 1, tzinfo=UTC))


def next_start(start_ns: int, unit: Unit) -> int:
    """The start of the bucket after the one starting at `start_ns`."""
    if unit is Unit.HOUR:
        return start_ns + HOUR_NS
    if unit is Unit.DAY:
        return start_ns + DAY_NS
    if unit is Unit.WEEK:
        return start_ns + WEEK_NS
    moment = to_datetime(start_ns)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return from_datetime(datetime(year, month, 1, tzinfo=UTC))


def unit_for_span(span_ns: int) -> Unit:
    if span_ns < DAYS_FOR_DAILY * DAY_NS:
        return Unit.HOUR
    if span_ns < DAYS_FOR_WEEKLY * DAY_NS:
        return Unit.DAY
    if span_ns < DAYS_FOR_MONTHLY * DAY_NS:
        return Unit.WEEK
    return Unit.MONTH


def plausible(hour_ns: int, now_ns: int) -> bool:
    """An hour a real write can have happened in: from 2015 to a day after the run."""
    return EARLIEST_PLAUSIBLE_NS <= hour_ns <= now_ns + LATEST_PLAUSIBLE_AFTER_NOW_NS


@dataclass(frozen=True)
class Growth:
    """Bytes and checkpoints written per unit, oldest first, gaps filled, and what is not in the series:
    checkpoints without a write time, those whose time no real write can have (out of range), and Postgres
    blobs no checkpoint names."""

    unit: Unit
    buckets: tuple[Bucket, ...]
    untimed_checkpoints: int = 0
    untimed_bytes: int = 0
    out_of_range_checkpoints: int = 0
    out_of_range_bytes: int = 0
    unnamed_blob_rows: int = 0
    unnamed_blob_bytes: int = 0


@dataclass(frozen=True)
class Rate:
    """Bytes written in the week up to the run (or since the first write, on a younger store); a rate per
    week only when the store has a day of history (`enough_history`)."""

    window_ns: int
    bytes: int
    checkpoints: int
    # The run's clock, where the window ends.
    end_ns: int
    # The start of the last hour anything was written in (within the plausible range).
    last_write_ns: int
    # The start of the first hour anything was written in (within the plausible range).
    first_write_ns: int

    @property
    def history_ns(self) -> int:
        """How long the store has surely been written: a write's time is known to its hour, so from the end of
        the first write's hour to the run."""
        return max(0, self.end_ns - (self.first_write_ns + HOUR_NS))

    @property
    def enough_history(self) -> bool:
        return self.history_ns >= MIN_RATE_HISTORY_NS

    @property
    def bytes_per_week(self) -> float | None:
        """The window's bytes per week; None without a day of history ("not enough history")."""
        if not self.enough_history:
            return None
        return self.bytes * WEEK_NS / self.window_ns if self.window_ns else 0.0

    @property
    def idle_ns(self) -> int:
        """How long ago the last hour that wrote ended (0 when it is the current one)."""
        return max(0, self.end_ns - (self.last_write_ns + HOUR_NS))


def fold(times: WriteTimes, now_ns: int, unit: Unit | None = None) -> Growth:
    """The hours summed into `unit` (by default the one the plausible span calls for), gaps filled; hours
    outside the plausible range counted apart and never bucketed, so the series stays small."""
    inside: list[Bucket] = []
    out_checkpoints = out_bytes = 0
    for hour in times.hours:
        if plausible(hour.start_ns, now_ns):
            inside.append(hour)
        else:
            out_checkpoints += hour.checkpoints
            out_bytes += hour.bytes
    inside.sort(key=lambda bucket: bucket.start_ns)
    if unit is None:
        unit = unit_for_span(inside[-1].start_ns - inside[0].start_ns if inside else 0)
    sums: dict[int, list[int]] = {}
    for hour in inside:
        slot = sums.setdefault(unit_start(hour.start_ns, unit), [0, 0])
        slot[0] += hour.checkpoints
        slot[1] += hour.bytes
    filled: list[Bucket] = []
    if sums:
        start, last = min(sums), max(sums)
        while start <= last:
            filled.append(Bucket(start, *sums.get(start, (0, 0))))
            start = next_start(start, unit)
    return Growth(
        unit,
        tuple(filled),
        times.untimed_checkpoints,
        times.untimed_bytes,
        out_checkpoints,
        out_bytes,
        times.unnamed_blob_rows,
        times.unnamed_blob_bytes,
    )


def recent_rate(times: WriteTimes, now_ns: int) -> Rate | None:
    """What the 7 days up to `now_ns` wrote (from the hour 7 days before it), or the whole history when it
    is younger; None when no plausible hour wrote anything. Its rate per week needs a day of history."""
    hours = sorted((b for b in times.hours if plausible(b.start_ns, now_ns)), key=lambda b: b.start_ns)
    if not hours:
        return None
    start = max(hours[0].start_ns, hour_start_ns(now_ns - WEEK_NS))
    window = [hour for hour in hours if start <= hour.start_ns <= now_ns]
    return Rate(
        window_ns=max(now_ns - start, HOUR_NS),
        bytes=sum(hour.bytes for hour in window),
        checkpoints=sum(hour.checkpoints for hour in window),
        end_ns=now_ns,
        last_write_ns=hours[-1].start_ns,
        first_write_ns=hours[0].start_ns,
    )


def merge_copies(values: Iterable[LargeValue]) -> list[LargeValue]:
    """One row per file: values of one thread, namespace, table and channel that hold a file of the same
    kind and content (by digest) are copies of it (every Postgres messages version repeats an image the
    thread holds), kept with the earliest checkpoint; largest total first."""
    merged: dict[tuple[str, str, str, str, str, int, str], LargeValue] = {}
    for value in values:
        key = (
            value.thread_id,
            value.checkpoint_ns,
            value.stored_in,
            value.channel,
            value.looks_like,
            value.bytes,
            value.digest,
        )
        seen = merged.get(key)
        if seen is None:
            merged[key] = value
            continue
        first = min(filter(None, (seen.checkpoint_id, value.checkpoint_id)), default=None)
        merged[key] = replace(seen, copies=seen.copies + value.copies, checkpoint_id=first)
    return sorted(merged.values(), key=lambda value: (-value.bytes * value.copies, value.thread_id, value.channel))


def vacuum_needs(files: SqliteFiles) -> str:
    """What a VACUUM needs: the compacted size beside the file and again in SQLite's temp directory."""
    need = (
        f"it needs about {human_bytes(files.used_bytes)} free beside the file and as much again in SQLite's "
        "temp directory"
    )
    if files.free_disk_bytes is not None:
        need += f" ({human_bytes(files.free_disk_bytes)} free on the database's file system)"
    return need


def sqlite_advice(files: SqliteFiles) -> list[Advice]:
    """Whether a VACUUM is worth it and what it needs, and whether the WAL is being checkpointed."""
    advice = []
    free = files.freelist_bytes
    total = files.page_count * files.page_size
    share = free / total if total else 0.0
    need = vacuum_needs(files)
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
                f"of the file; {need}",
            )
        )
    else:
        advice.append(Advice(Urgency.FINE, "VACUUM", "nothing to free: the freelist is empty"))
    advice.extend(_wal_advice(files))
    return advice


def autocheckpoint_bytes(page_size: int) -> int:
    """What the -wal file holds when an autocheckpoint is due: the header and WAL_AUTOCHECKPOINT_PAGES frames."""
    return WAL_HEADER_BYTES + WAL_AUTOCHECKPOINT_PAGES * (page_size + WAL_FRAME_HEADER_BYTES)


def _wal_advice(files: SqliteFiles) -> list[Advice]:
    checkpointed_at = autocheckpoint_bytes(files.page_size)
    if files.wal_frames is not None and files.wal_backfilled is not None:
        behind = files.wal_frames - files.wal_backfilled
        if behind > WAL_STUCK_FACTOR * WAL_AUTOCHECKPOINT_PAGES:
            return [
                Advice(
                    Urgency.ACT,
                    "WAL",
                    f"not being checkpointed: {behind:,} frames wait to be copied into the database (autocheckpoint "
                    f"at {WAL_AUTOCHECKPOINT_PAGES:,}); a long-lived reader, or a writer with autocheckpoint off, "
                    "holds it",
                )
            ]
        live = WAL_HEADER_BYTES + files.wal_frames * (files.page_size + WAL_FRAME_HEADER_BYTES)
        if files.wal_bytes is not None and files.wal_bytes > WAL_BURST_FACTOR * max(live, checkpointed_at):
            return [
                Advice(
                    Urgency.WATCH,
                    "WAL",
                    f"the -wal file is {human_bytes(files.wal_bytes)} but holds {files.wal_frames:,} frames: it kept "
                    "the size of an earlier burst; SQLite gives the space back when the last connection closes",
                )
            ]
        return []
    # No wal-index to read (no -shm, an immutable read, a torn header): the file's size is all there is.
    if files.wal_bytes is not None and files.wal_bytes > WAL_BURST_FACTOR * checkpointed_at:
        return [
            Advice(
                Urgency.WATCH,
                "WAL",
                f"the -wal file is {human_bytes(files.wal_bytes)}, {files.wal_bytes / checkpointed_at:.0f}x what "
                f"SQLite's autocheckpoint lets it reach ({WAL_AUTOCHECKPOINT_PAGES:,} pages of "
                f"{files.page_size:,} B): a reader held it from being checkpointed, or one large transaction wrote "
                "it; how many frames wait is unknown without the wal-index",
            )
        ]
    return []


def postgres_advice(database: PostgresDatabase, relations: Iterable[Relation]) -> list[Advice]:
    """Dead rows per table and whether autovacuum keeps up; what holds VACUUM back. A table whose dead rows
    are not known gets no VACUUM advice, only why they are not known."""
    advice = []
    if database.autovacuum is False:
        advice.append(Advice(Urgency.ACT, "autovacuum", "off on this server: dead rows stay until someone runs VACUUM"))
    for relation in relations:
        if relation.dead_rows is None:
            # Advice rests only on figures known to be current: a restored copy's or reset statistics say 0.
            if relation.dead_rows_unknown is not None:
                advice.append(
                    Advice(
                        Urgency.WATCH,
                        relation.name,
                        f"dead rows not known: {relation.dead_rows_unknown}; ANALYZE {relation.name} counts them "
                        "again (and lets autovacuum see them), pgstattuple reads them from the pages",
                    )
                )
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
                    "no autovacuum on record: VACUUM makes the space reusable (VACUUM FULL or pg_repack returns it to "
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
