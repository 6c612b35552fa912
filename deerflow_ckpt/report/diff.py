"""Unified diffs of config text, with the marker GNU diff prints for a missing final newline."""

from __future__ import annotations

import difflib
import re

from deerflow_ckpt.config.textspans import split_lines

NO_NEWLINE = "\\ No newline at end of file\n"
# GitHub's runner ends a log line at a lone CR too, and runs a line whose text after its blanks starts with
# '::' (a context line of a config is " " + its text): in a diff, both are shown as escapes.
_LONE_CR = re.compile(r"\r(?!\n$)")
_COMMAND_START = re.compile(r"^(\s*)::")


def _inert(line: str) -> str:
    """A diff line no CI log splits or runs; any other line is left byte for byte, so the patch still applies."""
    return _COMMAND_START.sub(r"\1:\\x3a", _LONE_CR.sub(r"\\x0d", line), count=1)


def unified_diff(before: str, after: str, name: str) -> str:
    """A `diff -u` style patch turning `before` into `after` ("" when they are equal)."""
    lines: list[str] = []
    for line in difflib.unified_diff(split_lines(before), split_lines(after), name, name):
        if line.endswith("\n"):
            lines.append(_inert(line))
        else:
            lines.extend((_inert(line) + "\n", NO_NEWLINE))
    return "".join(lines)


_HEADER, _HUNK, _ADDED, _REMOVED, _RESET = "\x1b[1m", "\x1b[36m", "\x1b[32m", "\x1b[31m", "\x1b[0m"


def _colour(body: str) -> str | None:
    if body.startswith("@@"):
        return _HUNK
    if body.startswith("+"):
        return _ADDED
    if body.startswith("-"):
        return _REMOVED
    return None


def colorize_diff(patch: str) -> str:
    """ANSI colours per diff line, as git colours them; line endings stay outside the escape codes."""
    lines = patch.splitlines(keepends=True)
    out: list[str] = []
    for index, line in enumerate(lines):
        body = line.rstrip("\r\n")
        # A removed line may itself start with "--": only a "---" followed by "+++" is a file header.
        header = (body.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ ")) or (
            body.startswith("+++ ") and index > 0 and lines[index - 1].startswith("--- ")
        )
        colour = _HEADER if header else _colour(body)
        out.append(line if colour is None else f"{colour}{body}{_RESET}{line[len(body) :]}")
    return "".join(out)
