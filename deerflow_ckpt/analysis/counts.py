"""What verify-shape and `inspect summary` both count while they read a store, one thread at a time."""

from __future__ import annotations

from collections import Counter

from deerflow_ckpt.analysis.shape import ThreadKind
from deerflow_ckpt.dataclass import dataclass, field


@dataclass(kw_only=True)
class StoreCounts:
    """Threads, lineages and checkpoints read; threads by kind and by the cadence inferred for them."""

    threads: int = 0
    lineages: int = 0
    checkpoints: int = 0
    kinds: Counter[ThreadKind] = field(default_factory=Counter)
    inferred_cadences: Counter[int] = field(default_factory=Counter)

    def count_thread(self, lineages: int, checkpoints: int, kind: ThreadKind, inferred: int | None) -> None:
        self.threads += 1
        self.lineages += lineages
        self.checkpoints += checkpoints
        self.kinds[kind] += 1
        if inferred is not None:
            self.inferred_cadences[inferred] += 1

    def add_counts(self, other: StoreCounts) -> None:
        self.threads += other.threads
        self.lineages += other.lineages
        self.checkpoints += other.checkpoints
        self.kinds.update(other.kinds)
        self.inferred_cadences.update(other.inferred_cadences)
