"""The deployment's channel mode as someone states it (`--mode`, or the DeerFlow config that chose the database),
and what the store shows against it.

A store written by a plain LangGraph app (or DeerFlow in full mode) holds no delta-mode checkpoint: every
message-writing step stores the whole list, so there are no snapshots, no cadence and nothing to replay. The
store itself tells which threads delta mode wrote (DeerFlow's metadata marker); what it cannot tell is the mode
of the process that writes next, which is what `plan retention` needs on Postgres (analysis/retention.py).
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum

from deerflow_ckpt.analysis.shape import ThreadKind
from deerflow_ckpt.dataclass import dataclass

# The option that states the mode, as a source the reports name.
OPTION = "--mode"


class ChannelMode(StrEnum):
    FULL = "full"
    DELTA = "delta"


@dataclass(frozen=True)
class StatedMode:
    """The mode the deployment runs in, and who said so (None: nobody did)."""

    mode: ChannelMode | None = None
    # "--mode", or the path of the config that chose the database.
    source: str | None = None

    @property
    def from_option(self) -> bool:
        """Stated with --mode (reports that read a config already follow it say only what --mode changed)."""
        return self.source == OPTION

    def describe(self) -> str:
        if self.mode is None:
            return "not stated (no --mode, and no DeerFlow config chose this database)"
        return f"{self.mode.value} (from {self.source})"

    def conflict(self, kinds: Counter[ThreadKind]) -> str | None:
        """Why the store contradicts the stated mode, or None when it does not (or nothing was stated)."""
        threads = sum(kinds.values())
        delta = kinds[ThreadKind.DELTA] + kinds[ThreadKind.MIGRATED]
        read = f"{threads:,} thread{'s' if threads != 1 else ''} read"
        if self.mode is ChannelMode.FULL and delta:
            return (
                f"{self.source} says full mode, but {delta:,} of the {read} hold delta-mode checkpoints (a delta "
                "channel's values, or DeerFlow's marker): a full-mode process writes none, so a delta-mode process "
                "wrote here; those threads are read as delta threads"
            )
        if self.mode is ChannelMode.DELTA and threads and not delta:
            return (
                f"{self.source} says delta mode, but no delta-mode checkpoint is in the {read}: whole message lists "
                "are stored, as a full-mode app (a plain LangGraph app) writes them"
            )
        return None


def all_full(kinds: Counter[ThreadKind]) -> bool:
    """Threads were read and none holds a delta-mode checkpoint: no snapshots, no cadence anywhere."""
    return sum(kinds.values()) > 0 and kinds[ThreadKind.FULL] == sum(kinds.values())


def full_store_line(kinds: Counter[ThreadKind]) -> str:
    """How a report says what an all-full store is, instead of a cadence it does not have."""
    return (
        f"full mode: none of the {sum(kinds.values()):,} threads holds a delta-mode checkpoint; every "
        "message-writing step stores the whole list (no snapshots, no cadence, nothing replayed)"
    )
