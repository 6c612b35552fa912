"""Differential: DeerFlow's loading rules, restated in tests/deerflow_reference.py, against ckpt's reading.

The reference follows docs/deerflow-config.md step by step with the real libraries DeerFlow uses: the
file opened as UTF-8 text and read by `yaml.safe_load`, `$VAR` resolution over every value (an unset
variable fails the load), the `database:` file defaults, the legacy-key shim, and pydantic models with
DeerFlow's field types. Generated `database:` sections (TABs, BOMs, `$VAR`s, the shim's branches, odd
values) must give the same verdict on those sections (refused or not) and, when accepted, the same
effective settings. DeerFlow's other sections are not compared: lint-config does not check them.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deerflow_ckpt.config.database import read_database_settings
from deerflow_ckpt.config.lint import lint_config_bytes
from deerflow_ckpt.config.values import load_values
from tests.deerflow_reference import REFUSALS, Checkpointer, Database, apply_database_defaults, resolve_variables

ENVIRON = {"SNAP": "250", "MODE": "delta", "URL": "postgresql://u:pw@db:5432/deerflow", "EMPTY": ""}


def _libpq_reads(dsn: str | None) -> bool:
    """libpq (through psycopg) parses the DSN, after the `+driver` suffix DeerFlow strips."""
    from psycopg.conninfo import conninfo_to_dict

    if not dsn:
        return False  # the providers raise before any pool is built (see deerflow_reading)
    try:
        conninfo_to_dict(re.sub(r"^postgres(?:ql)?\+[A-Za-z0-9_]+://", "postgresql://", dsn))
    except Exception:
        return False
    return True


# Verdicts when DeerFlow cannot run with a file: AppConfig.from_file raises, or the file loads and the
# process stops at startup (lint-config's CK500/CK503 and CK513).
LOAD_FAILS = "load fails"
STARTUP_FAILS = "startup fails"


def deerflow_reading(text: str, environ: dict[str, str]) -> tuple[Any, ...] | str:
    """The database settings DeerFlow's loader would run with, or the step at which it gives up.

    Startup: bytedance/deer-flow f1f4af99, backend/packages/harness/deerflow/runtime/checkpointer/provider.py
    lines 45, 75-77, 137-139 and async_provider.py lines 129-134, 171-176 (an empty postgres_url or
    connection_string raises; any other goes to a psycopg pool, which fails on what libpq cannot read).
    """
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "config.yaml"
        path.write_bytes(text.encode("utf-8"))
        try:
            with open(path, encoding="utf-8") as stream:
                data = yaml.safe_load(stream) or {}
            data = resolve_variables(data, environ)
            apply_database_defaults(data)
            model = Database.model_validate(data["database"])
            section = data.get("checkpointer")
            checkpointer = None if section is None else Checkpointer.model_validate(section)
        except REFUSALS:
            return LOAD_FAILS
    if model.backend == "postgres" and not _libpq_reads(model.postgres_url):
        # "database.postgres_url is required for the postgres backend", or the pool fails to connect.
        return STARTUP_FAILS
    if (
        checkpointer is not None
        and checkpointer.type == "postgres"
        and not _libpq_reads(checkpointer.connection_string)
    ):
        # "checkpointer.connection_string is required for the postgres backend", or the pool fails.
        return STARTUP_FAILS
    legacy = None if checkpointer is None else (
        checkpointer.type, checkpointer.connection_string, checkpointer.postgres_schema
    )  # fmt: skip
    return (
        model.backend,
        model.checkpoint_channel_mode,
        model.checkpoint_delta.snapshot_frequency,
        model.sqlite_dir,
        model.postgres_url,
        model.postgres_schema,
        legacy,
    )


def ckpt_reading(text: str, environ: dict[str, str]) -> tuple[Any, ...] | str:
    """ckpt's reading of the same text: lint-config's verdict, and the settings verify-shape would use."""
    rules = {finding.rule for finding in lint_config_bytes(text.encode("utf-8"), environ, Path("/")).findings}
    if rules & {"CK500", "CK503"}:
        return LOAD_FAILS
    if "CK513" in rules:
        return STARTUP_FAILS
    data = load_values(text)
    chosen = read_database_settings(data, environ)
    override = chosen.checkpointer
    legacy = None if override is None else (override.kind, override.connection_string, override.postgres_schema or "")
    return (
        chosen.backend,
        chosen.channel_mode,
        chosen.cadence.effective,
        chosen.sqlite_dir,
        chosen.postgres_url,
        chosen.postgres_schema,
        legacy,
    )


GAP = st.sampled_from([" ", " ", " ", "\t", "  "])
VALUES = {
    "backend": ["sqlite", "postgres", "memory", "Sqlite", "$MISSING", "mysql"],
    "checkpoint_channel_mode": ["delta", "full", "Delta", "$MODE", "yes", "~"],
    "sqlite_dir": ["data", ".deer-flow/data", "''", "$EMPTY", "[a]"],
    "postgres_url": ["$URL", "postgresql://h/db", "''", "$MISSING"],
    "postgres_schema": ["team_a", "''", "Team", "$EMPTY"],
    "checkpoint_delta_snapshot_frequency": ["1000", "'250'", "$SNAP", "010", "1:30", "true", "0", "~", "1.5", "1e3"],
}
CHECKPOINTER_VALUES = {
    "type": ["postgres", "sqlite", "memory", "SQLite", "$MISSING"],
    "connection_string": ["$URL", "store.db", "123", "~", "postgresql://h/db"],
    "postgres_schema": ["team_a", "Bad", "''", "~", "$EMPTY"],
}
DELTA_SHAPES = [
    "", "~", "5", "[1]", "{}", "{snapshot_frequency: 7}", "{snapshot_frequency: $SNAP}", "{snapshot_frequency: no}",
    "{snapshot_frequency: 100.0}", "{foo: 1}", "\n    snapshot_frequency: 12", "\n    snapshot_frequency: null",
]  # fmt: skip


@st.composite
def configs(draw: st.DrawFn) -> str:
    lines = [f"database:{draw(st.sampled_from(['', ' # db', chr(9)]))}"]
    keys = draw(st.lists(st.sampled_from(sorted(VALUES)), max_size=5, unique=True))
    for key in keys:
        lines.append(f"  {key}:{draw(GAP)}{draw(st.sampled_from(VALUES[key]))}{draw(st.sampled_from(['', '  # x']))}")
    if draw(st.booleans()):
        lines.insert(
            draw(st.integers(1, len(lines))), f"  checkpoint_delta:{draw(GAP)}{draw(st.sampled_from(DELTA_SHAPES))}"
        )
    if draw(st.booleans()):
        lines.insert(0, draw(st.sampled_from(["models: []", "log_level: $MISSING", "tools: [$SNAP]", "title: x"])))
    if draw(st.booleans()):
        lines.append("checkpointer:")
        for key, values in CHECKPOINTER_VALUES.items():
            if draw(st.booleans()):
                lines.append(f"  {key}:{draw(GAP)}{draw(st.sampled_from(values))}")
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["\ufeff", "\t", " \t"])) + text[at:]
    return text


@pytest.mark.slow
@given(configs())
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_ckpt_reads_generated_database_sections_as_deerflow_does(text: str) -> None:
    assert ckpt_reading(text, ENVIRON) == deerflow_reading(text, ENVIRON), text


@pytest.mark.parametrize(
    "text",
    [
        "database:\n  backend: sqlite\t\n",
        "database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: $SNAP\n",
        "database:\n  checkpoint_delta_snapshot_frequency: 5\n  checkpoint_delta: {snapshot_frequency: 7}\n",
        "database:\n  checkpoint_delta_snapshot_frequency: 5\n  checkpoint_delta: 3\n",
        "models: [$MISSING]\ndatabase:\n  backend: sqlite\n",
        "\ufeffdatabase:\n  backend: postgres\n  postgres_url: $URL\n",
        "database:\n  backend: sqlite\n\ufeff  sqlite_dir: x\n",
        # A connection string libpq cannot read: DeerFlow's pool fails at startup, ckpt says CK513.
        "database:\ncheckpointer:\n  type: postgres\n  connection_string: store.db\n",
        "database:\n  backend: postgres\n  postgres_url: store.db\n",
        # No DSN at all: the file loads and the providers raise at startup, in either section.
        "database:\n  backend: postgres\n",
        "checkpointer:\n  type: postgres\n",
        "checkpointer:\n  type: postgres\n  connection_string: ''\n",
        # database: still serves DeerFlow's app tables under a checkpointer override.
        "\ufeffdatabase:\n  backend: postgres\n  checkpoint_channel_mode: delta\ncheckpointer:\n  type: postgres\n",
    ],
)
def test_known_cases_agree(text: str) -> None:
    assert ckpt_reading(text, ENVIRON) == deerflow_reading(text, ENVIRON), text
