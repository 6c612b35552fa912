"""Where a report goes: stdout or --output (a file atomically, a pipe or device as a stream), GitHub's step
summary, in the chosen format.

Payload goes to stdout (or --output); everything else goes to stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deerflow_ckpt.cli.ci_options import ColorChoice, ReportFormat
from deerflow_ckpt.dataclass import dataclass, replace
from deerflow_ckpt.errors import OutputError
from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.fileio import resolved
from deerflow_ckpt.report.annotations import Annotation, FileSpot

if TYPE_CHECKING:
    from rich.console import Console

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
WORKSPACE_ENV = "GITHUB_WORKSPACE"


def refuse_output_onto(
    output: Path | None, inputs: Iterable[tuple[Path, str]], option: str = "--output", written: str = "the report"
) -> None:
    """Refuse an `option` file (--output) that is one of the command's inputs (the same file, through any path
    or link)."""
    if output is None:
        return
    for path, what in inputs:
        # The same name (a database's -wal need not exist yet), or the same file under another name or link.
        same = resolved(output, OutputError) == resolved(path, OutputError)
        if not same and output.exists() and path.exists():
            same = os.path.samefile(output, path)
        if same:
            raise OutputError(f"{option} {output} is {what} {path}: {written} would overwrite it; write it elsewhere")


def deliver(text: str, output: Path | None) -> None:
    """The payload to stdout, or to --output (a regular file written atomically: the old bytes or the whole
    report; a pipe, device or socket as a stream, fileio.write_output)."""
    deliver_chunks((text,), output)


def deliver_chunks(chunks: Iterable[str], output: Path | None) -> None:
    """deliver() for a payload made piece by piece (a large script): never held whole in memory."""
    if output is None:
        for chunk in chunks:
            sys.stdout.write(chunk)
        sys.stdout.flush()
        return
    from deerflow_ckpt.fileio import write_output

    sys.stdout.flush()  # what was printed comes first when --output names stdout (/dev/stdout)
    write_output(output, (chunk.encode("utf-8") for chunk in chunks))


def deliver_github(command: str, annotations: Sequence[Annotation], output: Path | None, headline: str) -> None:
    """Workflow commands as the payload, and the full list appended to $GITHUB_STEP_SUMMARY when set."""
    from deerflow_ckpt.report.github import step_summary, workflow_commands

    deliver(workflow_commands([_workspace_relative(annotation) for annotation in annotations]), output)
    summary_path = os.environ.get(STEP_SUMMARY_ENV)
    if not summary_path:
        return
    try:
        with open(summary_path, "a", encoding="utf-8") as summary:
            summary.write(step_summary(command, annotations, headline))
    except OSError as exc:
        raise OutputError(f"cannot append to ${STEP_SUMMARY_ENV} ({summary_path}): {exc.strerror or exc}") from exc


def _workspace_relative(annotation: Annotation) -> Annotation:
    """GitHub attaches a file annotation to the diff only when its path is relative to the workspace."""
    spot = annotation.where
    if not isinstance(spot, FileSpot) or spot.path == "-":
        return annotation
    try:
        workspace = resolved(Path(os.environ.get(WORKSPACE_ENV) or Path.cwd()), OutputError)
        relative = resolved(Path.cwd() / spot.path, OutputError).relative_to(workspace)
    except (ValueError, OSError, OutputError):  # OutputError: a loop of symbolic links
        return annotation
    return replace(annotation, where=replace(spot, path=relative.as_posix()))


@dataclass(frozen=True)
class Report:
    """What a reporting command hands to emit_report; only the chosen format's renderer is called."""

    command: str
    headline: str
    annotations: Callable[[], Sequence[Annotation]]
    json_document: Callable[[], str]
    render_text: Callable[[Console], None]


def emit_report(
    report: Report, output_format: ReportFormat, output: Path | None, exit_code: ExitCode, color: ColorChoice
) -> None:
    """The report in its format, to stdout or --output; text is coloured only on stdout."""
    from deerflow_ckpt.cli.console import file_console, message, text_console

    if output_format is ReportFormat.json:
        deliver(report.json_document(), output)
    elif output_format is ReportFormat.github:
        deliver_github(report.command, report.annotations(), output, report.headline)
        message(f"ckpt: {report.headline}")
    elif output_format is ReportFormat.sarif:
        from deerflow_ckpt import __version__
        from deerflow_ckpt.report.sarif import to_sarif

        annotations = report.annotations()
        deliver(to_sarif(annotations, command=report.command, exit_code=int(exit_code), version=__version__), output)
    elif output is None:
        report.render_text(text_console(color.flag()))
    else:
        console = file_console()
        with console.capture() as capture:
            report.render_text(console)
        deliver(capture.get(), output)
