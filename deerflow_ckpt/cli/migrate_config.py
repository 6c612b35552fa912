"""`ckpt migrate-config`: move the deprecated cadence key without disturbing config.yaml."""

from __future__ import annotations

from pathlib import Path

import typer

from deerflow_ckpt.cli import ci_options, deerflow_options, delivery
from deerflow_ckpt.cli.ci_options import ReportFormat
from deerflow_ckpt.cli.console import message
from deerflow_ckpt.commands.migrate_config import FileMigration, WriteMode, migrate_path, migrate_stream
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.report import migration as report
from deerflow_ckpt.report.annotations import at_or_above
from deerflow_ckpt.report.diff import colorize_diff
from deerflow_ckpt.rules import Severity

STDIN = "-"


def _write_stdout(data: str | bytes) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8")
    stream = typer.get_binary_stream("stdout")
    stream.write(data)
    stream.flush()


def _mode(check: bool, diff: bool, stdout: bool) -> WriteMode:
    # --check --diff is the CI pair black and ruff accept: show the diff, exit 1 if it is not empty.
    if stdout and (check or diff):
        raise typer.BadParameter("--stdout does not combine with --check or --diff")
    if check:
        return WriteMode.CHECK
    if diff:
        return WriteMode.DIFF
    return WriteMode.STDOUT if stdout else WriteMode.IN_PLACE


def migrate_config(
    paths: list[str] | None = typer.Argument(
        None,
        metavar="PATH",
        help="Config files to migrate; '-' reads standard input and writes standard output. "
        "Default: config.yaml found the way DeerFlow finds it.",
        show_default=False,
    ),
    check: bool = typer.Option(
        False, "--check", help="Write nothing; exit 1 if a file would change or must be fixed by hand."
    ),
    diff: bool = typer.Option(
        False, "--diff", help="Write nothing; print a unified diff (with --check: exit 1 if it is not empty)."
    ),
    stdout: bool = typer.Option(False, "--stdout", help="Write nothing; print the migrated file."),
    restore_from_backup: bool = typer.Option(
        False,
        "--restore-from-backup",
        help="Carry back the cadence make config-upgrade replaced: set checkpoint_delta.snapshot_frequency to "
        "what config.yaml.bak gave DeerFlow (one value edited), then move the legacy key.",
    ),
    stdin_filename: str = typer.Option(
        STDIN, "--stdin-filename", metavar="NAME", help="Name to report for standard input.", show_default=False
    ),
    output_format: ReportFormat = typer.Option(
        ReportFormat.text,
        "--format",
        metavar="FORMAT",
        help="text; json (one result object per file); github (workflow annotations, plus "
        "$GITHUB_STEP_SUMMARY); sarif (2.1.0). Machine formats replace the diff or file on stdout and "
        "change only what is printed: without --check, --diff or --stdout the files are still rewritten in place.",
    ),
    fail_on: Severity = ci_options.FAIL_ON_OPTION,
    exit_zero: bool = ci_options.EXIT_ZERO_OPTION,
    color: ci_options.ColorChoice = ci_options.COLOR_OPTION,
    quiet: bool = ci_options.QUIET_OPTION,
    deerflow_root: Path | None = deerflow_options.DEERFLOW_ROOT_OPTION,
) -> None:
    """Rewrite database.checkpoint_delta_snapshot_frequency into database.checkpoint_delta.snapshot_frequency.

    Only the lines that carry the legacy key change; comments, order, quoting, indentation, line
    endings, a BOM and a missing final newline survive byte for byte. DeerFlow's migration warnings are
    printed verbatim. Files DeerFlow would misread are refused and left untouched.
    """
    mode = _mode(check, diff, stdout)
    outcomes: list[FileMigration] = []
    named = next((Path(path) for path in paths or [] if path != STDIN), None)
    environment = deerflow_options.deerflow_environment(deerflow_root, named)
    for target in paths or [str(deerflow_options.default_config(environment))]:
        if target == STDIN:
            from deerflow_ckpt.fileio import MAX_CONFIG_BYTES

            if restore_from_backup:
                raise typer.BadParameter("--restore-from-backup reads the .bak beside a file: name the file")

            raw = typer.get_binary_stream("stdin").read(MAX_CONFIG_BYTES + 1)
            if len(raw) > MAX_CONFIG_BYTES:
                raise ConfigError(f"standard input holds more than {MAX_CONFIG_BYTES // (1024 * 1024)} MB: no config")
            outcomes.append(migrate_stream(raw, stdin_filename, environment.variables))
        else:
            outcomes.append(migrate_path(Path(target), mode, environment.variables, restore_from_backup))
    exit_code = _exit_code(outcomes, mode, fail_on, exit_zero)
    colored_diff = output_format is ReportFormat.text and diff and _stdout_in_colour(color)

    for outcome in outcomes:
        # A file that could not be read is the run's error (exit 2), said on stderr in every format.
        if outcome.unreadable:
            message(f"ckpt: error: {outcome.name}: {outcome.result.diagnostics[0].message}")
            continue
        if output_format is not ReportFormat.text:
            continue  # machine formats carry every diagnostic in their payload: none is repeated on stderr
        for diagnostic in outcome.result.diagnostics:
            message(report.diagnostic_line(outcome.name, diagnostic))
        _emit_text_payload(outcome, mode, diff, colored_diff)
        message(report.summary_line(outcome, mode))
    if output_format is not ReportFormat.text:
        machine = delivery.Report(
            command="migrate-config",
            headline=report.headline(outcomes),
            annotations=lambda: report.annotations_of(outcomes),
            json_document=lambda: report.to_json(outcomes, mode, int(exit_code), include_diff=diff),
            # Text is streamed file by file above: diffs or files on stdout, diagnostics on stderr.
            render_text=lambda console: None,
        )
        delivery.emit_report(machine, output_format, None, exit_code, color)
    raise typer.Exit(int(exit_code))


def _exit_code(outcomes: list[FileMigration], mode: WriteMode, fail_on: Severity, exit_zero: bool) -> ExitCode:
    """2 when a file could not be handled; else 1 for --check changes or diagnostics at --fail-on."""
    worst = max((outcome.exit_code(mode) for outcome in outcomes), default=ExitCode.CLEAN)
    if worst is ExitCode.ERROR:
        return worst
    failing = worst is ExitCode.FINDINGS or at_or_above(report.annotations_of(outcomes), fail_on) > 0
    return ci_options.findings_exit(failing, exit_zero)


def _stdout_in_colour(color: ci_options.ColorChoice) -> bool:
    from deerflow_ckpt.cli.console import stdout_console

    return stdout_console(color.flag()).color_system is not None


def _emit_text_payload(outcome: FileMigration, mode: WriteMode, show_diff: bool, colored_diff: bool) -> None:
    result = outcome.result
    if show_diff:
        text = report.diff_of(outcome)
        _write_stdout(colorize_diff(text) if colored_diff else text)
    elif mode is WriteMode.STDOUT or (outcome.path is None and mode is WriteMode.IN_PLACE):
        # Like black and ruff: standard input always comes back on standard output, changed or not.
        _write_stdout(result.migrated)


def register(app: typer.Typer) -> None:
    app.command("migrate-config")(migrate_config)
