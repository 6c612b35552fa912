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
