"""Unified diffs of config text, with the marker GNU diff prints for a missing final newline."""

from __future__ import annotations

import difflib

from deerflow_ckpt.config.textspans import split_lines

NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(before: str, after: str, name: str) -> str:
    """A `diff -u` style patch turning `before` into `after` ("" when they are equal)."""
    lines: list[str] = []
    for line in difflib.unified_diff(split_lines(before), split_lines(after), name, name):
        if line.endswith("\n"):
            lines.append(line)
        else:
            lines.extend((line + "\n", NO_NEWLINE))
    return "".join(lines)


_DIFF_COLOURS = (("+++", "\x1b[1m"), ("---", "\x1b[1m"), ("@@", "\x1b[36m"), ("+", "\x1b[32m"), ("-", "\x1b[31m"))
_RESET = "\x1b[0m"


def colorize_diff(patch: str) -> str:
    """ANSI colours per diff line, as git colours them; line endings stay outside the escape codes."""
    out: list[str] = []
    for line in patch.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        colour = next((code for prefix, code in _DIFF_COLOURS if body.startswith(prefix)), None)
        out.append(line if colour is None else f"{colour}{body}{_RESET}{line[len(body):]}")
    return "".join(out)
