"""`ckpt plan retention`: options in, the retention plan (commands/plan_retention.py) out as text, json or
a SQL script. ckpt itself never deletes."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from deerflow_ckpt.cli import ci_options, database_options, deerflow_options, delivery, project_options
from deerflow_ckpt.cli.ci_options import ColorChoice
from deerflow_ckpt.cli.console import (
    counting_checkpoints,
    file_console,
    info,
    is_quiet,
    message,
    text_console,
)
from deerflow_ckpt.fileio import terminable

if TYPE_CHECKING:
    from deerflow_ckpt.commands.plan_retention import RetentionPlan


class PlanFormat(StrEnum):
    text = "text"
    json = "json"
    sql = "sql"


plan_app = typer.Typer(
    name="plan",
    help="Plan changes to a checkpoint store without making them: what they keep, free and would break.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@plan_app.command("retention")
def retention(
    ctx: typer.Context,
    keep_newest: int | None = typer.Option(
        None, "--keep-newest", min=1, metavar="N", help="Keep the newest N checkpoints of each thread and namespace."
    ),
    keep_since: str | None = typer.Option(
        None,
        "--keep-since",
        metavar="TIME|ID",
        help="Keep checkpoints written at or after this ISO-8601 time (UTC unless it has an offset) or checkpoint id.",
        show_default=False,
    ),
    keep_heads_only: bool = typer.Option(
        False, "--keep-heads-only", help="Keep each thread's newest checkpoint (and what its reads need)."
    ),
    only_safe_shapes: bool = typer.Option(
        False,
        "--only-safe-shapes",
        help="Delete only what the retention contract proves safe: branches off the newest checkpoint's chain "
        "(leaf sibling branches, trailing duration-only leaves). With other policies: only where both allow.",
    ),
    threads: list[str] | None = typer.Option(
        None, "--thread", metavar="ID", help="Plan only this thread (repeat for several).", show_default=False
    ),
    output_format: PlanFormat = typer.Option(
        PlanFormat.text,
        "--format",
        metavar="FORMAT",
        help="text; json (the plan as data, every row it deletes); sql (a script to review and run with sqlite3 "
        "or psql: one transaction, or --batch).",
    ),
    output: Path | None = ci_options.OUTPUT_OPTION,
    batch: int | None = typer.Option(
        None,
        "--batch",
        min=1,
        metavar="N",
        help="sql: one transaction per group of whole threads of about N deleted checkpoints, each guarded on "
        "its own, so a live SQLite database is locked briefly (default: one transaction for the whole plan).",
        show_default=False,
    ),
    top: int = typer.Option(10, "--top", min=0, metavar="N", help="Text: how many lineages to list."),
    mode: database_options.ModeChoice | None = database_options.MODE_OPTION,
    db: str | None = database_options.DB_OPTION,
    schema: str = database_options.SCHEMA_OPTION,
    config: Path | None = database_options.CONFIG_OPTION,
    immutable: bool = database_options.IMMUTABLE_OPTION,
    deerflow_root: Path | None = deerflow_options.DEERFLOW_ROOT_OPTION,
    network_timeout: str = database_options.NETWORK_TIMEOUT_OPTION,
    statement_timeout: str | None = database_options.STATEMENT_TIMEOUT_OPTION,
    jobs: int | None = database_options.JOBS_OPTION,
    color: ColorChoice = ci_options.COLOR_OPTION,
    quiet: bool = ci_options.QUIET_OPTION,
    verbose: bool = database_options.VERBOSE_OPTION,
) -> None:
    """Plan a delta-safe deletion of old checkpoints, read-only: the policy widened until every kept checkpoint
    can still be read, what it frees per table, and what the policy alone would have broken.

    Several policies combine: a checkpoint any of them keeps is kept. Nothing is deleted: --format sql writes
    a transaction (or, with --batch, several of whole threads) that deletes every row by its full primary key,
    re-parents the oldest kept checkpoint of a cut chain, and deletes nothing if a planned thread changed after
    the plan was made. Review it, run it with sqlite3 or psql, then run ckpt verify-shape.
    """
    from deerflow_ckpt.analysis.retention import RetentionPolicy
    from deerflow_ckpt.commands.plan_retention import RetentionRequest, plan_retention

    policy = RetentionPolicy(
        keep_newest=keep_newest,
        keep_since=database_options.parse_since(keep_since, "--keep-since"),
        heads_only=keep_heads_only,
        only_safe_shapes=only_safe_shapes,
    )
    if not policy.asks_for_deletion():
        raise typer.BadParameter(
            "name a policy: --keep-newest N, --keep-since TIME, --keep-heads-only or --only-safe-shapes"
        )
    db_via = project_options.given_via(ctx, "db", "--db")
    selection = database_options.select(db, schema, config, None, immutable, deerflow_root, db_via)
    selection = database_options.with_timeouts(selection, network_timeout, statement_timeout)
    delivery.refuse_output_onto(output, database_options.input_files(selection))
    target = selection.choice.target
    info(f"ckpt: planning retention for {target.describe()} (chosen via {selection.choice.found_via})")
    if verbose:
        database_options.say_reading_path(target)
    stated = database_options.stated_mode(selection, mode, db)
    request = RetentionRequest(selection.choice, policy, tuple(threads) if threads else None, stated, top)
    show_progress = output_format is PlanFormat.text and sys.stderr.isatty() and not is_quiet()
    # SIGTERM ends the run as an exit, so the plan's scratch files are removed.
    with terminable():
        plan = counting_checkpoints(
            lambda progress: plan_retention(request, progress, jobs=jobs), show_progress, color.flag(), "planning"
        )
        if verbose:
            database_options.say_processes(plan.processes, plan.processes_why)
        # The text report says it in its mode line; the other formats are read by programs, so stderr says it.
        conflict = plan.mode_conflict()
        if conflict is not None and output_format is not PlanFormat.text:
            message(f"ckpt: warning: {conflict}")
        _deliver(plan, output_format, output, batch, top, color)


def _deliver(
    plan: RetentionPlan, output_format: PlanFormat, output: Path | None, batch: int | None, top: int, color: ColorChoice
) -> None:
    if output_format is PlanFormat.json:
        from deerflow_ckpt.report.retention_json import plan_to_json

        delivery.deliver_chunks(plan_to_json(plan), output)
    elif output_format is PlanFormat.sql:
        from deerflow_ckpt.report.retention_sql import plan_to_sql

        delivery.deliver_chunks(plan_to_sql(plan, str(output) if output else "plan.sql", batch), output)
    else:
        from deerflow_ckpt.report.retention_text import render_plan

        if output is None:
            render_plan(plan, text_console(color.flag()), top)
        else:
            console = file_console()
            with console.capture() as capture:
                render_plan(plan, console, top)
            delivery.deliver(capture.get(), output)


def register(app: typer.Typer) -> None:
    app.add_typer(plan_app, name="plan")
