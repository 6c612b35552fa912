"""A conversion report as data (versioned json): the totals, and per thread what was converted or why not."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from deerflow_ckpt.commands.convert import ConversionReport
from deerflow_ckpt.report.printable import json_text

JSON_SCHEMA_VERSION = 1


def conversion_to_json(report: ConversionReport) -> str:
    converted, refused = report.converted, report.refused
    document: dict[str, Any] = {
        "schema_version": JSON_SCHEMA_VERSION,
        "database": report.database,
        "found_via": report.found_via,
        "output": report.output,
        "mode": str(report.mode),
        "snapshot_frequency": report.snapshot_frequency,
        "totals": {
            "threads": len(report.threads),
            "converted_threads": len(converted),
            "refused_threads": len(refused),
            "checkpoints": sum(t.checkpoints for t in report.threads),
            "converted_checkpoints": sum(t.checkpoints for t in converted),
            "rewritten_checkpoints": sum(t.rewritten for t in converted),
            "stored_values": sum(t.stored_values for t in converted),
            "stored_value_bytes": sum(t.stored_value_bytes for t in converted),
            "predicted_value_bytes": sum(t.predicted_value_bytes for t in converted),
            "modelled_threads": sum(t.modelled_exactly for t in converted),
            "modelled_stored_value_bytes": sum(t.stored_value_bytes for t in converted if t.modelled_exactly),
            "modelled_predicted_value_bytes": sum(t.predicted_value_bytes for t in converted if t.modelled_exactly),
        },
        "carried_over_threads": report.carried_over,
        "still_refused": report.still_refused,
        "history_cache": None
        if report.history_cache is None
        else {"key_prefix": report.history_cache.key_prefix, "prefix_origin": report.history_cache.prefix_origin},
        "tables_before": report.tables_before,
        "tables_after": report.tables_after,
        "backend": str(report.backend),
        "disk_bytes_before": report.disk_before,
        "disk_bytes_after": report.disk_after,
        "threads": [dataclasses.asdict(thread) for thread in report.threads],
    }
    return json_text(json.dumps(document, indent=2, ensure_ascii=False)) + "\n"
