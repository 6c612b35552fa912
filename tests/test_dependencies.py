"""ckpt's runtime dependencies are exactly what its commands import: every `import` in deerflow_ckpt (deferred
and `TYPE_CHECKING` ones included) outside the standard library names a distribution pyproject.toml lists,
and every listed distribution is imported somewhere. What only the demo, the fixture builder and the tests
need (LangGraph and its savers) is an extra."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "deerflow_ckpt"


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement (PEP 503): `psycopg[binary]>=3.3` -> `psycopg`."""
    bare = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", bare).lower()


def _imported_top_levels() -> dict[str, set[str]]:
    """Each top-level module deerflow_ckpt imports from outside itself and the standard library, with the files."""
    found: dict[str, set[str]] = {}
    for source in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "deerflow_ckpt" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(source.relative_to(REPO)))
    return found


def test_runtime_dependencies_are_what_the_package_imports() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {_name(requirement) for requirement in project["dependencies"]}
    owners = packages_distributions()
    imported = _imported_top_levels()
    by_distribution: dict[str, set[str]] = {}
    for top, files in imported.items():
        assert top in owners, f"{top} (imported by {sorted(files)}) belongs to no installed distribution"
        for distribution in owners[top]:
            by_distribution.setdefault(_name(distribution), set()).update(files)
    undeclared = {name: sorted(files) for name, files in by_distribution.items() if name not in declared}
    assert not undeclared, f"imported but not a dependency in pyproject.toml: {undeclared}"
    unused = declared - by_distribution.keys()
    assert not unused, f"dependencies no module of deerflow_ckpt imports (make them an extra): {sorted(unused)}"
    # The savers and LangGraph's runtime are extras: no command may import them.
    extras = {_name(requirement) for requirement in project["optional-dependencies"]["fixtures"]}
    assert {"langgraph", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres"} <= extras
    assert extras.isdisjoint(declared)
