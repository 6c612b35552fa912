"""`inspect storage` as text: files and tables, bytes by channel, large values, growth with a chart and a
row per heaviest thread, the heaviest threads, threads the app no longer knows, and compaction advice."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from deerflow_ckpt.analysis.storage import (
    DAY_NS,
    IDLE_NS,
    MIN_RATE_HISTORY_NS,
    Growth,
    Unit,
    Urgency,
    human_bytes,
    vacuum_needs,
)
from deerflow_ckpt.commands.inspect_storage import StorageInspection
from deerflow_ckpt.report.inspect_text import CountBar, can_draw_blocks
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.store.clock import format_duration, format_time
from deerflow_ckpt.store.storage import StorageFacts

_URGENCY_STYLE = {Urgency.ACT: "bold red", Urgency.WATCH: "yellow", Urgency.FINE: "green"}
CHART_WIDTH = 40
# A thread's growth row: at most this many cells (consecutive buckets share a cell beyond it).
SPARK_WIDTH = 48
# Eight heights, from a trace to the thread's busiest cell; an empty cell is a space.
_SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
_SPARK_ASCII = ".:-=+*#@"
# A bucket is named by as much of its start as tells it apart: a month by year-month, a day or week by date.
_BUCKET_LABEL = {Unit.HOUR: 16, Unit.DAY: 10, Unit.WEEK: 10, Unit.MONTH: 7}
_RATE_HISTORY = "a day" if MIN_RATE_HISTORY_NS == DAY_NS else format_duration(MIN_RATE_HISTORY_NS)
_UNIT_PHRASE = {Unit.HOUR: "hour", Unit.DAY: "day", Unit.WEEK: "week (from Monday)", Unit.MONTH: "month"}


def render_storage(inspection: StorageInspection, console: Console) -> None:
    facts = inspection.facts
    console.print(Text(printable(f"Storage of {inspection.database} (chosen via {inspection.found_via})")))
    _files(facts, console)
    _relations(facts, console)
    _channels(facts, console)
    _large_values(facts, console)
    _growth(inspection, console)
    _heaviest(inspection, console)
    _app_threads(facts, console)
    _advice(inspection, console)
    for note in facts.notes:
        console.print(Text(f"note: {printable(note)}", style="dim"))


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, box=None, pad_edge=False)
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    return table


def _files(facts: StorageFacts, console: Console) -> None:
    if facts.sqlite is not None:
        files = facts.sqlite
        console.print("Files")
        pages = f"{files.page_count:,} pages of {files.page_size:,} B, {files.freelist_count:,} on the freelist"
        console.print(f"  database   {human_bytes(files.database_bytes):>12}  ({pages})")
        wal = "none" if files.wal_bytes is None else human_bytes(files.wal_bytes)
        frames = ""
        if files.wal_frames is not None and files.wal_backfilled is not None:
            frames = f"  ({files.wal_frames:,} frames, {files.wal_frames - files.wal_backfilled:,} not checkpointed)"
        console.print(f"  -wal       {wal:>12}{frames}")
        console.print(f"  -shm       {'none' if files.shm_bytes is None else human_bytes(files.shm_bytes):>12}")
        if files.free_disk_bytes is not None:
            console.print(f"  free disk  {human_bytes(files.free_disk_bytes):>12}  (on the database's file system)")
        console.print(
            f"  a VACUUM would free at least {human_bytes(files.freelist_bytes)} (the freelist); {vacuum_needs(files)}"
        )
    if facts.postgres is not None:
        console.print(f"Database size {human_bytes(facts.postgres.database_bytes)} (pg_database_size)")
    for legacy in facts.legacy_files:
        companions = (("-wal", legacy.wal_bytes), ("-shm", legacy.shm_bytes))
        parts = [f"file {human_bytes(legacy.bytes)}"]
        parts += [f"{name} {human_bytes(size)}" for name, size in companions if size is not None]
        console.print(
            Text(f"  legacy checkpointer file {printable(legacy.path)}: {human_bytes(legacy.total_bytes)} "
                 f"({', '.join(parts)})")
        )  # fmt: skip


def _relations(facts: StorageFacts, console: Console) -> None:
    if not facts.relations:
        return
    postgres = facts.postgres is not None
    columns = ["table", "bytes", "rows"]
    if postgres:
        columns += ["heap", "TOAST", "indexes", "dead rows", "last (auto)vacuum", "last (auto)analyze"]
    else:
        columns += ["of it indexes"]
    table = _table("Tables and indexes", *columns)
    for relation in facts.relations:
        rows = f"{relation.rows:,}" if relation.rows_exact else f"~{relation.rows:,}"
        row = [printable(relation.name), human_bytes(relation.bytes), rows]
        if postgres:
            vacuumed = max(filter(None, (relation.last_vacuum, relation.last_autovacuum)), default="never")
            analyzed = max(filter(None, (relation.last_analyze, relation.last_autoanalyze)), default="never")
            dead = "not known" if relation.dead_rows is None else f"{relation.dead_rows:,}"
            heap = human_bytes(relation.bytes - relation.index_bytes - relation.toast_bytes)
            row += [
                heap,
                human_bytes(relation.toast_bytes),
                human_bytes(relation.index_bytes),
                dead,
                vacuumed,
                analyzed,
            ]
        else:
            row.append(human_bytes(relation.index_bytes))
        table.add_row(*row)
    console.print(table)
    if postgres:
        for line in _row_sources(facts):
            console.print(Text(f"  ({line})", style="dim"))
    if all(relation.exact for relation in facts.relations):
        return
    if facts.sqlite is not None and not facts.sqlite.dbstat:
        why = "estimated from stored lengths: dbstat is not compiled into this SQLite"
    else:
        why = (
            "--no-channels: dbstat did not read checkpoints and writes; they share the rest of the used pages by "
            "their stored lengths (estimated)"
        )
    console.print(Text(f"  ({why})", style="dim"))


def _row_sources(facts: StorageFacts) -> list[str]:
    """Where the Postgres rows and dead rows come from: what is counted, what is an estimate, what is unknown."""
    relations = facts.relations
    estimated = [relation.name for relation in relations if not relation.rows_exact]
    lines = ["rows: count(*) in this read's transaction" + (
        f", except ~ (the statistics' estimate, the rows not readable): {', '.join(estimated)}" if estimated else ""
    )]  # fmt: skip
    sources = sorted({relation.dead_rows_source.value for relation in relations if relation.dead_rows_source})
    if sources:
        named = {"pgstattuple": "pgstattuple_approx (exact)", "statistics": "the statistics, current for those tables"}
        lines.append(f"dead rows: {' and '.join(named[source] for source in sources)}")
    if any(relation.dead_rows is None for relation in relations):
        lines.append("dead rows not known: the statistics do not see those tables' rows; why, under Compaction")
    return lines


def _channels(facts: StorageFacts, console: Console) -> None:
    if facts.rows_unread is not None:
        console.print(Text(f"Bytes by channel: not read ({printable(facts.rows_unread)})", style="dim"))
        return
    if facts.channels is None:
        console.print(Text("Bytes by channel: skipped (--no-channels)", style="dim"))
        return
    # Only Postgres compresses (TOAST, and the checkpoint JSONB as a whole): on SQLite the bytes are the raw.
    compressed = any(row.raw_bytes != row.bytes for row in facts.channels)
    columns = ["stored in", "channel", "values", "bytes", *(["before compression"] if compressed else [])]
    table = _table("Bytes by channel", *columns)
    for row in sorted(facts.channels, key=lambda channel: -channel.bytes):
        cells = [row.stored_in.value, Text(printable(row.label)), f"{row.values:,}", human_bytes(row.bytes)]
        table.add_row(*cells, *([human_bytes(row.raw_bytes)] if compressed else []))
    if facts.checkpoint_rest_bytes is not None:
        table.add_row("checkpoints", "(versions, ids, framing)", "", human_bytes(facts.checkpoint_rest_bytes))
    table.add_row("checkpoints", "(metadata)", "", human_bytes(facts.metadata_bytes))
    console.print(table)
    if any(row.part is not None for row in facts.channels):
        console.print(Text("  (messages: tool outputs is the ToolMessage items, not in the messages row)", style="dim"))


def _large_values(facts: StorageFacts, console: Console) -> None:
    if not facts.large_values:
        return
    table = _table("Large values that look like base64 images or documents", "thread", "channel", "stored in",
                   "looks like", "bytes", "copies")  # fmt: skip
    for value in facts.large_values:
        table.add_row(
            Text(printable(value.thread_id)),
            Text(printable(value.channel)),
            value.stored_in.value,
            value.looks_like,
            human_bytes(value.bytes),
            f"{value.copies:,}",
        )
    console.print(table)


def _growth(inspection: StorageInspection, console: Console) -> None:
    growth, facts = inspection.growth, inspection.facts
    if facts.rows_unread is not None:
        console.print(Text(f"Growth: not read ({printable(facts.rows_unread)})", style="dim"))
        return
    checkpoints = growth.untimed_checkpoints + growth.out_of_range_checkpoints
    checkpoints += sum(bucket.checkpoints for bucket in growth.buckets)
    if not growth.buckets:
        if checkpoints == 0 and not growth.unnamed_blob_rows:
            console.print(Text("Growth: the store has no checkpoints", style="dim"))
            return
        console.print(Text("Growth: no checkpoint carries a plausible write time", style="dim"))
    else:
        console.print(f"Bytes written per {_UNIT_PHRASE[growth.unit]}")
        _chart(growth, console)
    rate = inspection.rate
    if rate is not None:
        per_week = rate.bytes_per_week
        if per_week is None:
            console.print(
                f"  rate: not enough history (a rate per week needs {_RATE_HISTORY} since the first write, which was "
                f"in the hour from {format_time(rate.first_write_ns)}; {human_bytes(rate.bytes)} in "
                f"{rate.checkpoints:,} checkpoints so far)"
            )
        else:
            console.print(
                f"  at the rate of the last {format_duration(rate.window_ns)} up to now: "
                f"+{human_bytes(per_week)}/week written ({rate.checkpoints:,} checkpoints in that time; "
                "deleted rows are reused before the file grows)"
            )
        if rate.idle_ns > IDLE_NS:
            console.print(
                f"  last write {format_duration(rate.idle_ns)} ago (in the hour from {format_time(rate.last_write_ns)})"
            )
    for line in _not_in_growth(growth):
        console.print(f"  {line}: not in growth")


def _not_in_growth(growth: Growth) -> list[str]:
    lines = []
    if growth.untimed_checkpoints or growth.untimed_bytes:
        lines.append(
            f"{growth.untimed_checkpoints:,} checkpoints, {human_bytes(growth.untimed_bytes)} with their writes, "
            "carry no write time (ids that are not UUIDv6)"
        )
    if growth.out_of_range_checkpoints or growth.out_of_range_bytes:
        lines.append(
            f"{growth.out_of_range_checkpoints:,} checkpoints, {human_bytes(growth.out_of_range_bytes)} with their "
            "writes, have ids whose write time is before 2015 or more than a day after now"
        )
    if growth.unnamed_blob_rows:
        lines.append(
            f"{growth.unnamed_blob_rows:,} blob rows, {human_bytes(growth.unnamed_blob_bytes)}, no checkpoint names"
        )
    return lines


def _label(start_ns: int, unit: Unit) -> str:
    return format_time(start_ns)[: _BUCKET_LABEL[unit]].replace("T", " ")


def _chart(growth: Growth, console: Console) -> None:
    blocks = can_draw_blocks(console)
    largest = max(bucket.bytes for bucket in growth.buckets)
    table = _table("", "", "", "bytes", "checkpoints")
    for bucket in growth.buckets:
        bar = CountBar(bucket.bytes, largest, CHART_WIDTH, blocks)
        table.add_row(_label(bucket.start_ns, growth.unit), bar, human_bytes(bucket.bytes), f"{bucket.checkpoints:,}")
    console.print(table)


def sparkline(values: list[int], blocks: bool, width: int = SPARK_WIDTH) -> str:
    """One character per value (consecutive values summed into `width` cells when there are more), its
    height against the largest cell; a cell with nothing is a space, one with anything at least a trace."""
    per_cell = max(1, -(-len(values) // width))
    cells = [sum(values[start : start + per_cell]) for start in range(0, len(values), per_cell)]
    ramp = _SPARK_BLOCKS if blocks else _SPARK_ASCII
    largest = max(cells, default=0)
    if largest <= 0:
        return " " * len(cells)
    return "".join(" " if cell <= 0 else ramp[max(1, -(-cell * len(ramp) // largest)) - 1] for cell in cells)


def _heaviest(inspection: StorageInspection, console: Console) -> None:
    heaviest = inspection.facts.heaviest
    if not heaviest:
        return
    table = _table("Heaviest threads", "thread", "checkpoints", "bytes", "first written", "last written")
    for thread in heaviest:
        table.add_row(
            Text(printable(thread.thread_id)),
            f"{thread.checkpoints:,}",
            human_bytes(thread.bytes),
            format_time(thread.first_ns),
            format_time(thread.last_ns),
        )
    console.print(table)
    growth = inspection.growth
    if not growth.buckets:
        return
    starts = [bucket.start_ns for bucket in growth.buckets]
    per_cell = max(1, -(-len(starts) // SPARK_WIDTH))
    span = f"{_label(starts[0], growth.unit)} to {_label(starts[-1], growth.unit)}"
    cell = _UNIT_PHRASE[growth.unit] if per_cell == 1 else f"{per_cell} {growth.unit}s"
    rows = _table(
        f"Heaviest threads written per {_UNIT_PHRASE[growth.unit]}, {span} (a character per {cell}, each row "
        "against its own busiest)",
        "thread",
        "",
        "busiest",
        "not in growth",
    )
    blocks = can_draw_blocks(console)
    for place, thread in enumerate(heaviest):
        series = inspection.heaviest_growth.get(place)
        if series is None:
            continue
        by_start = {bucket.start_ns: bucket.bytes for bucket in series.buckets}
        values = [by_start.get(start, 0) for start in starts]
        # Each cell sums per_cell buckets: the busiest cell is what the tallest character stands for.
        busiest = max((sum(values[i : i + per_cell]) for i in range(0, len(values), per_cell)), default=0)
        apart = series.untimed_bytes + series.out_of_range_bytes + series.unnamed_blob_bytes
        rows.add_row(
            Text(printable(thread.thread_id)),
            Text(sparkline(values, blocks)),
            human_bytes(busiest),
            human_bytes(apart) if apart else "",
        )
    console.print(rows)


def _app_threads(facts: StorageFacts, console: Console) -> None:
    app = facts.app
    if app is None:
        return
    console.print(
        Text(
            f"Threads the app no longer knows ({printable(app.table)}): {len(app.orphans):,} threads with stored rows "
            f"and no app row, {human_bytes(app.orphan_bytes)}; {app.known:,} known; {app.app_only:,} app rows "
            "without stored rows"
        )
    )
    for orphan in app.orphans[:10]:
        console.print(Text(f"  {printable(orphan.thread_id)}: {orphan.checkpoints:,} checkpoints, "
                           f"{human_bytes(orphan.bytes)}"))  # fmt: skip


def _advice(inspection: StorageInspection, console: Console) -> None:
    if not inspection.advice:
        return
    console.print("Compaction (advice only: ckpt never runs VACUUM)")
    for advice in inspection.advice:
        line = Text("  ")
        line.append(f"[{advice.urgency.value}]", style=_URGENCY_STYLE[advice.urgency])
        line.append(f" {printable(advice.subject)}: {advice.message}")
        console.print(line)
