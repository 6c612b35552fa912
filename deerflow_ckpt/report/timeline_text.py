"""The cadence timeline's text lines shared by verify-shape's and inspect's text reports: the cadence in force and
why, each change, and the epochs no class holds."""

from __future__ import annotations

from deerflow_ckpt.analysis.timeline import Change, ChangeKind, Timeline
from deerflow_ckpt.store.clock import format_time

# Cadences of epochs no class holds, each on a line of its own; the rest are counted.
SHOWN_UNPLACED = 5


def _names(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + f" and {labels[-1]}"


def in_force_line(timeline: Timeline | None) -> str | None:
    """'in force: K=10 since T, <why>[, after <the change into it>][; <who else wrote after it began>]'.

    None when no conversation bounds K (nothing to say beyond the threads' own cadences).
    """
    if timeline is None or not timeline.classes:
        return None
    current = timeline.current
    if current is None:
        if timeline.expected is not None:
            written = _names([c.label for c in timeline.classes])
            return f"in force: none; no cadence written here ({written}) admits the expected K={timeline.expected}"
        concurrent = [c for c in timeline.changes if c.kind is ChangeKind.CONCURRENT]
        if not concurrent:
            return "in force: unknown; too few timed writes to order the cadences"
        names = _names([c.label for c in timeline.classes])
        start, end = min(c.at_ns for c in concurrent), max(c.older_last.time_ns for c in concurrent)
        return (
            f"in force: none; {names} wrote side by side from {format_time(start)} to {format_time(end)}, beyond "
            "the rolling window (pass --cadence K to judge every thread against yours)"
        )
    label = f"K={timeline.expected}" if timeline.expected is not None else current.label
    if timeline.expected is not None:
        why = "the expected cadence"
    elif len(timeline.classes) == 1:
        why = "the only cadence written here"
    else:
        why = "every other cadence changed into it"
    line = f"in force: {label} since {format_time(timeline.current_since_ns())}, {why}"
    into = [c for c in timeline.relations.values() if c is not None and c.older in timeline.prior]
    if into:
        changes = ", ".join(f"a {c.kind.value} change from {c.older.label} at {format_time(c.at_ns)}" for c in into)
        line += f", after {changes}"
    after = timeline.written_after_current()
    if after:
        last = max(mark.time_ns for _, mark in after)
        line += f"; {_names([c.label for c, _ in after])} also wrote after it began, until {format_time(last)}"
    return line


def change_line(change: Change) -> str:
    """A change, dated by the newer cadence's first write the older cannot explain: its class's first write may be
    earlier (the first steps of an epoch fit both cadences), so the line says which write dates it."""
    older, newer = change.older.label, change.newer.label
    return (
        f"{change.kind.value} change {older} -> {newer} at {format_time(change.at_ns)} (the first {newer} write "
        f"{older} cannot explain; last {older} write {format_time(change.older_last.time_ns)})"
    )


def unplaced_lines(timeline: Timeline) -> list[str]:
    """'not placed: K=10 T..T (2 threads; too few snapshots to tell which of K>=17 and K=10 wrote them)', one for
    each of the first cadences the one in force cannot explain (those a finding may quote), then one line for the
    rest: on a store with many short threads beside a large-K worker they are many, and explain nothing wrong."""
    groups = timeline.unplaced()
    shown = [group for group in groups if not group.fits_in_force][:SHOWN_UNPLACED]
    lines = [
        f"not placed: {group.label} {format_time(group.first_time_ns)}..{format_time(group.last_time_ns)} "
        f"({plural(group.threads, 'thread')}; too few snapshots to tell which of {_names(list(group.fits))} wrote them)"
        for group in shown
    ]
    rest = [group for group in groups if group not in shown]
    if rest:
        epochs = sum(group.epochs for group in rest)
        cadences = plural(len(rest), "more cadence" if shown else "cadence")
        unexplained = sum(1 for group in rest if not group.fits_in_force)
        if timeline.current is None:
            which = ""
        elif not unexplained:
            which = ", which the cadence in force explains too"
        elif unexplained == len(rest):
            which = ", which the cadence in force cannot explain"
        else:
            which = f"; the cadence in force cannot explain {unexplained} of these cadences"
        lines.append(f"not placed: {plural(epochs, 'epoch')} of {cadences}{which} (each listed with --format json)")
    return lines


def plural(count: int, noun: str) -> str:
    """'1 thread', '2,000 threads': shared with inspect's text report."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"
