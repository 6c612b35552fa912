"""The quick start's demo project is one DeerFlow would run: its config loads under DeerFlow's loader as
tests/deerflow_reference.py restates it, with no variable set, and `ckpt lint-config` passes it as it is.

The demo keeps the deprecated flat cadence key on purpose (migrate-config's job in the quick start).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from fixtures.demo import DEMO_CONFIG
from tests.cli import run_ckpt
from tests.deerflow_reference import LEGACY_KEY, REFUSALS, load_app_config

TEXT = DEMO_CONFIG.read_text(encoding="utf-8")


def without_section(text: str, name: str) -> str:
    """The text with one top-level section (its key line and the indented lines under it) removed."""
    return re.sub(rf"^{name}:.*\n(?:[ #].*\n|\n)*", "", text, flags=re.M)


def test_the_demo_config_loads_under_deerflows_loader_with_no_variable_set() -> None:
    config = load_app_config(TEXT, {})
    assert config.sandbox.use == "deerflow.sandbox.local:LocalSandboxProvider"
    assert [model.name for model in config.models] == ["gpt-4o"]
    assert "api_key" not in (config.models[0].model_extra or {})
    # Still on the legacy key, carried by DeerFlow's shim.
    assert LEGACY_KEY in yaml.safe_load(TEXT)["database"]
    assert (config.database.backend, config.database.sqlite_dir) == ("sqlite", ".deer-flow/data")
    assert (config.database.checkpoint_channel_mode, config.database.checkpoint_delta.snapshot_frequency) == (
        "delta",
        3,
    )


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(without_section(TEXT, "sandbox"), id="no sandbox"),
        pytest.param(TEXT.replace("  use: deerflow.sandbox.local:LocalSandboxProvider\n", ""), id="null sandbox"),
        pytest.param(TEXT.replace("    model: gpt-4o\n", ""), id="a model entry without model"),
        pytest.param(TEXT + "max_recursion_limit: 0\n", id="max_recursion_limit 0"),
    ],
)
def test_the_restated_loader_refuses_what_deerflow_refuses(broken: str) -> None:
    assert broken != TEXT
    with pytest.raises(REFUSALS):
        load_app_config(broken, {})


def test_an_unset_variable_anywhere_refuses_the_demo_and_a_set_one_loads_it() -> None:
    with_key = TEXT.replace("    model: gpt-4o\n", "    model: gpt-4o\n    api_key: $OPENAI_API_KEY\n")
    with pytest.raises(ValueError, match="Environment variable OPENAI_API_KEY not found"):
        load_app_config(with_key, {})
    assert (load_app_config(with_key, {"OPENAI_API_KEY": "sk-test"}).models[0].model_extra or {})[
        "api_key"
    ] == "sk-test"


def test_lint_config_passes_the_demo_without_assume_set(tmp_path: Path) -> None:
    shutil.copyfile(DEMO_CONFIG, tmp_path / "config.yaml")  # as fixtures/demo.py writes it
    result = run_ckpt("lint-config", "--format", "json", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    # Only the deprecated key the quick start migrates: no CK500 for a variable unset here.
    assert [(f["rule"], f["line"]) for f in document["findings"]] == [("CK501", 18)]
    (entry,) = document["files"]
    assert (entry["yaml_valid"], entry["database_valid"]) == (True, True)
    text = run_ckpt("lint-config", "--color", "never", cwd=tmp_path)
    assert text.exit_code == 0 and "1 config file: 0 errors, 1 warning, 0 info.\n" in text.stdout
