"""`inspect storage` as text: files and tables, bytes by channel, large values, growth with a chart, the
heaviest threads, threads the app no longer knows, and compaction advice."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from deerflow_ckpt.analysis.storage import Growth, Urgency, human_bytes
from deerflow_ckpt.commands.inspect_storage import StorageInspection
from deerflow_ckpt.report.inspect_text import CountBar, can_draw_blocks
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.store.clock import format_time
from deerflow_ckpt.store.storage import StorageFacts

_URGENCY_STYLE = {Urgency.ACT: "bold red", Urgency.WATCH: "yellow", Urgency.FINE: "green"}
CHART_WIDTH = 40
# A day's bucket is named by its date, an hour's by its hour.
_BUCKET_LABEL = {"day": 10, "hour": 16}


def render_storage(inspection: StorageInspection, console: Console) -> None:
    facts = inspection.facts
    console.print(Text(f"Storage of {inspection.database} (chosen via {inspection.found_via})"))
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
    if facts.postgres is not None:
        console.print(f"Database size {human_bytes(facts.postgres.database_bytes)} (pg_database_size)")
    for path, size in facts.legacy_files:
        console.print(Text(f"  legacy checkpointer file {printable(path)}: {human_bytes(size)}"))


def _relations(facts: StorageFacts, console: Console) -> None:
    if not facts.relations:
        return
    postgres = facts.postgres is not None
    columns = ["table", "bytes", "rows"]
    if postgres:
        columns += ["heap+TOAST", "indexes", "dead rows", "last (auto)vacuum"]
    table = _table("Tables and indexes", *columns)
    for relation in facts.relations:
        row = [printable(relation.name), human_bytes(relation.bytes), f"{relation.rows:,}"]
        if postgres:
            vacuumed = max(filter(None, (relation.last_vacuum, relation.last_autovacuum)), default="never")
            dead = "?" if relation.dead_rows is None else f"{relation.dead_rows:,}"
            heap = human_bytes(relation.bytes - relation.index_bytes)
            row += [heap, human_bytes(relation.index_bytes), dead, vacuumed]
        table.add_row(*row)
    console.print(table)
    if not all(relation.exact for relation in facts.relations):
        console.print(Text("  (estimated from stored lengths: dbstat is not compiled into this SQLite)", style="dim"))


def _channels(facts: StorageFacts, console: Console) -> None:
    if facts.channels is None:
        console.print(Text("Bytes by channel: skipped (--no-channels)", style="dim"))
        return
    # Only Postgres compresses (TOAST): on SQLite the bytes before compression are the bytes.
    compressed = any(row.raw_bytes != row.bytes for row in facts.channels)
    columns = ["stored in", "channel", "values", "bytes", *(["before compression"] if compressed else [])]
    table = _table("Bytes by channel", *columns)
    for row in sorted(facts.channels, key=lambda channel: -channel.bytes):
        cells = [row.stored_in.value, Text(printable(row.channel)), f"{row.values:,}", human_bytes(row.bytes)]
        table.add_row(*cells, *([human_bytes(row.raw_bytes)] if compressed else []))
    if facts.checkpoint_rest_bytes is not None:
        table.add_row("checkpoints", "(versions, ids, framing)", "", human_bytes(facts.checkpoint_rest_bytes))
    table.add_row("checkpoints", "(metadata)", "", human_bytes(facts.metadata_bytes))
    console.print(table)


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
    growth = inspection.growth
    if not growth.buckets:
        console.print(Text("Growth: no checkpoint carries a write time", style="dim"))
        return
    console.print(f"Bytes written per {growth.unit}")
    _chart(growth, console)
    rate = inspection.rate
    if rate is not None:
        days = rate.window_ns / (24 * 3_600 * 10**9)
        console.print(
            f"  at the last {days:.3g} days' rate: +{human_bytes(rate.bytes_per_week)}/week written "
            f"({rate.checkpoints:,} checkpoints in those days; deleted rows are reused before the file grows)"
        )
    if inspection.facts.untimed_checkpoints:
        console.print(f"  {inspection.facts.untimed_checkpoints:,} checkpoints carry no write time (not UUIDv6 ids)")


def _chart(growth: Growth, console: Console) -> None:
    blocks = can_draw_blocks(console)
    largest = max(bucket.bytes for bucket in growth.buckets)
    width = _BUCKET_LABEL[growth.unit]
    table = _table("", "", "", "bytes", "checkpoints")
    for bucket in growth.buckets:
        label = format_time(bucket.start_ns)[:width].replace("T", " ")
        bar = CountBar(bucket.bytes, largest, CHART_WIDTH, blocks)
        table.add_row(label, bar, human_bytes(bucket.bytes), f"{bucket.checkpoints:,}")
    console.print(table)


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


def _app_threads(facts: StorageFacts, console: Console) -> None:
    app = facts.app
    if app is None:
        return
    console.print(
        f"Threads the app no longer knows ({printable(app.table)}): {len(app.orphans):,} checkpoint threads without "
        f"an app row, {human_bytes(app.orphan_bytes)}; {app.known:,} known; {app.app_only:,} app rows without "
        "checkpoints"
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
