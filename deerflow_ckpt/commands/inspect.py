"""inspect's core: open the chosen database, then inspect named threads, every thread, the heaviest ones,
or fold them all into the store at a glance (`inspect summary`).

Reads through the same read-only readers as verify-shape. One thread named on the command line is read
with a thread_id condition, so its cost does not grow with the database.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

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
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.store.readers import LineageReader, open_reader
from deerflow_ckpt.store.selection import ThreadSelection
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
    for _, grouped in itertools.groupby(inspection.reader.lineages(), key=lambda lineage: lineage.thread_id):
        if on_thread is not None:
            on_thread()
        lineages = list(grouped)
        shown = namespace
        if shown is None:
            shown = "" if any(lineage.checkpoint_ns == "" for lineage in lineages) else lineages[0].checkpoint_ns
        try:
            yield inspect_thread(lineages, scope.backend, scope.settings, shown)
        except NamespaceNotFound:
            continue


def heaviest_threads(threads: Iterable[ThreadInspection], top: int, by: RankBy) -> list[ThreadInspection]:
    ranking = TopThreads(top, by)
    for inspected in threads:
        ranking.add(inspected)
    return ranking.result()


def summarize(
    inspection: Inspection, heaviest: int, on_thread: Callable[[], None] | None = None
) -> tuple[DatabaseSummary, Timeline]:
    """The store at a glance, and the cadence over time across every conversation."""
    result = DatabaseSummary(heaviest_limit=heaviest)
    for inspected in every_thread(inspection, None, on_thread):
        result.add(inspected)
    return result, result.timeline(inspection.scope.settings)
