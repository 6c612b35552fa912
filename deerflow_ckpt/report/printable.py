"""Text from a database, a config or a path, made safe to show: on terminals, in CI logs, in Markdown, in a
spreadsheet.

A thread id is whatever a client sent, a directory name whatever its maker chose. Raw, an escape sequence
in it takes over the terminal, a newline followed by `::warning ...` becomes a GitHub Actions workflow
command in a CI log, and a CSV cell starting with `=` is a formula a spreadsheet runs.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import sys
import unicodedata
from collections.abc import Iterable, Sequence

# The Unicode categories a terminal acts on or does not show: controls (C0, C1, DEL), format characters (bidi
# overrides, marks and isolates, zero-width and invisible joiners, tags, interlinear annotation), lone
# surrogates (bytes that were not UTF-8, kept by surrogateescape, which no terminal can be written), private
# use, and the line and paragraph separators. Chosen by category, so a character the list forgot cannot slip by.
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
# Kept as they are where lines may stay lines (a workflow command's data escapes them itself, a table cell
# turns them into <br>; a JSON document's own newlines).
_LINE_BREAKS = r"\n\r"


@functools.cache
def _unsafe_class() -> str:
    """UNSAFE_CATEGORIES as the inside of a regex character class, from this Python's Unicode database (built
    once, and only when some text is not plainly printable: it takes about a quarter of a second)."""
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code)) in UNSAFE_CATEGORIES:
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "".join(rf"\U{low:08x}-\U{high:08x}" for low, high in ranges)


@functools.cache
def _unsafe(keep_lines: bool) -> re.Pattern[str]:
    """Every unsafe character and the backslash that starts our escapes; '::' (a workflow command) too unless
    lines are kept, where it cannot start one."""
    if keep_lines:
        return re.compile(rf"(?![{_LINE_BREAKS}])[\\{_unsafe_class()}]")
    return re.compile(rf"[\\{_unsafe_class()}]|::")


@functools.cache
def _unsafe_character() -> re.Pattern[str]:
    return re.compile(f"[{_unsafe_class()}]")


@functools.cache
def _unsafe_in_json() -> re.Pattern[str]:
    """What json.dumps(ensure_ascii=False) leaves raw that is unsafe (it escapes C0 itself)."""
    return re.compile(rf"(?![{_LINE_BREAKS}])[{_unsafe_class()}]")


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
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: str, keep_lines: bool = False) -> str:
    """`text` with every control or invisible character, and '::', written as a visible escape.

    `keep_lines` leaves line breaks (and '::') to a format that escapes them itself.
    """
    if text.isprintable() and "::" not in text and "\\" not in text:
        return text
    return _unsafe(keep_lines).sub(_escape, text)


def json_text(document: str) -> str:
    """A json.dumps(ensure_ascii=False) document with the characters a terminal acts on, or cannot be
    written, as JSON escapes (\\uXXXX): the same document to a parser, safe to print."""
    if document.replace("\n", " ").isprintable():
        return document
    return _unsafe_in_json().sub(_json_escape, document)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    # Beyond the BMP JSON spells a character as its UTF-16 surrogate pair.
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_dumps(document: object, indent: int | None = 2) -> str:
    """The one way a report's json is written: json.dumps(ensure_ascii=False) through json_text."""
    return json_text(json.dumps(document, indent=indent, ensure_ascii=False))


def shell_word(text: str) -> str:
    """`text` as one shell word that names exactly it and is safe to print: shlex.quote's, or where it holds an
    unsafe character bash's $'...' with that character's bytes as \\xNN (a backslash only doubled there)."""
    import shlex  # this module's rarer writers load their stdlib helpers when used, not at start-up

    unsafe = _unsafe_character()
    if not unsafe.search(text):
        return shlex.quote(text)
    spelled = []
    for character in text:
        if unsafe.match(character):
            spelled.append("".join(f"\\x{byte:02x}" for byte in os.fsencode(character)))
        else:
            spelled.append(character.replace("\\", "\\\\").replace("'", "\\'"))
    return "$'" + "".join(spelled) + "'"


def markdown_cell(text: str) -> str:
    """Safe inside a Markdown table cell of a step summary: escaped, no HTML, no cell or row breaks."""
    import html

    escaped = _MARKDOWN.sub(r"\\\1", html.escape(printable(text, keep_lines=True), quote=False))
    return escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def csv_cell(text: str) -> str:
    """A CSV cell no spreadsheet runs and no terminal acts on: escaped as printable(), then a value that
    starts a formula gets a leading `'` (one more `'` before a value that starts with one)."""
    shown = printable(text)
    return "'" + shown if shown.startswith(_FORMULA_START) else shown


def csv_text(rows: Iterable[Sequence[str | int | None]]) -> str:
    """The one CSV writer: every text cell through csv_cell, numbers as they are, one line per row."""
    import csv

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows([csv_cell(cell) if isinstance(cell, str) else cell for cell in row] for row in rows)
    return buffer.getvalue()
