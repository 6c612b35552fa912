"""ckpt reads YAML with the loader DeerFlow uses: PyYAML's pure-Python SafeLoader (`yaml.safe_load`).

libyaml's CSafeLoader disagrees with it (a TAB as separator, a U+FEFF mid-file, flow scalars such as
`[a, b?]`). These tests drive generated and mutated `database:` sections through both ckpt's loader and
`yaml.safe_load`, and require the same outcome: the same value, or a failure in both. The marks of every
event must match too, since ckpt's edits and line numbers come from them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deerflow_ckpt.config.values import SafeLoader, compose_documents, construct_values, load_values, same_value
from deerflow_ckpt.config.yamlnodes import effective_pair
from tests.cli import run_ckpt

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "configs"

# What separates and ends things on a line, including what the two parsers disagree on.
GAPS = st.sampled_from([" ", "  ", "\t", " \t", "\t ", ""])
SCALARS = st.sampled_from(
    [
        "10", "250", "010", "1:30", "0x1F", "1e3", "1.0e+3", "yes", "off", "~", "null", "''", '"7"', "'250'",
        "$SNAP", "[a, b?]", "[1, 2]", "{a: 1}", "{a: 1, b}", "[a, b]:", "a?", "?a", "b?]", "'x' ", '"tab\there"',
        "!!str 5", "&a 5", "*a", "- 1", "|", ">-", "full", "delta", "sqlite", "postgresql://u@h/db",
    ]
)  # fmt: skip
KEYS = st.sampled_from(
    ["backend", "sqlite_dir", "checkpoint_channel_mode", "checkpoint_delta", "snapshot_frequency",
     "checkpoint_delta_snapshot_frequency", "postgres_url", "postgres_schema", "pool_size", "x"]
)  # fmt: skip


@st.composite
def database_sections(draw: st.DrawFn) -> str:
    """A `database:` section as an operator might write it, with TABs, comments and BOMs about."""
    lines = ["database:" + draw(GAPS) + draw(st.sampled_from(["", "# db", "\t# db"]))]
    for _ in range(draw(st.integers(1, 6))):
        indent = " " * draw(st.sampled_from([2, 2, 4, 6]))
        line = f"{indent}{draw(KEYS)}:{draw(GAPS)}{draw(SCALARS)}{draw(GAPS)}"
        if draw(st.booleans()):
            line += draw(st.sampled_from(["# note", "#", "# \ufeff", "#\tx"]))
        lines.append(line)
    text = draw(st.sampled_from(["\n", "\r\n"])).join(lines) + draw(st.sampled_from(["\n", ""]))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + "\ufeff" + text[at:]
    return text


def outcome(load: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", load(text)
    except yaml.YAMLError as exc:
        return "error", type(exc).__name__
    except (ValueError, TypeError) as exc:  # constructed but unusable: `!!int abc`, an unhashable key
        return "error", type(exc).__name__


def events(loader: type[yaml.SafeLoader], text: str) -> list[tuple[Any, ...]]:
    """Every event with its marks, or the error and where it was raised."""
    seen: list[tuple[Any, ...]] = []
    try:
        for event in yaml.parse(text, Loader=loader):
            marks = [(m.index, m.line, m.column) for m in (event.start_mark, event.end_mark)]
            seen.append((type(event).__name__, getattr(event, "value", None), marks))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        seen.append(("error", type(exc).__name__, None if mark is None else (mark.index, mark.line, mark.column)))
    return seen


def deerflow_load(text: str) -> Any:
    """AppConfig.from_file's reading: the file opened as UTF-8 text (universal newlines: a CR or CRLF
    reaches the parser as LF), handed to yaml.safe_load as a stream."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "config.yaml"
        path.write_bytes(text.encode("utf-8"))
        with open(path, encoding="utf-8") as stream:
            return yaml.safe_load(stream)


def assert_same_reading(text: str) -> None:
    ours, deerflows = outcome(load_values, text), outcome(deerflow_load, text)
    assert ours[0] == deerflows[0], (text, ours, deerflows)
    assert same_value(ours[1], deerflows[1]), (text, ours, deerflows)
    assert same_value(ours, outcome(yaml.safe_load, text))
    assert events(SafeLoader, text) == events(yaml.SafeLoader, text), text


@pytest.mark.slow
@given(database_sections())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_generated_database_sections_read_as_safe_load_reads_them(text: str) -> None:
    assert_same_reading(text)


CORPUS_TEXTS = sorted(
    (path.parent.name, path.read_bytes().decode("utf-8-sig", errors="replace")) for path in CORPUS.glob("*/input.yaml")
)
MUTATIONS = st.sampled_from(["\t", " ", "#", "\ufeff", "\n", "\r", ":", "-", "[", "]", "?", ",", "{", "'", '"'])


@pytest.mark.slow
@given(st.sampled_from(CORPUS_TEXTS), st.lists(st.tuples(st.floats(0, 1), MUTATIONS, st.booleans()), max_size=4))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_corpus_configs_read_as_safe_load_reads_them(
    case: tuple[str, str], edits: list[tuple[float, str, bool]]
) -> None:
    text = case[1]
    for where, char, replace in edits:
        at = int(where * len(text))
        text = text[:at] + char + text[at + (1 if replace else 0) :]
    assert_same_reading(text)


# Each of these is read differently by libyaml; all are what DeerFlow's safe_load says they are.
DISAGREEMENTS = {
    "tab_after_value": "database:\n  backend: sqlite\t\n",
    "tab_before_comment": "database:\n  backend: sqlite\t# here\n",
    "tab_after_colon": "database:\n  checkpoint_delta:\t{snapshot_frequency: 5}\n",
    "bom_mid_file": "database:\n  backend: sqlite\n\ufeff  sqlite_dir: x\n",
    "flow_question_mark": "database:\n  x: [a, b?]\n",
}


@pytest.mark.parametrize("name", sorted(DISAGREEMENTS))
def test_where_libyaml_disagrees_ckpt_agrees_with_safe_load(name: str) -> None:
    text = DISAGREEMENTS[name]
    c_reading = outcome(lambda t: yaml.load(t, Loader=yaml.CSafeLoader), text)
    assert c_reading != outcome(yaml.safe_load, text)  # the case still separates the two parsers
    assert_same_reading(text)


def test_construct_values_is_safe_load_of_the_composed_document() -> None:
    for _, text in CORPUS_TEXTS:
        try:
            documents = compose_documents(text)
        except yaml.YAMLError:
            continue
        if len(documents) == 1:
            root = documents[0]
            assert outcome(lambda _, node=root: construct_values(node), text) == outcome(yaml.safe_load, text)


def test_a_tab_separated_value_fails_lint_and_is_not_migrated(tmp_path: Path) -> None:
    # DeerFlow raises ScannerError on this file and refuses to start; ckpt must say so, not migrate it.
    config = tmp_path / "config.yaml"
    text = "database:\n  backend: sqlite\n  checkpoint_delta_snapshot_frequency: 1000\t\n"
    config.write_text(text)
    with pytest.raises(yaml.scanner.ScannerError):
        yaml.safe_load(text)
    lint = run_ckpt("lint-config", str(config))
    assert lint.exit_code == 1 and "CK500" in lint.stdout, lint.stdout
    migrate = run_ckpt("migrate-config", str(config))
    assert migrate.exit_code == 2, migrate.stdout + migrate.stderr
    assert config.read_text() == text


@pytest.mark.parametrize(
    ("written", "yaml12"),
    [
        ("010", "read 010 as 10"),
        ("1:30", "read 1:30 as '1:30'"),
        ("yes", "read yes as 'yes'"),
        ("on", "read on as 'on'"),
    ],
)
def test_lint_says_where_yaml_12_tools_read_the_cadence_otherwise(written: str, yaml12: str) -> None:
    from deerflow_ckpt.config.lint import lint_config_bytes

    text = f"database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta:\n    snapshot_frequency: {written}\n"
    findings = lint_config_bytes(text.encode(), {}, Path("/")).findings
    assert [finding.rule for finding in findings] == ["CK504"]
    assert f"YAML 1.2 tools (ruamel.yaml, yq, editors' schema checks) {yaml12}" in findings[0].message


def test_values_both_yaml_versions_read_alike_get_no_yaml_12_note() -> None:
    from deerflow_ckpt.config.values import yaml12_disagreement

    assert yaml12_disagreement("0x1F", 31) == "" and yaml12_disagreement("250", 250) == ""
    assert yaml12_disagreement("true", True) == ""


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_a_cadence_integer_reads_as_pydantic_reads_it(value: int) -> None:
    from typing import Annotated

    from pydantic import Field, TypeAdapter, ValidationError

    from deerflow_ckpt.config.values import MAX_CADENCE, read_cadence

    try:
        expected: int | None = TypeAdapter(Annotated[int, Field(ge=1)]).validate_python(value)
    except ValidationError:
        expected = None
    if value > MAX_CADENCE:
        expected = None  # ckpt refuses what no process can count to (read_cadence's docstring)
    assert read_cadence(value).effective == expected


# PyYAML 6.0.3, DeerFlow's lock (bytedance/deer-flow f1f4af99, backend/uv.lock lines 4025-4026), builds a
# merged mapping as: the pairs of each `<<` in turn (a list's mappings last to first), then the mapping's own
# pairs, the last pair of a key winning (yaml/pyyaml 6.0.3, lib/yaml/constructor.py lines 180-213). PyYAML
# 6.0.4 changed the list case, so these values are restated here, not read from the installed safe_load.
MERGES = {
    "a: 1\nb: 2\na: 3\n": 3,
    "x: &x {a: 1}\nm:\n  <<: *x\n": 1,
    "x: &x {a: 1}\nm:\n  <<: *x\n  a: 2\n": 2,
    "x: &x {a: 1}\ny: &y {a: 2}\nm:\n  <<: [*x, *y]\n": 1,
    "x: &x {a: 1}\ny: &y {a: 2}\nm:\n  <<: [*y, *x]\n": 2,
    "x: &x {a: 1}\ny: &y {a: 2}\nm:\n  <<: *x\n  <<: *y\n": 2,
    "x: &x {a: 1}\ny: &y\n  <<: *x\nm:\n  <<: *y\n": 1,
    "x: &x {long_key_name: 1}\ny: &y {long_key_name: 2}\nm:\n  <<: [*x, *y]\n": 1,
}


@pytest.mark.parametrize(("text", "value"), MERGES.items())
def test_merges_and_duplicates_resolve_as_deerflows_pyyaml(text: str, value: int) -> None:
    """ckpt's values, and the pair it points at for a duplicate key or a `<<` merge, are DeerFlow's."""
    data = load_values(text)
    key = "long_key_name" if "long_key_name" in text else "a"
    assert data.get("m", data)[key] == value
    (root,) = compose_documents(text)
    mapping = effective_pair(root, "m")
    node = root if mapping is None else mapping[1]
    assert isinstance(node, yaml.MappingNode)
    found = effective_pair(node, key)
    assert found is not None and found[1].value == str(value)
