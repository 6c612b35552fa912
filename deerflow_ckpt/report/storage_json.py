"""`inspect storage` as json (versioned) and its growth series as csv."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from typing import Any

from deerflow_ckpt.analysis.storage import Growth, Rate
from deerflow_ckpt.commands.inspect_storage import StorageInspection
from deerflow_ckpt.store.clock import format_time

JSON_SCHEMA_VERSION = 1
CSV_HEADER = ("series", "unit", "start", "checkpoints", "bytes")


def _series(growth: Growth) -> list[dict[str, Any]]:
    return [
        {"start": format_time(bucket.start_ns), "checkpoints": bucket.checkpoints, "bytes": bucket.bytes}
        for bucket in growth.buckets
    ]


def _rate(rate: Rate) -> dict[str, Any]:
    return {
        "window_seconds": rate.window_ns // 10**9,
        "bytes": rate.bytes,
        "bytes_per_week": round(rate.bytes_per_week),
    }


def storage_to_json(inspection: StorageInspection) -> str:
    facts = inspection.facts
    rate = inspection.rate
    empty = Growth(inspection.growth.unit_ns, ())
    document = {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": "inspect storage",
        "database": {"description": inspection.database, "backend": facts.backend, "found_via": inspection.found_via},
        "sqlite": dataclasses.asdict(facts.sqlite) if facts.sqlite is not None else None,
        "postgres": dataclasses.asdict(facts.postgres) if facts.postgres is not None else None,
        "relations": [dataclasses.asdict(relation) for relation in facts.relations],
        "channels": None if facts.channels is None else [dataclasses.asdict(row) for row in facts.channels],
        "checkpoint_rest_bytes": facts.checkpoint_rest_bytes,
        "metadata_bytes": facts.metadata_bytes,
        "large_values": [dataclasses.asdict(value) for value in facts.large_values],
        "growth": {"unit": inspection.growth.unit, "buckets": _series(inspection.growth)},
        "rate": None if rate is None else _rate(rate),
        "untimed_checkpoints": facts.untimed_checkpoints,
        "heaviest": [
            {
                **dataclasses.asdict(thread),
                "first": format_time(thread.first_ns),
                "last": format_time(thread.last_ns),
                "growth": _series(inspection.heaviest_growth.get(thread.thread_id, empty)),
            }
            for thread in facts.heaviest
        ],
        "app": dataclasses.asdict(facts.app) if facts.app is not None else None,
        "legacy_files": [{"path": path, "bytes": size} for path, size in facts.legacy_files],
        "advice": [dataclasses.asdict(advice) for advice in inspection.advice],
        "notes": facts.notes,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def storage_to_csv(inspection: StorageInspection) -> str:
    """The growth series: the whole store ('store'), then each heaviest thread by its id."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    series = [("store", inspection.growth), *inspection.heaviest_growth.items()]
    for name, growth in series:
        for bucket in growth.buckets:
            writer.writerow((name, growth.unit, format_time(bucket.start_ns), bucket.checkpoints, bucket.bytes))
    return buffer.getvalue()
