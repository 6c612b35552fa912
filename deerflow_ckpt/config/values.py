"""DeerFlow's reading of config values: PyYAML safe_load (YAML 1.1), then pydantic's lax rules.

Every semantic decision in ckpt goes through here, so `yes`, `010` or `1:30` mean what they mean to
DeerFlow, not what a YAML 1.2 parser would say.
"""

from __future__ import annotations

import copy
import functools
import math
import re
import sys
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

import yaml

from deerflow_ckpt.config import messages
from deerflow_ckpt.config.keys import CADENCE_KEY, DELTA_SECTION, LEGACY_CADENCE_KEY
from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.redact import remember_config_credentials

if TYPE_CHECKING:
    from pydantic import TypeAdapter

# Where a comment's text ends: the characters PyYAML's scanner stops a comment at.
_COMMENT_END = re.compile("[\0\r\n\x85\u2028\u2029]")
# What Reader.forward counts as a new line ("\r" only when no "\n" follows, which a search for "\n" covers).
_LINE_BREAK = re.compile("[\r\n\x85\u2028\u2029]")


class SafeLoader(yaml.SafeLoader):
    """PyYAML's pure-Python SafeLoader, the one DeerFlow's `yaml.safe_load` uses (libyaml's CSafeLoader
    disagrees with it: a TAB as separator, a U+FEFF mid-file, some flow scalars).

    Only moving over text that holds no line break is done in bulk instead of one character at a
    time (spaces and comments between tokens, a scalar's characters): the same stops and the same
    marks, about five times faster on DeerFlow's comment-heavy 128 KB example config. A differential
    test (tests/test_yaml_loader.py) pins values and marks to yaml.safe_load's.
    """

    def __init__(self, stream: str) -> None:
        # The bulk moves index the whole text: a str, never a chunked byte stream.
        if not isinstance(stream, str):
            raise TypeError("ckpt's SafeLoader reads a str")
        super().__init__(stream)

    def _skip_to(self, end: int) -> None:
        # Reader.forward over characters that are never line breaks: a U+FEFF takes no column.
        start = self.pointer
        self.pointer = end
        self.index += end - start
        self.column += end - start - self.buffer.count("\ufeff", start, end)

    def forward(self, length: int = 1) -> None:
        end = self.pointer + length
        if length > 1 and _LINE_BREAK.search(self.buffer, self.pointer, end) is None:
            self._skip_to(end)
        else:
            super().forward(length)

    def scan_to_next_token(self) -> None:
        if self.index == 0 and self.peek() == "\ufeff":
            self.forward()
        buffer = self.buffer
        while True:
            end = self.pointer
            while buffer[end] == " ":
                end += 1
            if buffer[end] == "#":
                # The text always ends in "\0" (Reader appends it), so the search always stops.
                found = _COMMENT_END.search(buffer, end)
                assert found is not None
                end = found.start()
            if end != self.pointer:
                self._skip_to(end)
            if not self.scan_line_break():  # type: ignore[no-untyped-call]
                return
            if not self.flow_level:
                self.allow_simple_key = True

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Resolve `<<` merges as PyYAML 6.0.3, DeerFlow's locked version, does: keys written in the mapping
        win, then a later `<<` over an earlier one, and in a `<<: [*a, *b]` list the first mapping over the
        ones after it. PyYAML 6.0.4 lets the last mapping of a list win, so the installed one cannot decide."""
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        own: list[tuple[yaml.Node, yaml.Node]] = []
        for key, value in node.value:
            if key.tag != "tag:yaml.org,2002:merge":
                if key.tag == "tag:yaml.org,2002:value":
                    key.tag = "tag:yaml.org,2002:str"
                own.append((key, value))
                continue
            if isinstance(value, yaml.MappingNode):
                sources = [value]
            elif isinstance(value, yaml.SequenceNode):
                for source in value.value:
                    if not isinstance(source, yaml.MappingNode):
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping",
                            node.start_mark,
                            f"expected a mapping for merging, but found {source.id}",
                            source.start_mark,
                        )
                # Later pairs win when the mapping is built: the first mapping listed goes last.
                sources = list(reversed(value.value))
            else:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"expected a mapping or list of mappings for merging, but found {value.id}",
                    value.start_mark,
                )
            for source in sources:
                self.flatten_mapping(source)
                merged.extend(source.value)
        node.value = merged + own


class OversizedInteger(yaml.constructor.ConstructorError):
    """A decimal integer of more digits than Python converts (sys.get_int_max_str_digits()): DeerFlow's
    yaml.safe_load fails on it with a ValueError; this says so once, with the line."""

    def __init__(self, digits: int, limit: int, mark: yaml.Mark | None) -> None:
        problem = f"an integer of {digits} digits, more than the {limit} Python reads"
        super().__init__(None, None, problem, mark)


def _construct_int(loader: SafeLoader, node: yaml.ScalarNode) -> int:
    try:
        value: int = yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:
        limit = sys.get_int_max_str_digits()
        longest = max((len(run) for run in re.findall(r"[0-9]+", str(node.value).replace("_", ""))), default=0)
        if limit and longest > limit:
            raise OversizedInteger(longest, limit, node.start_mark) from None
        raise
    return value


SafeLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


# Values a config may hold once its aliases are expanded: DeerFlow's example has about 2,000. A few
# hundred bytes of nested aliases ("billion laughs") expand past any bound; ckpt's walks would never end.
MAX_EXPANDED_VALUES = 100_000


class ExpansionError(ConfigError):
    """A document whose aliases expand past MAX_EXPANDED_VALUES (or into themselves)."""


def check_expansion(node: yaml.Node) -> None:
    """Count the values `node` expands to, each shared node once per use; raise past the bound."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()

    def size(current: yaml.Node) -> int:
        key = id(current)
        if key in sizes:
            return sizes[key]
        if key in visiting:
            raise ExpansionError("an alias refers to the node that contains it (a recursive document)")
        visiting.add(key)
        total = 1
        if isinstance(current, yaml.SequenceNode):
            total += sum(size(child) for child in current.value)
        elif isinstance(current, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in current.value)
        visiting.discard(key)
        if total > MAX_EXPANDED_VALUES:
            raise ExpansionError(
                f"its aliases expand to more than {MAX_EXPANDED_VALUES:,} values (an alias bomb?); no config.yaml "
                "needs that many"
            )
        sizes[key] = total
        return total

    size(node)


class NestingError(yaml.YAMLError):
    """Nesting deeper than a recursive parser follows: DeerFlow's yaml.safe_load fails on it too."""

    problem = "nesting deeper than PyYAML's parser follows (DeerFlow's yaml.safe_load fails on it too)"

    def __str__(self) -> str:
        return self.problem


def load_values(text: str) -> Any:
    """The Python value DeerFlow's `yaml.safe_load` gives for `text` (one document); ExpansionError for a
    document whose aliases expand past the bound, NestingError for one nested past Python's recursion."""
    loader = SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_expansion(node)
        return _remembered(loader.construct_document(node))
    except RecursionError:
        raise NestingError() from None
    finally:
        loader.dispose()


def _remembered(data: Any) -> Any:
    # Whatever ckpt prints after reading a config (a diff of its lines, a message) has its credentials masked.
    remember_config_credentials(data)
    return data


# Keys PyYAML's constructor rewrites in the node tree as it builds values: `<<` merges, `=` values.
_REWRITTEN_KEY_TAGS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})


def _rewritten_by_construction(root: yaml.Node) -> bool:
    seen: set[int] = set()
    pending = [root]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            if any(key.tag in _REWRITTEN_KEY_TAGS for key, _ in node.value):
                return True
            pending.extend(child for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            pending.extend(node.value)
    return False


def construct_values(node: yaml.Node) -> Any:
    """The Python value of one document already composed by compose_documents (checked for expansion
    there), as yaml.safe_load would construct it: a config is scanned once, not once per question.

    The node tree is left as composed: a tree the constructor would rewrite is built from a copy.
    """
    loader = SafeLoader("")
    try:
        if _rewritten_by_construction(node):
            node = copy.deepcopy(node)
        return _remembered(loader.construct_document(node))
    except RecursionError:
        raise NestingError() from None
    finally:
        loader.dispose()


def compose_documents(text: str) -> list[yaml.Node]:
    """The node trees of every document in `text`, with start/end marks into `text`."""
    try:
        nodes = list(yaml.compose_all(text, Loader=SafeLoader))
        for node in nodes:
            check_expansion(node)
    except RecursionError:
        raise NestingError() from None
    return nodes


def yaml12_reading(written: str) -> tuple[bool, object]:
    """What a YAML 1.2 tool makes of a plain scalar (ruamel.yaml's safe loader; yq and editors' schema
    checks read YAML 1.2 too): (True, value), or (False, None) when it cannot read it alone."""
    # Imported on demand: only a value YAML 1.1 and 1.2 may read differently needs it.
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return True, YAML(typ="safe", pure=True).load(written)
    except (YAMLError, ValueError, TypeError):
        return False, None


def yaml12_disagreement(written: str, deerflows: object) -> str:
    """`; YAML 1.2 tools ... read it as X` when they read `written` otherwise than DeerFlow's PyYAML, else ''."""
    readable, value = yaml12_reading(written)
    if not readable or same_value(value, deerflows):
        return ""
    return (
        f"; YAML 1.2 tools (ruamel.yaml, yq, editors' schema checks) read {written} as {value!r}, so they show "
        "another value than DeerFlow uses"
    )


def kind_of(value: object) -> str:
    """What a config value is, for people: `a mapping`, `an integer`, `null`."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
    return names.get(type(value), "a mapping" if isinstance(value, dict) else f"a {type(value).__name__}")


@dataclass(frozen=True)
class CadenceReading:
    """How DeerFlow would read one snapshot-frequency value."""

    raw: object
    # The int DeerFlow would freeze, or None when it rejects the value or it is an unresolved $VAR.
    effective: int | None
    # The variable name when the value is a `$VAR` reference resolved at load time.
    env_reference: str | None = None
    # Why DeerFlow rejects the value, or misreads it (a boolean accepted as 1).
    problem: str | None = None
    # An integer past MAX_CADENCE: DeerFlow would take it, ckpt refuses to (see read_cadence).
    beyond_range: bool = False

    @property
    def acceptable(self) -> bool:
        """True when carrying the value keeps DeerFlow's behaviour and intent."""
        return self.problem is None


@functools.cache
def _positive_int_adapter() -> TypeAdapter[int]:
    # Imported on demand: pydantic costs ~0.2 s and most runs never validate a cadence.
    from typing import Annotated

    from pydantic import Field, TypeAdapter

    return TypeAdapter(Annotated[int, Field(ge=1)])


# No process counts this far: a larger integer (a long hex or sexagesimal scalar) can only be a typo, and
# Python refuses to print an integer of more than 4300 digits.
MAX_CADENCE = 2**63 - 1


def read_cadence(raw: object) -> CadenceReading:
    """Read a snapshot_frequency value exactly as DeerFlow's `int = Field(ge=1)` would."""
    if isinstance(raw, bool):
        if raw:
            return CadenceReading(
                raw,
                1,
                problem="is a boolean (YAML 1.1 reads true/yes/on as True), which DeerFlow "
                "silently accepts as cadence 1: a snapshot on every write",
            )
        return CadenceReading(
            raw,
            None,
            problem="is a boolean (YAML 1.1 reads false/no/off as False), which DeerFlow rejects (must be 1 or more)",
        )
    if raw is None:
        return CadenceReading(raw, None, problem="is null, which DeerFlow rejects (must be an integer)")
    if isinstance(raw, int) and raw > MAX_CADENCE:
        digits = int(raw.bit_length() * 0.30103) + 1
        return CadenceReading(
            raw,
            None,
            problem=f"is an integer of about {digits} digits, beyond any count a process reaches (it would never "
            "snapshot by cadence); write the integer you mean",
            beyond_range=True,
        )
    if isinstance(raw, str) and raw.startswith("$"):
        return CadenceReading(raw, None, env_reference=raw[1:])
    if isinstance(raw, float) and not math.isfinite(raw):
        return CadenceReading(raw, None, problem="is not a finite number, which DeerFlow rejects")
    if type(raw) is int and raw >= 1:
        # What pydantic answers for a positive int, without building its validator (~0.4 s at start-up).
        return CadenceReading(raw, raw)
    from pydantic import ValidationError

    try:
        value = _positive_int_adapter().validate_python(raw)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"]
        return CadenceReading(raw, None, problem=f"is rejected by DeerFlow: {reason}")
    return CadenceReading(raw, value)


class ShimBranch(Enum):
    """Which way DeerFlow's legacy-key shim goes for a `database:` mapping."""

    NO_LEGACY_KEY = "no_legacy_key"
    NESTED_WINS = "nested_wins"
    IGNORED = "ignored"
    CARRIED = "carried"


@dataclass(frozen=True)
class ShimOutcome:
    branch: ShimBranch
    # The database mapping as DeerFlow's model validator hands it on to pydantic.
    database: dict[Any, Any]
    # DeerFlow's warning, verbatim, or None when it logs nothing.
    warning: str | None


def apply_legacy_shim(database: Mapping[Any, Any]) -> ShimOutcome:
    """Mirror DatabaseConfig._migrate_legacy_snapshot_frequency on a copy of `database`."""
    data = dict(database)
    if LEGACY_CADENCE_KEY not in data:
        return ShimOutcome(ShimBranch.NO_LEGACY_KEY, data, None)
    legacy = data.pop(LEGACY_CADENCE_KEY)
    nested = data.get(DELTA_SECTION)
    if isinstance(nested, dict) and CADENCE_KEY in nested:
        return ShimOutcome(ShimBranch.NESTED_WINS, data, messages.BOTH_KEYS_SET)
    if nested is None:
        data[DELTA_SECTION] = {CADENCE_KEY: legacy}
    elif isinstance(nested, dict):
        data[DELTA_SECTION] = {**nested, CADENCE_KEY: legacy}
    else:
        return ShimOutcome(ShimBranch.IGNORED, data, messages.IGNORED_NON_MAPPING)
    return ShimOutcome(ShimBranch.CARRIED, data, messages.carried_forward(legacy))


def same_value(left: object, right: object) -> bool:
    """Deep equality that also tells True from 1 and 1.0 from 1, and lets NaN equal NaN."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        assert isinstance(right, dict)
        return left.keys() == right.keys() and all(same_value(left[k], right[k]) for k in left)
    if isinstance(left, list):
        assert isinstance(right, list)
        return len(left) == len(right) and all(same_value(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    return left == right
