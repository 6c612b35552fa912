"""Options every reporting command shares for CI: --format, --fail-on, --exit-zero, --color, --output,
--quiet, and the exit code they decide. Where the report goes is cli/delivery.py."""

from __future__ import annotations

from enum import StrEnum

import typer

from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.rules import Severity


class ColorChoice(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"

    def flag(self) -> bool | None:
        """rich's force_terminal: None lets rich honour the TTY, NO_COLOR, FORCE_COLOR and TERM=dumb."""
        return {"auto": None, "always": True, "never": False}[self.value]


class ReportFormat(StrEnum):
    text = "text"
    json = "json"
    github = "github"
    sarif = "sarif"


FORMAT_HELP = "text; json (versioned); github (workflow annotations, plus $GITHUB_STEP_SUMMARY); sarif (2.1.0)."
# Choices get a domain metavar and are listed in the help: typer would show "<text|json|...>" otherwise.
FORMAT_OPTION = typer.Option(ReportFormat.text, "--format", metavar="FORMAT", help=FORMAT_HELP)
FAIL_ON_OPTION = typer.Option(
    Severity.ERROR,
    "--fail-on",
    metavar="SEVERITY",
    help="Lowest severity that makes the exit code 1: error, warning or info.",
)
EXIT_ZERO_OPTION = typer.Option(
    False, "--exit-zero", help="Exit 0 even when findings exist (2 still means the command could not run)."
)
COLOR_OPTION = typer.Option(
    ColorChoice.auto,
    "--color",
    metavar="WHEN",
    help="Colour in text output: auto (a terminal only; honours NO_COLOR and FORCE_COLOR), always or never.",
)
OUTPUT_OPTION = typer.Option(
    None, "-o", "--output", metavar="FILE", help="Write the report to this file instead of stdout.", show_default=False
)


def _set_quiet(value: bool) -> bool:
    from deerflow_ckpt.cli.console import set_quiet

    set_quiet(value)
    return value


QUIET_OPTION = typer.Option(
    False,
    "-q",
    "--quiet",
    callback=_set_quiet,
    help="Leave out the informational lines on stderr (the file or database chosen and why, the .env read, "
    "progress); errors, warnings and results are still printed.",
)


def findings_exit(failing: bool, exit_zero: bool) -> ExitCode:
    """1 when findings at or above --fail-on exist, unless --exit-zero."""
    return ExitCode.FINDINGS if failing and not exit_zero else ExitCode.CLEAN
