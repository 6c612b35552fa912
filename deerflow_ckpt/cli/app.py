"""The `ckpt` application: global options and the one handler that turns failures into exit 2."""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

import typer
from typer.core import TyperGroup

from deerflow_ckpt import __version__
from deerflow_ckpt.errors import CkptError
from deerflow_ckpt.exitcodes import ExitCode
from deerflow_ckpt.redact import redact

DEBUG_ENV = "CKPT_DEBUG"
# typer vendors Click; its exception base is reachable from the public BadParameter.
_CLICK_EXCEPTION: type[BaseException] = next(
    cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException"
)


def _wants_traceback(ctx: Any) -> bool:
    return bool(ctx.params.get("debug")) or os.environ.get(DEBUG_ENV, "") not in ("", "0")


class _CkptGroup(TyperGroup):
    """Every exception a command lets escape ends here: one redacted line on stderr, exit 2."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # --debug is global, but operators add it at the end of a command line: take it from anywhere
        # before a "--" and hand it to the group.
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[:end]:
            args = ["--debug", *[a for a in args[:end] if a != "--debug"], *args[end:]]
        result: list[str] = super().parse_args(ctx, args)
        return result

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, _CLICK_EXCEPTION):
            raise
        except BrokenPipeError:
            _quiet_broken_pipe()
        except CkptError as exc:
            message = f"ckpt: error: {exc}"
            trace = traceback.format_exc() if _wants_traceback(ctx) else ""
        except Exception as exc:
            message = f"ckpt: internal error: {type(exc).__name__}: {exc}"
            trace = traceback.format_exc() if _wants_traceback(ctx) else ""
            if not trace:
                message += " (run with --debug for the traceback)"
        if trace:
            sys.stderr.write(redact(trace))
        sys.stderr.write(redact(one_line(message)) + "\n")
        raise typer.Exit(ExitCode.ERROR)


def one_line(message: str) -> str:
    """Multi-line messages (libpq's, with their hints) as one line: logs and CI keep one error per line."""
    return "; ".join(part for line in message.splitlines() if (part := " ".join(line.split())))


def _quiet_broken_pipe() -> None:
    """The reader closed the pipe (`ckpt ... | head`): stop without a message, and without Python's own
    complaint when it flushes stdout at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(ExitCode.ERROR)


app = typer.Typer(
    name="ckpt",
    cls=_CkptGroup,
    help="The operator's command line for DeerFlow checkpoint storage.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"ckpt {__version__}")
        raise typer.Exit(ExitCode.CLEAN)


@app.callback()
def _global_options(
    debug: bool = typer.Option(False, "--debug", help=f"Print tracebacks for errors (also ${DEBUG_ENV}=1)."),
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """The operator's command line for DeerFlow checkpoint storage.

    Exit codes: 0 clean, 1 findings (or a file would change), 2 usage, config, I/O or internal error.
    """


def _register_commands() -> None:
    # Each command module imports only what it needs, so `ckpt --help` stays light.
    from deerflow_ckpt.cli import inspect, lint_config, migrate_config, verify_shape

    migrate_config.register(app)
    lint_config.register(app)
    verify_shape.register(app)
    inspect.register(app)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    app(prog_name="ckpt")
