"""`inspect storage` as json (versioned) and its growth series as csv."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from deerflow_ckpt.analysis.storage import Growth, Rate, autocheckpoint_bytes
from deerflow_ckpt.commands.inspect_storage import StorageInspection
from deerflow_ckpt.report.printable import csv_text, json_dumps
from deerflow_ckpt.store.clock import format_time
from deerflow_ckpt.store.storage import ChannelBytes, SqliteFiles

# 2: hourly-exact growth in hour/day/week/month units with what is not in it, the rate up to the run,
# tool outputs, vacuum and heap/TOAST figures, legacy files with their -wal and -shm.
# 3: Postgres relations' rows counted (rows_exact, statistics_rows beside them), dead_rows null when not
# known (dead_rows_unknown says why, dead_rows_source where known ones come from), postgres.stats_reset.
# 4: the rate's bytes_per_week is null without a day of history (enough_history false), and history_seconds
# and first_write_hour say how much there is.
JSON_SCHEMA_VERSION = 4
# series "store" or "thread" (then thread_id names it); unit is the bucket's, or for a row that is not a
# bucket (start empty) what it counts: "untimed", "out of range", "unnamed blobs" (blob rows in blob_rows).
CSV_HEADER = ("series", "thread_id", "unit", "start", "checkpoints", "bytes", "blob_rows")


def _series(growth: Growth) -> list[dict[str, Any]]:
    return [
        {"start": format_time(bucket.start_ns), "checkpoints": bucket.checkpoints, "bytes": bucket.bytes}
        for bucket in growth.buckets
    ]


def _growth(growth: Growth) -> dict[str, Any]:
    return {
        "unit": growth.unit.value,
        "buckets": _series(growth),
        "untimed": {"checkpoints": growth.untimed_checkpoints, "bytes": growth.untimed_bytes},
        "out_of_range": {"checkpoints": growth.out_of_range_checkpoints, "bytes": growth.out_of_range_bytes},
        "unnamed_blobs": {"rows": growth.unnamed_blob_rows, "bytes": growth.unnamed_blob_bytes},
    }


def _rate(rate: Rate) -> dict[str, Any]:
    return {
        "window_seconds": rate.window_ns // 10**9,
        "window_end": format_time(rate.end_ns),
        "bytes": rate.bytes,
        "checkpoints": rate.checkpoints,
        # null: not enough history for a rate per week (less than a day since the first write's hour ended).
        "bytes_per_week": None if rate.bytes_per_week is None else round(rate.bytes_per_week),
        "enough_history": rate.enough_history,
        "history_seconds": rate.history_ns // 10**9,
        "first_write_hour": format_time(rate.first_write_ns),
        "last_write_hour": format_time(rate.last_write_ns),
        "idle_seconds": rate.idle_ns // 10**9,
    }


def _sqlite(files: SqliteFiles) -> dict[str, Any]:
    # asdict leaves out properties: the figures a VACUUM decision reads are named explicitly.
    return {
        **dataclasses.asdict(files),
        "freelist_bytes": files.freelist_bytes,
        "used_bytes": files.used_bytes,
        "vacuum": {
            "frees_at_least_bytes": files.freelist_bytes,
            "needs_beside_the_file_bytes": files.used_bytes,
            "needs_in_temp_directory_bytes": files.used_bytes,
        },
        "wal_autocheckpoint_bytes": autocheckpoint_bytes(files.page_size),
    }


def _channel(row: ChannelBytes) -> dict[str, Any]:
    return {**dataclasses.asdict(row), "label": row.label}


def storage_to_json(inspection: StorageInspection) -> str:
    facts = inspection.facts
    rate = inspection.rate
    document = {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": "inspect storage",
        "database": {"description": inspection.database, "backend": facts.backend, "found_via": inspection.found_via},
        "now": format_time(inspection.now_ns),
        "sqlite": _sqlite(facts.sqlite) if facts.sqlite is not None else None,
        "postgres": dataclasses.asdict(facts.postgres) if facts.postgres is not None else None,
        "relations": [
            {**dataclasses.asdict(relation), "heap_bytes": relation.bytes - relation.index_bytes - relation.toast_bytes}
            for relation in facts.relations
        ],
        "rows_unread": facts.rows_unread,
        "channels": None if facts.channels is None else [_channel(row) for row in facts.channels],
        "checkpoint_rest_bytes": facts.checkpoint_rest_bytes,
        "metadata_bytes": facts.metadata_bytes,
        "large_values": [dataclasses.asdict(value) for value in facts.large_values],
        "growth": _growth(inspection.growth),
        "rate": None if rate is None else _rate(rate),
        "heaviest": [
            {
                **dataclasses.asdict(thread),
                "first": format_time(thread.first_ns),
                "last": format_time(thread.last_ns),
                "growth": _growth(inspection.heaviest_growth[place]) if place in inspection.heaviest_growth else None,
            }
            for place, thread in enumerate(facts.heaviest)
        ],
        "app": dataclasses.asdict(facts.app) if facts.app is not None else None,
        "legacy_files": [
            {**dataclasses.asdict(legacy), "total_bytes": legacy.total_bytes} for legacy in facts.legacy_files
        ],
        "advice": [dataclasses.asdict(advice) for advice in inspection.advice],
        "notes": facts.notes,
    }
    return json_dumps(document) + "\n"


def _rows(series: str, thread_id: str, growth: Growth) -> Iterator[tuple[Any, ...]]:
    if thread_id and not (
        growth.buckets
        or growth.untimed_checkpoints
        or growth.untimed_bytes
        or growth.out_of_range_checkpoints
        or growth.out_of_range_bytes
        or growth.unnamed_blob_rows
    ):
        # A heaviest thread always has a row, even one that wrote nothing datable.
        yield (series, thread_id, "untimed", "", 0, 0, "")
    for bucket in growth.buckets:
        yield (series, thread_id, growth.unit.value, format_time(bucket.start_ns), bucket.checkpoints, bucket.bytes, "")
    if growth.untimed_checkpoints or growth.untimed_bytes:
        yield (series, thread_id, "untimed", "", growth.untimed_checkpoints, growth.untimed_bytes, "")
    if growth.out_of_range_checkpoints or growth.out_of_range_bytes:
        yield (series, thread_id, "out of range", "", growth.out_of_range_checkpoints, growth.out_of_range_bytes, "")
    if growth.unnamed_blob_rows:
        yield (series, thread_id, "unnamed blobs", "", 0, growth.unnamed_blob_bytes, growth.unnamed_blob_rows)


def storage_to_csv(inspection: StorageInspection) -> str:
    """The growth series: the whole store ('store'), then each heaviest thread ('thread', its id in its own
    column, neutralised as every CSV cell is), each followed by what is not in its buckets."""
    rows: list[Sequence[Any]] = [CSV_HEADER, *_rows("store", "", inspection.growth)]
    for place, thread in enumerate(inspection.facts.heaviest):
        growth = inspection.heaviest_growth.get(place)
        if growth is not None:
            rows.extend(_rows("thread", thread.thread_id, growth))
    return csv_text(rows)
