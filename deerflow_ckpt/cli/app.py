"""The `ckpt` application: global options and the one handler that turns failures into exit 2."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import typer.main
from typer.core import TyperArgument, TyperCommand, TyperGroup

from deerflow_ckpt import __version__
from deerflow_ckpt.cli.console import message as console_message
from deerflow_ckpt.cli.console import set_quiet
from deerflow_ckpt.errors import CkptError, Interrupted
from deerflow_ckpt.exitcodes import ExitCode, exit_statuses, signalled
from deerflow_ckpt.fileio import remember_inherited_descriptors
from deerflow_ckpt.redact import redact, remember_dsn

if TYPE_CHECKING:
    from typer._click.core import Command

# cli/params.py reaches into typer's private coercion layer, tested on typer 0.29 only (pyproject.toml pins
# >=0.29,<0.30 and tests/test_cli_params.py fails on any other): another typer coerces options its own way.
TESTED_TYPER = (0, 29)


def _typer_minor(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return ()


install_direct_coercion: Callable[[list[Any]], None] | None = None
if _typer_minor(typer.__version__) == TESTED_TYPER:
    # A later 0.29 patch release that moved typer's private layer falls back to typer's own coercion.
    with contextlib.suppress(ImportError, AttributeError):
        from deerflow_ckpt.cli.params import install_direct_coercion

DEBUG_ENV = "CKPT_DEBUG"
# typer vendors Click; its exception base is reachable from the public BadParameter.
_CLICK_EXCEPTION: type[BaseException] = next(
    cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException"
)
_USAGE_ERROR: type[Exception] = next(cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "UsageError")


def _wants_traceback(ctx: Any) -> bool:
    return bool(ctx.params.get("debug")) or os.environ.get(DEBUG_ENV, "") not in ("", "0")


# Each command's module is imported only when that command runs (or its help is shown), so
# `ckpt migrate-config` in a pre-commit hook does not pay for the database commands' imports. The
# summary is what `ckpt --help` lists; the module's docstring is the command's full help.
COMMANDS: dict[str, tuple[str, str]] = {
    "migrate-config": (
        "deerflow_ckpt.cli.migrate_config",
        "Move the deprecated snapshot-frequency key under database.checkpoint_delta.",
    ),
    "lint-config": (
        "deerflow_ckpt.cli.lint_config",
        "Check database: sections as DeerFlow reads them, and that configs sharing a database agree.",
    ),
    "verify-shape": (
        "deerflow_ckpt.cli.verify_shape",
        "Scan a checkpoint database, read-only, for storage-shape violations.",
    ),
    "inspect": (
        "deerflow_ckpt.cli.inspect",
        "Snapshot intervals, cadence, replay depth and what-if K, per thread or for the whole store.",
    ),
    "convert": (
        "deerflow_ckpt.cli.convert",
        "Copy a checkpoint store into full or delta mode, every read kept the same.",
    ),
    "plan": (
        "deerflow_ckpt.cli.plan",
        "Plan a delta-safe retention: what a deletion keeps, frees and would break, as a script you review.",
    ),
    "config": (
        "deerflow_ckpt.cli.show_config",
        "Print the settings a project's pyproject.toml [tool.ckpt] or .ckpt.toml gives, and where each comes from.",
    ),
}
# Global options operators also write after the command (`ckpt verify-shape --isolated`): moved before it.
_GLOBAL_FLAGS = ("--debug", "--isolated")
_GLOBAL_VALUED = ("--config-file",)


def _coerced_directly(params: list[Any]) -> list[Any]:
    """`params` coerced without pydantic where typer's own functions can (cli/params.py), the help and
    completion options included, which typer adds as a command parses."""
    if install_direct_coercion is not None:
        install_direct_coercion(params)
    return params


def top_level_name(ctx: Any) -> str | None:
    """The command under `ckpt` that `ctx` runs (`inspect` for `ckpt inspect thread`), None for `ckpt` itself."""
    names = []
    while ctx is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return names[-2] if len(names) > 1 else None


def _format_exit_codes(ctx: Any, formatter: Any) -> None:
    """--help's last section: what each exit code means for this command (exitcodes.py, the one table)."""
    with formatter.section("Exit codes"):
        formatter.write_dl(exit_statuses(top_level_name(ctx)))


class _Command(TyperCommand):
    __slots__ = ()  # each command's class is swapped for this one: the layout must stay TyperCommand's

    def get_params(self, ctx: Any) -> list[Any]:
        return _coerced_directly(super().get_params(ctx))

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        super().format_epilog(ctx, formatter)
        _format_exit_codes(ctx, formatter)


class _Group(TyperGroup):
    __slots__ = ()

    def get_params(self, ctx: Any) -> list[Any]:
        return _coerced_directly(super().get_params(ctx))

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        super().format_epilog(ctx, formatter)
        _format_exit_codes(ctx, formatter)


class _Argument(TyperArgument):
    """An argument listed in --help under its metavar alone."""

    def display_type_rich(self, ctx: Any) -> str | None:
        # typer appends the Python type even to an argument with a metavar ("PATH <list[str]>").
        return None if self.metavar is not None else super().display_type_rich(ctx)


def _helpful(command: Command) -> Command:
    """`command` and its subcommands with every argument shown as its metavar (no Python type beside it),
    each subcommand listed under its help's whole first paragraph (click cuts it at 45 characters), and
    option values coerced without pydantic where typer's own functions can (_coerced_directly)."""
    if type(command) is TyperCommand:
        command.__class__ = _Command
    elif type(command) is TyperGroup:
        command.__class__ = _Group
    for param in command.params:
        if type(param) is TyperArgument:
            param.__class__ = _Argument
    for sub in getattr(command, "commands", {}).values():
        if sub.short_help is None and sub.help:
            sub.short_help = " ".join(sub.help.split("\n\n", 1)[0].split())
        _helpful(sub)
    return command


def load_command(name: str) -> Command | None:
    """The click command `name`, built from its module on first use; None for an unknown name."""
    if name not in COMMANDS:
        return None
    module_name, summary = COMMANDS[name]
    module = importlib.import_module(module_name)
    holder = typer.Typer(rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]})
    module.register(holder)
    command = typer.main.get_group(holder).commands[name]
    command.short_help = summary
    return _helpful(command)


class _CkptGroup(_Group):
    """Every exception a command lets escape ends here: one redacted line on stderr, exit 2."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands and (command := load_command(cmd_name)) is not None:
            self.commands[cmd_name] = command
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # The listing comes from the table, so `ckpt --help` imports no command module.
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in COMMANDS.items()])

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except _CLICK_EXCEPTION as exc:
            # A usage error in ckpt's own options (`ckpt --nosuch`, `ckpt postgresql://...`): click prints it.
            _mask_usage_error(exc)
            raise

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # A DSN typed anywhere on the command line (a --db, or by mistake any other option or argument) is
        # remembered first, so whatever quotes it later, even rewritten as a path, shows its password masked.
        for arg in args:
            remember_dsn(arg)
        # --debug, --isolated and --config-file are global, but operators add them at the end of a command
        # line: take them from anywhere before a "--" and hand them to the group.
        result: list[str] = super().parse_args(ctx, _globals_first(args))
        return result

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        try:
            name, command, rest = super().resolve_command(ctx, args)
        except _USAGE_ERROR as exc:
            # typer suggests from the commands already built, none here (they load on first use): the table's.
            if args and getattr(exc, "message", "").startswith("No such command"):
                exc.message = f"No such command {redact(args[0])!r}.{_suggestion(args[0])}"  # type: ignore[attr-defined]
            raise
        if name is not None and command is not None:
            # The project file's values become the command's option defaults: the command line still wins.
            from deerflow_ckpt.cli import project_options

            project = project_options.load_into(ctx, ctx.params.get("config_file"), bool(ctx.params.get("isolated")))
            ctx.default_map = {name: project_options.default_map(command, project, name, ctx)}
        return name, command, rest

    def invoke(self, ctx: Any) -> Any:
        # -q is per run: a command without it, or the next run in the same process, is not quiet.
        set_quiet(False)
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except _CLICK_EXCEPTION as exc:
            # A usage error in a command's options or arguments: click prints it, after this masks it.
            _mask_usage_error(exc)
            raise
        except Interrupted as stopped:
            raise typer.Exit(signalled(stopped.signum)) from None
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
        finally:
            set_quiet(False)
        # Messages quote what a database or a config holds: escaped, so no error writes a control character,
        # and a traceback's lines stay lines while a newline inside a quoted path cannot start one.
        if trace:
            for line in redact(trace).rstrip("\n").split("\n"):
                console_message(line)
        console_message(redact(one_line(message)))
        raise typer.Exit(ExitCode.ERROR)


def _mask_usage_error(exc: BaseException) -> None:
    """Every password in the usage error `exc` masked where click renders it: its message quotes what was typed
    ("'postgresql://u:pw@h/db' is not a valid integer."), and click prints it itself, never through redact."""
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        exc.message = redact(message)  # type: ignore[attr-defined]
    render = exc.format_message  # type: ignore[attr-defined]
    # format_message adds what the message leaves out (a refused file's name, the options that exist).
    exc.format_message = lambda: redact(render())  # type: ignore[attr-defined]


def _suggestion(typo: str) -> str:
    """The "Did you mean 'inspect'?" after a misspelled command, as typer words it for subcommands; a
    subcommand's name given alone (`ckpt retention`) is suggested with its group. Empty when nothing is close."""
    from difflib import get_close_matches  # only on the way to an error

    # A name's first word (`ckpt lint`, `ckpt verify`) is too short for difflib to call it close.
    matches = [name for name in COMMANDS if name.split("-")[0] == typo] or get_close_matches(typo, list(COMMANDS))
    if not matches:
        # Only now are the groups' modules imported, to read their subcommands' names.
        nested = {sub: f"{name} {sub}" for name in COMMANDS for sub in getattr(load_command(name), "commands", {})}
        matches = [nested[sub] for sub in get_close_matches(typo, list(nested))]
    return f" Did you mean {', '.join(repr(match) for match in matches)}?" if matches else ""


def _globals_first(args: list[str]) -> list[str]:
    """`args` with the global options found before a "--" moved to the front, each with its value."""
    end = args.index("--") if "--" in args else len(args)
    moved: list[str] = []
    kept: list[str] = []
    index = 0
    while index < end:
        arg = args[index]
        if arg in _GLOBAL_FLAGS or arg.startswith(tuple(f"{name}=" for name in _GLOBAL_VALUED)):
            moved.append(arg)
        elif arg in _GLOBAL_VALUED and index + 1 < end:
            moved += args[index : index + 2]
            index += 1
        else:
            kept.append(arg)
        index += 1
    return [*moved, *kept, *args[end:]] if moved else args


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
        False, "-V", "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
    config_file: Path | None = typer.Option(
        None,
        "--config-file",
        metavar="FILE",
        help="Read ckpt's settings from this TOML file (a pyproject.toml's [tool.ckpt], or a .ckpt.toml) "
        "instead of the nearest one from the working directory up.",
        show_default=False,
    ),
    isolated: bool = typer.Option(
        False, "--isolated", help="Read no project config file (pyproject.toml, .ckpt.toml)."
    ),
) -> None:
    """The operator's command line for DeerFlow checkpoint storage (--help lists what each exit code means)."""
    # Before ckpt opens anything: -o /dev/fd/N may name only a descriptor its caller handed it.
    remember_inherited_descriptors()


def main() -> None:
    """Console-script entry point."""
    app(prog_name="ckpt")
