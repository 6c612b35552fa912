"""A `.env` file read exactly as python-dotenv 1.2.2 (the version DeerFlow's `backend/uv.lock` pins) reads it
for DeerFlow's `load_dotenv()`, whatever python-dotenv is installed here (ckpt does not depend on it).

Restated from python-dotenv v1.2.2 (theskumar/python-dotenv, tag v1.2.2), file by file:
- `src/dotenv/main.py` `DotEnv._get_stream` (lines 60-73) and `load_dotenv` (383-428): the file is opened in
  text mode as UTF-8, so line endings are translated (universal newlines) and a byte-order mark is *kept*: the
  first name of a `.env` saved with a BOM is `\\ufeffNAME`, not `NAME` (later releases, 1.2.4 measured,
  strip it; nothing here does). `PYTHON_DOTENV_DISABLED` (`_load_dotenv_disabled`, lines 22-29) is casefolded,
  not stripped.
- `src/dotenv/parser.py` (whole file, 182 lines): the statement grammar, one binding at a time; a statement it
  cannot parse is skipped to the end of its line and logged by line number.
- `src/dotenv/main.py` `resolve_variables` (lines 289-311) and `src/dotenv/variables.py` (whole file):
  `${NAME}` and `${NAME:-default}` are interpolated with the environment winning over earlier lines
  (`override=False`), and a name the file binds without `=` resolves to "".
- `src/dotenv/main.py` `DotEnv.set_as_environment_variables` (lines 97-110): a name already in the
  environment (even empty) is left alone; a name without a value is not set.
`tests/test_dotenv_file.py` holds this module to python-dotenv 1.2.2 itself (the dev extra pins it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from deerflow_ckpt.dataclass import dataclass

# load_dotenv() does nothing when this is one of the values below (casefolded, not stripped).
DISABLED_ENV = "PYTHON_DOTENV_DISABLED"
DISABLED_VALUES = frozenset({"1", "true", "t", "yes", "y"})
BYTE_ORDER_MARK = "\ufeff"

# The grammar, as parser.py's regular expressions define it. "Blank" is whitespace other than a line break.
_ANY_WHITESPACE = re.compile(r"\s*")
_BLANKS = re.compile(r"[^\S\r\n]*")
_EXPORT = re.compile(r"(?:export[^\S\r\n]+)?")
_QUOTED_NAME = re.compile(r"'([^']+)'")
_BARE_NAME = re.compile(r"([^=\#\s]+)")
_EQUALS = re.compile(r"=[^\S\r\n]*")
_SINGLE_QUOTED = re.compile(r"'((?:\\'|[^'])*)'")
_DOUBLE_QUOTED = re.compile(r'"((?:\\"|[^"])*)"')
_BARE_VALUE = re.compile(r"[^\r\n]*")
_INLINE_COMMENT = re.compile(r"\s+#.*")
_COMMENT = re.compile(r"(?:[^\S\r\n]*#[^\r\n]*)?")
_LINE_END = re.compile(r"[^\S\r\n]*(?:\r\n|\n|\r|$)")
_REST_OF_LINE = re.compile(r"[^\r\n]*(?:\r|\n|\r\n)?")
_LINE_BREAK = re.compile(r"\r\n|\n|\r")
# The escapes each kind of quote decodes (Python's unicode-escape of each pair).
_DOUBLE_ESCAPES = re.compile(r"\\[\\'\"abfnrtv]")
_SINGLE_ESCAPES = re.compile(r"\\[\\']")
_ESCAPED = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPED["v"] = "\v"
_REFERENCE = re.compile(r"\$\{(?P<name>[^\}:]*)(?::-(?P<default>[^\}]*))?\}")


class _Unparsable(Exception):
    """A statement python-dotenv skips (and logs) instead of binding."""


@dataclass(frozen=True)
class DotenvFile:
    # Every binding in file order, repeats included (each is interpolated as it comes); None: `NAME` without `=`.
    bindings: tuple[tuple[str, str | None], ...]
    # Lines of statements python-dotenv could not parse ("could not parse statement starting at line N").
    unparsable_lines: tuple[int, ...]


def is_disabled(environ: Mapping[str, str]) -> bool:
    """PYTHON_DOTENV_DISABLED turns load_dotenv() off."""
    return environ.get(DISABLED_ENV, "").casefold() in DISABLED_VALUES


def _match(pattern: re.Pattern[str], text: str, position: int) -> re.Match[str]:
    found = pattern.match(text, position)
    if found is None:
        raise _Unparsable
    return found


def _unescape(pattern: re.Pattern[str], text: str) -> str:
    return pattern.sub(lambda escape: _ESCAPED[escape.group(0)[1]], text)


def _value(text: str, position: int) -> tuple[str, int]:
    """The value after `=`: quoted (escapes decoded, line breaks allowed), or bare up to the line's end."""
    first = text[position : position + 1]
    if first == "'":
        found = _match(_SINGLE_QUOTED, text, position)
        return _unescape(_SINGLE_ESCAPES, found.group(1)), found.end()
    if first == '"':
        found = _match(_DOUBLE_QUOTED, text, position)
        return _unescape(_DOUBLE_ESCAPES, found.group(1)), found.end()
    if first in ("", "\n", "\r"):
        return "", position
    found = _match(_BARE_VALUE, text, position)
    return _INLINE_COMMENT.sub("", found.group(0)).rstrip(), found.end()


def _statement(text: str, position: int) -> tuple[str | None, str | None, int]:
    """One statement from `position` (blank lines before it included): its name (None for a comment), its
    value (None without `=`) and where the next begins. Raises _Unparsable where python-dotenv gives up,
    with the position reached in `args`."""
    position = _ANY_WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
    if position >= len(text):
        return None, None, position
    reached = position
    try:
        position = _match(_EXPORT, text, position).end()
        reached = position
        name: str | None = None
        if text[position : position + 1] != "#":
            quoted = text[position : position + 1] == "'"
            found = _match(_QUOTED_NAME if quoted else _BARE_NAME, text, position)
            name, position = found.group(1), found.end()
        reached = position = _match(_BLANKS, text, position).end()
        value: str | None = None
        if text[position : position + 1] == "=":
            reached = position = _match(_EQUALS, text, position).end()
            value, position = _value(text, position)
            reached = position
        reached = position = _match(_COMMENT, text, position).end()
        position = _match(_LINE_END, text, position).end()
    except _Unparsable:
        raise _Unparsable(reached) from None
    return name, value, position


def parse(text: str) -> DotenvFile:
    """The statements of a `.env` text as python-dotenv 1.2.2's parser binds them (before interpolation)."""
    bindings: list[tuple[str, str | None]] = []
    unparsable: list[int] = []
    position = 0
    while position < len(text):
        start = position
        try:
            name, value, position = _statement(text, position)
        except _Unparsable as failure:
            # Skipped from where the parser stopped to the end of that line; logged at the statement's start.
            unparsable.append(1 + len(_LINE_BREAK.findall(text, 0, start)))
            position = _REST_OF_LINE.match(text, failure.args[0]).end()  # type: ignore[union-attr]
            continue
        if name is not None:
            bindings.append((name, value))
    return DotenvFile(tuple(bindings), tuple(unparsable))


def interpolate(bindings: tuple[tuple[str, str | None], ...], environ: Mapping[str, str]) -> dict[str, str | None]:
    """`${NAME}` / `${NAME:-default}` in each value, the environment winning over the lines before it."""
    resolved: dict[str, str | None] = {}
    for name, value in bindings:
        if value is not None:
            scope: dict[str, str | None] = {**resolved, **environ}

            def substitute(reference: re.Match[str], scope: Mapping[str, str | None] = scope) -> str:
                found = scope.get(reference["name"], reference["default"] or "")
                return found if found is not None else ""

            value = _REFERENCE.sub(substitute, value)
        resolved[name] = value
    return resolved


def read_text(path: Path) -> str:
    """The file as python-dotenv opens it: UTF-8 (a BOM kept as U+FEFF), line endings translated."""
    with open(path, encoding="utf-8") as stream:
        return stream.read()


def load(path: Path, environ: Mapping[str, str]) -> tuple[dict[str, str], DotenvFile]:
    """What load_dotenv() adds to `environ` from the file at `path` (names the environment has are left alone,
    names without a value are not set), and the parsed file. Raises OSError or UnicodeDecodeError as it does."""
    parsed = parse(read_text(path))
    values = interpolate(parsed.bindings, environ)
    return {name: value for name, value in values.items() if value is not None and name not in environ}, parsed
