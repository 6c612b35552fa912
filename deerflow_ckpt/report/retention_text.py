"""A retention plan as text: what the policy would delete, how far the closure widened it and why, what it
frees per table, what the naive policy would have broken, and the next steps."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from deerflow_ckpt.analysis.mode import ChannelMode
from deerflow_ckpt.analysis.retention import KeepReason, LineagePlan, RetentionPolicy
from deerflow_ckpt.analysis.storage import human_bytes
from deerflow_ckpt.commands.plan_retention import RetentionPlan
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.rules import RULES, RuleCode
from deerflow_ckpt.store.records import Backend


def widening(plan: LineagePlan, policy: RetentionPolicy) -> str:
    """Why the plan keeps more than the policy asked, in one clause ("" when it does not)."""
    if plan.skipped is not None:
        return f"left whole: {plan.skipped}"
    if not plan.widened_by:
        return ""
    reasons = Counter(reason for cid, reason in plan.kept.items() if cid not in plan.policy_kept)
    clauses = []
    if plan.widest is not None:
        clauses.append(f"the nearest snapshot (or stored list) is {plan.widest[1]} further back")
    if reasons[KeepReason.BRANCH]:
        clauses.append(f"{reasons[KeepReason.BRANCH]} lead(s) a kept branch back to where it forked")
    if reasons[KeepReason.PENDING_WRITES]:
        clauses.append(f"{reasons[KeepReason.PENDING_WRITES]} hold pending writes")
    if reasons[KeepReason.NEWEST]:
        clauses.append("the newest checkpoint always stays")
    if plan.note is not None:
        clauses.append(plan.note)
    return f"{policy.describe()} keeps {len(plan.kept)} here: " + "; ".join(clauses)


def mode_line(plan: RetentionPlan) -> str | None:
    """The deployment's mode and what it changes: only Postgres walks differ by mode (analysis/retention.py)."""
    stated = plan.mode
    if plan.backend is not Backend.POSTGRES:
        return stated.describe() if stated.mode is not None else None
    if stated.mode is ChannelMode.FULL:
        return f"{stated.describe()}: full-mode threads may be cut"
    keeps = "full-mode threads keep their whole chain"
    if stated.mode is ChannelMode.DELTA:
        return f"{stated.describe()}: {keeps}, as a delta-mode process continuing one needs"
    hint = "pass --mode full if every process writing here runs full mode (a plain LangGraph app does)"
    return f"{stated.describe()}: {keeps}; {hint}"


def render_plan(plan: RetentionPlan, console: Console, top: int) -> None:
    console.print(Text(printable(f"Retention plan for {plan.database} (chosen via {plan.found_via})")))
    console.print(Text(f"  policy: {plan.policy.describe()}"))
    if (mode := mode_line(plan)) is not None:
        console.print(Text(f"  deployment mode: {printable(mode)}"))
    if (conflict := plan.mode_conflict()) is not None:
        console.print(Text(f"  warning: {printable(conflict)}", style="yellow"))
    _totals(plan, console)
    _lineages(plan, console, top)
    _naive(plan, console)
    for lineage in plan.skipped:
        where = f" namespace {printable(lineage.checkpoint_ns)!r}" if lineage.checkpoint_ns else ""
        console.print(Text(f"  left whole: thread {printable(lineage.thread_id)}{where}: {lineage.skipped}"))
    _next_steps(plan, console)


def _totals(plan: RetentionPlan, console: Console) -> None:
    freed = plan.freed
    deleted = plan.checkpoints - plan.kept
    console.print(
        f"  {plan.threads:,} threads, {plan.lineages:,} lineages, {plan.checkpoints:,} checkpoints: keeps "
        f"{plan.kept:,} ({plan.widened:,} of them beyond the policy, for reads it must keep), deletes {deleted:,}"
    )
    rows = [f"{freed.checkpoints:,} checkpoints ({human_bytes(freed.checkpoint_bytes)})",
            f"{freed.writes:,} write rows ({human_bytes(freed.write_bytes)})"]  # fmt: skip
    if plan.backend is Backend.POSTGRES:
        rows.append(f"{freed.blobs:,} blob rows ({human_bytes(freed.blob_bytes)})")
    console.print(f"  frees {', '.join(rows)}: {human_bytes(freed.total_bytes)} of stored rows")
    if plan.reparented:
        console.print(
            f"  re-parents {plan.reparented:,} kept checkpoint(s) whose parent goes (each stores its messages, so its "
            "reads stay whole): onto the nearest kept ancestor across copies of one state, else as a root; no "
            "parent id is left dangling"
        )
    lost = plan.branch_steps_lost
    if lost:
        console.print(
            f"  branch/regenerate: {lost:,} message-writing step(s) of the threads' current chains go; their turns "
            "can no longer be regenerated or branched from (--only-safe-shapes keeps those chains whole)"
        )


def _lineages(plan: RetentionPlan, console: Console, top: int) -> None:
    if not plan.deleting:
        console.print("  nothing to delete: every checkpoint is kept by the policy or by a read it must keep")
        return
    shown = plan.heaviest[:top]
    title = f"Lineages that free the most ({len(shown)} of {plan.deleting:,}; --top N)"
    table = Table(title=title, title_justify="left", show_edge=False, box=None, pad_edge=False)
    for index, column in enumerate(("thread", "ns", "checkpoints", "policy keeps", "plan keeps", "deletes", "frees")):
        table.add_column(column, justify="left" if index < 2 else "right")
    for lineage in shown:
        table.add_row(
            Text(printable(lineage.thread_id)),
            Text(printable(lineage.checkpoint_ns)),
            f"{lineage.checkpoints:,}",
            f"{len(lineage.policy_kept):,}",
            f"{len(lineage.kept):,}",
            f"{len(lineage.deleted):,}",
            human_bytes(lineage.freed.total_bytes),
        )
    console.print(table)
    for lineage in shown:
        if why := widening(lineage, plan.policy):
            console.print(Text(f"  {printable(lineage.thread_id)}: {why}"))


def _naive(plan: RetentionPlan, console: Console) -> None:
    breaks = plan.naive_breaks
    if not plan.naive_deleted and not breaks:
        return
    console.print(
        "What the policy alone would break (deleting everything it does not name, as a newest-N estimate does):"
    )
    counts = ", ".join(f"{_break_label(label)} x{count}" for label, count in sorted(breaks.items()))
    total = sum(breaks.values())
    console.print(f"  it would delete {plan.naive_deleted:,} more checkpoint(s) and break {total:,} read(s): {counts}")
    for lineage, broken in plan.examples:
        rule = str(broken.rule) if broken.rule is not None else f"{broken.kind}: no rule reported here"
        # Checkpoint ids come from the database, in the detail too: the whole line is escaped.
        line = f"  e.g. thread {lineage.thread_id} checkpoint {broken.checkpoint_id} ({rule}): {broken.detail}"
        console.print(Text(printable(line)))


# What breaks where verify-shape reports no rule.
_BREAKS = {
    "read": "reads through a chain broken further up",
    "next turn": "next turns that would lose history",
    "thread gone": "threads gone",
}


def _break_label(label: str) -> str:
    if label in RuleCode.__members__:
        return f"{label} ({RULES[RuleCode(label)].title})"
    return _BREAKS.get(label, label)


def _next_steps(plan: RetentionPlan, console: Console) -> None:
    if not plan.deleting:
        return
    from deerflow_ckpt.report.retention_sql import shell_command

    console.print(
        Text(
            f"Next: ckpt plan retention {plan.policy.describe()} (and the same database options) --format sql -o "
            "plan.sql; review it; run "
            f"{shell_command(plan)}; then ckpt verify-shape (nothing the plan introduced) and a "
            "VACUUM to give the disk back."
        )
    )
