"""A retention plan as data (versioned json): the totals, and per lineage what it keeps and why, what it deletes
(every row by its full primary key), what it re-parents, and what the naive policy would have broken."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from deerflow_ckpt.analysis.retention import FreedBytes, LineagePlan
from deerflow_ckpt.commands.plan_retention import RetentionPlan

JSON_SCHEMA_VERSION = 1


def _freed(freed: FreedBytes) -> dict[str, int]:
    return {**dataclasses.asdict(freed), "total_bytes": freed.total_bytes}


def _lineage(plan: LineagePlan) -> dict[str, Any]:
    deletion = plan.deletion
    return {
        "thread_id": plan.thread_id,
        "checkpoint_ns": plan.checkpoint_ns,
        "checkpoints": plan.checkpoints,
        "skipped": plan.skipped,
        "policy_keeps": len(plan.policy_kept),
        "keeps": len(plan.kept),
        "kept_by_reason": dict(sorted(Counter(str(reason) for reason in plan.kept.values()).items())),
        "widened_by": plan.widened_by,
        "widest": None if plan.widest is None else {"checkpoint_id": plan.widest[0], "links": plan.widest[1]},
        "branch_steps_lost": plan.branch_steps_lost,
        "note": plan.note,
        "freed": _freed(plan.freed),
        "deleted": list(plan.deleted),
        "reparented": [dataclasses.asdict(reparent) for reparent in plan.reparented],
        "rows": None
        if deletion is None
        else {
            "writes": [list(row) for row in deletion.writes],
            "blobs": [list(row) for row in deletion.blobs],
            "guard": {
                "checkpoints": deletion.guard_checkpoints,
                "newest": deletion.guard_newest,
                "writes": deletion.guard_writes,
            },
        },
        "naive": {
            "deleted_beyond_plan": list(plan.naive_deleted),
            "breaks": [
                {
                    "checkpoint_id": b.checkpoint_id,
                    "breaks": str(b.kind),
                    "rule": None if b.rule is None else str(b.rule),
                    "detail": b.detail,
                }
                for b in plan.naive_breaks
            ],
        },
    }


def plan_to_json(plan: RetentionPlan) -> Iterator[str]:
    """The document in pieces, one lineage a line: a large plan is never held whole as text."""
    policy = plan.policy
    head = {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": "plan retention",
        "database": plan.database,
        "found_via": plan.found_via,
        "backend": str(plan.backend),
        "planned_at": plan.planned_at,
        "full_mode_from": plan.full_mode_from,
        "mode": {
            "stated": None if plan.mode.mode is None else plan.mode.mode.value,
            "source": plan.mode.source,
            "delta_threads": plan.delta_threads,
            "conflict": plan.mode_conflict(),
        },
        "policy": {**dataclasses.asdict(policy), "options": policy.describe()},
        "totals": {
            "threads": plan.threads,
            "lineages": plan.lineages,
            "checkpoints": plan.checkpoints,
            "keeps": plan.kept,
            "widened_by": plan.widened,
            "lineages_deleting": plan.deleting,
            "lineages_skipped": len(plan.skipped),
            "reparented": plan.reparented,
            "branch_steps_lost": plan.branch_steps_lost,
            "freed": _freed(plan.freed),
        },
        "naive": {"deleted_beyond_plan": plan.naive_deleted, "breaks": dict(sorted(plan.naive_breaks.items()))},
    }
    yield json.dumps(head, indent=2)[:-2] + ',\n  "lineages": [\n'
    for index, lineage in enumerate(plan.planned_lineages()):
        yield ("    " if index == 0 else ",\n    ") + json.dumps(_lineage(lineage), separators=(",", ":"))
    yield "\n  ]\n}\n"
