"""Lines and splices over the original text: the migration edits text, it never re-emits YAML."""

from __future__ import annotations

from collections.abc import Iterable

from deerflow_ckpt.dataclass import dataclass


@dataclass(frozen=True)
class Line:
    """One physical line, split on "\\n" only (str.splitlines would also split on \\x0c, U+2028...)."""

    start: int
    # Index just past the content, before "\r\n" or "\n".
    content_end: int
    # Index of the next line's first character (len(text) on the last line).
    next_start: int


def line_at(text: str, index: int) -> Line:
    """The line that holds `index` (an index equal to len(text) belongs to the last line)."""
    start = text.rfind("\n", 0, index) + 1
    newline = text.find("\n", index)
    if newline < 0:
        return Line(start, len(text), len(text))
    content_end = newline - 1 if newline > start and text[newline - 1] == "\r" else newline
    return Line(start, content_end, newline + 1)


def terminator(text: str, line: Line) -> str:
    """The line's own ending: "\\r\\n", "\\n", or "" on a last line without one."""
    return text[line.content_end : line.next_start]


def default_newline(text: str) -> str:
    """The ending the file uses first, for lines created where no neighbour's ending applies."""
    newline = text.find("\n")
    if newline > 0 and text[newline - 1] == "\r":
        return "\r\n"
    return "\n"


def split_lines(text: str) -> list[str]:
    """Lines with their endings kept, split on "\\n" only."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] with `replacement` (start == end inserts)."""

    start: int
    end: int
    replacement: str


class OverlappingEdits(ValueError):
    """Two planned edits touch the same characters: a planning bug, never written."""


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Splice non-overlapping edits into `text`; insertions at one point keep their planned order."""
    ordered = sorted(edits, key=lambda edit: (edit.start, edit.end))
    pieces: list[str] = []
    cursor = 0
    for edit in ordered:
        if edit.start < cursor:
            raise OverlappingEdits(f"edit at {edit.start} overlaps the previous one ending at {cursor}")
        pieces.append(text[cursor : edit.start])
        pieces.append(edit.replacement)
        cursor = edit.end
    pieces.append(text[cursor:])
    return "".join(pieces)
