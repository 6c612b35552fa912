"""A conversion report as text: what was written where, the bytes before and after beside the what-if's
prediction, and every refused thread with its reason."""

from __future__ import annotations

import re
import shlex

from rich.console import Console
from rich.text import Text

from deerflow_ckpt.analysis.storage import human_bytes
from deerflow_ckpt.commands.convert import ConversionReport
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.store.records import Backend


def _mode(report: ConversionReport) -> str:
    if report.snapshot_frequency is None:
        return "full mode"
    return f"delta mode at K={report.snapshot_frequency}"


def _change(before: int, after: int) -> str:
    if not before:
        return f"{human_bytes(before)} -> {human_bytes(after)}"
    return f"{human_bytes(before)} -> {human_bytes(after)} ({(after - before) / before:+.1%})"


# Converted threads listed by name, the ones whose stored bytes changed most.
_LISTED = 10
# What a redis glob pattern reads as other than itself.
_GLOB = re.compile(r"([*?\[\]\\])")


def render_conversion(report: ConversionReport, console: Console) -> None:
    converted, refused = report.converted, report.refused
    console.print(Text(printable(f"Converted {report.database} (chosen via {report.found_via})")))
    console.print(Text(printable(f"  into {report.output}, {_mode(report)}")))
    checkpoints = sum(t.checkpoints for t in converted)
    rewritten = sum(t.rewritten for t in converted)
    console.print(
        Text(
            f"  {len(report.threads)} threads: {len(converted)} converted ({checkpoints:,} checkpoints, "
            f"{rewritten:,} rewritten), {len(refused)} refused and copied unchanged"
        )
    )
    if report.carried_over is not None:
        carried = report.carried_over
        console.print(Text(f"  caught up: {carried} threads unchanged since the previous run, carried over"))
    for table in sorted(report.tables_before):
        before, after = report.tables_before[table], report.tables_after.get(table, 0)
        console.print(Text(f"  {table}: {_change(before, after)} (stored column bytes)"))
    if report.backend is Backend.SQLITE:
        disk = "file"
    elif report.carried_over is None:
        disk = "saver tables on disk (a fresh copy, then compacted)"
    else:
        disk = "saver tables on disk (the live ones, then the copies compacted)"
    console.print(Text(f"  {disk}: {_change(report.disk_before, report.disk_after)}"))
    kind = "lists" if report.snapshot_frequency is None else "snapshots"
    values = sum(t.stored_values for t in converted)
    console.print(
        Text(f"  message {kind} stored: {values:,}, {human_bytes(sum(t.stored_value_bytes for t in converted))}")
    )
    modelled = [t for t in converted if t.modelled_exactly]
    stored = sum(t.stored_value_bytes for t in modelled)
    predicted = sum(t.predicted_value_bytes for t in modelled)
    if modelled:
        against = f" ({(stored - predicted) / predicted:+.1%})" if predicted else ""
        console.print(
            Text(
                f"  the what-if (ckpt inspect thread) predicted {human_bytes(predicted)} for the {len(modelled)} "
                f"threads it models exactly: stored {human_bytes(stored)}{against}"
            )
        )
    others = len(converted) - len(modelled)
    if others:
        console.print(
            Text(
                f"  ({others} threads are outside its model: branches, removals, Overwrites, subgraph calls or a "
                "stored start)"
            )
        )
    changed = sorted(converted, key=lambda t: -abs(t.checkpoint_bytes_after - t.checkpoint_bytes_before))[:_LISTED]
    for thread in changed:
        line = (
            f"  thread {thread.thread_id} ({thread.source_mode}): {thread.checkpoints:,} checkpoints, "
            f"{thread.rewritten:,} rewritten, {_change(thread.checkpoint_bytes_before, thread.checkpoint_bytes_after)}"
        )
        console.print(Text(printable(line)))
    for thread in refused:
        console.print(Text(printable(f"  refused: thread {thread.thread_id} ({thread.source_mode}): {thread.refused}")))
    for thread_id, why in sorted(report.still_refused.items()):
        console.print(Text(printable(f"  refused by the previous run, unchanged since: thread {thread_id}: {why}")))
    kept = len(refused) + len(report.still_refused)
    if report.snapshot_frequency is None and kept:
        console.print(
            Text(
                f"  {kept} refused threads keep their delta checkpoints: a full-mode DeerFlow refuses them ('Thread "
                "requires delta mode; materialize and convert its checkpoints before using full mode.')"
            )
        )
    cache = report.history_cache
    if cache is not None and converted:
        pattern = shlex.quote(_GLOB.sub(r"\\\1", cache.key_prefix) + ":*")
        console.print(
            Text(
                printable(
                    f"  DeerFlow's history cache (redis, key prefix {cache.key_prefix}, {cache.prefix_origin}) still "
                    "holds the histories of the converted checkpoints as they were stored before: after the switch "
                    f"and before DeerFlow starts, unlink every key under the prefix, e.g. redis-cli --scan --pattern "
                    f"{pattern} | xargs -r -d '\\n' redis-cli unlink"
                )
            )
        )
    if report.backend is Backend.SQLITE:
        steps = (
            f"ckpt verify-shape --deep --db {shlex.quote(report.output)}; stop DeerFlow, catch up (ckpt convert "
            "--catch-up), swap the files (keep the old one), start DeerFlow in the converted mode"
        )
    else:
        steps = (
            f"ckpt verify-shape --deep --schema {shlex.quote(report.output)} (same --db); stop DeerFlow, catch up "
            "(ckpt convert --catch-up), run the switch script with psql, start DeerFlow in the converted mode"
        )
    console.print(Text(printable(f"Next: {steps}")))
