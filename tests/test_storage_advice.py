"""inspect storage's analysis (pure): hours from checkpoint ids, folding them into hours, days, weeks or
months with implausible times counted apart, the rate of the week up to now, merging copies, and the
compaction advice at upstream DeerFlow's thresholds."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deerflow_ckpt.analysis.storage import (
    DAY_NS,
    EARLIEST_PLAUSIBLE_NS,
    HOUR_NS,
    MIB,
    WEEK_NS,
    Unit,
    Urgency,
    autocheckpoint_bytes,
    fold,
    merge_copies,
    postgres_advice,
    recent_rate,
    sqlite_advice,
)
from deerflow_ckpt.store.clock import (
    boundary_id,
    from_datetime,
    hour_start_ns,
    is_timed,
    prefix_hour_ns,
    write_time_ns,
)
from deerflow_ckpt.store.storage import (
    Bucket,
    LargeValue,
    PostgresDatabase,
    Relation,
    SqliteFiles,
    StoredIn,
    WriteTimes,
)

START = 1_780_000_000 * 10**9 // DAY_NS * DAY_NS  # midnight UTC
NOW = START + 30 * DAY_NS + 12 * HOUR_NS


def _id_at(unix_ns: int) -> str:
    """A canonical UUIDv6 minted at `unix_ns` (to the 100 ns tick), as LangGraph mints them."""
    return boundary_id(unix_ns)[:19] + "8abc-0123456789ab"


def _reference_write_time(checkpoint_id: str) -> int | None:
    """write_time_ns as it was written before the one regular expression replaced its checks."""
    hexdigits = set("0123456789abcdef")
    if (
        len(checkpoint_id) != 36
        or checkpoint_id[14] != "6"
        or checkpoint_id[8] != "-"
        or checkpoint_id[13] != "-"
        or checkpoint_id[18] != "-"
        or not hexdigits.issuperset(checkpoint_id[:8])
        or not hexdigits.issuperset(checkpoint_id[9:13])
        or not hexdigits.issuperset(checkpoint_id[15:18])
    ):
        return None
    ticks = (int(checkpoint_id[:8], 16) << 28) | (int(checkpoint_id[9:13], 16) << 12) | int(checkpoint_id[15:18], 16)
    return (ticks - 0x01B21DD213814000) * 100


_ID_CHARS = "0123456789abcdefABCDEF-6g "


@given(st.text(alphabet=_ID_CHARS, min_size=30, max_size=40))
def test_the_timed_test_is_the_old_write_time_test(text: str) -> None:
    assert write_time_ns(text) == _reference_write_time(text)
    assert is_timed(text) == (_reference_write_time(text) is not None)


@given(st.integers(min_value=0, max_value=(1 << 60) - 1))
def test_every_timed_id_is_bucketed_in_the_hour_of_its_write_time(ticks: int) -> None:
    checkpoint_id = f"{ticks >> 28:08x}-{(ticks >> 12) & 0xFFFF:04x}-6{ticks & 0xFFF:03x}-8000-000000000000"
    written = write_time_ns(checkpoint_id)
    assert written is not None
    hour = prefix_hour_ns(checkpoint_id[:8])
    # A prefix's hour, when it has one, is the hour of every id under it.
    assert hour is None or hour == hour_start_ns(written)
    assert hour_start_ns(written) <= written < hour_start_ns(written) + HOUR_NS


def _prefix_start(checkpoint_id: str) -> int:
    """Where the 26.8 s its first 8 hex digits cover begin (what growth was bucketed by before)."""
    return ((int(checkpoint_id[:8], 16) << 28) - 0x01B21DD213814000) * 100


def test_a_write_five_seconds_after_the_hour_is_in_that_hour() -> None:
    start = from_datetime(datetime(2026, 12, 1, tzinfo=UTC))
    # The first hour whose hh:00:05 shares its 8-digit prefix with ids of the hour before.
    hour = next(
        hour for hour in range(start, start + 2000 * HOUR_NS, HOUR_NS) if _prefix_start(_id_at(hour + 5 * 10**9)) < hour
    )
    checkpoint_id = _id_at(hour + 5 * 10**9)
    written = write_time_ns(checkpoint_id)
    assert written is not None and hour_start_ns(written) == hour
    # The prefix alone spans the hour's start: it names no hour, so the whole id decides.
    assert prefix_hour_ns(checkpoint_id[:8]) is None
    # Every hh:00:05 of those hours is in hour hh.
    for other in range(start, start + 200 * HOUR_NS, HOUR_NS):
        assert hour_start_ns(write_time_ns(_id_at(other + 5 * 10**9)) or 0) == other
    # uuid's own UUIDv6 agrees on the time (Python 3.14 mints them; the field layout is RFC 9562's).
    if hasattr(uuid, "uuid6"):  # pragma: no cover - depends on the Python
        assert write_time_ns(str(uuid.uuid6())) is not None


def _times(*hours: tuple[int, int, int], untimed: tuple[int, int] = (0, 0)) -> WriteTimes:
    return WriteTimes([Bucket(*hour) for hour in hours], *untimed)


def test_a_young_store_is_folded_by_the_hour_and_gaps_are_filled() -> None:
    times = _times((START, 3, 150), (START + 3 * HOUR_NS, 4, 400))
    growth = fold(times, NOW)
    assert growth.unit is Unit.HOUR
    assert [(b.start_ns - START, b.checkpoints, b.bytes) for b in growth.buckets] == [
        (0, 3, 150),
        (HOUR_NS, 0, 0),
        (2 * HOUR_NS, 0, 0),
        (3 * HOUR_NS, 4, 400),
    ]


def test_a_store_of_several_days_is_folded_by_the_day() -> None:
    times = _times(*((START + day * DAY_NS + HOUR_NS, 1, 10 * (day + 1)) for day in range(10)))
    growth = fold(times, NOW)
    assert growth.unit is Unit.DAY and len(growth.buckets) == 10
    assert sum(b.bytes for b in growth.buckets) == sum(b.bytes for b in times.hours)


@pytest.mark.parametrize(("span_days", "unit"), [(2, Unit.HOUR), (80, Unit.DAY), (400, Unit.WEEK), (3000, Unit.MONTH)])
def test_a_long_span_is_folded_into_weeks_or_months(span_days: int, unit: Unit) -> None:
    now = from_datetime(datetime(2026, 12, 6, tzinfo=UTC))
    times = _times((now - span_days * DAY_NS, 1, 5), (now - HOUR_NS, 2, 7))
    growth = fold(times, now)
    assert growth.unit is unit
    assert len(growth.buckets) <= 160
    assert sum(b.bytes for b in growth.buckets) == 12 and sum(b.checkpoints for b in growth.buckets) == 3
    starts = [datetime.fromtimestamp(b.start_ns / 1e9, UTC) for b in growth.buckets]
    if unit is Unit.WEEK:
        assert {start.weekday() for start in starts} == {0}
    if unit is Unit.MONTH:
        assert {start.day for start in starts} == {1}
        assert all((b.year * 12 + b.month) - (a.year * 12 + a.month) == 1 for a, b in itertools.pairwise(starts))


def test_write_times_no_real_write_can_have_are_counted_apart() -> None:
    now = from_datetime(datetime(2026, 12, 6, 12, tzinfo=UTC))
    forged_late = hour_start_ns(write_time_ns("ffffffff-ffff-6fff-8000-000000000000") or 0)
    forged_early = hour_start_ns(write_time_ns("00000000-0000-6000-8000-000000000000") or 0)
    times = _times(
        (forged_early, 1, 100),
        (EARLIEST_PLAUSIBLE_NS - HOUR_NS, 1, 10),
        (now - 2 * DAY_NS, 5, 500),
        (now + 2 * DAY_NS, 1, 1000),
        (forged_late, 1, 10_000),
        untimed=(3, 33),
    )
    growth = fold(times, now)
    assert growth.unit is Unit.HOUR and len(growth.buckets) == 1
    assert (growth.out_of_range_checkpoints, growth.out_of_range_bytes) == (4, 11_110)
    assert (growth.untimed_checkpoints, growth.untimed_bytes) == (3, 33)
    # Within a day after now is plausible (clocks differ).
    assert len(fold(_times((now + 20 * HOUR_NS, 1, 1)), now).buckets) == 1


def test_the_rate_is_the_week_up_to_now() -> None:
    times = _times(*((START + day * DAY_NS + HOUR_NS, 1, 10 * (day + 1)) for day in range(10)))
    now = START + 9 * DAY_NS + 2 * HOUR_NS
    rate = recent_rate(times, now)
    assert rate is not None
    window_start = hour_start_ns(now - WEEK_NS)
    assert rate.window_ns == now - window_start
    assert rate.bytes == sum(b.bytes for b in times.hours if b.start_ns >= window_start)
    assert rate.idle_ns == 0
    # Idle for a month: the week up to now wrote nothing, and the last write is a month old.
    idle = recent_rate(times, now + 30 * DAY_NS)
    assert idle is not None and idle.bytes == 0 and idle.bytes_per_week == 0
    assert idle.last_write_ns == times.hours[-1].start_ns
    assert idle.idle_ns == now + 30 * DAY_NS - (times.hours[-1].start_ns + HOUR_NS)


def test_a_store_younger_than_a_week_is_rated_over_its_own_span() -> None:
    times = _times((START, 1, 100), (START + 3 * DAY_NS, 1, 100))
    now = START + 4 * DAY_NS
    rate = recent_rate(times, now)
    assert rate is not None and rate.window_ns == 4 * DAY_NS
    assert rate.bytes_per_week == 200 * 7 / 4
    assert recent_rate(WriteTimes(), now) is None


def test_a_store_without_a_day_of_history_has_no_rate() -> None:
    """354 KiB written in one second read as +58 MiB/week: a rate per week needs a day since the first write,
    counted from the end of its hour (a write's time is known to its hour)."""
    burst = _times((START, 135, 354 * 1024))
    rate = recent_rate(burst, START + 20 * 60 * 10**9)
    assert rate is not None and rate.bytes == 354 * 1024 and rate.checkpoints == 135
    assert not rate.enough_history and rate.bytes_per_week is None and rate.history_ns == 0
    surely_a_day = START + HOUR_NS + DAY_NS
    almost = recent_rate(burst, surely_a_day - 1)
    assert almost is not None and almost.bytes_per_week is None
    # From then on the burst is a day's writing: 354 KiB over the 25 hours since its hour began, per week.
    day = recent_rate(burst, surely_a_day)
    assert day is not None and day.enough_history and day.history_ns == DAY_NS
    assert day.bytes_per_week == 354 * 1024 * WEEK_NS / (HOUR_NS + DAY_NS)
    # Writes spanning more than a day, read right after the last: a rate from their whole span.
    spread = recent_rate(_times((START, 1, 100), (START + 2 * DAY_NS, 1, 100)), START + 2 * DAY_NS + 60 * 10**9)
    assert spread is not None and spread.enough_history and spread.bytes_per_week == 200 * WEEK_NS / spread.window_ns


def test_copies_are_merged_by_content_not_size() -> None:
    def value(digest: str, checkpoint_id: str) -> LargeValue:
        return LargeValue("t", "", StoredIn.BLOBS, "messages", "png", 5000, 1, checkpoint_id, digest)

    merged = merge_copies([value("aa", "2"), value("aa", "1"), value("bb", "3")])
    assert sorted((v.digest, v.copies, v.checkpoint_id) for v in merged) == [("aa", 2, "1"), ("bb", 1, "3")]


def _files(freelist_mib: int, used_mib: int, **wal: int | None) -> SqliteFiles:
    pages = MIB // 4096
    return SqliteFiles(
        database_bytes=(freelist_mib + used_mib) * MIB,
        wal_bytes=wal.get("wal_bytes"),
        shm_bytes=None,
        page_size=4096,
        page_count=(freelist_mib + used_mib) * pages,
        freelist_count=freelist_mib * pages,
        wal_frames=wal.get("frames"),
        wal_backfilled=wal.get("backfilled"),
        free_disk_bytes=10 * 1024 * MIB,
        dbstat=True,
    )


def test_vacuum_is_advised_at_upstreams_thresholds() -> None:
    (worth,) = sqlite_advice(_files(freelist_mib=64, used_mib=500))
    assert worth.urgency is Urgency.ACT and "64.0 MiB" in worth.message and "500.0 MiB free beside" in worth.message
    assert "DeerFlow's automatic compaction would run it" in worth.message
    (small,) = sqlite_advice(_files(freelist_mib=63, used_mib=100))
    assert small.urgency is Urgency.WATCH
    # Not yet worth it, but what it would need is said all the same.
    assert "100.0 MiB free beside" in small.message and "10.0 GiB free on" in small.message
    (thin,) = sqlite_advice(_files(freelist_mib=100, used_mib=1000))  # 9% of the file
    assert thin.urgency is Urgency.WATCH
    (large,) = sqlite_advice(_files(freelist_mib=300, used_mib=2000))
    assert large.urgency is Urgency.ACT and "over 2 GiB" in large.message
    (empty,) = sqlite_advice(_files(freelist_mib=0, used_mib=10))
    assert empty.urgency is Urgency.FINE


def test_a_wal_a_reader_keeps_from_checkpointing_is_named() -> None:
    _, stuck = sqlite_advice(_files(0, 10, wal_bytes=60 * MIB, frames=12_000, backfilled=900))
    assert stuck.urgency is Urgency.ACT and "11,100 frames" in stuck.message
    _, idle = sqlite_advice(_files(0, 10, wal_bytes=60 * MIB, frames=40, backfilled=40))
    assert idle.urgency is Urgency.WATCH and "earlier burst" in idle.message
    assert len(sqlite_advice(_files(0, 10, wal_bytes=200_000, frames=40, backfilled=40))) == 1


def test_a_large_wal_is_named_without_the_wal_index() -> None:
    """No -shm (or an immutable read): the -wal's size against what an autocheckpoint lets it reach."""
    limit = autocheckpoint_bytes(4096)
    assert limit == 32 + 1000 * (4096 + 24)
    _, large = sqlite_advice(_files(0, 10, wal_bytes=5 * limit, frames=None, backfilled=None))
    assert large.urgency is Urgency.WATCH and "5x" in large.message and "wal-index" in large.message
    assert len(sqlite_advice(_files(0, 10, wal_bytes=3 * limit, frames=None, backfilled=None))) == 1


def test_dead_rows_above_autovacuums_trigger_and_an_old_snapshot_are_named() -> None:
    database = PostgresDatabase(10**9, False, 50, 0.2, 20_000_000)
    relations = [
        Relation("checkpoints", 10**6, rows=1000, dead_rows=400),  # trigger 50 + 0.2 x 1000 = 250
        Relation("checkpoint_writes", 10**6, rows=1000, dead_rows=100, last_autovacuum="2026-12-01T00:00:00Z"),
        Relation("checkpoint_blobs", 10**6, rows=1000, dead_rows=300, last_autovacuum="2026-12-01T00:00:00Z"),
    ]
    advice = postgres_advice(database, relations)
    subjects = {(a.subject, a.urgency) for a in advice}
    assert ("autovacuum", Urgency.ACT) in subjects
    assert ("checkpoints", Urgency.ACT) in subjects
    assert ("checkpoint_blobs", Urgency.WATCH) in subjects  # 23% dead, but autovacuum has run
    assert not any(a.subject == "checkpoint_writes" for a in advice)
    assert any(a.subject == "VACUUM" and "20,000,000 transactions" in a.message for a in advice)


def test_dead_rows_not_known_get_no_vacuum_advice_only_why() -> None:
    """Statistics a restore or a reset left behind (dead_rows None): no figure is advised on."""
    database = PostgresDatabase(10**9, True, 50, 0.2, 0, stats_reset="2026-12-06T21:06:48Z")
    why = "statistics reset at 2026-12-06T21:06:48Z, no VACUUM or ANALYZE of the table since"
    relations = [Relation("checkpoints", 10**6, rows=208, dead_rows=None, statistics_rows=0, dead_rows_unknown=why)]
    (advice,) = postgres_advice(database, relations)
    assert advice.urgency is Urgency.WATCH and advice.subject == "checkpoints"
    assert advice.message.startswith(f"dead rows not known: {why}; ANALYZE checkpoints")
