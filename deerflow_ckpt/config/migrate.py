"""Move `database.checkpoint_delta_snapshot_frequency` into `database.checkpoint_delta` by minimal edit.

Locate with a parser, splice the original text, re-parse the result and require that it means exactly
what DeerFlow's shim makes of the input. Anything the splice cannot do safely is refused, never guessed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import yaml

from deerflow_ckpt.config import messages, yamlnodes
from deerflow_ckpt.config.helm import EmbeddedConfig, HelmEditError, embedded_config, splice
from deerflow_ckpt.config.keys import (
    CADENCE_KEY,
    CHANNEL_MODE_KEY,
    DATABASE,
    DEFAULT_CHANNEL_MODE,
    DELTA_SECTION,
    LEGACY_CADENCE_KEY,
)
from deerflow_ckpt.config.lint_env import first_unset
from deerflow_ckpt.config.lint_source import ConfigSource, dotted
from deerflow_ckpt.config.textspans import (
    Edit,
    Line,
    OverlappingEdits,
    apply_edits,
    default_newline,
    line_at,
    terminator,
)
from deerflow_ckpt.config.upgrade import UPGRADER_DEFAULT
from deerflow_ckpt.config.values import (
    CadenceReading,
    ExpansionError,
    SafeLoader,
    ShimBranch,
    ShimOutcome,
    apply_legacy_shim,
    compose_documents,
    construct_values,
    read_cadence,
    same_value,
)
from deerflow_ckpt.dataclass import dataclass, field, replace
from deerflow_ckpt.rules import RuleCode, Severity

UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Diagnostic:
    severity: Severity
    # 1-based line in the file, or None when the message is about the whole file.
    line: int | None
    message: str
    # True for DeerFlow's own warning strings, printed verbatim.
    from_deerflow: bool = False
    # The registry rule (rules.py) CI formats file it under; the deprecated key by default.
    rule: RuleCode = RuleCode.CK501


class MigrationStatus(StrEnum):
    UNCHANGED = "unchanged"  # no legacy key: the file is left byte for byte
    MIGRATED = "migrated"  # the result differs from the input
    NEEDS_HAND_FIX = "needs_hand_fix"  # refused: only the operator can decide
    FAILED = "failed"  # unreadable input, or the edit could not be verified


@dataclass(frozen=True)
class MigrationResult:
    status: MigrationStatus
    original: bytes
    # The bytes to write: equal to `original` unless status is MIGRATED.
    migrated: bytes
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def changed(self) -> bool:
        return self.migrated != self.original


class _Refusal(Exception):
    def __init__(self, line: int | None, message: str, rule: RuleCode = RuleCode.CK501) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
        self.rule = rule


class _Unreadable(_Refusal):
    """Not UTF-8 or not YAML: DeerFlow could not load it either."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(line, message, RuleCode.CK500)


def _line_of(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


@dataclass
class _Plan:
    edits: list[Edit] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # What yaml.safe_load must return for the edited text.
    expected: Any = None

    def note(self, line: int | None, message: str, rule: RuleCode = RuleCode.CK501) -> None:
        self.diagnostics.append(Diagnostic(Severity.INFO, line, message, rule=rule))

    def warn(
        self, line: int | None, message: str, from_deerflow: bool = False, rule: RuleCode = RuleCode.CK501
    ) -> None:
        self.diagnostics.append(Diagnostic(Severity.WARNING, line, message, from_deerflow, rule))


@dataclass(frozen=True)
class _PairText:
    """Where one `key: value` pair stands in the text."""

    key_start: int
    key_end: int
    value_start: int
    value_end: int
    first_line: Line
    last_line: Line

    def key_text(self, text: str) -> str:
        return text[self.key_start : self.key_end]

    def value_text(self, text: str) -> str:
        return text[self.value_start : self.value_end]

    def separator(self, text: str) -> str:
        return text[self.key_end : self.value_start]

    def trailer(self, text: str) -> str:
        """What follows the value on its last line: blanks and an inline comment."""
        return text[self.value_end : self.last_line.content_end]


def _pair_text(text: str, key: yaml.Node, value: yaml.Node) -> _PairText:
    value_start, value_end = yamlnodes.value_span(text, key, value)
    if value_start == value_end:
        # An empty (null) value ends where the key does; keep the span on the key's line.
        colon = text.find(":", key.end_mark.index)
        if colon < 0 or text[key.end_mark.index : colon].strip():
            # `{key, other: 1}` or `? key`: the next colon found belongs to someone else.
            name = key.value if isinstance(key, yaml.ScalarNode) else "the key"
            raise ValueError(f"{name} on line {key.start_mark.line + 1} has no ':' of its own; edit it by hand")
        value_start = value_end = colon + 1
    end = max(value_end, key.end_mark.index)
    return _PairText(
        key.start_mark.index,
        key.end_mark.index,
        value_start,
        value_end,
        line_at(text, key.start_mark.index),
        line_at(text, end - 1 if end > 0 and text[end - 1] == "\n" else end),
    )


def _describe_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
    return names.get(type(value), f"a {type(value).__name__}")


def _quote_of(key_text: str) -> str:
    """Write new keys with the quote character the flat key used, if any."""
    return key_text[0] if key_text[:1] in ("'", '"') else ""


def _block_indent(text: str, node: yaml.Node) -> str:
    line = line_at(text, node.start_mark.index)
    indent = text[line.start : node.start_mark.index]
    if indent.strip(" "):
        raise _Refusal(_line_of(node), "a key shares its line with other content; edit it by hand")
    return indent


def _nesting_step(database_key: yaml.Node, database: yaml.MappingNode) -> int:
    """The file's own indentation step under `database:` (2 when nothing shows it)."""
    for key, value in yamlnodes.own_pairs(database):
        if yamlnodes.is_alias_value(key, value):
            continue
        if isinstance(value, yaml.MappingNode) and not value.flow_style:
            children = yamlnodes.own_pairs(value)
            if children:
                step = children[0][0].start_mark.column - key.start_mark.column
                if step > 0:
                    return int(step)
    pairs = yamlnodes.own_pairs(database)
    if pairs:
        step = pairs[0][0].start_mark.column - database_key.start_mark.column
        if step > 0:
            return int(step)
    return 2


def _yaml_error(exc: Exception) -> _Unreadable:
    """A parse or construction failure as one line, with the line number when PyYAML knows it."""
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return _Unreadable(line, f"not valid YAML: {problem}")


def _second_document_line(text: str) -> int | None:
    """The 1-based line where the second document starts: its `---`, not its first node, which may
    be missing (a `---` followed only by comments composes to an empty scalar at the end of the text)."""
    starts = 0
    for event in yaml.parse(text, Loader=SafeLoader):
        if isinstance(event, yaml.DocumentStartEvent):
            starts += 1
            if starts == 2:
                return int(event.start_mark.line) + 1 if event.start_mark is not None else None
    return None


class _Migrator:
    """Plans the edits for one file's text; raises _Refusal when it must not touch it."""

    def __init__(self, text: str, environ: Mapping[str, str]) -> None:
        self.text = text
        # DeerFlow's environment: a `$VAR` value is logged as it resolves there.
        self.environ = environ
        self.plan = _Plan()

    # -- locating -------------------------------------------------------------------------------

    def run(self) -> _Plan:
        text = self.text
        try:
            documents = compose_documents(text)
        except yaml.YAMLError as exc:
            raise _yaml_error(exc) from exc
        if len(documents) > 1:
            raise _Refusal(
                _second_document_line(text),
                f"holds {len(documents)} YAML documents; DeerFlow's yaml.safe_load accepts exactly one",
                RuleCode.CK500,
            )
        if not documents:
            return self.plan
        root = documents[0]
        try:
            data = construct_values(root)
        except (yaml.YAMLError, ValueError, TypeError) as exc:
            # Composes but does not construct (`!!int abc`, an unknown tag, an unhashable key):
            # DeerFlow's safe_load fails the same way.
            raise _yaml_error(exc) from exc
        database = data.get(DATABASE) if isinstance(data, dict) else None
        if not isinstance(database, dict) or LEGACY_CADENCE_KEY not in database:
            return self.plan
        assert isinstance(root, yaml.MappingNode)
        # DeerFlow's shim runs on what safe_load gives, whatever ckpt refuses below: its warning is said first.
        outcome = apply_legacy_shim(database)
        self._deerflow_warning(root, data, outcome)
        duplicates = yamlnodes.duplicate_keys(root)
        if duplicates:
            first = duplicates[0]
            lines = ", ".join(str(line) for line in first.lines)
            raise _Refusal(
                first.lines[-1],
                f"duplicate key {first.name!r} (lines {lines}); DeerFlow silently keeps the last one, "
                "so remove the duplicates by hand first",
                RuleCode.CK508,
            )
        database_pair = yamlnodes.find_own(root, DATABASE)
        if database_pair is None:
            raise _Refusal(None, "database: reaches the file only through a merge key (<<); edit it by hand")
        database_key, database_node = database_pair
        if yamlnodes.is_alias_value(database_key, database_node):
            raise _Refusal(
                _line_of(database_key),
                "database: is an alias of an anchored mapping; move the key in the anchored mapping by hand",
            )
        assert isinstance(database_node, yaml.MappingNode)
        if yamlnodes.use_count(root, database_node) > 1:
            raise _Refusal(
                _line_of(database_key),
                "database: carries an anchor that is aliased elsewhere, so editing it would change those "
                "places too; move the key by hand",
            )
        merged = yamlnodes.merged_key_names(database_node)
        flat_pair = yamlnodes.find_own(database_node, LEGACY_CADENCE_KEY)
        if flat_pair is None or LEGACY_CADENCE_KEY in merged:
            raise _Refusal(
                _line_of(database_key),
                f"{LEGACY_CADENCE_KEY} reaches database: through a merge key (<<); move it by hand",
            )
        delta_pair = yamlnodes.find_own(database_node, DELTA_SECTION)
        if delta_pair is None and DELTA_SECTION in merged:
            raise _Refusal(
                _line_of(database_key),
                f"{DELTA_SECTION} reaches database: through a merge key (<<); move the legacy key by hand",
            )

        expected = copy.copy(data)
        expected[DATABASE] = outcome.database
        self.plan.expected = expected
        self._decide(root, database_key, database_node, flat_pair, delta_pair, database, outcome)
        return self.plan

    def _deerflow_warning(self, root: yaml.MappingNode, data: dict[Any, Any], outcome: ShimOutcome) -> None:
        """The line DeerFlow's shim logs for this file, at the flat key whose value safe_load keeps (the last
        duplicate, or the one a merge brings); none when any `$VAR` in the file (the flat key's or another) is
        unset in DeerFlow's environment: resolve_env_variables walks the whole file first and fails the load at
        the first unset one (app_config.py:412, 545-567), before the shim runs."""
        assert outcome.warning is not None
        legacy = data[DATABASE][LEGACY_CADENCE_KEY]
        warning = outcome.warning
        blocker = first_unset(data, self.environ)
        if blocker is not None:
            if blocker.path != (DATABASE, LEGACY_CADENCE_KEY):
                # The flat key's own variable is explained where its value is carried; another one is said here.
                self.plan.note(
                    ConfigSource(self.text, root).line(*blocker.path),
                    f"DeerFlow logs no warning for the deprecated key where ${blocker.name} is unset: it resolves "
                    f"every $VAR in the file first and refuses the whole file at {dotted(blocker.path)} "
                    f"(Environment variable {blocker.name} not found for config value ${blocker.name}), "
                    "before its legacy-key shim runs",
                    rule=RuleCode.CK509,
                )
            return
        if isinstance(legacy, str) and legacy.startswith("$") and outcome.branch is ShimBranch.CARRIED:
            # DeerFlow resolves `$VAR` before its shim runs, so its warning shows the variable's value.
            warning = messages.carried_forward(self.environ[legacy[1:]])
        database_pair = yamlnodes.effective_pair(root, DATABASE)
        flat_pair = None
        if database_pair is not None and isinstance(database_pair[1], yaml.MappingNode):
            flat_pair = yamlnodes.effective_pair(database_pair[1], LEGACY_CADENCE_KEY)
        line = _line_of(flat_pair[0]) if flat_pair is not None else None
        rule = RuleCode.CK503 if outcome.branch is ShimBranch.IGNORED else RuleCode.CK501
        self.plan.warn(line, warning, from_deerflow=True, rule=rule)

    # -- deciding -------------------------------------------------------------------------------

    def _decide(
        self,
        root: yaml.Node,
        database_key: yaml.Node,
        database_node: yaml.MappingNode,
        flat_pair: tuple[yaml.Node, yaml.Node],
        delta_pair: tuple[yaml.Node, yaml.Node] | None,
        database: dict[Any, Any],
        outcome: ShimOutcome,
    ) -> None:
        flat_key, flat_value = flat_pair
        flat_line = _line_of(flat_key)
        legacy = database[LEGACY_CADENCE_KEY]
        flow = bool(database_node.flow_style)

        if outcome.branch is ShimBranch.IGNORED:
            assert delta_pair is not None
            kind = _describe_type(database[DELTA_SECTION])
            raise _Refusal(
                _line_of(delta_pair[0]),
                f"{DELTA_SECTION} is {kind}, not a mapping: DeerFlow drops the legacy value and then "
                f"rejects {DELTA_SECTION}; write {DELTA_SECTION}: {{{CADENCE_KEY}: N}} by hand",
                RuleCode.CK503,
            )

        self._note_mode(database, flat_line)
        if outcome.branch is ShimBranch.NESTED_WINS:
            # Said even when the file is refused below: the operator is about to lose a cadence.
            assert delta_pair is not None
            self._report_discarded_legacy(legacy, database[DELTA_SECTION][CADENCE_KEY], flat_pair, delta_pair)
        moves_value = outcome.branch is ShimBranch.CARRIED and delta_pair is not None
        if (
            yamlnodes.use_count(root, flat_value) > 1
            and not yamlnodes.is_alias_value(flat_key, flat_value)
            and (outcome.branch is ShimBranch.NESTED_WINS or moves_value)
        ):
            raise _Refusal(
                flat_line,
                f"the value of {LEGACY_CADENCE_KEY} carries an anchor used elsewhere; edit it by hand",
            )

        if outcome.branch is ShimBranch.NESTED_WINS:
            self.plan.edits.extend(self._delete_pair(flat_pair, flow))
            return

        self._check_carried_value(legacy, flat_pair)
        if delta_pair is None:
            self.plan.edits.append(self._create_section(database_key, database_node, flat_pair, flow))
        elif isinstance(delta_pair[1], yaml.MappingNode):
            self._carry_into_mapping(root, database_key, database_node, flat_pair, delta_pair, flow)
        else:
            self._carry_into_null(database_key, database_node, flat_pair, delta_pair, flow)

    def _note_mode(self, database: dict[Any, Any], line: int) -> None:
        mode = database.get(CHANNEL_MODE_KEY, DEFAULT_CHANNEL_MODE)
        if mode == "full":
            how = "is full" if CHANNEL_MODE_KEY in database else "is not set, so it is full"
            self.plan.note(
                line,
                f"database.{CHANNEL_MODE_KEY} {how}: DeerFlow ignores the snapshot cadence in that mode "
                "(it only matters in delta mode)",
                rule=RuleCode.CK506,
            )

    def _report_discarded_legacy(
        self,
        legacy: object,
        nested: object,
        flat_pair: tuple[yaml.Node, yaml.Node],
        delta_pair: tuple[yaml.Node, yaml.Node],
    ) -> None:
        legacy_reading, nested_reading = read_cadence(legacy), read_cadence(nested)
        if legacy_reading.effective is not None and nested_reading.effective is not None:
            differs = legacy_reading.effective != nested_reading.effective
        else:
            differs = legacy != nested
        if not differs:
            return
        written = self._pair(flat_pair).value_text(self.text)
        if not written or "\n" in written:
            written = repr(legacy)
        message = (
            f"the legacy value {written} differs from the nested value {nested!r} "
            f"(line {_line_of(delta_pair[0])}): DeerFlow already runs with {nested!r}, and removing the "
            f"flat key discards {written}. {_discarded_advice(written, legacy_reading)}"
        )
        if nested_reading.effective == UPGRADER_DEFAULT:
            message += (
                f" (make config-upgrade adds the default {UPGRADER_DEFAULT} next to a legacy key; "
                "1000 was the pre-rename default)"
            )
        self.plan.warn(_line_of(flat_pair[0]), message, rule=RuleCode.CK502)

    def _check_carried_value(self, legacy: object, flat_pair: tuple[yaml.Node, yaml.Node]) -> None:
        flat_key, flat_value = flat_pair
        span = _pair_text(self.text, flat_key, flat_value)
        written = span.value_text(self.text)
        line = _line_of(flat_key)
        reading = read_cadence(legacy)
        if reading.problem is not None:
            raise _Refusal(
                line,
                f"{LEGACY_CADENCE_KEY}: {written or '(empty)'} {reading.problem}; set "
                f"database.{DELTA_SECTION}.{CADENCE_KEY} to the cadence you mean by hand",
                RuleCode.CK504 if isinstance(legacy, bool) else RuleCode.CK500,
            )
        if "\n" in written:
            raise _Refusal(line, f"the value of {LEGACY_CADENCE_KEY} spans several lines; move it by hand")
        if reading.env_reference is not None:
            name = reading.env_reference
            logged = (
                ", and the warning it logs shows the resolved value"
                if name in self.environ
                else f"; ${name} is not set here, and where it is unset DeerFlow refuses the whole file "
                f"(Environment variable {name} not found for config value ${name}) before its legacy-key shim "
                "runs, so it logs no warning"
            )
            self.plan.note(
                line,
                f"{written} is carried verbatim: DeerFlow resolves ${name} when it loads the config{logged}",
                rule=RuleCode.CK509,
            )
        elif str(reading.effective) != written:
            self.plan.note(
                line,
                f"DeerFlow reads {written} as {reading.effective}; the text is carried unchanged, so the "
                f"cadence stays {reading.effective}",
            )

    # -- editing --------------------------------------------------------------------------------

    def _pair(self, pair: tuple[yaml.Node, yaml.Node]) -> _PairText:
        try:
            return _pair_text(self.text, *pair)
        except ValueError as exc:
            raise _Refusal(_line_of(pair[0]), str(exc)) from exc

    def _newline_for(self, line: Line) -> str:
        return terminator(self.text, line) or default_newline(self.text)

    def _check_block_line(self, span: _PairText, key: yaml.Node) -> None:
        _block_indent(self.text, key)
        trailer = span.trailer(self.text).strip(" \t")
        if trailer and not trailer.startswith("#"):
            raise _Refusal(_line_of(key), "a key shares its line with other content; edit it by hand")

    def _delete_pair(self, pair: tuple[yaml.Node, yaml.Node], flow: bool) -> list[Edit]:
        span = self._pair(pair)
        if flow:
            return [self._delete_flow_pair(span)]
        self._check_block_line(span, pair[0])
        return [Edit(span.first_line.start, span.last_line.next_start, "")]

    def _delete_flow_pair(self, span: _PairText) -> Edit:
        text = self.text
        start, end = span.key_start, span.value_end
        after = end
        while after < len(text) and text[after] in " \t\r\n":
            after += 1
        if after < len(text) and text[after] == ",":
            end = after + 1
            while end < len(text) and text[end] in " \t":
                end += 1
        else:
            before = start
            while before > 0 and text[before - 1] in " \t\r\n":
                before -= 1
            if before > 0 and text[before - 1] == ",":
                start = before - 1
        first, last = line_at(text, start), line_at(text, end)
        if not text[first.start : start].strip() and not text[end : last.content_end].strip():
            # The pair stood alone on its lines: take the whole lines, not a blank husk.
            return Edit(first.start, last.next_start, "")
        return Edit(start, end, "")

    def _moved_value(self, flat_pair: tuple[yaml.Node, yaml.Node]) -> tuple[str, str, str]:
        """The value text, the separator to write before it, and the flat line's trailer."""
        span = self._pair(flat_pair)
        separator = span.separator(self.text)
        if "\n" in separator:
            separator = ": "
        return span.value_text(self.text), separator, span.trailer(self.text)

    def _create_section(
        self,
        database_key: yaml.Node,
        database_node: yaml.MappingNode,
        flat_pair: tuple[yaml.Node, yaml.Node],
        flow: bool,
    ) -> Edit:
        """No checkpoint_delta yet: the flat pair becomes the nested block where it stood."""
        span = self._pair(flat_pair)
        quote = _quote_of(span.key_text(self.text))
        value, separator, trailer = self._moved_value(flat_pair)
        if flow:
            replacement = f"{quote}{DELTA_SECTION}{quote}: {{{quote}{CADENCE_KEY}{quote}: {value}}}"
            return Edit(span.key_start, span.value_end, replacement)
        self._check_block_line(span, flat_pair[0])
        indent = _block_indent(self.text, flat_pair[0])
        step = " " * _nesting_step(database_key, database_node)
        ending = terminator(self.text, span.last_line)
        replacement = (
            f"{indent}{quote}{DELTA_SECTION}{quote}:{self._newline_for(span.last_line)}"
            f"{indent}{step}{quote}{CADENCE_KEY}{quote}{separator}{value}{trailer}{ending}"
        )
        return Edit(span.first_line.start, span.last_line.next_start, replacement)

    def _flat_line_remains(self, flat_pair: tuple[yaml.Node, yaml.Node], flow: bool) -> list[Edit]:
        """Delete the flat pair; an inline comment that cannot travel with the value stays as a line."""
        span = self._pair(flat_pair)
        trailer = span.trailer(self.text).strip(" \t")
        if flow or not trailer.startswith("#"):
            return self._delete_pair(flat_pair, flow)
        self._check_block_line(span, flat_pair[0])
        indent = _block_indent(self.text, flat_pair[0])
        ending = terminator(self.text, span.last_line)
        return [Edit(span.first_line.start, span.last_line.next_start, f"{indent}{trailer}{ending}")]

    def _check_alias_order(self, flat_pair: tuple[yaml.Node, yaml.Node], insert_at: int) -> None:
        flat_key, flat_value = flat_pair
        if yamlnodes.is_alias_value(flat_key, flat_value) and insert_at < flat_value.start_mark.index:
            raise _Refusal(
                _line_of(flat_key),
                f"the alias in {LEGACY_CADENCE_KEY} would move above its anchor; move it by hand",
            )

    def _carry_into_mapping(
        self,
        root: yaml.Node,
        database_key: yaml.Node,
        database_node: yaml.MappingNode,
        flat_pair: tuple[yaml.Node, yaml.Node],
        delta_pair: tuple[yaml.Node, yaml.Node],
        flow: bool,
    ) -> None:
        """checkpoint_delta is a mapping without snapshot_frequency: append the key last, like the shim."""
        delta_key, delta_node = delta_pair
        assert isinstance(delta_node, yaml.MappingNode)
        line = _line_of(delta_key)
        if yamlnodes.is_alias_value(delta_key, delta_node) or yamlnodes.use_count(root, delta_node) > 1:
            raise _Refusal(line, f"{DELTA_SECTION} is shared through an anchor; add {CADENCE_KEY} by hand")
        if yamlnodes.merged_key_names(delta_node):
            raise _Refusal(line, f"{DELTA_SECTION} uses a merge key (<<); add {CADENCE_KEY} by hand")
        value, separator, trailer = self._moved_value(flat_pair)
        quote = _quote_of(self._pair(flat_pair).key_text(self.text))
        children = yamlnodes.own_pairs(delta_node)
        if delta_node.flow_style or not children:
            if not delta_node.flow_style:
                raise _Refusal(line, f"{DELTA_SECTION} has no keys of its own; add {CADENCE_KEY} by hand")
            closing = delta_node.end_mark.index - 1
            if self.text[closing] != "}":
                raise _Refusal(line, f"cannot find the closing brace of {DELTA_SECTION}; edit it by hand")
            if children:
                last_key, last_value = children[-1]
                insert_at = yamlnodes.value_span(self.text, last_key, last_value)[1]
                inserted = f", {quote}{CADENCE_KEY}{quote}: {value}"
            else:
                insert_at, inserted = closing, f"{quote}{CADENCE_KEY}{quote}: {value}"
            self._check_alias_order(flat_pair, insert_at)
            self.plan.edits.append(Edit(insert_at, insert_at, inserted))
            self.plan.edits.extend(self._flat_line_remains(flat_pair, flow))
            return
        first_child = children[0][0]
        indent = _block_indent(self.text, first_child)
        last_key, last_value = children[-1]
        end = max(yamlnodes.content_end(self.text, last_value), last_key.end_mark.index)
        last_line = line_at(self.text, end - 1 if self.text[end - 1] == "\n" else end)
        ending = terminator(self.text, last_line)
        lead = "" if ending else default_newline(self.text)
        inserted = f"{lead}{indent}{quote}{CADENCE_KEY}{quote}{separator}{value}{trailer}{ending}"
        self._check_alias_order(flat_pair, last_line.next_start)
        self.plan.edits.append(Edit(last_line.next_start, last_line.next_start, inserted))
        self.plan.edits.extend(self._delete_pair(flat_pair, flow))

    def _carry_into_null(
        self,
        database_key: yaml.Node,
        database_node: yaml.MappingNode,
        flat_pair: tuple[yaml.Node, yaml.Node],
        delta_pair: tuple[yaml.Node, yaml.Node],
        flow: bool,
    ) -> None:
        """`checkpoint_delta:` is null or empty: give it the value as its only key."""
        delta_key, delta_node = delta_pair
        line = _line_of(delta_key)
        if yamlnodes.is_alias_value(delta_key, delta_node):
            raise _Refusal(line, f"{DELTA_SECTION} is an alias; add {CADENCE_KEY} by hand")
        delta_span = self._pair(delta_pair)
        value, separator, trailer = self._moved_value(flat_pair)
        quote = _quote_of(self._pair(flat_pair).key_text(self.text))
        colon = self.text.index(":", delta_span.key_end)
        self._check_alias_order(flat_pair, colon)
        if flow:
            replacement = f": {{{quote}{CADENCE_KEY}{quote}: {value}}}"
            self.plan.edits.append(Edit(colon, delta_span.value_end, replacement))
            self.plan.edits.extend(self._delete_pair(flat_pair, flow))
            return
        self._check_block_line(delta_span, delta_key)
        if "\n" in self.text[colon : delta_span.value_end]:
            raise _Refusal(line, f"the null value of {DELTA_SECTION} is on its own line; edit it by hand")
        # Drop `null`/`~` and the blanks before it; keep the colon and any comment after it.
        self.plan.edits.append(Edit(colon + 1, delta_span.value_end, ""))
        indent = _block_indent(self.text, delta_key) + " " * _nesting_step(database_key, database_node)
        ending = terminator(self.text, delta_span.last_line)
        lead = "" if ending else default_newline(self.text)
        inserted = f"{lead}{indent}{quote}{CADENCE_KEY}{quote}{separator}{value}{trailer}{ending}"
        insert_at = delta_span.last_line.next_start
        self.plan.edits.append(Edit(insert_at, insert_at, inserted))
        self.plan.edits.extend(self._delete_pair(flat_pair, flow))


def _discarded_advice(written: str, reading: CadenceReading) -> str:
    """What to do about a dropped legacy value, as DeerFlow would have read it had it been carried."""
    target = f"database.{DELTA_SECTION}.{CADENCE_KEY}"
    restart = "by hand and restart every process sharing the database"
    if reading.env_reference is not None:
        return f"If ${reading.env_reference} holds the chosen cadence, set {target}: {written} {restart}"
    if reading.problem is None and reading.effective is not None:
        read_as = "" if str(reading.effective) == written else f"DeerFlow reads {written} as {reading.effective}. "
        return f"{read_as}If {reading.effective} was the chosen cadence, set {target}: {reading.effective} {restart}"
    if reading.effective is not None:
        # yes/on/true: YAML 1.1's True, which DeerFlow's pydantic model takes as 1 (lax mode).
        return (
            f"{written} is no cadence: DeerFlow's PyYAML (YAML 1.1) reads it as True, which its model would take "
            f"as cadence {reading.effective}, a snapshot on every write; if a cadence was meant, set {target} to "
            f"that integer {restart}"
        )
    return f"{written} {reading.problem}, so it never was a cadence DeerFlow could run with"


def _decode(raw: bytes) -> tuple[bytes, str]:
    bom = UTF8_BOM if raw.startswith(UTF8_BOM) else b""
    try:
        return bom, raw[len(bom) :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Unreadable(None, f"not UTF-8 text (byte {exc.start + len(bom)}); DeerFlow cannot read it") from exc


def _keep_final_newline(original: str, edited: str) -> str:
    """A file without a final newline keeps having none, whichever line the edit removed."""
    if original.endswith("\n") or not edited.endswith("\n"):
        return edited
    return edited[:-2] if edited.endswith("\r\n") else edited[:-1]


def _verify(edited: str, expected: Any) -> None:
    try:
        documents = compose_documents(edited)
        values = construct_values(documents[0]) if len(documents) == 1 else None
    except yaml.YAMLError as exc:
        raise _Unreadable(None, f"internal error: the edited text is not valid YAML ({exc}); nothing written") from exc
    if len(documents) != 1 or yamlnodes.duplicate_keys(documents[0]):
        raise _Unreadable(None, "internal error: the edited text changed the document structure; nothing written")
    if not same_value(values, expected):
        raise _Unreadable(
            None,
            "internal error: the edited text does not mean what DeerFlow's shim makes of the original; nothing written",
        )
    database = values.get(DATABASE) if isinstance(values, dict) else None
    if isinstance(database, dict) and LEGACY_CADENCE_KEY in database:
        raise _Unreadable(None, "internal error: the legacy key survived the edit; nothing written")


def migrate_config_bytes(raw: bytes, environ: Mapping[str, str] | None = None) -> MigrationResult:
    """Plan, apply and verify the migration of one config file's bytes, its `$VAR` values read in `environ`
    (DeerFlow's environment; none by default). Never raises for bad input."""
    diagnostics: list[Diagnostic] = []
    migrator: _Migrator | None = None
    try:
        bom, text = _decode(raw)
        embedded = embedded_config(text)
        if embedded is not None:
            return _migrate_embedded(raw, bom, text, embedded, environ)
        migrator = _Migrator(text, environ or {})
        plan = migrator.run()
        diagnostics = plan.diagnostics
        if not plan.edits:
            return MigrationResult(MigrationStatus.UNCHANGED, raw, raw, tuple(diagnostics))
        try:
            edited = _keep_final_newline(text, apply_edits(text, plan.edits))
        except OverlappingEdits as exc:
            raise _Unreadable(None, f"internal error: {exc}; nothing written") from exc
        _verify(edited, plan.expected)
    except _Unreadable as exc:
        error = Diagnostic(Severity.ERROR, exc.line, exc.message, rule=exc.rule)
        return MigrationResult(MigrationStatus.FAILED, raw, raw, (*diagnostics, error))
    except ExpansionError as exc:
        return MigrationResult(
            MigrationStatus.FAILED, raw, raw, (*diagnostics, Diagnostic(Severity.ERROR, None, str(exc)))
        )
    except _Refusal as exc:
        diagnostics = migrator.plan.diagnostics if migrator is not None else []
        error = Diagnostic(Severity.ERROR, exc.line, exc.message, rule=exc.rule)
        return MigrationResult(MigrationStatus.NEEDS_HAND_FIX, raw, raw, (*diagnostics, error))
    return MigrationResult(MigrationStatus.MIGRATED, raw, bom + edited.encode("utf-8"), tuple(diagnostics))


def restore_cadence_bytes(raw: bytes, cadence: int, source: str, environ: Mapping[str, str]) -> MigrationResult:
    """Set database.checkpoint_delta.snapshot_frequency back to `cadence` (what `source`, the upgrader's
    backup, gave DeerFlow), editing only that value, then move any legacy key as migrate-config does."""
    try:
        bom, text = _decode(raw)
        span = _nested_cadence_span(text)
        restored = text[: span[0]] + str(cadence) + text[span[1] :]
        _verify_cadence(restored, cadence, environ)
    except _Unreadable as exc:
        error = Diagnostic(Severity.ERROR, exc.line, exc.message, rule=exc.rule)
        return MigrationResult(MigrationStatus.FAILED, raw, raw, (error,))
    except _Refusal as exc:
        error = Diagnostic(Severity.ERROR, exc.line, exc.message, rule=exc.rule)
        return MigrationResult(MigrationStatus.NEEDS_HAND_FIX, raw, raw, (error,))
    line = text.count("\n", 0, span[0]) + 1
    note = Diagnostic(
        Severity.INFO,
        line,
        f"{DELTA_SECTION}.{CADENCE_KEY} set back to {cadence}, the cadence {source} gave DeerFlow",
        rule=RuleCode.CK512,
    )
    moved = migrate_config_bytes(bom + restored.encode("utf-8"), environ)
    if moved.status in (MigrationStatus.FAILED, MigrationStatus.NEEDS_HAND_FIX):
        return MigrationResult(moved.status, raw, raw, (note, *moved.diagnostics))
    return MigrationResult(MigrationStatus.MIGRATED, raw, moved.migrated, (note, *moved.diagnostics))


def _nested_cadence_span(text: str) -> tuple[int, int]:
    try:
        documents = compose_documents(text)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc) from exc
    path = (DATABASE, DELTA_SECTION, CADENCE_KEY)
    node: yaml.Node | None = documents[0] if len(documents) == 1 else None
    found = None
    for name in path:
        found = yamlnodes.find_own(node, name) if isinstance(node, yaml.MappingNode) else None
        if found is None:
            raise _Refusal(None, f"{'.'.join(path)} is not written in this file; set it by hand")
        node = found[1]
    assert found is not None
    if not isinstance(found[1], yaml.ScalarNode) or "\n" in text[slice(*yamlnodes.value_span(text, *found))]:
        raise _Refusal(_line_of(found[0]), f"{'.'.join(path)} is not a one-line value; set it by hand")
    return yamlnodes.value_span(text, *found)


def _verify_cadence(text: str, cadence: int, environ: Mapping[str, str]) -> None:
    from deerflow_ckpt.config.database import read_database_settings

    documents = compose_documents(text)
    settings = read_database_settings(construct_values(documents[0]), environ)
    if settings.cadence.effective != cadence:
        raise _Unreadable(None, "internal error: the edited text does not give the restored cadence; nothing written")


def _migrate_embedded(
    raw: bytes, bom: bytes, text: str, embedded: EmbeddedConfig, environ: Mapping[str, str] | None
) -> MigrationResult:
    """A Helm values.yaml: migrate its `config: |` block and put the changed lines back, re-indented."""
    inner = migrate_config_bytes(embedded.text.encode("utf-8"), environ)
    diagnostics = tuple(replace(d, line=embedded.outer_line(d.line)) for d in inner.diagnostics)
    if inner.status is not MigrationStatus.MIGRATED:
        return MigrationResult(inner.status, raw, raw, diagnostics)
    try:
        spliced = splice(text, embedded, inner.migrated.decode("utf-8"))
    except HelmEditError as exc:
        error = Diagnostic(Severity.ERROR, None, f"internal error: {exc}; nothing written")
        return MigrationResult(MigrationStatus.FAILED, raw, raw, (*diagnostics, error))
    return MigrationResult(MigrationStatus.MIGRATED, raw, bom + spliced.encode("utf-8"), diagnostics)
