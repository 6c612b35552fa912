"""Where a setting stands in a config's text, and how to show a value the way it was written.

Lines come from the nodes PyYAML composes from the same text DeerFlow loads, so a finding points at the
key that decides; a key that reaches its mapping only through a `<<` merge key falls back to the
nearest key written in the file itself.
"""

from __future__ import annotations

from typing import Any

import yaml

from deerflow_ckpt.config import yamlnodes
from deerflow_ckpt.config.lint_env import Unset
from deerflow_ckpt.config.values import SafeLoader, kind_of
from deerflow_ckpt.redact import is_credential_path, redact

SHOWN_WIDTH = 60


def dotted(path: tuple[object, ...]) -> str:
    return ".".join(str(part) for part in path)


def yaml_problem(exc: Exception, text: str) -> tuple[int | None, str]:
    """The 1-based line and the problem of a PyYAML parse, compose or construct error."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    position = getattr(exc, "position", None)
    if mark is not None and hasattr(mark, "line"):
        line: int | None = int(mark.line) + 1
    elif isinstance(position, int):
        line = text.count("\n", 0, position) + 1
    else:
        line = None
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc).splitlines()[0]
    return line, str(problem)


def document_lines(text: str) -> list[int]:
    """1-based line where each document starts (its `---` when one is written)."""
    events = yaml.parse(text, Loader=SafeLoader)
    return [int(e.start_mark.line) + 1 for e in events if isinstance(e, yaml.DocumentStartEvent) and e.start_mark]


class ConfigSource:
    def __init__(self, text: str, root: yaml.Node | None) -> None:
        self.text = text
        self.root = root

    def pair(self, path: tuple[Any, ...]) -> tuple[yaml.Node, yaml.Node] | None:
        """The key and value nodes written for `path`, or None when any step is not written as such."""
        node, found = self.root, None
        for name in path:
            if isinstance(node, yaml.SequenceNode) and isinstance(name, int) and 0 <= name < len(node.value):
                # A list item ($VARs in DeerFlow's models: list): the item stands for its own key.
                found = (node.value[name], node.value[name])
            elif isinstance(node, yaml.MappingNode) and isinstance(name, str):
                found = yamlnodes.find_own(node, name)
            else:
                return None
            if found is None:
                return None
            node = found[1]
        return found

    def line(self, *path: Any) -> int | None:
        """The line of the deepest key of `path` written in the file itself."""
        for depth in range(len(path), 0, -1):
            found = self.pair(path[:depth])
            if found is not None:
                return int(found[0].start_mark.line) + 1
        return None

    def shown(self, path: tuple[Any, ...], value: object) -> str:
        """The value as written (with what a `$VAR` resolves to), short, on one line, never a password."""
        found = self.pair(path)
        if found is not None and isinstance(found[1], yaml.ScalarNode):
            start, end = yamlnodes.value_span(self.text, *found)
            written = " ".join(self.text[start:end].split()) or "(empty)"
        elif is_credential_path(path) and not isinstance(value, str):
            written = f"(a {type(value).__name__}, not shown: it may hold a password)"
        elif isinstance(value, int) and value.bit_length() > 64:
            written = "(a very large integer)"  # repr() refuses past 4300 digits
        else:
            written = repr(value)
        if written.startswith("$") and not isinstance(value, Unset) and not is_credential_path(path):
            written += f" (= {value!r})"
        # Masked before it is shortened: a cut before the '@' would hide the password from redact.
        written = redact(written)
        if len(written) > SHOWN_WIDTH:
            written = written[: SHOWN_WIDTH - 3] + "..."
        return written

    def described(self, path: tuple[Any, ...], value: object) -> str:
        """`a string (abc)`, `null (~)`, or just `null` when nothing is written."""
        shown = self.shown(path, value)
        return kind_of(value) if shown == "(empty)" else f"{kind_of(value)} ({shown})"
