"""CI formats: GitHub workflow commands and step summary, and SARIF 2.1.0 checked against the OASIS schema."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from jsonschema import Draft7Validator, FormatChecker

from deerflow_ckpt.report.annotations import Annotation, CheckpointSpot, FileSpot
from deerflow_ckpt.report.github import SUMMARY_ROW_CAP, step_summary, workflow_commands
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.report.sarif import to_sarif
from deerflow_ckpt.rules import RULES, Severity

SCHEMA_PATH = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

# The runner's reading of a workflow command: escaped properties hold no ':', so the first '::' ends them.
COMMAND_LINE = re.compile(r"::(?P<command>[a-z]+)(?: (?P<properties>[^:]*))?::(?P<data>.*)", re.DOTALL)
DATA_ESCAPES = {"%25": "%", "%0D": "\r", "%0A": "\n"}
PROPERTY_ESCAPES = {**DATA_ESCAPES, "%3A": ":", "%2C": ","}


def unescape(text: str, escapes: dict[str, str]) -> str:
    """One left-to-right pass, so '%250A' decodes to '%0A' and not to a newline."""
    pattern = "|".join(re.escape(escape) for escape in escapes)
    return re.sub(pattern, lambda match: escapes[match.group(0)], text)


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    match = COMMAND_LINE.fullmatch(line)
    assert match is not None, line
    properties: dict[str, str] = {}
    for item in (match["properties"] or "").split(","):
        key, _, value = item.partition("=")
        assert key not in properties, line
        properties[key] = unescape(value, PROPERTY_ESCAPES)
    return match["command"], properties, unescape(match["data"], DATA_ESCAPES)


def command_lines(output: str) -> list[str]:
    assert output.endswith("\n")
    # Only '\n' ends a command; other line separators are message text.
    return output[:-1].split("\n")


def note(code: str = "CK501", severity: Severity | None = None, message: str = "m", where: Any = None) -> Annotation:
    return Annotation(code, severity or RULES[code].severity, message, where)


# --- workflow commands -------------------------------------------------------------------------------------


@given(message=st.text(), path=st.text())
@example(message="100% done: a,b\r\nnext", path="dir,1/a: b.yaml")
@example(message="%0A and %25 stay literal", path="%2C.yaml")
def test_message_and_property_escaping_round_trip(message: str, path: str) -> None:
    annotation = note(message=message, where=FileSpot(path, 7))
    [line] = command_lines(workflow_commands([annotation]))
    assert "\r" not in line
    command, properties, data = parse_command(line)
    assert command == "warning"
    # Control and invisible characters arrive as visible escapes; everything else round-trips exactly.
    assert data == printable(message, keep_lines=True)
    assert properties == {"title": annotation.title, "file": printable(path, keep_lines=True), "line": "7"}


def test_exact_escaped_line() -> None:
    annotation = note(message="50% of x\ny", where=FileSpot("a,b: c.yaml", 3))
    expected = "::warning title=CK501 deprecated flat cadence key,file=a%2Cb%3A c.yaml,line=3::50%25 of x%0Ay\n"
    assert workflow_commands([annotation]) == expected


@pytest.mark.parametrize(
    ("severity", "command"),
    [(Severity.ERROR, "error"), (Severity.WARNING, "warning"), (Severity.INFO, "notice")],
)
def test_severity_picks_the_command(severity: Severity, command: str) -> None:
    # CK305 is info in the registry: the annotation's own severity decides.
    [line] = command_lines(workflow_commands([note("CK305", severity, where=FileSpot("c.yaml", 1))]))
    assert parse_command(line)[0] == command


def test_file_spot_without_line_has_no_line_property() -> None:
    [line] = command_lines(workflow_commands([note(where=FileSpot("config.yaml"))]))
    _, properties, _ = parse_command(line)
    assert properties == {"title": "CK501 deprecated flat cadence key", "file": "config.yaml"}


def test_checkpoint_spot_is_run_level_and_names_the_place() -> None:
    spot = CheckpointSpot("thread-1", "sub:graph", "cp-9", 4)
    [line] = command_lines(workflow_commands([note("CK101", message="raw list", where=spot)]))
    command, properties, data = parse_command(line)
    assert command == "error"
    assert properties == {"title": "CK101 plain message list stored by a delta checkpoint"}
    assert data == "thread thread-1, namespace sub:graph, checkpoint cp-9, step 4: raw list"


def test_annotation_without_place_keeps_its_message() -> None:
    [line] = command_lines(workflow_commands([note("CK510", message="two configs disagree")]))
    assert parse_command(line) == (
        "error",
        {"title": "CK510 configs sharing a database disagree"},
        "two configs disagree",
    )


def test_one_line_per_annotation_in_order() -> None:
    annotations = [note(message=str(index), where=FileSpot("c.yaml", index + 1)) for index in range(5)]
    lines = command_lines(workflow_commands(annotations))
    assert [parse_command(line)[2] for line in lines] == ["0", "1", "2", "3", "4"]


def test_no_annotations_no_output() -> None:
    assert workflow_commands([]) == ""


# --- step summary -------------------------------------------------------------------------------------------


def table(summary: str, header: str) -> list[list[str]]:
    """The rows under a header line, split on unescaped pipes."""
    lines = summary.split("\n")
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


RULE_HEADER = "| Rule | Severity | Title | Count |"
FINDINGS_HEADER = "| Location | Rule | Severity | Message |"


def test_summary_heading_headline_and_full_counts() -> None:
    annotations = [note("CK101"), note("CK101"), note("CK305", where=CheckpointSpot("t"))]
    summary = step_summary("verify-shape", annotations, "Checked sqlite /tmp/x.db")
    assert summary.startswith("### ckpt verify-shape\n\nChecked sqlite /tmp/x.db\n\n")
    assert "**Findings:** 3 (error: 2, warning: 0, info: 1)" in summary.split("\n")


def test_summary_rule_table_counts_by_rule_most_severe_first() -> None:
    annotations = [note("CK305"), note("CK501"), note("CK101"), note("CK501"), note("CK501", Severity.ERROR)]
    rows = table(step_summary("lint-config", annotations, "h"), RULE_HEADER)
    assert rows == [
        ["CK101", "error", "plain message list stored by a delta checkpoint", "1"],
        ["CK501", "error", "deprecated flat cadence key", "1"],
        ["CK501", "warning", "deprecated flat cadence key", "2"],
        ["CK305", "info", "fork in a delta thread", "1"],
    ]


def test_summary_findings_table_escapes_pipes_and_newlines() -> None:
    annotations = [
        note(message="a|b\nc\r\nd", where=FileSpot("x|y.yaml", 2)),
        note("CK104", where=CheckpointSpot("t1", "", "cp1")),
        note("CK509", where=FileSpot("c.yaml")),
        note("CK510"),
    ]
    rows = table(step_summary("lint-config", annotations, "h"), FINDINGS_HEADER)
    assert rows == [
        ["thread t1, checkpoint cp1", "CK104", "error", "m"],
        ["-", "CK510", "error", "m"],
        ["x\\|y.yaml:2", "CK501", "warning", "a\\|b<br>c<br>d"],
        ["c.yaml", "CK509", "info", "m"],
    ]


def test_summary_caps_the_findings_table_and_says_how_many_more() -> None:
    # The errors come last in input order; the table still shows them because it is most severe first.
    annotations = [note("CK509", message=f"info {index}") for index in range(SUMMARY_ROW_CAP)]
    annotations += [note("CK101", message=f"error {index}") for index in range(3)]
    summary = step_summary("lint-config", annotations, "h")
    rows = table(summary, FINDINGS_HEADER)
    assert len(rows) == SUMMARY_ROW_CAP == 500
    assert [row[3] for row in rows[:3]] == ["error 0", "error 1", "error 2"]
    assert "…and 3 more findings not shown here (a step summary is limited to 1 MiB)." in summary.split("\n")
    assert "**Findings:** 503 (error: 3, warning: 0, info: 500)" in summary


def test_summary_at_the_cap_has_no_more_line() -> None:
    summary = step_summary("lint-config", [note() for _ in range(SUMMARY_ROW_CAP)], "h")
    assert len(table(summary, FINDINGS_HEADER)) == SUMMARY_ROW_CAP
    assert "more findings" not in summary


def test_summary_caps_long_messages() -> None:
    summary = step_summary("lint-config", [note(message="x" * 5000)], "h")
    [row] = table(summary, FINDINGS_HEADER)
    assert len(row[3]) == 1000 and row[3].endswith("…")


def test_summary_without_findings_has_counts_and_no_tables() -> None:
    summary = step_summary("verify-shape", [], "Checked sqlite a.db")
    assert summary == (
        "### ckpt verify-shape\n\nChecked sqlite a.db\n\n**Findings:** 0 (error: 0, warning: 0, info: 0)\n\n"
    )


def test_successive_summaries_stay_separate() -> None:
    first = step_summary("lint-config", [note()], "one")
    second = step_summary("verify-shape", [], "two")
    assert first.endswith("|\n\n") and not first.endswith("\n\n\n")
    assert "|\n\n### ckpt verify-shape\n" in first + second


# --- SARIF --------------------------------------------------------------------------------------------------


def sarif(annotations: list[Annotation], exit_code: int = 1) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        to_sarif(annotations, command="lint-config", exit_code=exit_code, version="9.9")
    )
    return document


def run_of(annotations: list[Annotation]) -> dict[str, Any]:
    [run] = sarif(annotations)["runs"]
    return run


def test_sarif_document_and_driver() -> None:
    document = sarif([], exit_code=0)
    assert document["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert document["version"] == "2.1.0"
    [run] = document["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("ckpt", "9.9")
    assert "informationUri" not in driver
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 0}]
    assert run["properties"] == {"command": "lint-config"}
    assert run["results"] == []


def test_sarif_lists_every_rule_in_registry_order() -> None:
    rules = run_of([])["tool"]["driver"]["rules"]
    assert [descriptor["id"] for descriptor in rules] == list(RULES)
    levels = {"error": "error", "warning": "warning", "info": "note"}
    for descriptor, entry in zip(rules, RULES.values(), strict=True):
        assert descriptor["shortDescription"] == {"text": entry.title}
        assert descriptor["fullDescription"] == {"text": entry.impact}
        assert descriptor["defaultConfiguration"] == {"level": levels[entry.severity.value]}
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", descriptor["name"])
    assert rules[4]["name"] == "PayloadUnsafeToLoadPickleOrAForeignType"
    assert len({descriptor["name"] for descriptor in rules}) == len(rules)


def test_sarif_results_point_at_their_rule_and_map_levels() -> None:
    annotations = [note("CK101"), note("CK101", Severity.INFO), note("CK505"), note("CK305", Severity.WARNING)]
    run = run_of(annotations)
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert [rules[result["ruleIndex"]]["id"] for result in results] == [result["ruleId"] for result in results]
    assert [result["ruleId"] for result in results] == ["CK101", "CK101", "CK505", "CK305"]
    assert [result["level"] for result in results] == ["error", "note", "warning", "warning"]
    assert all(result["message"] == {"text": "m"} for result in results)
    assert all("locations" not in result for result in results)


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        ("config.yaml", "config.yaml"),
        ("conf dir/ü.yaml", "conf%20dir/%C3%BC.yaml"),
        ("c:x.yaml", "c%3Ax.yaml"),
        ("../up/100%.yaml", "../up/100%25.yaml"),
        ("/srv/deer flow/config.yaml", "file:///srv/deer%20flow/config.yaml"),
    ],
)
def test_sarif_file_uris(path: str, uri: str) -> None:
    [result] = run_of([note(where=FileSpot(path, 12))])["results"]
    assert result["locations"] == [
        {"physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": 12}}}
    ]


def test_sarif_file_without_line_has_no_region() -> None:
    [result] = run_of([note(where=FileSpot("config.yaml"))])["results"]
    assert result["locations"] == [{"physicalLocation": {"artifactLocation": {"uri": "config.yaml"}}}]
    assert "properties" not in result


@pytest.mark.parametrize(
    ("spot", "name", "qualified"),
    [
        (CheckpointSpot("t1", "", "cp1", 3), "cp1", "t1//cp1"),
        (CheckpointSpot("t1", "sub:1", "cp1"), "cp1", "t1/sub:1/cp1"),
        (CheckpointSpot("t1", "sub:1"), "t1", "t1/sub:1"),
        (CheckpointSpot("t1"), "t1", "t1"),
        (CheckpointSpot("a/b", "", "50%"), "50%", "a%2Fb//50%25"),
    ],
)
def test_sarif_checkpoint_logical_location(spot: CheckpointSpot, name: str, qualified: str) -> None:
    [result] = run_of([note("CK102", where=spot)])["results"]
    assert result["locations"] == [
        {"logicalLocations": [{"name": name, "fullyQualifiedName": qualified, "kind": "object"}]}
    ]
    assert result["properties"] == {
        "thread_id": spot.thread_id,
        "checkpoint_ns": spot.checkpoint_ns,
        "checkpoint_id": spot.checkpoint_id,
        "step": spot.step,
    }


def test_sarif_checkpoint_fingerprint_follows_rule_and_place_not_message() -> None:
    def fingerprint(annotation: Annotation) -> str:
        [result] = run_of([annotation])["results"]
        [value] = result["partialFingerprints"].values()
        return str(value)

    base = fingerprint(note("CK102", message="one", where=CheckpointSpot("t", "", "cp", 1)))
    assert base == fingerprint(note("CK102", message="two", where=CheckpointSpot("t", "", "cp", 2)))
    assert base != fingerprint(note("CK102", where=CheckpointSpot("t", "", "cp2")))
    assert base != fingerprint(note("CK104", where=CheckpointSpot("t", "", "cp")))


def test_sarif_is_deterministic_with_two_space_indent() -> None:
    annotations = [note(where=FileSpot("c.yaml", 1)), note("CK101", where=CheckpointSpot("t", "", "cp"))]
    first = to_sarif(annotations, command="verify-shape", exit_code=1, version="0.1.0")
    assert first == to_sarif(annotations, command="verify-shape", exit_code=1, version="0.1.0")
    assert first.startswith('{\n  "$schema": ') and first.endswith("}\n")


# --- SARIF against the OASIS schema --------------------------------------------------------------------------

# RFC 3986 characters; jsonschema checks 'uri' formats only with optional packages, so the test brings its own.
URI_REFERENCE = re.compile(r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def is_uri_reference(value: object) -> bool:
    return not isinstance(value, str) or URI_REFERENCE.fullmatch(value) is not None


def is_uri(value: object) -> bool:
    return not isinstance(value, str) or (is_uri_reference(value) and URI_SCHEME.match(value) is not None)


@pytest.fixture(scope="module")
def validator() -> Draft7Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert schema["$id"].endswith("/sarif-schema-2.1.0.json")
    Draft7Validator.check_schema(schema)
    checker = FormatChecker()
    checker.checks("uri")(is_uri)
    checker.checks("uri-reference")(is_uri_reference)
    return Draft7Validator(schema, format_checker=checker)


def errors(validator: Draft7Validator, document: dict[str, Any]) -> list[str]:
    return [f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(document)]


EVERY_KIND = [
    note("CK501", Severity.WARNING, "flat key: snapshot_frequency, 5", FileSpot("conf dir/config.yaml", 3)),
    note("CK509", Severity.INFO, "env", FileSpot("/etc/deer flow/ü.yaml")),
    note("CK500", Severity.ERROR, "cannot load", FileSpot("c:x.yaml")),
    note("CK101", Severity.ERROR, "raw list\nstored", CheckpointSpot("t/1", "", "cp1", 4)),
    note("CK305", Severity.INFO, "fork", CheckpointSpot("t2", "sub:1")),
    note("CK204", Severity.WARNING, "reset", CheckpointSpot("t3")),
    note("CK510", Severity.ERROR, "disagree"),
]


def test_sarif_validates_against_the_oasis_schema(validator: Draft7Validator) -> None:
    document = sarif(EVERY_KIND)
    assert {result["level"] for result in document["runs"][0]["results"]} == {"error", "warning", "note"}
    assert errors(validator, document) == []
    assert errors(validator, sarif([], exit_code=0)) == []


@pytest.mark.parametrize(
    "break_it",
    [
        lambda document: document["runs"][0]["results"][0].update(level="info"),
        lambda document: document["runs"][0]["tool"]["driver"].pop("name"),
        lambda document: document["runs"][0]["results"][0]["locations"][0]["physicalLocation"][
            "artifactLocation"
        ].update(uri="conf dir/config.yaml"),
        lambda document: document["runs"][0]["results"][0]["locations"][0]["physicalLocation"].update(
            region={"startLine": 0}
        ),
        lambda document: document.update(extra=True),
    ],
    ids=["level-info", "driver-without-name", "uri-with-space", "line-zero", "unknown-top-level-key"],
)
def test_the_schema_check_can_fail(validator: Draft7Validator, break_it: Any) -> None:
    document = sarif(EVERY_KIND)
    break_it(document)
    assert errors(validator, document) != []
