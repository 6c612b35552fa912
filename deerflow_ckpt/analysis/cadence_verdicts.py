"""CK201/CK202 judged in time, and the database's cadence changes (CK205 clean, CK206 rolling).

While the database streams by, each conversation lineage is checked against one cadence (the
expected K, or its own inferred one): those CK201/CK202 findings are provisional. Once every epoch
is known, the timeline says which cadence was in force when: a thread whose other-cadence writes all
precede the change keeps none of them, one touched inside a rolling change's window is named in that
change's warning, and one another cadence still wrote after the window keeps its errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from deerflow_ckpt.analysis.epochs import Epoch, Mark
from deerflow_ckpt.analysis.shape import CONVERSATION_NS, Finding
from deerflow_ckpt.analysis.timeline import Change, ChangeKind, ThreadJudgement, Timeline, Verdict, judge_thread
from deerflow_ckpt.rules import RuleCode, rule
from deerflow_ckpt.store.clock import format_duration, format_time, write_time_ns

CADENCE_RULES = frozenset({RuleCode.CK201, RuleCode.CK202})
# Threads named in one database-level finding; the rest are counted.
NAMED_THREADS = 10


def is_provisional(finding: Finding) -> bool:
    """A conversation's CK201/CK202, to be judged against the cadence in force when it was written."""
    return finding.rule in CADENCE_RULES and finding.thread_id is not None and finding.checkpoint_ns == CONVERSATION_NS


def judge_in_time(
    timeline: Timeline,
    epochs_by_thread: dict[str, list[Epoch]],
    provisional: dict[str, list[Finding]],
    since: str | None = None,
) -> list[Finding]:
    """The provisional findings that stand, the ones the timeline adds, and its database-level changes."""
    if timeline.current is None or len(timeline.classes) < 2:
        return [finding for findings in provisional.values() for finding in findings]
    judged: list[Finding] = []
    for thread_id in sorted(set(provisional) | set(epochs_by_thread)):
        judgement = judge_thread(timeline, epochs_by_thread.get(thread_id, []))
        found = provisional.get(thread_id, [])
        if judgement.verdict in (Verdict.HISTORY, Verdict.ROLLING):
            continue
        if judgement.verdict is not Verdict.CONCURRENT:
            judged.extend(found)
            continue
        judged.extend(kept for finding in found if (kept := _in_time(finding, judgement, timeline, since)))
        writer = judgement.leftover_writer
        latest = writer.latest if writer is not None else None
        if writer is not None and latest is not None and (since is None or latest.checkpoint_id >= since):
            judged.append(_leftover_writer(thread_id, writer, timeline))
    judged.extend(database_changes(timeline, since))
    return judged


def _in_force(timeline: Timeline) -> str:
    assert timeline.current is not None
    return f"K={timeline.expected}" if timeline.expected is not None else timeline.current.label


def _when(mark: Mark, judgement: ThreadJudgement, timeline: Timeline) -> str:
    """'at T' and, where the cadence in force's start is known, how long after it."""
    when = f"at {format_time(mark.time_ns)}"
    if judgement.since_ns is not None and mark.time_ns > judgement.since_ns:
        late = format_duration(mark.time_ns - judgement.since_ns)
        when += f", {late} after {_in_force(timeline)} began at {format_time(judgement.since_ns)}"
    return when


def _with_timing(finding: Finding, judgement: ThreadJudgement, timeline: Timeline) -> Finding:
    latest = judgement.latest
    assert latest is not None
    timing = f"{judgement.other} still wrote {_when(latest, judgement, timeline)}"
    return replace(finding, message=f"{finding.message}; {timing}")


def _in_time(finding: Finding, judgement: ThreadJudgement, timeline: Timeline, since: str | None) -> Finding | None:
    """A provisional finding with when the other cadence last wrote. After a change into the cadence in
    force, one that names a checkpoint written clearly before the change (history) is re-pointed at the
    latest write that was not, or dropped when that cadence wrote no such evidence after the change."""
    written = write_time_ns(finding.checkpoint_id) if finding.checkpoint_id else None
    # The mark this rule rests on, with the start of the cadence in force against the cadence that wrote it.
    source = judgement.source(counter=finding.rule == RuleCode.CK201)
    began = source.since_ns
    skew = timeline.settings.clock_skew_ns
    # The cadence that wrote the finding's own epoch, where the thread has several: an epoch the timeline excuses
    # (history, or inside a rolling window) makes the finding history too, whatever start applies to the mark.
    own = judgement.named_for(finding.checkpoint_id)
    excused = own is not judgement and own.verdict in (Verdict.HISTORY, Verdict.ROLLING)
    history = excused or (written is not None and began is not None and written < began - skew)
    mark = source.counter if finding.rule == RuleCode.CK201 else source.interval
    if history and (mark is None or (began is not None and mark.time_ns <= began + skew)):
        return None
    if not history or mark is None or (since is not None and mark.checkpoint_id < since):
        return _with_timing(finding, judgement if excused else own, timeline)
    if finding.rule == RuleCode.CK201:
        what = f"updates counter reaches {mark.value - 1} without a snapshot"
    else:
        what = f"a cadence snapshot closed an interval of {mark.value} message-writing steps"
    return replace(
        finding,
        checkpoint_id=mark.checkpoint_id,
        step=mark.step,
        message=f"{what} {_when(mark, source, timeline)}, which {_in_force(timeline)} cannot write",
    )


def _leftover_writer(thread_id: str, judgement: ThreadJudgement, timeline: Timeline) -> Finding:
    """CK207: the cadence in force took over from another one, which still wrote this thread afterwards."""
    latest = judgement.latest
    assert latest is not None
    return Finding(
        rule=RuleCode.CK207,
        severity=rule(RuleCode.CK207).severity,
        thread_id=thread_id,
        checkpoint_ns=CONVERSATION_NS,
        checkpoint_id=latest.checkpoint_id,
        step=latest.step,
        message=f"the {judgement.other} cadence, which {_in_force(timeline)} took over from, still wrote this "
        f"thread {_when(latest, judgement, timeline)}",
    )


def concurrent_classes(timeline: Timeline) -> str | None:
    """With no cadence in force: the classes that wrote side by side beyond the rolling window."""
    concurrent = [c for c in timeline.changes if c.kind is ChangeKind.CONCURRENT]
    if timeline.current is not None or not concurrent:
        return None
    names = ", ".join(f"{c.label} ({c.threads} thread{'s' if c.threads != 1 else ''})" for c in timeline.classes)
    start = min(c.at_ns for c in concurrent)
    end = max(c.older_last.time_ns for c in concurrent)
    return (
        f"cadences {names} wrote side by side from {format_time(start)} to {format_time(end)}, beyond the "
        f"rolling window: no single cadence is in force (pass --cadence K to judge every thread against yours)"
    )


def _thread_list(threads: Sequence[str]) -> str:
    named = ", ".join(threads[:NAMED_THREADS])
    more = len(threads) - NAMED_THREADS
    return named + (f" and {more} more" if more > 0 else "")


def database_changes(timeline: Timeline, since: str | None = None) -> list[Finding]:
    """One CK205 per clean change on the way to the cadence in force, one CK206 per rolling one."""
    if not timeline.settled:
        return []
    findings = []
    for change in timeline.path:
        if change.kind is ChangeKind.CLEAN and (since is None or change.newer_first.checkpoint_id >= since):
            findings.append(_database_finding(RuleCode.CK205, _clean_message(change, timeline)))
        elif change.kind is ChangeKind.ROLLING and (since is None or change.older_last.checkpoint_id >= since):
            findings.append(_database_finding(RuleCode.CK206, _rolling_message(change, timeline)))
    return findings


def _database_finding(code: RuleCode, message: str) -> Finding:
    return Finding(code, rule(code).severity, None, None, None, None, message)


def _clean_message(change: Change, timeline: Timeline) -> str:
    threads = change.threads
    spanning = f"; {len(threads)} threads span it: {_thread_list(threads)}" if threads else ""
    return (
        f"cadence changed from {change.older.label} to {change.newer.label} at {format_time(change.at_ns)} "
        f"(last {change.older.label} write at {format_time(change.older_last.time_ns)}, clock skew allowed "
        f"{format_duration(timeline.settings.clock_skew_ns)}){spanning}"
    )


def _rolling_message(change: Change, timeline: Timeline) -> str:
    threads = change.threads
    touched = f"; threads both cadences touched in it: {_thread_list(threads)}" if threads else ""
    return (
        f"{change.older.label} and {change.newer.label} both wrote from {format_time(change.at_ns)} to "
        f"{format_time(change.older_last.time_ns)} ({format_duration(change.overlap_ns)}, within the rolling "
        f"window of {format_duration(timeline.settings.rolling_window_ns)}){touched}"
    )
