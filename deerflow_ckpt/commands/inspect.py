"""inspect's core: open the chosen database, then inspect named threads, every thread, the heaviest ones,
or fold them all into the store at a glance (`inspect summary`, in worker processes over thread ranges as
verify-shape reads them: commands/shares.py).

Reads through the same read-only readers as verify-shape. One thread named on the command line is read
with a thread_id condition, so its cost does not grow with the database.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterable, Iterator

from deerflow_ckpt.analysis.inspection import (
    InspectionScope,
    InspectSettings,
    NamespaceNotFound,
    ThreadInspection,
    inspect_thread,
)
from deerflow_ckpt.analysis.mode import StatedMode
from deerflow_ckpt.analysis.store_summary import DatabaseSummary, RankBy, TopThreads
from deerflow_ckpt.analysis.timeline import Timeline
from deerflow_ckpt.commands.shares import ShareSplit, run_shares, share_selections, without_cycle_collector
from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.store.readers import LineageReader, open_reader
from deerflow_ckpt.store.records import Backend, Lineage
from deerflow_ckpt.store.selection import ALL_THREADS, ThreadSelection
from deerflow_ckpt.store.source import DatabaseChoice, DatabaseTarget


@dataclass(frozen=True)
class Inspection:
    """An open database and what every thread of it is inspected with."""

    reader: LineageReader
    scope: InspectionScope
    target: DatabaseTarget


def open_inspection(
    choice: DatabaseChoice, settings: InspectSettings, cadence_source: str, mode: StatedMode | None = None
) -> Inspection:
    reader, backend = open_reader(choice.target)
    scope = InspectionScope(
        choice.target.describe(), choice.found_via, backend, settings, cadence_source, mode or StatedMode()
    )
    return Inspection(reader, scope, choice.target)


def named_threads(
    inspection: Inspection, thread_ids: Iterable[str], namespace: str, deep: bool = False
) -> list[ThreadInspection]:
    """Every named thread, read before any is returned: an unknown one fails before output is written.
    `deep` adds the shown namespace's proof (a second read-only pass over its message history)."""
    found = []
    for thread_id in thread_ids:
        lineages = list(inspection.reader.lineages(ThreadSelection(thread_id=thread_id)))
        if not lineages:
            raise StoreError(f"no checkpoints for thread {thread_id!r} in {inspection.scope.database}")
        try:
            inspected = inspect_thread(lineages, inspection.scope.backend, inspection.scope.settings, namespace)
        except NamespaceNotFound as exc:
            raise StoreError(str(exc)) from None
        found.append(_with_proof(inspected, inspection.target, namespace) if deep else inspected)
    return found


def _with_proof(inspected: ThreadInspection, target: DatabaseTarget, namespace: str) -> ThreadInspection:
    from deerflow_ckpt.analysis.replay import prove_lineage
    from deerflow_ckpt.store.history import open_history

    for history in open_history(target).histories(ThreadSelection(thread_id=inspected.thread_id)):
        if history.checkpoint_ns == namespace:
            return dataclasses.replace(inspected, proof=prove_lineage(history))
    return inspected


def every_thread(
    inspection: Inspection, namespace: str | None, on_thread: Callable[[], None] | None = None
) -> Iterator[ThreadInspection]:
    """Each thread that has `namespace`, in thread id order (None: the conversation, else its first one);
    `on_thread` is called as each thread is read."""
    scope = inspection.scope
    on_lineages = None if on_thread is None else lambda lineages: on_thread()
    return _inspected(inspection.reader, scope.backend, scope.settings, ALL_THREADS, namespace, on_lineages)


def _inspected(
    reader: LineageReader,
    backend: Backend,
    settings: InspectSettings,
    selection: ThreadSelection,
    namespace: str | None,
    on_lineages: Callable[[list[Lineage]], None] | None = None,
) -> Iterator[ThreadInspection]:
    """every_thread over one selection of the threads; `on_lineages` is handed each thread's lineages."""
    for _, grouped in itertools.groupby(reader.lineages(selection), key=lambda lineage: lineage.thread_id):
        lineages = list(grouped)
        if on_lineages is not None:
            on_lineages(lineages)
        shown = namespace
        if shown is None:
            shown = "" if any(lineage.checkpoint_ns == "" for lineage in lineages) else lineages[0].checkpoint_ns
        try:
            yield inspect_thread(lineages, backend, settings, shown)
        except NamespaceNotFound:
            continue


def heaviest_threads(threads: Iterable[ThreadInspection], top: int, by: RankBy) -> list[ThreadInspection]:
    ranking = TopThreads(top, by)
    for inspected in threads:
        ranking.add(inspected)
    return ranking.result()


@dataclass(frozen=True)
class StoreSummary:
    summary: DatabaseSummary
    # The cadence over time across every conversation.
    timeline: Timeline
    # How many processes read the threads, and why that many.
    split: ShareSplit


def summarize(
    inspection: Inspection,
    heaviest: int,
    progress: Callable[[int], None] | None = None,
    jobs: int | None = 1,
    start_method: str | None = None,
) -> StoreSummary:
    """The store at a glance, read as verify-shape reads it: `jobs` processes over thread ranges (None: as
    many as the store's size and the machine allow); `progress` gets the running checkpoint count."""
    scope = inspection.scope
    split = share_selections(inspection.reader, jobs)
    work = functools.partial(_summarize_share, inspection.target, scope.backend, scope.settings, heaviest)
    result = DatabaseSummary(heaviest_limit=heaviest)
    for share in run_shares(work, split.selections, progress, start_method):
        result.merge(share)
    return StoreSummary(result, result.timeline(scope.settings), split)


def _summarize_share(
    target: DatabaseTarget,
    backend: Backend,
    settings: InspectSettings,
    heaviest: int,
    selection: ThreadSelection,
    on_checkpoints: Callable[[int], None] | None = None,
) -> DatabaseSummary:
    """One share of the threads folded into a summary; `on_checkpoints` is told each thread's checkpoints."""
    reader, _ = open_reader(target)

    def count(lineages: list[Lineage]) -> None:
        if on_checkpoints is not None:
            on_checkpoints(sum(len(lineage.records) for lineage in lineages))

    share = DatabaseSummary(heaviest_limit=heaviest)
    with without_cycle_collector():
        for inspected in _inspected(reader, backend, settings, selection, None, count):
            share.add(inspected)
    return share
