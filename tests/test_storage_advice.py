"""inspect storage's analysis (pure): folding write-time buckets into days or hours, the recent rate, and the
compaction advice at upstream DeerFlow's thresholds."""

from __future__ import annotations

from deerflow_ckpt.analysis.storage import (
    DAY_NS,
    HOUR_NS,
    MIB,
    Urgency,
    fold,
    postgres_advice,
    recent_rate,
    sqlite_advice,
)
from deerflow_ckpt.store.clock import bucket_start_ns, write_time_ns
from deerflow_ckpt.store.storage import Bucket, PostgresDatabase, Relation, SqliteFiles

START = 1_780_000_000 * 10**9 // DAY_NS * DAY_NS  # midnight UTC


def test_bucket_start_is_within_one_bucket_before_the_write_time() -> None:
    checkpoint_id = "1f0d2b4c-1234-6abc-8def-0123456789ab"
    written, start = write_time_ns(checkpoint_id), bucket_start_ns(checkpoint_id)
    assert written is not None and start is not None
    assert 0 <= written - start < 2**28 * 100
    assert bucket_start_ns("not-hex!") is None


def test_a_young_store_is_folded_by_the_hour_and_gaps_are_filled() -> None:
    buckets = [Bucket(START + 10, 2, 100), Bucket(START + 20, 1, 50), Bucket(START + 3 * HOUR_NS + 5, 4, 400)]
    growth = fold(buckets)
    assert growth.unit == "hour"
    assert [(b.start_ns - START, b.checkpoints, b.bytes) for b in growth.buckets] == [
        (0, 3, 150),
        (HOUR_NS, 0, 0),
        (2 * HOUR_NS, 0, 0),
        (3 * HOUR_NS, 4, 400),
    ]


def test_a_store_of_several_days_is_folded_by_the_day() -> None:
    buckets = [Bucket(START + day * DAY_NS + HOUR_NS, 1, 10 * (day + 1)) for day in range(10)]
    growth = fold(buckets)
    assert growth.unit == "day" and len(growth.buckets) == 10
    assert sum(b.bytes for b in growth.buckets) == sum(b.bytes for b in buckets)
    rate = recent_rate(growth)
    assert rate is not None
    # The last 7 days wrote 40+50+...+100 bytes: that is the week's rate.
    assert rate.window_ns == 7 * DAY_NS and rate.bytes == sum(10 * (day + 1) for day in range(3, 10))
    assert round(rate.bytes_per_week) == rate.bytes


def test_a_store_younger_than_a_week_is_rated_over_its_own_span() -> None:
    growth = fold([Bucket(START, 1, 100), Bucket(START + 3 * DAY_NS, 1, 100)], DAY_NS)
    rate = recent_rate(growth)
    assert rate is not None and rate.window_ns == 4 * DAY_NS
    assert rate.bytes_per_week == 200 * 7 / 4
    assert recent_rate(fold([])) is None


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
