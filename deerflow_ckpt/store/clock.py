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

from datetime import UTC, datetime

# 100 ns ticks between the UUID epoch (1582-10-15) and the Unix epoch.
_UUID_EPOCH_TICKS = 0x01B21DD213814000
_CANONICAL_LENGTH = 36
_HEX = frozenset("0123456789abcdef")


def write_time_ns(checkpoint_id: str) -> int | None:
    """Nanoseconds since the Unix epoch when `checkpoint_id` (a UUIDv6) was minted; None for any other id."""
    if (
        len(checkpoint_id) != _CANONICAL_LENGTH
        or checkpoint_id[14] != "6"
        or checkpoint_id[8] != "-"
        or checkpoint_id[13] != "-"
        or checkpoint_id[18] != "-"
        or not _HEX.issuperset(checkpoint_id[:8])
        or not _HEX.issuperset(checkpoint_id[9:13])
        or not _HEX.issuperset(checkpoint_id[15:18])
    ):
        return None
    ticks = (int(checkpoint_id[:8], 16) << 28) | (int(checkpoint_id[9:13], 16) << 12) | int(checkpoint_id[15:18], 16)
    return (ticks - _UUID_EPOCH_TICKS) * 100


# A checkpoint id's first 8 hex digits are the top 32 bits of its UUIDv6 time: buckets of 2**28 x 100 ns
# (26.8 s), which SQL can group by without parsing a time (`substr(checkpoint_id, 1, 8)`).
BUCKET_PREFIX = 8


def bucket_start_ns(prefix: str) -> int | None:
    """The start of a checkpoint id's time bucket, from its first BUCKET_PREFIX hex digits."""
    if len(prefix) < BUCKET_PREFIX or not _HEX.issuperset(prefix[:BUCKET_PREFIX]):
        return None
    return ((int(prefix[:BUCKET_PREFIX], 16) << 28) - _UUID_EPOCH_TICKS) * 100


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
