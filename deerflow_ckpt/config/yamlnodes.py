"""Questions about composed YAML node trees that PyYAML does not answer directly.

Composed aliases are the anchored node itself (same object, same marks), so "where does this value
stand in the text" needs the key's position and a look at the characters after it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import yaml

from deerflow_ckpt.dataclass import dataclass

MERGE_TAG = "tag:yaml.org,2002:merge"
# An alias token: `*` then anything up to a blank or a flow indicator.
_ALIAS_AFTER_COLON = re.compile(r"[ \t]*:[ \t]*(?:\r?\n[ \t]*)?(\*[^\s,\[\]{}]+)")


def is_merge_key(key: yaml.Node) -> bool:
    return isinstance(key, yaml.ScalarNode) and key.tag == MERGE_TAG


def own_pairs(mapping: yaml.MappingNode) -> list[tuple[yaml.Node, yaml.Node]]:
    """The pairs written in this mapping itself, without `<<` merge keys."""
    return [(key, value) for key, value in mapping.value if not is_merge_key(key)]


def find_own(mapping: yaml.MappingNode, name: str) -> tuple[yaml.Node, yaml.Node] | None:
    """The last own pair whose key is the plain string `name` (PyYAML keeps the last duplicate)."""
    found = None
    for key, value in own_pairs(mapping):
        if isinstance(key, yaml.ScalarNode) and key.tag == "tag:yaml.org,2002:str" and key.value == name:
            found = (key, value)
    return found


def effective_pair(mapping: yaml.MappingNode, name: str) -> tuple[yaml.Node, yaml.Node] | None:
    """The pair whose value yaml.safe_load gives `name` in `mapping`: the last own pair, else the one a
    `<<` merge brings (PyYAML's flatten_mapping: a later `<<` over an earlier one, and the first mapping
    of a merged list over the ones after it)."""
    found = find_own(mapping, name)
    if found is not None:
        return found
    for key, value in reversed(mapping.value):
        if is_merge_key(key):
            sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
            for source in sources:
                if isinstance(source, yaml.MappingNode) and (merged := effective_pair(source, name)):
                    return merged
    return None


def is_alias_value(key: yaml.Node, value: yaml.Node) -> bool:
    """True when `value` was written as `*alias`: its marks point back at the anchor, before the key."""
    return value.start_mark.index < key.end_mark.index


def alias_span(text: str, key: yaml.Node) -> tuple[int, int] | None:
    """Where the `*alias` token after `key:` stands in the text, if it does."""
    match = _ALIAS_AFTER_COLON.match(text, key.end_mark.index)
    if match is None:
        return None
    return match.start(1), match.end(1)


def value_span(text: str, key: yaml.Node, value: yaml.Node) -> tuple[int, int]:
    """Start and end of the value's own text (the alias token for an alias, anchors and tags included)."""
    if is_alias_value(key, value):
        span = alias_span(text, key)
        if span is None:
            raise ValueError(f"cannot find the alias written after line {key.start_mark.line + 1}")
        return span
    return value.start_mark.index, content_end(text, value)


def content_end(text: str, node: yaml.Node) -> int:
    """Index just past the node's last written character.

    A block collection's end mark sits at the next token, possibly past comment lines that belong to
    the following key, so descend to the last value instead.
    """
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        key, value = node.value[-1]
        if is_alias_value(key, value):
            span = alias_span(text, key)
            return span[1] if span else int(key.end_mark.index)
        return max(content_end(text, value), int(key.end_mark.index))
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        last = node.value[-1]
        if last.start_mark.index >= node.start_mark.index:
            return content_end(text, last)
    return int(node.end_mark.index)


def walk(node: yaml.Node) -> Iterator[yaml.Node]:
    """Every node reachable from `node`, once per place it is used (an aliased node repeats)."""
    expanded: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if id(current) in expanded:
            continue
        expanded.add(id(current))
        if isinstance(current, yaml.MappingNode):
            for key, value in reversed(current.value):
                stack.extend((value, key))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(reversed(current.value))


def use_count(root: yaml.Node, node: yaml.Node) -> int:
    """How many places use `node`: more than one means an anchor with aliases."""
    return sum(1 for current in walk(root) if current is node)


def merged_key_names(mapping: yaml.MappingNode) -> set[str]:
    """Keys that reach `mapping` only through `<<` merge keys."""
    names: set[str] = set()
    for key, value in mapping.value:
        if not is_merge_key(key):
            continue
        sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
        for source in sources:
            if isinstance(source, yaml.MappingNode):
                names.update(str(k.value) for k, _ in own_pairs(source) if isinstance(k, yaml.ScalarNode))
                names.update(merged_key_names(source))
    return names


@dataclass(frozen=True)
class DuplicateKey:
    name: str
    # 1-based lines of every occurrence, in file order.
    lines: tuple[int, ...]


def duplicate_keys(root: yaml.Node) -> list[DuplicateKey]:
    """Keys written more than once in one mapping (PyYAML silently keeps the last)."""
    duplicates: list[DuplicateKey] = []
    seen: set[int] = set()
    for node in walk(root):
        if not isinstance(node, yaml.MappingNode) or id(node) in seen:
            continue
        seen.add(id(node))
        scalar_keys = [key for key, _ in own_pairs(node) if isinstance(key, yaml.ScalarNode)]
        counts = Counter((key.tag, key.value) for key in scalar_keys)
        for (tag, name), count in counts.items():
            if count > 1:
                lines = tuple(k.start_mark.line + 1 for k in scalar_keys if (k.tag, k.value) == (tag, name))
                duplicates.append(DuplicateKey(str(name), lines))
    return duplicates
