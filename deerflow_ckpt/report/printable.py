"""Text from a database, a config or a path, made safe to show: on terminals, in CI logs, in Markdown, in a
spreadsheet.

A thread id is whatever a client sent, a directory name whatever its maker chose. Raw, an escape sequence
in it takes over the terminal, a newline followed by `::warning ...` becomes a GitHub Actions workflow
command in a CI log, and a CSV cell starting with `=` is a formula a spreadsheet runs.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Iterable, Sequence

# C0 and C1 controls, DEL, and the format characters that reorder or hide text (bidi overrides and
# isolates, zero-width joiners), lone surrogates (bytes that were not UTF-8, kept by surrogateescape, which
# no terminal can be written), the backslash that starts our escapes, and '::' (workflow commands).
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\\\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]|::")
# Where lines may stay lines (a workflow command's data escapes them itself, a table cell turns them
# into <br>) and '::' is harmless.
_UNSAFE_KEEPING_LINES = re.compile(
    r"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\\\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)
# What JSON leaves raw in a string (ensure_ascii=False) that a terminal acts on or cannot be written: C1
# controls, DEL, the invisible format characters, lone surrogates. json.dumps escapes C0 itself.
_UNSAFE_IN_JSON = re.compile(r"[\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
# surrogateescape keeps an undecodable byte b as U+DC00 + b.
_ESCAPED_BYTES = range(0xDC80, 0xDD00)
# Markdown that would change how a table cell reads: emphasis, code, links, cell breaks.
_MARKDOWN = re.compile(r"([`*_\[\]|~])")
# What makes a spreadsheet take a cell for a formula (OWASP's CSV injection list: = + - @ TAB CR), and
# the quote that marks a neutralised cell, so that a value which began with one stays told apart.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")


def _escape(match: re.Match[str]) -> str:
    found = match.group(0)
    if found == "::":
        return ":\\x3a"
    if found == "\\":
        return "\\\\"
    code = ord(found)
    if code in _ESCAPED_BYTES:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, keep_lines: bool = False) -> str:
    """`text` with every control or invisible character, and '::', written as a visible escape.

    `keep_lines` leaves line breaks (and '::') to a format that escapes them itself.
    """
    if text.isprintable() and "::" not in text and "\\" not in text:
        return text
    return (_UNSAFE_KEEPING_LINES if keep_lines else _UNSAFE).sub(_escape, text)


def json_text(document: str) -> str:
    """A json.dumps(ensure_ascii=False) document with the characters a terminal acts on, or cannot be
    written, as JSON escapes (\\uXXXX): the same document to a parser, safe to print."""
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group(0)):04x}", document)


def markdown_cell(text: str) -> str:
    """Safe inside a Markdown table cell of a step summary: escaped, no HTML, no cell or row breaks."""
    escaped = _MARKDOWN.sub(r"\\\1", html.escape(printable(text, keep_lines=True), quote=False))
    return escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def csv_cell(text: str) -> str:
    """A CSV cell no spreadsheet runs and no terminal acts on: escaped as printable(), then a value that
    starts a formula gets a leading `'` (one more `'` before a value that starts with one)."""
    shown = printable(text)
    return "'" + shown if shown.startswith(_FORMULA_START) else shown


def csv_text(rows: Iterable[Sequence[str | int | None]]) -> str:
    """The one CSV writer: every text cell through csv_cell, numbers as they are, one line per row."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows([csv_cell(cell) if isinstance(cell, str) else cell for cell in row] for row in rows)
    return buffer.getvalue()
