"""`ckpt inspect`'s JSON documents (versioned schema, stable key order).

Histograms follow docs/architecture.md, "Reports": `count`, `sum`, `min`, `max` exact, and `buckets` of
`{lower (inclusive), upper (exclusive, null when unbounded), count}`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Iterator
from typing import Any

from deerflow_ckpt.analysis.histogram import Histogram
from deerflow_ckpt.analysis.inspection import (
    CadenceReport,
    EpochInspection,
    InspectionScope,
    LineageInspection,
    NamespaceGroup,
    ThreadInspection,
)
from deerflow_ckpt.analysis.replay import ProofResult
from deerflow_ckpt.analysis.shape import ThreadKind
from deerflow_ckpt.analysis.store_summary import DatabaseSummary
from deerflow_ckpt.analysis.stored_bytes import StorageBytes
from deerflow_ckpt.analysis.timeline import CHART_CELLS, Timeline, timeline_chart
from deerflow_ckpt.analysis.what_if import WhatIf
from deerflow_ckpt.report.printable import json_dumps
from deerflow_ckpt.report.shape_json import finding_to_dict
from deerflow_ckpt.report.timeline_json import chart_to_dict, epoch_to_dict, timeline_to_dict

# 2: cadence epochs per lineage (interval histograms moved into them), what_if.epoch, the summary's timeline.
JSON_SCHEMA_VERSION = 2
INTERVAL_UNIT = "message-writing steps"


def histogram_dict(name: str, unit: str, histogram: Histogram, **labels: str) -> dict[str, Any]:
    return {
        "name": name,
        "unit": unit,
        **labels,
        "count": histogram.count,
        "sum": histogram.total,
        "min": histogram.minimum,
        "max": histogram.maximum,
        "buckets": [{"lower": b.lower, "upper": b.upper, "count": b.count} for b in histogram.buckets],
    }


def storage_dict(storage: StorageBytes) -> dict[str, Any]:
    return {
        "unit": "By",
        "snapshots": storage.snapshots,
        "message_writes": storage.message_writes,
        "checkpoints": storage.checkpoints,
        "other_writes": storage.other_writes,
        "other_blobs": storage.other_blobs,
        "total": storage.total,
    }


def cadence_dict(cadence: CadenceReport) -> dict[str, Any]:
    return {
        "lower": cadence.lower,
        "upper": cadence.upper,
        "inferred": cadence.inferred,
        "expected": cadence.expected,
        "status": cadence.status.value,
    }


def what_if_dict(what_if: WhatIf) -> dict[str, Any]:
    check = what_if.check
    return {
        "epoch": what_if.epoch,
        "message_writing_steps": what_if.message_writing_steps,
        "append_only": what_if.append_only,
        "model_check": None
        if check is None
        else {
            "snapshots": check.snapshots,
            "modelled_bytes": check.modelled_bytes,
            "measured_bytes": check.measured_bytes,
            "exact": check.exact,
        },
        "rows": [
            {
                "mode": "delta" if row.cadence is not None else "full",
                "cadence": row.cadence,
                "stored_values": row.stored_values,
                "retained_bytes": row.retained_bytes,
                "worst_replay_depth": row.worst_replay_depth,
                "worst_replay_bytes": row.worst_replay_bytes,
            }
            for row in what_if.rows
        ],
    }


def epoch_dict(inspected: EpochInspection) -> dict[str, Any]:
    return {
        **epoch_to_dict(inspected.epoch),
        "message_writing_steps": inspected.message_writing_steps,
        "snapshot_steps": inspected.snapshot_steps,
        "metrics": [
            histogram_dict("snapshot_interval", INTERVAL_UNIT, inspected.counters, method="counters"),
            histogram_dict("snapshot_interval", INTERVAL_UNIT, inspected.chain, method="chain"),
        ],
        "carried_over_intervals": list(inspected.carried_over),
        "cadence": cadence_dict(inspected.cadence),
    }


def lineage_dict(inspection: LineageInspection) -> dict[str, Any]:
    intervals = inspection.intervals
    document: dict[str, Any] = {
        "checkpoint_ns": inspection.checkpoint_ns,
        "mode": inspection.kind,
        "checkpoints": inspection.checkpoints,
        "message_writing_steps": inspection.message_writing_steps,
        "snapshot_steps": inspection.snapshot_steps,
        "replay_depth": {"head": inspection.replay_depth_head, "max": inspection.replay_depth_max},
        "epochs": [epoch_dict(epoch) for epoch in inspection.epochs],
        "intervals": {
            "forced": [
                {
                    "checkpoint_id": f.checkpoint_id,
                    "step": f.step,
                    "trigger": f.trigger.value,
                    "counter_interval": f.counter_interval,
                    "chain_interval": f.chain_interval,
                }
                for f in intervals.forced
            ],
            "open_tail": intervals.open_tail,
            "methods_agree": not intervals.disagreements,
            "disagreements": [
                {
                    "checkpoint_id": d.checkpoint_id,
                    "step": d.step,
                    "counter_interval": d.counter_interval,
                    "chain_interval": d.chain_interval,
                }
                for d in intervals.disagreements
            ],
        },
        "cadence": cadence_dict(inspection.cadence),
        "storage": storage_dict(inspection.storage),
    }
    if inspection.what_if is not None:
        document["what_if"] = what_if_dict(inspection.what_if)
    return document


def group_dict(group: NamespaceGroup) -> dict[str, Any]:
    return {
        "namespace": group.pattern,
        "lineages": group.lineages,
        "checkpoints": group.checkpoints,
        "message_writing_steps": group.message_writing_steps,
        "snapshot_steps": group.snapshot_steps,
        "cadence": {
            "lower": group.bounds.lower,
            "upper": group.bounds.upper,
            "inferred": group.bounds.inferred,
            "contradictory": group.bounds.contradictory,
        },
        "storage": storage_dict(group.storage),
    }


def thread_dict(thread: ThreadInspection) -> dict[str, Any]:
    return {
        "thread_id": thread.thread_id,
        "checkpoints": thread.checkpoints,
        "namespaces": len(thread.namespaces),
        "storage": storage_dict(thread.storage),
        "shown": lineage_dict(thread.shown),
        "subgraphs": [group_dict(group) for group in thread.subgraphs],
        "proof": None if thread.proof is None else proof_dict(thread.proof),
    }


def proof_dict(proof: ProofResult) -> dict[str, Any]:
    return {
        "status": proof.status,
        "proved_lists": proof.proved,
        "differing_lists": proof.differing,
        "started_lists": proof.started,
        "unprovable": list(proof.unprovable),
        "findings": [finding_to_dict(finding) for finding in proof.findings],
    }


def _header(command: str, scope: InspectionScope) -> dict[str, Any]:
    settings = scope.settings
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": command,
        "database": {"description": scope.database, "backend": scope.backend.value, "found_via": scope.found_via},
        "settings": {
            "expected_cadence": settings.expected_cadence,
            "cadence_source": scope.cadence_source,
            "superstep_bound": settings.superstep_bound,
            "what_if": list(settings.what_if) if settings.what_if is not None else None,
            "mode": None if scope.mode.mode is None else scope.mode.mode.value,
            "mode_source": scope.mode.source,
        },
    }


def _dump(document: dict[str, Any]) -> str:
    return json_dumps(document) + "\n"


def iter_threads_json(scope: InspectionScope, threads: Iterable[ThreadInspection]) -> Iterator[str]:
    """The document in pieces, one thread at a time; joined, it equals `json.dumps(..., indent=2)`."""
    empty = json_dumps({**_header("inspect thread", scope), "threads": []})
    before, after = empty.rsplit('"threads": []', 1)
    yield before + '"threads": ['
    count = 0
    for thread in threads:
        body = json_dumps(thread_dict(thread))
        yield ("," if count else "") + "\n" + textwrap.indent(body, "    ")
        count += 1
    yield ("\n  ]" if count else "]") + after + "\n"


def summary_to_json(scope: InspectionScope, summary: DatabaseSummary, timeline: Timeline) -> str:
    document = {
        **_header("inspect summary", scope),
        "summary": {
            "threads": summary.threads,
            "lineages": summary.lineages,
            "checkpoints": summary.checkpoints,
            "modes": {kind.value: summary.kinds[kind] for kind in ThreadKind},
            "mode_conflict": scope.mode.conflict(summary.kinds),
            "inferred_cadence": histogram_dict("inferred_cadence", "threads", summary.cadence_distribution),
            "unsettled_cadence": dict(sorted(summary.unsettled.items())),
            "threads_with_several_epochs": summary.changed,
            "timeline": timeline_to_dict(timeline),
            "chart": chart_to_dict(timeline_chart(timeline, CHART_CELLS)),
            "storage": storage_dict(summary.storage),
            "heaviest": [
                {
                    "thread_id": thread.thread_id,
                    "mode": thread.shown.kind,
                    "checkpoints": thread.checkpoints,
                    "bytes": thread.storage.total,
                    "snapshot_bytes": thread.storage.snapshots,
                    "replay_depth_max": thread.shown.replay_depth_max,
                    "cadence": cadence_dict(thread.shown.cadence),
                }
                for thread in summary.heaviest
            ],
        },
    }
    return _dump(document)
