"""When a checkpoint was written, read from its id: LangGraph's checkpoint ids are UUIDv6.

A UUIDv6 carries a 60-bit timestamp (100 ns ticks since 1582-10-15) in its leading bits: 32 bits, then
16, then the version nibble 6 and the last 12. LangGraph passes the step as the clock sequence, so only
those bits mean time; the checkpoint's `ts` holds the same instant (docs/cadence-timeline.md, "Write
times"). Reading the id costs no column and is the same on SQLite and Postgres, in every reader.

Because the timestamp leads, UUIDv6 ids in their canonical lowercase form sort by write time as
strings: `boundary_id(t)` is the smallest id written at or after `t`, and comparing ids with it is a
time comparison, in Python and in SQL alike.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

# 100 ns ticks between the UUID epoch (1582-10-15) and the Unix epoch.
_UUID_EPOCH_TICKS = 0x01B21DD213814000
_CANONICAL_LENGTH = 36
# The canonical lowercase UUIDv6 time fields: 8 and 4 hex digits, the version 6, 3 hex digits. The one test
# of "this id carries a write time", for write_time_ns and every reader that buckets ids by time.
TIMED_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-6[0-9a-f]{3}-")
# The same test in Postgres SQL (a POSIX regular expression), for a text column.
TIMED_ID_SQL = "^[0-9a-f]{8}-[0-9a-f]{4}-6[0-9a-f]{3}-"
HOUR_NS = 3_600 * 10**9
_TICKS_PER_HOUR = HOUR_NS // 100
# The first 8 hex digits are the top 32 bits of the 60-bit time: 2**28 ticks (26.8 s) share them.
PREFIX_DIGITS = 8
_PREFIX_TICKS = 1 << 28


def is_timed(checkpoint_id: object) -> bool:
    """The id is a canonical UUIDv6, so it carries its write time (the test write_time_ns applies)."""
    return (
        type(checkpoint_id) is str
        and len(checkpoint_id) == _CANONICAL_LENGTH
        and TIMED_ID.match(checkpoint_id) is not None
    )


def write_time_ns(checkpoint_id: str) -> int | None:
    """Nanoseconds since the Unix epoch when `checkpoint_id` (a UUIDv6) was minted; None for any other id."""
    if not is_timed(checkpoint_id):
        return None
    ticks = (int(checkpoint_id[:8], 16) << 28) | (int(checkpoint_id[9:13], 16) << 12) | int(checkpoint_id[15:18], 16)
    return (ticks - _UUID_EPOCH_TICKS) * 100


def hour_start_ns(unix_ns: int) -> int:
    """The start of the UTC hour `unix_ns` falls in."""
    return unix_ns - unix_ns % HOUR_NS


def prefix_hour_ns(prefix: str) -> int | None:
    """The hour every UUIDv6 whose first PREFIX_DIGITS hex digits are `prefix` was written in, or None when
    those 26.8 seconds cross the start of an hour (then only the whole id says which). A reader caches it
    per prefix, so most ids are bucketed by the hour without parsing their time."""
    first = ((int(prefix, 16) << 28) - _UUID_EPOCH_TICKS) * 100
    last = first + (_PREFIX_TICKS - 1) * 100
    start = hour_start_ns(first)
    return start if start == hour_start_ns(last) else None


def hour_sql(column: str) -> str:
    """Postgres SQL for the hour a canonical UUIDv6 `column` was written in, as whole hours since the Unix
    epoch; NULL for any other id. All 15 hex digits of the time make a non-negative bigint (60 bits), and
    the UUID epoch is a whole number of hours before the Unix epoch, so integer division floors exactly."""
    ticks = f"('x0' || substr({column}, 1, 8) || substr({column}, 10, 4) || substr({column}, 16, 3))::bit(64)::bigint"
    return (
        f"CASE WHEN length({column}) = {_CANONICAL_LENGTH} AND {column} ~ '{TIMED_ID_SQL}'"
        f" THEN {ticks} / {_TICKS_PER_HOUR} - {_UUID_EPOCH_TICKS // _TICKS_PER_HOUR} END"
    )


# The times --since accepts: a UUIDv6 timestamp runs out in the year 5236.
SINCE_YEARS = (1970, 5000)


def boundary_id(unix_ns: int) -> str:
    """The smallest canonical UUIDv6 minted at or after `unix_ns`: ids >= it were written then or later."""
    ticks = max(0, -(-unix_ns // 100) + _UUID_EPOCH_TICKS)
    return f"{ticks >> 28:08x}-{(ticks >> 12) & 0xFFFF:04x}-6{ticks & 0xFFF:03x}-0000-000000000000"


def from_datetime(moment: datetime) -> int:
    """Nanoseconds since the Unix epoch; a naive datetime is taken as UTC (checkpoint times are UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def to_datetime(unix_ns: int) -> datetime:
    return datetime.fromtimestamp(unix_ns // 1000 / 1_000_000, tz=UTC)


def format_time(unix_ns: int | None) -> str:
    """ISO-8601 in UTC to the second, as operators compare it with logs; '?' when unknown."""
    if unix_ns is None:
        return "?"
    return to_datetime(unix_ns).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(nanoseconds: int) -> str:
    """A short human duration: 45s, 12m30s, 3h05m, 2d04h."""
    seconds = max(0, round(nanoseconds / 1e9))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s" if seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
