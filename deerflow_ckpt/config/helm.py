"""DeerFlow's Helm chart keeps config.yaml inside values.yaml, as the literal block under `config: |`.

The chart's ConfigMap mounts that block's text as /app/backend/config.yaml, so it is the config DeerFlow
reads. ckpt lints and migrates the block itself: in a literal block every line of the outer file is one
line of the config (its indentation removed), so findings keep the outer file's line numbers and an
edit re-indents only the lines it changes.
"""

from __future__ import annotations

import difflib
import re

import yaml

from deerflow_ckpt.config.textspans import default_newline, split_lines
from deerflow_ckpt.config.values import compose_documents, construct_values, same_value
from deerflow_ckpt.dataclass import dataclass

CONFIG_KEY = "config"
# A top-level `config:` whose value starts a literal block (a header like `|`, `|-` or `|2`).
_CONFIG_BLOCK = re.compile(r"(?m)^config:[ \t]*\|")
# A literal block's header: `|`, then an indentation indicator and a chomping indicator in either order.
_HEADER = re.compile(r"\|(?:([1-9])[-+]?|[-+]([1-9])?)?")
# Sections whose presence says the block is a DeerFlow config, not some other chart's string.
DEERFLOW_SECTIONS = frozenset({"database", "checkpointer", "config_version", "models", "sandbox"})


class HelmEditError(ValueError):
    """The edited block could not be put back so that values.yaml means what the edit says."""


@dataclass(frozen=True)
class EmbeddedConfig:
    """The config.yaml text of a Helm values file, and where its lines sit in the outer text."""

    text: str
    # 0-based index, in the outer file's lines, of the block's first line (the line after `config: |`).
    first_line: int
    # The spaces every content line of the block starts with.
    indent: int

    def outer_line(self, line: int | None) -> int | None:
        """The outer file's 1-based line for the config's 1-based line."""
        return None if line is None else line + self.first_line


def embedded_config(text: str) -> EmbeddedConfig | None:
    """The DeerFlow config under a top-level `config: |` literal block, or None when `text` is no such file."""
    if _CONFIG_BLOCK.search(text) is None:
        return None  # a config.yaml: no second parse
    try:
        documents = compose_documents(text)
    except (yaml.YAMLError, ValueError):
        return None
    if len(documents) != 1 or not isinstance(documents[0], yaml.MappingNode):
        return None
    # The last `config:` counts: PyYAML (and Helm's reading of values.yaml) keep the last of duplicate keys.
    pair = next(
        (
            pair
            for pair in reversed(documents[0].value)
            if isinstance(pair[0], yaml.ScalarNode) and pair[0].value == CONFIG_KEY
        ),
        None,
    )
    if pair is None or not isinstance(pair[1], yaml.ScalarNode) or pair[1].style != "|":
        return None
    inner = pair[1].value
    try:
        values = yaml.load(inner, Loader=yaml.BaseLoader) if inner.strip() else None
    except yaml.YAMLError:
        values = None
    if isinstance(values, dict) and not DEERFLOW_SECTIONS & set(values):
        return None
    first_line = int(pair[1].start_mark.line) + 1
    header = _HEADER.match(text, pair[1].start_mark.index)
    digit = header.group(1) or header.group(2) if header is not None else None
    if digit:
        indent = int(digit)  # an indentation indicator (`|2`): relative to the top level's column 0
    else:
        body = [line for line in split_lines(text)[first_line:] if line.strip()]
        indent = len(body[0]) - len(body[0].lstrip(" ")) if body else 0
    return EmbeddedConfig(inner, first_line, indent)


def splice(text: str, embedded: EmbeddedConfig, edited: str) -> str:
    """`text` with the block's lines replaced where `edited` differs from the block, re-indented."""
    outer = split_lines(text)
    newline = default_newline(text)
    old_lines = embedded.text.splitlines()
    new_lines = edited.splitlines()
    pad = " " * embedded.indent
    result: list[str] = outer[: embedded.first_line]
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        if tag == "equal":
            result.extend(outer[embedded.first_line + a_start : embedded.first_line + a_end])
        else:
            result.extend((pad + line if line else "") + newline for line in new_lines[b_start:b_end])
    result.extend(outer[embedded.first_line + len(old_lines) :])
    spliced = "".join(result)
    if not text.endswith(("\n", "\r")) and spliced.endswith(newline):
        spliced = spliced[: -len(newline)]  # the block ended the file without a line break: still none
    _verify(text, spliced, edited)
    return spliced


def _verify(original: str, spliced: str, edited: str) -> None:
    before, after = embedded_config(original), embedded_config(spliced)
    if after is None or after.text != edited:
        raise HelmEditError("the edited config block does not read back as the migrated config")
    old_values = construct_values(compose_documents(original)[0])
    new_values = construct_values(compose_documents(spliced)[0])
    if before is None or not isinstance(old_values, dict) or not isinstance(new_values, dict):
        raise HelmEditError("values.yaml no longer reads as a mapping")
    old_values.pop(CONFIG_KEY)
    new_values.pop(CONFIG_KEY)
    if not same_value(old_values, new_values):
        raise HelmEditError("the edit changed values outside the config block")
