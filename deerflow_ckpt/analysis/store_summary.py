"""The whole store at a glance (`inspect summary`) and the heaviest threads (`inspect thread --top`)."""

from __future__ import annotations

import heapq
from collections import Counter
from enum import StrEnum

from deerflow_ckpt.analysis.counts import StoreCounts
from deerflow_ckpt.analysis.epochs import Epoch, FirstEvidence, FirstSink
from deerflow_ckpt.analysis.histogram import Histogram, distinct_values
from deerflow_ckpt.analysis.inspection import InspectSettings, ThreadInspection
from deerflow_ckpt.analysis.shape import CONVERSATION_NS
from deerflow_ckpt.analysis.stored_bytes import StorageBytes
from deerflow_ckpt.analysis.timeline import Timeline, build_timeline
from deerflow_ckpt.dataclass import dataclass, field


class RankBy(StrEnum):
    SIZE = "size"
    CHECKPOINTS = "checkpoints"
    REPLAY_DEPTH = "replay-depth"


def rank_key(thread: ThreadInspection, by: RankBy) -> int:
    if by is RankBy.SIZE:
        return thread.storage.total
    if by is RankBy.CHECKPOINTS:
        return thread.checkpoints
    return thread.shown.replay_depth_max


class TopThreads:
    """The `limit` largest threads by `by` seen so far (ties: the smaller thread id first)."""

    def __init__(self, limit: int, by: RankBy) -> None:
        self.limit, self.by = limit, by
        self._heap: list[tuple[int, _Reversed, ThreadInspection]] = []

    def add(self, thread: ThreadInspection) -> None:
        if self.limit <= 0:
            return
        entry = (rank_key(thread, self.by), _Reversed(thread.thread_id), thread)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, entry)
        elif entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

    def result(self) -> list[ThreadInspection]:
        return [thread for _, _, thread in sorted(self._heap, key=lambda e: e[:2], reverse=True)]


@dataclass(frozen=True)
class _Reversed:
    """Orders thread ids backwards, so that among equal keys the heap drops the larger id first."""

    value: str

    def __lt__(self, other: _Reversed) -> bool:
        return self.value > other.value

    def __gt__(self, other: _Reversed) -> bool:
        return self.value < other.value


@dataclass
class DatabaseSummary(StoreCounts):
    """The whole database at a glance: built one thread at a time, memory bounded by `heaviest`."""

    heaviest_limit: int = 10
    # Conversations whose current epoch's K is not pinned down, by status (open, not_delta).
    unsettled: Counter[str] = field(default_factory=Counter)
    # Conversations written at more than one cadence (several epochs).
    changed: int = 0
    storage: StorageBytes = field(default_factory=StorageBytes)
    # Conversation epochs for the timeline, their first-time fronts kept per bounds (as a scan keeps them).
    epochs: list[Epoch] = field(default_factory=list)
    first_evidence: FirstSink = field(default_factory=dict)
    _top: TopThreads = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._top = TopThreads(self.heaviest_limit, RankBy.SIZE)

    def add(self, thread: ThreadInspection) -> None:
        cadence = thread.shown.cadence
        self.count_thread(len(thread.namespaces), thread.checkpoints, thread.shown.kind, cadence.inferred)
        if cadence.inferred is None:
            self.unsettled[cadence.status.value] += 1
        self.storage += thread.storage
        self._top.add(thread)
        shown = thread.shown
        if shown.checkpoint_ns == CONVERSATION_NS:
            self.changed += len(shown.epochs) > 1
            for inspected in shown.epochs:
                epoch = inspected.epoch
                self.first_evidence.setdefault(epoch.evidence_bounds, FirstEvidence()).add(epoch.fronts)
                self.epochs.append(epoch.without_first_fronts())

    def merge(self, other: DatabaseSummary) -> None:
        """Fold in the summary of other threads (another worker's share), as if they had been added here."""
        self.add_counts(other)
        self.unsettled.update(other.unsettled)
        self.changed += other.changed
        self.storage += other.storage
        for thread in other.heaviest:
            self._top.add(thread)
        self.epochs.extend(other.epochs)
        for bounds, evidence in other.first_evidence.items():
            self.first_evidence.setdefault(bounds, FirstEvidence()).merge(evidence)

    def timeline(self, settings: InspectSettings) -> Timeline:
        return build_timeline(self.epochs, settings.timeline, settings.expected_cadence, self.first_evidence)

    @property
    def cadence_distribution(self) -> Histogram:
        return distinct_values(self.inferred_cadences)

    @property
    def heaviest(self) -> list[ThreadInspection]:
        return self._top.result()
