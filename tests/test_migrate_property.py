"""Property: random configs keep every value except the moved key, and every other line, byte for byte.

Configs are generated as text: random sections, keys, scalar styles, comments (tabs, CJK), blank lines,
indentation step, line endings, BOM, document markers and final newline, with the flat key at a random
place in `database:` and `checkpoint_delta` in one of the shapes the shim distinguishes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deerflow_ckpt.config import messages
from deerflow_ckpt.config.migrate import MigrationStatus, migrate_config_bytes
from deerflow_ckpt.rules import Severity

FLAT = "checkpoint_delta_snapshot_frequency"
# DeerFlow's environment: the API key the generated models reference is set there, $SNAPSHOT_FREQ is not.
ENVIRON = {"OPENAI_API_KEY": "sk-test"}
MARKERS = ("checkpoint_delta", "snapshot_frequency")

# Words that can never be mistaken for the keys under test, YAML indicators or 1.1 booleans.
WORDS = st.sampled_from(
    ["alpha", "bravo", "charlie", "delta_mode", "echo", "sqlite", "memory", "deer", "flow", "gpt", "x1", "v2"]
)
KEY_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda k: (
        not any(m in k for m in MARKERS)
        and k not in {"database", "y", "n", "yes", "no", "on", "off", "true", "false", "null"}
    )
)
COMMENT_TEXT = st.sampled_from(
    ["tuned", "see docs\tfor details", "默认值", "TODO: review", "keep", "a # b", "深度 求索\t注释", ""]
)


def scalar() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(-10, 10**9).map(str),
        st.sampled_from(["true", "no", "null", "~", "1.5", "0x1F", "010", "1:30", "'it''s'", "[1, 2]", "{}"]),
        WORDS,
        WORDS.map(lambda w: f"'{w} quoted'"),
        WORDS.map(lambda w: f'"{w}\tdouble"'),
        st.just('"豆包 Seed"'),
        st.just("$OPENAI_API_KEY"),
    )


def comment() -> st.SearchStrategy[str]:
    return st.one_of(st.just(""), COMMENT_TEXT.map(lambda t: f"  # {t}"))


FLAT_VALUES = st.one_of(
    st.integers(1, 10**6).map(str),
    st.sampled_from(["'250'", '"77"', "010", "0x1F", "1_000", "1:30", "100.0", "$SNAPSHOT_FREQ"]),
)
DELTA_SHAPES = st.sampled_from(
    ["absent", "bare", "null", "tilde", "empty_flow", "foo_flow", "foo_block", "both_block", "both_flow"]
)


@dataclass(frozen=True)
class Layout:
    step: int
    newline: str
    bom: bool
    final_newline: bool
    markers: bool


@st.composite
def mapping_entries(draw: st.DrawFn, indent: str, step: int, depth: int) -> list[list[str]]:
    """A block mapping at `indent`, one group of lines per key: scalars, comments, blank lines, nested
    mappings and lists. Groups keep a key with its children, so the flat key never lands inside one."""
    entries: list[list[str]] = []
    keys = draw(st.lists(KEY_NAMES, min_size=1, max_size=5, unique=True))
    for key in keys:
        lines: list[str] = []
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from([f"{indent}# {draw(COMMENT_TEXT)}", "", "# column-0 note"])))
        kind = draw(st.sampled_from(["scalar", "scalar", "scalar", "mapping", "list"] if depth < 2 else ["scalar"]))
        if kind == "scalar":
            lines.append(f"{indent}{key}: {draw(scalar())}{draw(comment())}")
        elif kind == "mapping":
            lines.append(f"{indent}{key}:{draw(comment())}")
            nested = draw(mapping_entries(indent + " " * step, step, depth + 1))
            lines.extend(line for entry in nested for line in entry)
        else:
            lines.append(f"{indent}{key}:")
            dash = indent + draw(st.sampled_from(["", " " * step]))
            for item in draw(st.lists(scalar(), min_size=1, max_size=3)):
                lines.append(f"{dash}- {item}")
        entries.append(lines)
    return entries


@st.composite
def database_section(draw: st.DrawFn, step: int) -> tuple[list[str], str]:
    indent = " " * step
    entries = draw(mapping_entries(indent, step, 1))
    if draw(st.booleans()):
        entries.append([f"{indent}checkpoint_channel_mode: {draw(st.sampled_from(['delta', 'full']))}"])
    value = draw(FLAT_VALUES)
    flat = [f"{indent}{FLAT}:{draw(st.sampled_from([' ', '  ']))}{value}{draw(comment())}"]
    if draw(st.booleans()):
        flat.insert(0, f"{indent}# legacy cadence {draw(COMMENT_TEXT)}")
    entries.insert(draw(st.integers(0, len(entries))), flat)
    shape = draw(DELTA_SHAPES)
    child = indent + " " * step
    delta = {
        "absent": [],
        "bare": [f"{indent}checkpoint_delta:"],
        "null": [f"{indent}checkpoint_delta: null{draw(comment())}"],
        "tilde": [f"{indent}checkpoint_delta: ~"],
        "empty_flow": [f"{indent}checkpoint_delta: {{}}"],
        "foo_flow": [f"{indent}checkpoint_delta: {{foo: 1}}"],
        "foo_block": [f"{indent}checkpoint_delta:", f"{child}foo: 1{draw(comment())}"],
        "both_block": [f"{indent}checkpoint_delta:", f"{child}snapshot_frequency: {draw(FLAT_VALUES)}"],
        "both_flow": [f"{indent}checkpoint_delta: {{snapshot_frequency: 10}}"],
    }[shape]
    if delta:
        entries.insert(draw(st.integers(0, len(entries))), delta)
    return ["database:", *[line for entry in entries for line in entry]], shape


@st.composite
def configs(draw: st.DrawFn) -> tuple[bytes, Layout, str]:
    layout = Layout(
        step=draw(st.sampled_from([2, 4])),
        newline=draw(st.sampled_from(["\n", "\r\n"])),
        bom=draw(st.booleans()),
        final_newline=draw(st.booleans()),
        markers=draw(st.booleans()),
    )
    sections: list[list[str]] = []
    for name in draw(st.lists(KEY_NAMES, max_size=4, unique=True)):
        header = [f"# {draw(COMMENT_TEXT)}"] if draw(st.booleans()) else []
        body = draw(mapping_entries(" " * layout.step, layout.step, 1))
        sections.append([*header, f"{name}:{draw(comment())}", *[line for entry in body for line in entry]])
    database, shape = draw(database_section(layout.step))
    sections.insert(draw(st.integers(0, len(sections))), database)
    lines = [line for section in sections for line in [*section, *([""] if draw(st.booleans()) else [])]]
    while lines and lines[-1] == "":
        lines.pop()
    if layout.markers:
        lines = ["---", *lines, "..."]
    text = layout.newline.join(lines) + (layout.newline if layout.final_newline else "")
    raw = text.encode("utf-8")
    return (b"\xef\xbb\xbf" + raw if layout.bom else raw), layout, shape


def shim(database: dict[Any, Any]) -> dict[Any, Any]:
    """DeerFlow's DatabaseConfig._migrate_legacy_snapshot_frequency, copied independently."""
    data = dict(database)
    legacy = data.pop(FLAT)
    nested = data.get("checkpoint_delta")
    if isinstance(nested, dict) and "snapshot_frequency" in nested:
        return data
    data["checkpoint_delta"] = {**(nested or {}), "snapshot_frequency": legacy}
    return data


def same(left: Any, right: Any) -> bool:
    """Equality that tells True from 1 and 1.0 from 1 (key order is not meaning)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    return bool(left == right)


def unset_somewhere(value: object, environ: dict[str, str]) -> bool:
    """DeerFlow's AppConfig.resolve_env_variables (bytedance/deer-flow f1f4af99,
    backend/packages/harness/deerflow/config/app_config.py:545-567), run on the whole file at :412 before
    pydantic (and so the legacy-key shim) sees it: every mapping value and list item that is a string starting
    with `$` names a variable, and an unset one fails the load."""
    if isinstance(value, dict):
        return any(unset_somewhere(item, environ) for item in value.values())
    if isinstance(value, list):
        return any(unset_somewhere(item, environ) for item in value)
    return isinstance(value, str) and value.startswith("$") and value[1:] not in environ


def other_lines(text: str) -> list[str]:
    """Lines that carry neither key, without their endings (checked separately), split on \\n only."""
    lines = text.split("\n")
    return [line.removesuffix("\r") for line in lines if not any(marker in line for marker in MARKERS)]


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_random_configs_keep_every_other_value_and_line(generated: tuple[bytes, Layout, str]) -> None:
    raw, layout, shape = generated
    text = raw.decode("utf-8-sig")
    before = yaml.safe_load(text)

    result = migrate_config_bytes(raw, ENVIRON)
    assert result.status is MigrationStatus.MIGRATED, [d.message for d in result.diagnostics]
    output = result.migrated.decode("utf-8-sig")

    # Values: exactly what DeerFlow's shim makes of the input, nothing else moved or retyped.
    after = yaml.safe_load(output)
    wanted = dict(before)
    wanted["database"] = shim(before["database"])
    assert same(after, wanted)
    assert FLAT not in after["database"]

    # Text: every line that carries neither key is still there, unchanged and in order.
    kept, original = other_lines(output), other_lines(text)
    flat_line = next(line for line in text.split("\n") if FLAT in line)
    code, hash_, flat_comment = flat_line.partition("#")
    if shape in ("empty_flow", "foo_flow") and hash_ and kept != original:
        # A comment cannot follow the value into a flow mapping: it stays behind as its own line.
        extra = next(i for i, (a, b) in enumerate(zip(kept, [*original, None], strict=False)) if a != b)
        indent = code[: len(code) - len(code.lstrip(" "))]
        assert kept.pop(extra).rstrip() == f"{indent}#{flat_comment}".rstrip()
    assert kept == original

    # Bytes the layout owns.
    assert result.migrated.startswith(b"\xef\xbb\xbf") == layout.bom
    assert output.endswith("\n") == layout.final_newline
    if layout.newline == "\r\n":
        assert output.count("\n") == output.count("\r\n")
    else:
        assert "\r" not in output

    # DeerFlow's own warning, verbatim; none when a `$VAR` anywhere in the file is unset in its environment.
    deerflow = [d.message for d in result.diagnostics if d.from_deerflow]
    if unset_somewhere(before, ENVIRON):
        assert deerflow == []
    elif shape.startswith("both"):
        assert deerflow == [messages.BOTH_KEYS_SET]
    else:
        assert deerflow == [messages.carried_forward(before["database"][FLAT])]
    assert not [d for d in result.diagnostics if d.severity is Severity.ERROR]

    # A second run is a no-op.
    again = migrate_config_bytes(result.migrated)
    assert again.status is MigrationStatus.UNCHANGED
    assert again.migrated == result.migrated
