"""SQLite text that is not UTF-8: read without failing, kept apart from every other key, named again exactly.

A TEXT column can hold any bytes (a client's `CAST(x'..' AS TEXT)`, a C program's bind). Python's sqlite3
refuses to decode such a value, and one row would fail a whole scan. Read through `lossless_text`, its
undecodable bytes become lone surrogates (surrogateescape, U+DC80..U+DCFF): a str no UTF-8 text decodes to,
so it never equals another key, and `stored_bytes` gives back exactly the bytes SQLite holds. Reports show
those bytes as \\xNN (report/printable.py). Binding such a str fails in Python's sqlite3, so it is bound as its
bytes cast back to TEXT (`text_parameter`), or spelled as that cast of a hex literal in a list of keys
(`key_in`). Postgres text is always valid UTF-8: this is SQLite's alone.
"""

from __future__ import annotations

import json
from typing import Any


def lossless_text(data: bytes) -> str:
    """A connection's text_factory: SQLite text as str whatever its bytes, never an error."""
    return data.decode("utf-8", "surrogateescape")


def stored_bytes(text: str) -> bytes:
    """The bytes SQLite stores for `text` read by lossless_text (its UTF-8 where it was valid)."""
    return text.encode("utf-8", "surrogateescape")


def is_utf8(text: str) -> bool:
    """Whether `text` is valid UTF-8 text (so Python's sqlite3 binds it as it is)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_parameter(placeholder: str, value: Any) -> tuple[str, Any]:
    """The SQL for a bound key value and what to bind: a str that is not UTF-8 goes as its stored bytes
    cast back to TEXT (equal, under BINARY, to exactly that stored text); anything else as it is."""
    if type(value) is str and not is_utf8(value):
        return f"CAST({placeholder} AS TEXT)", stored_bytes(value)
    return placeholder, value


def key_in(column: str, placeholder: str, keys: list[Any]) -> tuple[str, Any]:
    """`column` among `keys` and what to bind: one JSON array (`json_each`, one parameter however many keys),
    and a key JSON cannot carry as stored (text that is not UTF-8, a BLOB) spelled as a literal of its stored
    bytes, hex only, so the SQL stays ASCII."""
    carried = [key for key in keys if not _spelled(key)]
    condition = f"{column} IN (SELECT value FROM json_each({placeholder}))"
    literals = [_literal(key) for key in keys if _spelled(key)]
    if literals:
        condition = f"({condition} OR {column} IN ({', '.join(literals)}))"
    return condition, json.dumps(carried)


def _spelled(key: Any) -> bool:
    return isinstance(key, bytes) or (type(key) is str and not is_utf8(key))


def _literal(key: str | bytes) -> str:
    if isinstance(key, bytes):
        return f"x'{key.hex()}'"
    return f"CAST(x'{stored_bytes(key).hex()}' AS TEXT)"
