"""The cadence timeline as JSON, shared by verify-shape's and inspect's documents."""

from __future__ import annotations

from typing import Any

from deerflow_ckpt.analysis.epochs import Epoch, Mark
from deerflow_ckpt.analysis.timeline import CadenceClass, Change, Timeline, TimelineChart
from deerflow_ckpt.store.clock import format_time


def _time(time_ns: int | None) -> str | None:
    return None if time_ns is None else format_time(time_ns)


def _mark(mark: Mark) -> dict[str, Any]:
    return {"checkpoint_id": mark.checkpoint_id, "step": mark.step, "written": _time(mark.time_ns)}


def class_to_dict(cadence_class: CadenceClass) -> dict[str, Any]:
    return {
        "cadence": cadence_class.label,
        "lower": cadence_class.lower,
        "upper": cadence_class.upper,
        "threads": cadence_class.threads,
        "epochs": len(cadence_class.epochs),
        "checkpoints": cadence_class.checkpoints,
        "first_write": _time(cadence_class.first_time_ns),
        "last_write": _time(cadence_class.last_time_ns),
    }


def change_to_dict(change: Change) -> dict[str, Any]:
    return {
        "from": change.older.label,
        "to": change.newer.label,
        "kind": change.kind.value,
        "at": _time(change.at_ns),
        "first_new": _mark(change.newer_first),
        "last_old": _mark(change.older_last),
        "threads": list(change.threads),
    }


def epoch_to_dict(epoch: Epoch) -> dict[str, Any]:
    return {
        "index": epoch.index,
        "lower": epoch.lower,
        "upper": epoch.upper,
        "inferred": epoch.inferred,
        "checkpoints": epoch.checkpoints,
        "first_checkpoint_id": epoch.first_id,
        "last_checkpoint_id": epoch.last_id,
        "first_write": _time(epoch.first_time_ns),
        "last_write": _time(epoch.last_time_ns),
    }


def chart_to_dict(chart: TimelineChart | None) -> dict[str, Any] | None:
    if chart is None:
        return None
    return {
        "start": _time(chart.start_ns),
        "end": _time(chart.end_ns),
        "cells": len(chart.rows[0][1]) if chart.rows else 0,
        "rows": [{"cadence": label, "writing_epochs": list(counts)} for label, counts in chart.rows],
    }


def timeline_to_dict(timeline: Timeline | None) -> dict[str, Any] | None:
    if timeline is None:
        return None
    current = timeline.current
    into_current = [c for c in timeline.relations.values() if c is not None and c.newer is current]
    return {
        "classes": [class_to_dict(c) for c in timeline.classes],
        "changes": [change_to_dict(c) for c in timeline.changes],
        "in_force": None
        if current is None
        else {"cadence": current.label, "since": _time(timeline.current_since_ns())},
        "changes_into_force": [change_to_dict(c) for c in into_current],
        "took_over_from": [c.label for c in timeline.prior],
        "ambiguous_epochs": len(timeline.ambiguous),
        "unplaced": [
            {
                "cadence": group.label,
                "threads": group.threads,
                "epochs": group.epochs,
                "checkpoints": group.checkpoints,
                "first_write": _time(group.first_time_ns),
                "last_write": _time(group.last_time_ns),
                "fits": list(group.fits),
                "fits_in_force": group.fits_in_force,
            }
            for group in timeline.unplaced()
        ],
    }
