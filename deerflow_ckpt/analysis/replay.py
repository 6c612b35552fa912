"""The deep proof: every stored message list equals the replay of the writes before it.

Per lineage, the `messages` writes stored under each checkpoint are folded down every branch, as
LangGraph applies them (one superstep's writes in (task_path, task_id, idx) order; an Overwrite replaces
the value; otherwise DeerFlow's reducer, `add_messages` once per write), from an empty list at the thread
start or from the first stored list of a lineage whose start is gone. Every stored list (each snapshot,
each full-mode list) is compared with the fold at its checkpoint, message by message: id, type and
stored bytes. The fold goes on from the replay, not from a stored list that disagreed, so one damaged
snapshot is one finding.
"""

from __future__ import annotations

from collections.abc import Callable

from deerflow_ckpt.analysis.shape import Finding
from deerflow_ckpt.dataclass import dataclass, field
from deerflow_ckpt.rules import RuleCode, rule
from deerflow_ckpt.store.messages import (
    NULL_TASK_ID,
    REMOVE_ALL_ID,
    HistoryCheckpoint,
    LineageHistory,
    MessageWrite,
    StoredMessage,
    Unprovable,
)

# metadata["source"] of a checkpoint that starts a run from new input, and of one a superstep wrote.
_INPUT = "input"
_LOOP = "loop"
# The synthetic task ids of exit-mode writes of later supersteps (langgraph.pregel._checkpoint).
_EXIT_TASK_PREFIX = "ffffffff-"
# How many ids a finding names of each difference.
_SHOWN = 3


@dataclass(slots=True)
class ProofResult:
    thread_id: str
    checkpoint_ns: str
    # Stored lists equal to their replay, those that differ, and those the replay had to start from (a
    # thread's first list, or the first after a stretch that could not be followed): not provable.
    proved: int = 0
    differing: int = 0
    started: int = 0
    # Why part of the lineage could not be proven (empty: every stored list was compared).
    unprovable: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.differing:
            return "differs"
        if self.unprovable:
            return "unprovable"
        if self.proved:
            return "proved"
        return "start only" if self.started else "nothing stored"


# Where a message of the fold came from: (the checkpoint its write is stored under, the task). A tuple:
# one is made per write applied.
_Origin = tuple[str, str]


class _Fold:
    """The replayed list at one checkpoint: messages in order, with where each came from."""

    __slots__ = ("_position", "agreed_at", "messages", "origins")

    def __init__(
        self, messages: list[StoredMessage], origins: list[_Origin | None], agreed_at: str | None = None
    ) -> None:
        self.messages = messages
        self.origins = origins
        # The last checkpoint on this branch whose stored list equalled the fold.
        self.agreed_at = agreed_at
        # id -> index of its last occurrence, as add_messages indexes the list; None until a write needs it.
        self._position: dict[str | None, int] | None = None

    def copy(self) -> _Fold:
        twin = _Fold(list(self.messages), list(self.origins), self.agreed_at)
        twin._position = None if self._position is None else dict(self._position)
        return twin

    def apply_step(self, checkpoint_id: str, writes: list[MessageWrite]) -> None:
        """One superstep's writes, as DeltaChannel.update applies them."""
        if len(writes) == 1 and not writes[0].overwrite:
            self._add_messages(checkpoint_id, writes[0])
            return
        overwrites = [write for write in writes if write.overwrite]
        if overwrites:
            write = overwrites[0]
            self._replace(list(write.items), (checkpoint_id, write.task_id))
            return
        for write in writes:
            self._add_messages(checkpoint_id, write)

    def _replace(self, messages: list[StoredMessage], origin: _Origin) -> None:
        self.messages = messages
        self.origins = [origin] * len(messages)
        self._position = None

    def _index(self) -> dict[str | None, int]:
        if self._position is None:
            self._position = {message.id: i for i, message in enumerate(self.messages)}
            if None in self._position:
                raise Unprovable("a write follows messages without ids (LangGraph assigns random ids to them)")
        return self._position

    def _add_messages(self, checkpoint_id: str, write: MessageWrite) -> None:
        """langgraph.graph.message.add_messages(current, write)."""
        position = self._index()
        origin = (checkpoint_id, write.task_id)
        items = write.items
        remove_all = None
        for i, message in enumerate(items):
            if message.removes and message.id == REMOVE_ALL_ID:
                remove_all = i
        if remove_all is not None:
            self._replace(list(items[remove_all + 1 :]), origin)
            return
        removed: set[str | None] = set()
        messages, origins = self.messages, self.origins
        for message in items:
            existing = position.get(message.id)
            if existing is not None:
                if message.removes:
                    removed.add(message.id)
                else:
                    removed.discard(message.id)
                    messages[existing] = message
                    origins[existing] = origin
            elif message.removes:
                raise Unprovable(f"a write removes message {message.id!r}, which the list does not hold")
            else:
                position[message.id] = len(messages)
                messages.append(message)
                origins.append(origin)
        if removed:
            kept = [i for i, message in enumerate(messages) if message.id not in removed]
            self.messages = [messages[i] for i in kept]
            self.origins = [origins[i] for i in kept]
            self._position = None


def _ordered(writes: list[MessageWrite]) -> list[MessageWrite]:
    return sorted(writes, key=lambda write: (write.task_path, write.task_id, write.idx))


def _shown(ids: list[str]) -> str:
    quoted = ", ".join(repr(i) for i in ids[:_SHOWN])
    return quoted + (f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")


def describe_difference(stored: tuple[StoredMessage, ...], fold: _Fold) -> str | None:
    """What differs between a stored list and the fold, or None when they are equal."""
    replayed = fold.messages
    # Equal bytes are one cached object: list equality tries identity first, so an intact list costs little.
    if len(stored) == len(replayed) and replayed == list(stored):
        return None
    stored_ids = [m.id or "" for m in stored]
    replay_ids = [m.id or "" for m in replayed]
    stored_set, replay_set = set(stored_ids), set(replay_ids)
    parts: list[str] = []
    missing = [i for i in replay_ids if i not in stored_set]
    extra = [i for i in stored_ids if i not in replay_set]
    if missing:
        parts.append(f"missing {_shown(missing)}")
    if extra:
        parts.append(f"extra {_shown(extra)}")
    common_stored = [i for i in stored_ids if i in replay_set]
    common_replay = [i for i in replay_ids if i in stored_set]
    if common_stored != common_replay:
        moved = [a for a, b in zip(common_stored, common_replay, strict=False) if a != b]
        parts.append(f"reordered ({_shown(moved)} out of place)")
    by_id = {m.id: m for m in replayed}
    changed = [m.id or "" for m in stored if m.id in by_id and by_id[m.id].payload != m.payload]
    if changed:
        parts.append(f"content changed in {_shown(changed)}")
    if not parts:
        parts.append("the same ids with a different message type or duplicate ids")
    return "; ".join(parts)


def _first_divergence(stored: tuple[StoredMessage, ...], fold: _Fold) -> str:
    """The earliest write the difference involves, or the last stored list on the branch that agreed."""
    stored_by_id = {m.id: m for m in stored}
    for message, origin in zip(fold.messages, fold.origins, strict=True):
        twin = stored_by_id.get(message.id)
        if origin is not None and (twin is None or twin.payload != message.payload):
            return f"first divergence at the write of task {origin[1]} under checkpoint {origin[0]}"
    if fold.agreed_at is not None:
        return f"the last stored list that agreed is at checkpoint {fold.agreed_at}"
    return "no earlier stored list on this branch agreed"


# Called with each checkpoint, parents before children, and the fold there (None where it could not be
# followed): `ckpt convert` stores what it says. The list is the fold's own: read it before returning.
Observer = Callable[[HistoryCheckpoint, list[StoredMessage] | None], None]


def prove_lineage(history: LineageHistory, observe: Observer | None = None) -> ProofResult:
    """Fold the lineage's writes down every branch and compare each stored list with the fold."""
    result = ProofResult(history.thread_id, history.checkpoint_ns)
    by_id = {checkpoint.checkpoint_id: checkpoint for checkpoint in history.checkpoints}
    children: dict[str, list[HistoryCheckpoint]] = {}
    roots: list[HistoryCheckpoint] = []
    for checkpoint in history.checkpoints:
        parent = checkpoint.parent_id
        if parent is not None and parent in by_id and parent != checkpoint.checkpoint_id:
            children.setdefault(parent, []).append(checkpoint)
        else:
            roots.append(checkpoint)
    visited: set[str] = set()
    for root in roots:
        # A thread starts empty; a lineage whose start is gone, or a first checkpoint that stores a list
        # (update_state on a new thread, whose writes are stored nowhere), starts at that list.
        start = _Fold([], []) if root.parent_id is None and root.stored is None else None
        if start is None and root.stored is None and root.unprovable is None:
            result.unprovable.append(
                f"checkpoint {root.checkpoint_id}'s parent is not stored and it holds no list to start from"
            )
        _prove_branch(root, start, children, result, visited, history, observe)
    unreached = len(history.checkpoints) - len(visited)
    if unreached:
        result.unprovable.append(f"{unreached} checkpoint(s) are not reachable from a start (a parent cycle)")
    return result


def _plain_step(checkpoint: HistoryCheckpoint, child: HistoryCheckpoint) -> bool:
    """No writes under the checkpoint and its child is the next superstep: nothing to apply."""
    if checkpoint.writes or checkpoint.writes_unprovable is not None:
        return False
    step, next_step = checkpoint.step, child.step
    return step is None or next_step is None or next_step <= step + 1 or child.source != _LOOP


def _spans_supersteps(checkpoint: HistoryCheckpoint, below: list[HistoryCheckpoint]) -> bool:
    """A child more than one superstep on, or writes of several supersteps under one checkpoint: a run with
    durability="exit" saves only its last checkpoint, and files what it stores under the one it started
    from (at some cadences, no messages write at all)."""
    step = checkpoint.step
    if step is not None:
        for child in below:
            if child.step is not None and child.step > step + 1 and child.source == _LOOP:
                return True
    # Exit-mode task ids come with the writes of several supersteps (or with no step to check a gap by).
    if len(checkpoint.writes) > 1 or step is None:
        for write in checkpoint.writes:
            if write.task_id.startswith(_EXIT_TASK_PREFIX) or write.task_path.startswith("~~"):
                return True
    return False


def _prove_branch(
    root: HistoryCheckpoint,
    start: _Fold | None,
    children: dict[str, list[HistoryCheckpoint]],
    result: ProofResult,
    visited: set[str],
    history: LineageHistory,
    observe: Observer | None,
) -> None:
    # Depth first with an explicit stack: a thread may be thousands of checkpoints deep.
    stack: list[tuple[HistoryCheckpoint, _Fold | None]] = [(root, start)]
    while stack:
        checkpoint, fold = stack.pop()
        checkpoint_id = checkpoint.checkpoint_id
        if checkpoint_id in visited:
            continue
        visited.add(checkpoint_id)
        if checkpoint.stored is not None or checkpoint.unprovable is not None:
            fold = _check(checkpoint, fold, result, history)
        if observe is not None:
            observe(checkpoint, None if fold is None else fold.messages)
        below = children.get(checkpoint_id)
        if below is None:
            continue
        if len(below) == 1 and (fold is None or _plain_step(checkpoint, below[0])):
            # The common case, a chain step with nothing to apply: the fold goes on as it is.
            stack.append((below[0], fold))
            continue
        checkpoint.spans_supersteps = _spans_supersteps(checkpoint, below)
        after: _Fold | None = None
        applied = False
        for child in below:
            takes = takes_writes(checkpoint, child)
            if takes is None:
                own = None  # the proof goes on from the list stored at the child
            elif takes:
                if not applied:
                    # A chain applies in place; where branches part, each takes its own copy.
                    after, applied = _advance(checkpoint, fold, result, copy=len(below) > 1), True
                own = after if len(below) == 1 or after is None else after.copy()
            else:
                own = fold if len(below) == 1 or fold is None else fold.copy()
            stack.append((child, own))


def takes_writes(checkpoint: HistoryCheckpoint, child: HistoryCheckpoint) -> bool | None:
    """Whether `child` holds the writes stored under `checkpoint`, as LangGraph ran it; None: not known.

    A loop child is the superstep the writes belong to. An input child starts a new run and drops them. An
    update or a fork that starts from a checkpoint with pending writes is not their superstep either, and
    LangGraph stores a snapshot there, from which the proof goes on; one that stores nothing is replayed
    as LangGraph replays it, with the writes.
    """
    if child.source == _INPUT:
        return False
    if child.source == _LOOP or not _wrote(checkpoint) or child.stored is None:
        return True
    return None


def _wrote(checkpoint: HistoryCheckpoint) -> bool:
    """Messages writes are stored under it, readable or not, or its child ran supersteps nobody saved."""
    return bool(checkpoint.writes) or checkpoint.writes_unprovable is not None or checkpoint.spans_supersteps


def _check(
    checkpoint: HistoryCheckpoint, fold: _Fold | None, result: ProofResult, history: LineageHistory
) -> _Fold | None:
    """Compare the list stored here with the fold; where there is no fold, a stored list starts one."""
    if checkpoint.unprovable is not None:
        result.unprovable.append(f"checkpoint {checkpoint.checkpoint_id}: {checkpoint.unprovable}")
        return None
    stored = checkpoint.stored
    if stored is None:
        return fold
    if fold is not None and stored.equals(fold.messages):
        result.proved += 1
        fold.agreed_at = checkpoint.checkpoint_id
        return fold
    try:
        messages = stored.messages(history.cache)
    except Unprovable as exc:
        result.unprovable.append(f"checkpoint {checkpoint.checkpoint_id}: {exc}")
        return None
    if fold is None:
        # Nothing before it could be followed (a lineage start, a fork by update, an unprovable write):
        # the replay begins again from this list, which itself is neither proven nor disproven.
        result.started += 1
        return _Fold(list(messages), [None] * len(messages), checkpoint.checkpoint_id)
    difference = describe_difference(messages, fold)
    if difference is None:
        result.proved += 1
        fold.agreed_at = checkpoint.checkpoint_id
        return fold
    result.differing += 1
    what = "snapshot" if stored.snapshot else "message list"
    result.findings.append(
        Finding(
            RuleCode.CK106,
            rule(RuleCode.CK106).severity,
            history.thread_id,
            history.checkpoint_ns,
            checkpoint.checkpoint_id,
            checkpoint.step,
            f"stored {what} ({len(messages)} messages) differs from the replay of its writes "
            f"({len(fold.messages)} messages): {difference}; {_first_divergence(messages, fold)}",
        )
    )
    return fold


def _advance(checkpoint: HistoryCheckpoint, fold: _Fold | None, result: ProofResult, copy: bool) -> _Fold | None:
    """The fold at a child that took this checkpoint's writes (applied to a copy, or in place); None: unknown."""
    if fold is None:
        return None
    problem = _writes_problem(checkpoint)
    if problem is not None:
        result.unprovable.append(f"checkpoint {checkpoint.checkpoint_id}: {problem}")
        return None
    if copy:
        fold = fold.copy()
    writes = checkpoint.writes
    try:
        if len(writes) == 1:
            fold.apply_step(checkpoint.checkpoint_id, writes)
            return fold
        # Graph input and Command(update=...) (the null task) are applied as a step of their own, first.
        commands = [write for write in writes if write.task_id == NULL_TASK_ID]
        tasks = [write for write in writes if write.task_id != NULL_TASK_ID]
        for step in (commands, tasks):
            if step:
                fold.apply_step(checkpoint.checkpoint_id, _ordered(step))
    except Unprovable as exc:
        result.unprovable.append(f"checkpoint {checkpoint.checkpoint_id}: {exc}")
        return None
    return fold


def _writes_problem(checkpoint: HistoryCheckpoint) -> str | None:
    if checkpoint.writes_unprovable is not None:
        return checkpoint.writes_unprovable
    if checkpoint.order_unknown:
        return "several tasks wrote messages and the store keeps no task_path to order them by"
    if checkpoint.spans_supersteps:
        return "supersteps after it were not checkpointed (durability='exit'): their writes cannot be replayed"
    return None


# How many unprovable lineages a summary keeps by name (the rest are counted).
_NAMED_UNPROVABLE = 20


@dataclass
class ProofSummary:
    """The deep proof over a whole scan."""

    lineages: int = 0
    proved_lists: int = 0
    differing_lists: int = 0
    started_lists: int = 0
    # Lineages with at least one stretch that could not be followed, and the first few, with their reason.
    unprovable_lineages: int = 0
    unprovable: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, result: ProofResult, differing: int | None = None) -> None:
        """`differing`: how many of its differing lists are reported (a --since scan reports fewer)."""
        self.lineages += 1
        self.proved_lists += result.proved
        self.differing_lists += result.differing if differing is None else differing
        self.started_lists += result.started
        if result.unprovable:
            self.unprovable_lineages += 1
            if len(self.unprovable) < _NAMED_UNPROVABLE:
                self.unprovable.append((result.thread_id, result.checkpoint_ns, result.unprovable[0]))

    def merge(self, other: ProofSummary) -> None:
        self.lineages += other.lineages
        self.proved_lists += other.proved_lists
        self.differing_lists += other.differing_lists
        self.started_lists += other.started_lists
        self.unprovable_lineages += other.unprovable_lineages
        room = _NAMED_UNPROVABLE - len(self.unprovable)
        self.unprovable.extend(other.unprovable[: max(room, 0)])
