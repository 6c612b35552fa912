"""`ckpt inspect`'s histograms as long ("tidy") CSV: one row per bucket.

Columns: thread_id, checkpoint_ns, epoch (the cadence epoch of an interval metric; empty for the others),
metric, lower (inclusive), upper (exclusive; empty when unbounded), count. Metrics: `snapshot_interval`
(cadence-triggered, by the counters, per epoch), `snapshot_interval_chain` (the same snapshots along the
chain), `forced_interval.<trigger>`,
`open_tail` (one row: the writes since the last snapshot), and for the summary `inferred_cadence`
(threads per inferred K).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from deerflow_ckpt.analysis.histogram import Histogram, histogram
from deerflow_ckpt.analysis.inspection import LineageInspection, ThreadInspection
from deerflow_ckpt.analysis.store_summary import DatabaseSummary
from deerflow_ckpt.report.printable import csv_text

HEADER = ("thread_id", "checkpoint_ns", "epoch", "metric", "lower", "upper", "count")
Row = tuple[str | int, ...]


def _bucket_rows(thread_id: str, ns: str, epoch: int | str, metric: str, values: Histogram) -> Iterator[Row]:
    for bucket in values.buckets:
        upper = "" if bucket.upper is None else bucket.upper
        yield (thread_id, ns, epoch, metric, bucket.lower, upper, bucket.count)


def lineage_rows(inspection: LineageInspection) -> Iterator[Row]:
    thread_id, ns, intervals = inspection.thread_id, inspection.checkpoint_ns, inspection.intervals
    for inspected in inspection.epochs:
        index = inspected.epoch.index
        yield from _bucket_rows(thread_id, ns, index, "snapshot_interval", inspected.counters)
        yield from _bucket_rows(thread_id, ns, index, "snapshot_interval_chain", inspected.chain)
    for trigger in sorted({f.trigger for f in intervals.forced}):
        forced = histogram(f.counter_interval for f in intervals.forced if f.trigger is trigger)
        yield from _bucket_rows(thread_id, ns, "", f"forced_interval.{trigger.value}", forced)
    tail = intervals.open_tail
    yield (thread_id, ns, "", "open_tail", tail, tail + 1, 1)


def iter_threads_csv(threads: Iterable[ThreadInspection]) -> Iterator[str]:
    """The header, then each thread's rows as it comes."""
    yield csv_text([HEADER])
    for thread in threads:
        yield csv_text(lineage_rows(thread.shown))


def summary_to_csv(summary: DatabaseSummary) -> str:
    return csv_text([HEADER, *_bucket_rows("", "", "", "inferred_cadence", summary.cadence_distribution)])
