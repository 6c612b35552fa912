"""Man pages for `ckpt`, written from the Click tree typer builds: `python -m deerflow_ckpt.manpages [--check] DIR`.

Writes ckpt.1 and one page per leaf command (ckpt-verify-shape.1, ckpt-inspect-thread.1, ...). The CLI
never imports this module, so `ckpt --help` does not pay for it. click-man cannot be used: it filters
with isinstance(x, click.Option), which typer's vendored Click objects are not, and drops every option.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
import typer.main
from typer.core import TyperArgument, TyperGroup, TyperOption

from deerflow_ckpt import __version__
from deerflow_ckpt.cli.app import DEBUG_ENV, app, top_level_name
from deerflow_ckpt.config.discovery import CONFIG_PATH_ENV, HOME_ENV, PROJECT_ROOT_ENV, SQLITE_FILE_NAME
from deerflow_ckpt.exitcodes import ExitCode, exit_statuses
from deerflow_ckpt.native import SWITCH_ENV as NATIVE_SWITCH_ENV

if TYPE_CHECKING:
    # typer vendors Click; its Context is what ctx.parent hands back.
    from typer._click.core import Command, Context

# A fixed date keeps the committed pages reproducible; bump it (or pass --date) when the pages change.
DEFAULT_DATE = datetime.date(2026, 12, 3)
COMPLETION_OPTIONS = ("install_completion", "show_completion")
ENVIRONMENT = (
    ("NO_COLOR", "A non-empty value turns colour off in text output (no-color.org); --color always wins over it."),
    (
        "FORCE_COLOR",
        "A non-empty value styles text output as for a terminal, even when piped (force-color.org); "
        "--color never wins over it.",
    ),
    (
        "GITHUB_STEP_SUMMARY",
        "With --format github, a markdown summary of every finding is appended to this file (set by GitHub Actions).",
    ),
    (DEBUG_ENV, "Any value but empty or 0 prints tracebacks for errors, like --debug."),
    (
        NATIVE_SWITCH_ENV,
        "0 reads and judges every row in Python, as if the C extension were not built (same findings, slower); "
        "--verbose says which ran.",
    ),
    (CONFIG_PATH_ENV, "The config.yaml to read when none is named on the command line."),
    (
        PROJECT_ROOT_ENV,
        "Where to look for config.yaml before DeerFlow's legacy backend/config.yaml; unset, a DeerFlow checkout's "
        "root (make dev exports it), else the working directory.",
    ),
    (
        HOME_ENV,
        f"docker compose's host directory for the gateway's backend/.deer-flow (a relative one against the "
        f"checkout's docker/): its data/{SQLITE_FILE_NAME} comes before the files left in the checkout.",
    ),
)
# typer detects the shell from the parent process; --show-completion ignores a shell named after it.
_COMPLETION = [
    "Completion works in bash, zsh, fish and PowerShell, for the shell \\fBckpt\\fR runs under.",
    "\\fBckpt \\-\\-install\\-completion\\fR writes the script and loads it from that shell's startup file;",
    "\\fBckpt \\-\\-show\\-completion\\fR prints it instead, to install by hand.",
    "For another shell, name it in \\fB_CKPT_COMPLETE\\fR:",
    ".PP",
    ".RS",
    ".nf",
    "\\fB_CKPT_COMPLETE=source_fish ckpt > ~/.config/fish/completions/ckpt.fish\\fR",
    ".fi",
    ".RE",
    ".PP",
    "with \\fBsource_bash\\fR, \\fBsource_zsh\\fR, \\fBsource_fish\\fR or \\fBsource_powershell\\fR.",
]
# Options, flags and minus signs start with a dash not glued to a word: "--fail-on", "-wal", "'-'".
_DASHED = re.compile(r"(?<![\w-])-[\w-]*")

Lines = list[str]


def _escape(text: str, *, literal: bool = False) -> str:
    """roff-safe text; `literal` makes every hyphen a minus (names, flags and metavars are typed as is)."""
    text = text.replace("\\", "\\e")
    text = text.replace("-", "\\-") if literal else _DASHED.sub(lambda m: m.group().replace("-", "\\-"), text)
    return "".join(c if c.isascii() else f"\\[u{ord(c):04X}]" for c in text)


def _line(text: str) -> str:
    # A text line starting with . or ' would be read as a request.
    return "\\&" + text if text.startswith((".", "'")) else text


def _paragraphs(help_text: str | None, separator: str) -> Lines:
    """Click help text as roff: blank lines split paragraphs, \\b keeps one verbatim, \\f ends the help."""
    blocks = [b for b in re.split(r"\n\s*\n", (help_text or "").split("\f", 1)[0].strip()) if b.strip()]
    out: Lines = []
    for index, block in enumerate(blocks):
        out += [separator] if index else []
        rows = block.splitlines()
        if rows[0].strip() == "\b":
            out += [".nf", *(_line(_escape(row)) for row in rows[1:]), ".fi"]
        else:
            out += [_line(_escape(row.strip())) for row in rows]
    return out


def _walk(command: Command, name: str, parent: Context | None = None) -> Iterator[Context]:
    """Every visible command's context, parents first, in the order `--help` lists them."""
    ctx = typer.Context(command, info_name=name, parent=parent, **command.context_settings)
    yield ctx
    if isinstance(command, TyperGroup):
        for sub in command.list_commands(ctx):
            child = command.get_command(ctx, sub)
            if child is not None and not child.hidden:
                yield from _walk(child, sub, ctx)


def _page(ctx: Context) -> str:
    return ctx.command_path.replace(" ", "-")


def _ref(ctx: Context) -> str:
    # \% keeps groff from hyphenating a page name across lines.
    return f"\\fB\\%{_escape(_page(ctx), literal=True)}\\fR(1)"


def _options(ctx: Context, *, keep_help: bool = True) -> list[TyperOption | TyperArgument]:
    """The visible parameters, in `--help` order; anything typer did not build stops the generator."""
    params: list[TyperOption | TyperArgument] = []
    for param in ctx.command.get_params(ctx):
        if not isinstance(param, TyperOption | TyperArgument):
            raise TypeError(f"{ctx.command_path}: {param!r} is not a typer parameter; teach manpages.py about it")
        params.append(param)
    return [p for p in params if not p.hidden and (keep_help or not set(p.opts) <= set(ctx.help_option_names))]


def _entry(param: TyperOption | TyperArgument, ctx: Context) -> Lines:
    """One .TP entry: flags and metavar (or the argument's name), help paragraphs, then typer's [default: ...]."""
    if isinstance(param, TyperArgument):
        name = param.display_name_raw + ("..." if param.metavar is None and param.nargs != 1 else "")
        tag = f"\\fI{_escape(name, literal=True)}\\fR"
    else:
        # Short flags first, as `--help` lists them (typer declares -h after --help).
        flags = sorted([*param.opts, *param.secondary_opts], key=lambda flag: flag.startswith("--"))
        tag = ", ".join(f"\\fB{_escape(flag, literal=True)}\\fR" for flag in flags)
        metavar = None if param.is_flag or param.count else param.display_type_rich(ctx)
        tag += f" \\fI{_escape(metavar, literal=True)}\\fR" if metavar else ""
    record = param.get_help_record(ctx)
    help_text = param.help or ""
    extra = record[1][len(help_text) :].strip() if record and record[1].startswith(help_text) else ""
    return [".TP", _line(tag), *_paragraphs(help_text, ".IP"), *([_line(_escape(extra))] if extra else [])]


def _header(ctx: Context, date: datetime.date, summary: str) -> Lines:
    title = _escape(_page(ctx).upper(), literal=True)
    return [
        '.\\" Generated by `python -m deerflow_ckpt.manpages man/` from the ckpt command tree; do not edit.',
        f'.TH {title} 1 "{date.isoformat()}" "ckpt {__version__}" "ckpt manual"',
        # Help text is full of identifiers (config.yaml, database.checkpoint_delta...): no hyphenation, no stretching.
        ".nh",
        ".ad l",
        ".SH NAME",
        f"{_escape(_page(ctx), literal=True)} \\- {_escape(summary.rstrip('.'))}",
        ".SH SYNOPSIS",
        _line(" ".join([f"\\fB{_escape(ctx.command_path, literal=True)}\\fR", *_usage(ctx)])),
    ]


def _usage(ctx: Context) -> Lines:
    return [_escape(piece) for piece in ctx.command.collect_usage_pieces(ctx)]


def _tail(ctx: Context, see_also: Sequence[str]) -> Lines:
    """EXIT STATUS as --help's "Exit codes" says it (exitcodes.py), then SEE ALSO."""
    rows = exit_statuses(top_level_name(ctx))
    # A man page's entries are sentences: capitalised, with a full stop.
    sentences = [(code, f"{meaning[0].upper()}{meaning[1:]}.") for code, meaning in rows]
    exits = [line for code, meaning in sentences for line in (".TP", f".B {_escape(code)}", _line(_escape(meaning)))]
    return [".SH EXIT STATUS", *exits, ".SH SEE ALSO", ",\n".join(see_also)]


def _summary(ctx: Context) -> str:
    return ctx.command.get_short_help_str(limit=10_000)


def command_page(ctx: Context, leaves: Sequence[Context], date: datetime.date) -> str:
    """The page of one leaf command; options of groups between ckpt and it get a subsection each."""
    out = [*_header(ctx, date, _summary(ctx)), ".SH DESCRIPTION", *_paragraphs(ctx.command.help, ".PP")]
    params = _options(ctx)
    arguments = [p for p in params if isinstance(p, TyperArgument)]
    if arguments:
        out += [".SH ARGUMENTS", *(line for p in arguments for line in _entry(p, ctx))]
    out += [".SH OPTIONS", *(line for p in params if isinstance(p, TyperOption) for line in _entry(p, ctx))]
    group = ctx.parent
    while group is not None and group.parent is not None:
        inherited = _options(group, keep_help=False)
        if inherited:
            out += [f'.SS "Options of {_escape(group.command_path, literal=True)}"']
            out += [line for p in inherited for line in _entry(p, group)]
        group = group.parent
    siblings = [_ref(leaf) for leaf in leaves if leaf.parent is ctx.parent and leaf is not ctx]
    return "\n".join([*out, *_tail(ctx, ["\\fBckpt\\fR(1)", *siblings])]) + "\n"


def main_page(root: Context, commands: Sequence[Context], date: datetime.date) -> str:
    """ckpt.1: commands with their pages, global options, completion, exit status and environment."""
    out = [*_header(root, date, _summary(root)), ".SH DESCRIPTION", *_paragraphs(root.command.help, ".PP")]
    out += [".PP", "Global options go before the command: \\fBckpt \\-\\-debug\\fR \\fICOMMAND\\fR.", ".SH COMMANDS"]
    for ctx in commands:
        name = ctx.command_path.split(" ", 1)[1]
        page = [] if isinstance(ctx.command, TyperGroup) else [f"See {_ref(ctx)}."]
        out += [".TP", f"\\fB{_escape(name, literal=True)}\\fR", _line(_escape(_summary(ctx))), *page]
    params = _options(root)
    out += [
        ".SH GLOBAL OPTIONS",
        *(line for p in params if p.name not in COMPLETION_OPTIONS for line in _entry(p, root)),
    ]
    out += [".SH SHELL COMPLETION", *_COMPLETION]
    out += [line for p in params if p.name in COMPLETION_OPTIONS for line in _entry(p, root)]
    out += [".SH ENVIRONMENT", *(line for n, text in ENVIRONMENT for line in (".TP", f".B {n}", _escape(text)))]
    leaves = [_ref(ctx) for ctx in commands if not isinstance(ctx.command, TyperGroup)]
    return "\n".join([*out, *_tail(root, leaves)]) + "\n"


def generate(date: datetime.date = DEFAULT_DATE) -> dict[str, str]:
    """File name -> page text for the whole command tree as it is now."""
    root, *commands = _walk(typer.main.get_command(app), "ckpt")
    leaves = [ctx for ctx in commands if not isinstance(ctx.command, TyperGroup)]
    pages = {f"{_page(ctx)}.1": command_page(ctx, leaves, date) for ctx in leaves}
    return {"ckpt.1": main_page(root, commands, date), **pages}


def _ours(directory: Path) -> set[str]:
    # Only ckpt pages: DIR may hold other pages (e.g. a system man1), never ours to judge or delete.
    return {p.name for p in directory.glob("ckpt*.1") if p.name == "ckpt.1" or p.name.startswith("ckpt-")}


def check(directory: Path, pages: dict[str, str]) -> list[str]:
    """What differs between `directory` and `pages`: one line per changed, missing or extra file."""
    present = _ours(directory) if directory.is_dir() else set()
    problems = [f"{name}: missing" for name in sorted(pages.keys() - present)]
    problems += [f"{name}: extra" for name in sorted(present - pages.keys())]
    changed = (n for n in sorted(pages.keys() & present) if (directory / n).read_bytes() != pages[n].encode("ascii"))
    return problems + [f"{name}: differs" for name in changed]


def write(directory: Path, pages: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for stale in sorted(_ours(directory) - pages.keys()):
        (directory / stale).unlink()
    for name, text in pages.items():
        (directory / name).write_bytes(text.encode("ascii"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deerflow_ckpt.manpages", description="Write ckpt's man pages.")
    parser.add_argument("directory", type=Path, metavar="DIR", help="where the pages go (the repository's man/)")
    parser.add_argument("--date", type=datetime.date.fromisoformat, default=DEFAULT_DATE, help="YYYY-MM-DD for .TH")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if DIR is out of date")
    args = parser.parse_args(argv)
    pages = generate(args.date)
    if not args.check:
        write(args.directory, pages)
        return int(ExitCode.CLEAN)
    problems = check(args.directory, pages)
    for problem in problems:
        sys.stderr.write(f"{args.directory / problem}\n")
    if problems:
        sys.stderr.write(f"man pages out of date: run `python -m deerflow_ckpt.manpages {args.directory}`\n")
    return int(ExitCode.FINDINGS if problems else ExitCode.CLEAN)


if __name__ == "__main__":
    sys.exit(main())
