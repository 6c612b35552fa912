"""`ckpt inspect`'s text report: rich tables and horizontal bar histograms.

Bars are rich.bar.Bar (eighth-cell blocks); any non-zero count gets at least one eighth so it never
looks like zero. A console that cannot encode block characters gets '#' bars instead (rich would
raise UnicodeEncodeError). Colour is rich's: off when piped and under NO_COLOR.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from rich.bar import Bar
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from deerflow_ckpt.analysis.epochs import Epoch
from deerflow_ckpt.analysis.histogram import Bucket, Histogram
from deerflow_ckpt.analysis.inspection import (
    CadenceReport,
    CadenceStatus,
    EpochInspection,
    InspectionScope,
    IntervalReport,
    LineageInspection,
    NamespaceGroup,
    ThreadInspection,
)
from deerflow_ckpt.analysis.mode import all_full, full_store_line
from deerflow_ckpt.analysis.replay import ProofResult
from deerflow_ckpt.analysis.shape import ThreadKind
from deerflow_ckpt.analysis.store_summary import DatabaseSummary
from deerflow_ckpt.analysis.stored_bytes import StorageBytes
from deerflow_ckpt.analysis.timeline import CHART_CELLS, Timeline, timeline_chart
from deerflow_ckpt.analysis.what_if import WhatIf
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.report.timeline_text import change_line, in_force_line, plural, unplaced_lines
from deerflow_ckpt.store.clock import format_time
from deerflow_ckpt.store.records import Backend

MAX_BAR_WIDTH = 40
_STATUS_STYLE = {
    CadenceStatus.MATCHES: "green",
    CadenceStatus.INFERRED: "green",
    CadenceStatus.DIFFERS: "bold red",
}


def can_draw_blocks(console: Console) -> bool:
    return console.encoding.lower().replace("-", "").startswith("utf")


class CountBar:
    """A bar of `count` against `largest`, at least one tick when `count` is not zero."""

    def __init__(self, count: int, largest: int, width: int, blocks: bool) -> None:
        self.count, self.largest, self.width, self.blocks = count, largest, width, blocks

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = min(self.width, options.max_width)
        if self.count <= 0 or self.largest <= 0:
            yield Segment(" " * width)
            return
        if not self.blocks:
            cells = max(1, round(width * self.count / self.largest))
            yield Segment("#" * cells + " " * (width - cells))
            return
        # One eighth of a cell, nudged up so Bar's int() truncation cannot round it away.
        smallest = self.largest / (width * 8) * 1.001
        yield Bar(self.largest, 0, max(self.count, smallest), width=width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(self.width, self.width)


def _bar_width(console: Console) -> int:
    return max(10, min(MAX_BAR_WIDTH, console.width - 36))


def _n(value: int) -> str:
    return f"{value:,}"


def _table() -> Table:
    return Table(box=None, show_edge=False, pad_edge=False, padding=(0, 1))


def _indented(table: Table) -> Padding:
    return Padding(table, (0, 0, 0, 2), expand=False)


def _bucket_label(bucket: Bucket) -> str:
    if bucket.upper is None:
        return f">= {bucket.lower}"
    if bucket.upper == bucket.lower + 1:
        return str(bucket.lower)
    return f"{bucket.lower}-{bucket.upper - 1}"


def histogram_table(values: Histogram, heading: str, console: Console, counted: str = "count") -> Table:
    """Counts per bucket with percentage and bar; labels are the half-open ranges written inclusively."""
    table = _table()
    table.add_column(heading, justify="right")
    table.add_column(counted, justify="right")
    table.add_column("%", justify="right")
    table.add_column("", no_wrap=True)
    width, blocks, largest = _bar_width(console), can_draw_blocks(console), values.largest_bucket
    for bucket in values.buckets:
        share = f"{100 * bucket.count / values.count:.1f}%" if values.count else ""
        table.add_row(_bucket_label(bucket), _n(bucket.count), share, CountBar(bucket.count, largest, width, blocks))
    return table


def _bounds(lower: int | None, upper: int | None) -> str:
    if lower is not None and upper is not None:
        return f"K in [{lower}, {upper}]"
    if lower is not None:
        return f"K >= {lower}"
    if upper is not None:
        return f"K <= {upper}"
    return "no bounds"


def short_cadence(cadence: CadenceReport) -> str:
    if cadence.inferred is not None:
        return f"K = {cadence.inferred}"
    if cadence.status is CadenceStatus.NOT_DELTA:
        return "full mode"
    return _bounds(cadence.lower, cadence.upper)


def cadence_line(cadence: CadenceReport, cadence_source: str, thread_id: str, epochs: int = 1) -> Text:
    bounds = _bounds(cadence.lower, cadence.upper)
    expected = f"the expected K = {cadence.expected} (from {printable(cadence_source)})"
    status = cadence.status
    if status is CadenceStatus.MATCHES:
        said = f"K = {cadence.inferred} ({bounds}), matches {expected}"
    elif status is CadenceStatus.INFERRED:
        said = f"K = {cadence.inferred} ({bounds}); no expected K (pass --cadence or a config)"
    elif status is CadenceStatus.CONSISTENT:
        said = f"{bounds}: not pinned down yet; {expected} lies within"
    elif status is CadenceStatus.DIFFERS:
        said = f"{bounds}, but {expected}: run `ckpt verify-shape --thread {thread_id}`"
    elif status is CadenceStatus.OPEN:
        said = f"{bounds}: not pinned down yet (no cadence-triggered snapshot closes it)"
    else:
        said = "full mode: no snapshot cadence"
    if epochs > 1:
        said = (
            f"in the current epoch ({epochs} of {epochs}), {said}; earlier epochs ran other cadences: a deliberate "
            "change or mixed writers, which `ckpt verify-shape` tells apart from the whole database's timeline"
        )
    return Text.assemble(("Cadence: ", "bold"), (said, _STATUS_STYLE.get(status, "")))


def _epoch_span(epoch: Epoch) -> str:
    return f"{format_time(epoch.first_time_ns)} .. {format_time(epoch.last_time_ns)}"


def epochs_table(epochs: Iterable[EpochInspection]) -> Table:
    table = _table()
    for heading in ("epoch", "written", "checkpoints", "writing steps", "snapshots", "cadence"):
        table.add_column(heading, justify="left" if heading in ("written", "cadence") else "right")
    for inspected in epochs:
        epoch = inspected.epoch
        table.add_row(
            str(epoch.index + 1),
            _epoch_span(epoch),
            _n(epoch.checkpoints),
            _n(inspected.message_writing_steps),
            _n(inspected.snapshot_steps),
            short_cadence(inspected.cadence),
        )
    return table


def _interval_notes(intervals: IntervalReport, thread_id: str) -> list[Text]:
    tail = plural(intervals.open_tail, "message-writing step")
    notes = [Text(f"  open tail: {tail} since the last snapshot (an interval not closed yet)")]
    by_trigger: dict[str, list[int]] = {}
    for forced in intervals.forced:
        by_trigger.setdefault(forced.trigger.value, []).append(forced.counter_interval)
    for trigger, found in sorted(by_trigger.items()):
        shown = ", ".join(str(v) for v in found[:12]) + (", ..." if len(found) > 12 else "")
        notes.append(Text(f"  forced snapshots, {trigger}: {len(found)} (intervals {shown}; not in the histogram)"))
    if not intervals.disagreements:
        notes.append(Text("  writes counted along the chain agree with the counters"))
    else:
        first = intervals.disagreements[0]
        where = f"step {first.step}" if first.step is not None else first.checkpoint_id
        ending = "s" if len(intervals.disagreements) > 1 else ""
        notes.append(
            Text(
                f"  the chain disagrees with the counters at {len(intervals.disagreements)} snapshot{ending} "
                f"(first at {where}: {first.counter_interval} by the counters, {first.chain_interval} along the "
                f"chain): run `ckpt verify-shape --thread {thread_id}`",
                style="yellow",
            )
        )
    return notes


def storage_table(storage: StorageBytes, backend: Backend) -> Table:
    table = _table()
    table.add_column("stored in", justify="left")
    table.add_column("bytes", justify="right")
    table.add_column("%", justify="right")
    rows = [
        ("snapshot blobs", storage.snapshots),
        ("message writes", storage.message_writes),
        ("rest of the checkpoints", storage.checkpoints),
        ("other writes", storage.other_writes),
    ]
    if backend is Backend.POSTGRES:
        rows.append(("other blobs (full-mode lists among them)", storage.other_blobs))
    total = storage.total
    for label, value in rows:
        table.add_row(label, _n(value), f"{100 * value / total:.1f}%" if total else "")
    table.add_row(Text("total", style="bold"), Text(_n(total), style="bold"), "")
    return table


def what_if_table(what_if: WhatIf, cadence: CadenceReport) -> Table:
    table = _table()
    for heading in ("K", "stored", "bytes kept", "max replay", "max replay bytes", ""):
        table.add_column(heading, justify="right" if heading else "left")
    for row in what_if.rows:
        if row.cadence is None:
            label, stored, note = "full", f"{_n(row.stored_values)} lists", ""
        else:
            label, stored = str(row.cadence), f"{_n(row.stored_values)} snapshots"
            note = "expected" if row.cadence == cadence.expected else ""
            note = note or ("inferred" if row.cadence == cadence.inferred else "")
        table.add_row(
            label, stored, _n(row.retained_bytes), _n(row.worst_replay_depth), _n(row.worst_replay_bytes), note
        )
    return table


def what_if_notes(what_if: WhatIf, backend: Backend) -> list[Text]:
    full = "a list in every checkpoint" if backend is Backend.SQLITE else "a list blob per message-writing step"
    notes = [
        Text(
            f"  model: this {'lineage' if what_if.epoch is None else 'epoch'}'s "
            f"{plural(what_if.message_writing_steps, 'message-writing step')} replayed; a snapshot at every K-th "
            "holds every message written so far"
        ),
        Text(f"  full mode stores {full}; max replay counts the writes a read replays after the last snapshot"),
    ]
    check = what_if.check
    if check is not None:
        measured = f"the {plural(check.snapshots, 'snapshot')} stored here measure {_n(check.measured_bytes)} bytes"
        if check.exact:
            notes.append(Text(f"  model check: {measured}, exactly as modelled", style="green"))
        else:
            notes.append(
                Text(
                    f"  model check: {measured}, modelled {_n(check.modelled_bytes)}: writes here re-send, remove "
                    "or replace messages, so read the bytes kept as estimates",
                    style="yellow",
                )
            )
    if not what_if.append_only:
        notes.append(Text("  removals or Overwrite were written: the model keeps every written message"))
    return notes


def _render_full_lineage(inspection: LineageInspection, console: Console) -> None:
    """A full-mode lineage has no snapshots, cadence or replay to show: say what it stores instead."""
    console.print(
        f"  {_n(inspection.checkpoints)} checkpoints, {_n(inspection.message_writing_steps)} message-writing steps; "
        "full mode: each checkpoint stores the whole message list (no snapshots, no cadence, nothing replayed)"
    )
    console.print(Text("Storage (stored column lengths)", style="bold"))
    console.print(_indented(storage_table(inspection.storage, inspection.backend)))
    if inspection.what_if is not None:
        console.print(Text("What-if: this lineage in delta mode (LangGraph's DeltaChannel) at cadence K", style="bold"))
        console.print(_indented(what_if_table(inspection.what_if, inspection.cadence)))
        for note in what_if_notes(inspection.what_if, inspection.backend):
            console.print(note)


def render_lineage(inspection: LineageInspection, scope: InspectionScope, console: Console) -> None:
    if inspection.kind is ThreadKind.FULL:
        _render_full_lineage(inspection, console)
        return
    thread_id = printable(inspection.thread_id)
    console.print(
        f"  {_n(inspection.checkpoints)} checkpoints, {_n(inspection.message_writing_steps)} message-writing steps, "
        f"{_n(inspection.snapshot_steps)} snapshot steps; replay depth {_n(inspection.replay_depth_head)} at the "
        f"head, {_n(inspection.replay_depth_max)} at most"
    )
    intervals = inspection.intervals
    several = len(inspection.epochs) > 1
    if several:
        console.print(Text("Cadence epochs (the fewest runs one K explains each, cut from the head back)", "bold"))
        console.print(_indented(epochs_table(inspection.epochs)))
    console.print(Text("Snapshot intervals (message-writing steps between snapshots, by the counters)", style="bold"))
    for inspected in inspection.epochs:
        if several:
            epoch = inspected.epoch
            console.print(f"  epoch {epoch.index + 1} ({short_cadence(inspected.cadence)}, {_epoch_span(epoch)})")
        if inspected.counters.count:
            console.print(_indented(histogram_table(inspected.counters, "interval", console)))
        else:
            console.print("  no cadence-triggered snapshot")
        if inspected.carried_over:
            carried = ", ".join(str(v) for v in inspected.carried_over)
            console.print(
                f"  carried over: {plural(len(inspected.carried_over), 'snapshot')} closing what the epoch before "
                f"left open ({carried} writes; not in the histogram)"
            )
    for note in _interval_notes(intervals, thread_id):
        console.print(note)
    console.print(cadence_line(inspection.cadence, scope.cadence_source, thread_id, len(inspection.epochs)))
    console.print(Text("Storage (stored column lengths)", style="bold"))
    console.print(_indented(storage_table(inspection.storage, inspection.backend)))
    if inspection.what_if is not None:
        modelled = inspection.what_if.epoch
        if modelled is None:
            console.print(Text("What-if: another cadence K for this lineage", style="bold"))
        else:
            since = format_time(inspection.epochs[modelled].epoch.first_time_ns)
            heading = f"What-if: another cadence K for epoch {modelled + 1} (the current one, from {since})"
            console.print(Text(heading, style="bold"))
        console.print(_indented(what_if_table(inspection.what_if, inspection.cadence)))
        for note in what_if_notes(inspection.what_if, inspection.backend):
            console.print(note)


def _group_cadence(group: NamespaceGroup) -> str:
    bounds = group.bounds
    if bounds.contradictory:
        return f"mixed (K >= {bounds.lower}, K <= {bounds.upper})"
    if bounds.inferred is not None:
        return f"K = {bounds.inferred}"
    return _bounds(bounds.lower, bounds.upper)


def subgraph_table(groups: Iterable[NamespaceGroup]) -> Table:
    table = _table()
    for heading in ("namespace", "lineages", "checkpoints", "writing steps", "snapshots", "cadence", "bytes"):
        table.add_column(heading, justify="left" if heading in ("namespace", "cadence") else "right")
    for group in groups:
        table.add_row(
            Text(printable(group.pattern)),
            _n(group.lineages),
            _n(group.checkpoints),
            _n(group.message_writing_steps),
            _n(group.snapshot_steps),
            _group_cadence(group),
            _n(group.storage.total),
        )
    return table


def proof_line(proof: ProofResult) -> Text:
    """inspect thread --deep: whether the shown lineage's stored lists are the replay of their writes."""
    line = Text("  proof: ", style="bold")
    if proof.findings:
        first = proof.findings[0]
        verb = "differs" if proof.differing == 1 else "differ"
        line.append(f"{plural(proof.differing, 'stored list')} {verb} from the replay of its writes", "bold red")
        line.append(printable(f" (first at checkpoint {first.checkpoint_id}: {first.message})"))
    elif proof.unprovable:
        line.append(f"{plural(proof.proved, 'stored list')} proved; could not be proven in part", "yellow")
        line.append(printable(f" ({proof.unprovable[0]})"))
    elif proof.proved:
        line.append(f"all {plural(proof.proved, 'stored list')} equal the replay of their writes", "green")
        if proof.started:
            line.append(f" ({plural(proof.started, 'more')} where the replay starts, not provable)")
    elif proof.started:
        line.append(f"{plural(proof.started, 'stored list')} where the replay starts, none to prove", "yellow")
    else:
        line.append("no stored message list to prove")
    return line


def render_thread(thread: ThreadInspection, scope: InspectionScope, console: Console) -> None:
    shown = thread.shown
    ns = "conversation ''" if shown.checkpoint_ns == "" else printable(repr(shown.checkpoint_ns))
    title = Text.assemble(
        ("Thread ", "bold"), (printable(thread.thread_id), "bold cyan"), f"  namespace {ns}, {shown.kind}"
    )
    console.print(title)
    if (conflict := scope.mode.conflict(Counter({shown.kind: 1}))) is not None:
        console.print(Text(f"  warning: {printable(conflict)}", style="yellow"))
    render_lineage(shown, scope, console)
    if thread.proof is not None:
        console.print(proof_line(thread.proof))
    if thread.subgraphs:
        console.print(Text("Subgraph namespaces (their own cadence; summarised apart, not in the histogram)", "bold"))
        console.print(_indented(subgraph_table(thread.subgraphs)))


def render_threads(threads: Iterable[ThreadInspection], scope: InspectionScope, console: Console) -> None:
    """The database inspected, then each thread as it comes."""
    console.print(Text(printable(f"Inspected {scope.database} (chosen via {scope.found_via})")))
    _stated_mode_line(scope, console)
    for thread in threads:
        console.print()
        render_thread(thread, scope, console)


_SHADES = " ░▒▓█"


def chart_row(counts: tuple[int, ...], largest: int, blocks: bool) -> str:
    """One class's row: how many of its epochs were writing in each time slice, shaded (or '#' and '.')."""
    if not blocks:
        return "".join("#" if count else "." for count in counts)
    steps = len(_SHADES) - 1
    return "".join(_SHADES[0 if not count else max(1, round(steps * count / largest))] for count in counts)


def render_timeline(timeline: Timeline, changed: int, console: Console) -> None:
    console.print(Text("Cadence over time (conversation epochs; `ckpt verify-shape` judges them)", style="bold"))
    if not timeline.classes:
        console.print("  no epoch bounds K (no delta counters and no cadence snapshot)")
        return
    table = _table()
    for heading in ("cadence", "first write", "last write", "threads", "epochs", "checkpoints"):
        table.add_column(heading, justify="left" if heading in ("cadence", "first write", "last write") else "right")
    for cadence_class in timeline.classes:
        table.add_row(
            cadence_class.label,
            format_time(cadence_class.first_time_ns),
            format_time(cadence_class.last_time_ns),
            _n(cadence_class.threads),
            _n(len(cadence_class.epochs)),
            _n(cadence_class.checkpoints),
        )
    console.print(_indented(table))
    chart = timeline_chart(timeline, max(10, min(CHART_CELLS, console.width - 16)))
    if chart is not None and len(chart.rows) > 1:
        blocks = can_draw_blocks(console)
        largest = max((max(counts) for _, counts in chart.rows), default=1) or 1
        label_width = max(len(label) for label, _ in chart.rows)
        for label, counts in chart.rows:
            console.print(Text(f"  {label:>{label_width}} |{chart_row(counts, largest, blocks)}|"))
        start, end = format_time(chart.start_ns), format_time(chart.end_ns)
        console.print(Text(f"  {'':>{label_width}}  from {start} to {end}, each cell an equal slice"))
    for change in timeline.changes:
        console.print(Text(f"  {change_line(change)}"))
    in_force = in_force_line(timeline)
    if in_force is not None:
        console.print(Text(f"  {in_force}", style="" if timeline.current is not None else "bold red"))
    if changed:
        console.print(f"  {plural(changed, 'conversation')} written at more than one cadence (several epochs)")
    for line in unplaced_lines(timeline):
        console.print(Text(f"  {line}"))


def _stated_mode_line(scope: InspectionScope, console: Console) -> None:
    if scope.mode.from_option:
        console.print(Text(f"  deployment mode: {printable(scope.mode.describe())}"))


def _render_cadences(summary: DatabaseSummary, console: Console, timeline: Timeline) -> None:
    """The inferred K across threads and the cadence over time (for a store with delta-mode threads)."""
    console.print(Text("Inferred K across threads (the current epoch of each conversation)", style="bold"))
    distribution = summary.cadence_distribution
    if distribution.count:
        console.print(_indented(histogram_table(distribution, "K", console, "threads")))
    else:
        console.print("  no thread's K is pinned down")
    if summary.unsettled:
        parts = ", ".join(f"{status.replace('_', ' ')} {n}" for status, n in sorted(summary.unsettled.items()))
        console.print(f"  not pinned down: {parts}")
    render_timeline(timeline, summary.changed, console)


def render_summary(summary: DatabaseSummary, scope: InspectionScope, console: Console, timeline: Timeline) -> None:
    kinds = summary.kinds
    console.print(Text(printable(f"Inspected {scope.database} (chosen via {scope.found_via})")))
    console.print(
        f"  {_n(summary.threads)} threads ({_n(kinds[ThreadKind.DELTA])} delta, {_n(kinds[ThreadKind.FULL])} full, "
        f"{_n(kinds[ThreadKind.MIGRATED])} migrated), {_n(summary.lineages)} lineages, "
        f"{_n(summary.checkpoints)} checkpoints"
    )
    if scope.settings.expected_cadence is not None:
        source = printable(scope.cadence_source)
        console.print(Text(f"  expected K = {scope.settings.expected_cadence} (from {source})"))
    _stated_mode_line(scope, console)
    if (conflict := scope.mode.conflict(kinds)) is not None:
        console.print(Text(f"  warning: {printable(conflict)}", style="yellow"))
    if all_full(kinds):
        console.print(Text(f"  {full_store_line(kinds)}"))
    else:
        _render_cadences(summary, console, timeline)
    console.print(Text("Storage (stored column lengths)", style="bold"))
    console.print(_indented(storage_table(summary.storage, scope.backend)))
    console.print("  files, tables, channels, growth and compaction: ckpt inspect storage")
    if summary.heaviest:
        console.print(Text("Heaviest threads", style="bold"))
        table = _table()
        table.add_column("thread", overflow="fold")
        table.add_column("mode")
        for heading in ("checkpoints", "bytes", "snapshot bytes", "max replay"):
            table.add_column(heading, justify="right", no_wrap=True)
        table.add_column("cadence", no_wrap=True)
        for thread in summary.heaviest:
            table.add_row(
                Text(printable(thread.thread_id)),
                thread.shown.kind,
                _n(thread.checkpoints),
                _n(thread.storage.total),
                _n(thread.storage.snapshots),
                _n(thread.shown.replay_depth_max),
                short_cadence(thread.shown.cadence),
            )
        console.print(_indented(table))
