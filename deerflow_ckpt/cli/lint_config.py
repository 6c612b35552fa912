"""`ckpt lint-config`: what DeerFlow silently makes of config files' `database:` sections."""

from __future__ import annotations

from pathlib import Path

import typer

from deerflow_ckpt.cli import ci_options, deerflow_options, delivery, project_options
from deerflow_ckpt.cli.ci_options import ReportFormat
from deerflow_ckpt.commands.lint_config import lint_files, read_configs
from deerflow_ckpt.fileio import resolved
from deerflow_ckpt.report.annotations import at_or_above
from deerflow_ckpt.report.lint_ci import annotations_of, headline
from deerflow_ckpt.rules import Severity

COMMAND = "lint-config"


def lint_config(
    ctx: typer.Context,
    files: list[Path] | None = typer.Argument(
        None,
        metavar="FILE",
        help="DeerFlow config files. Default: config.yaml found the way DeerFlow finds it.",
        show_default=False,
    ),
    sqlite_base: Path | None = typer.Option(
        None,
        "--sqlite-base",
        metavar="DIR",
        help="The directory DeerFlow runs in (its gateway runs from backend/): relative sqlite_dir values, and "
        "the project root when DEER_FLOW_PROJECT_ROOT is unset, resolve against it.",
        show_default="the current directory",
    ),
    output_format: ReportFormat = ci_options.FORMAT_OPTION,
    output: Path | None = ci_options.OUTPUT_OPTION,
    fail_on: Severity = ci_options.FAIL_ON_OPTION,
    exit_zero: bool = ci_options.EXIT_ZERO_OPTION,
    color: ci_options.ColorChoice = ci_options.COLOR_OPTION,
    quiet: bool = ci_options.QUIET_OPTION,
    deerflow_root: Path | None = deerflow_options.DEERFLOW_ROOT_OPTION,
    assume_set: list[str] = typer.Option(
        [],
        "--assume-set",
        metavar="NAME",
        help="A variable set where DeerFlow runs but not here (a secret injected at deploy time, in CI or "
        "pre-commit): its unset $NAME is info, not DeerFlow's CK500. Repeatable; '*' for every variable.",
        show_default=False,
    ),
    select: list[str] = project_options.SELECT_OPTION,
    extend_select: list[str] = project_options.EXTEND_SELECT_OPTION,
    ignore: list[str] = project_options.IGNORE_OPTION,
    severity: list[str] = project_options.SEVERITY_OPTION,
) -> None:
    """Check config files' database: sections the way DeerFlow reads them, and files against each other.

    Values are read as DeerFlow reads them: PyYAML (YAML 1.1), $VAR references resolved from this
    command's environment (an unset one is reported and its value treated as unknown), the file
    defaults, the legacy-key shim (its warnings printed verbatim) and pydantic's rules. Reported: values
    DeerFlow refuses to load (CK500), settings it accepts but cannot start with (CK513: Postgres without a
    DSN) and what it silently accepts: cadences read otherwise than written (true
    as 1, 010 as 8), unknown keys it ignores, the deprecated flat key, both cadence keys set,
    checkpoint_delta in full mode, a legacy checkpointer: section that overrides database:, duplicate
    keys.

    Across files: configs whose checkpoints go to the same database (the same SQLite file, or the same
    Postgres server, database and schema) must agree on checkpoint_channel_mode and, in delta mode, on
    the effective cadence (CK510). DeerFlow resolves a relative sqlite_dir against its process's
    working directory; ckpt resolves it against --sqlite-base.

    Checked: each file's YAML and $VAR references, and its database: and checkpointer: sections; the
    report and json (yaml_valid, database_valid) say so. DeerFlow's other sections are not read: a file
    with no findings can still be one DeerFlow refuses (no sandbox:, max_recursion_limit: 0).
    """
    rules = project_options.rule_selection(ctx, COMMAND, select, extend_select, ignore, severity)
    base = resolved(sqlite_base or Path.cwd())
    environment = deerflow_options.deerflow_environment(deerflow_root, files[0] if files else None)
    configs = files or [deerflow_options.default_config(environment)]
    delivery.refuse_output_onto(output, [(path, "the config") for path in configs])
    report = lint_files(read_configs(configs), environment.variables, base, frozenset(assume_set), rules)
    annotations = annotations_of(report)
    exit_code = ci_options.findings_exit(at_or_above(annotations, fail_on) > 0, exit_zero)
    from deerflow_ckpt.report import lint_json, lint_text

    rendered = delivery.Report(
        command=COMMAND,
        headline=headline(report),
        annotations=lambda: annotations,
        json_document=lambda: lint_json.to_json(report, fail_on, int(exit_code)),
        render_text=lambda console: lint_text.render_text(report, annotations, console),
    )
    delivery.emit_report(rendered, output_format, output, exit_code, color)
    raise typer.Exit(int(exit_code))


def register(app: typer.Typer) -> None:
    app.command(COMMAND)(lint_config)
