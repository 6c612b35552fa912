"""What the installed LangGraph Postgres saver knows about the tables it sets up, read without importing it.

langgraph-checkpoint-postgres applies its schema as a list of migrations (`MIGRATIONS` in its `base`
module) and records each applied one as a row of `checkpoint_migrations`. Comparing the two says which
saver generation set a database up: DeerFlow pins savers older than the one installed here, and their
databases lack later columns (`checkpoint_writes.task_path`). Importing the saver costs most of a second,
so its list is counted from its source with `ast` (the package is a dependency: it is always there).
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

POSTGRES_SAVER = "langgraph-checkpoint-postgres"
_POSTGRES_PACKAGE = "langgraph.checkpoint.postgres"


@dataclass(frozen=True)
class SaverSchema:
    distribution: str
    version: str
    migrations: int


@functools.cache
def installed_postgres_schema() -> SaverSchema | None:
    """The installed Postgres saver's version and migration count, or None when it cannot be read."""
    try:
        spec = importlib.util.find_spec(_POSTGRES_PACKAGE)
        version = importlib.metadata.version(POSTGRES_SAVER)
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        tree = ast.parse(Path(next(iter(spec.submodule_search_locations)), "base.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for statement in tree.body:
        target = statement.targets[0] if isinstance(statement, ast.Assign) else getattr(statement, "target", None)
        value = getattr(statement, "value", None)
        if isinstance(target, ast.Name) and target.id == "MIGRATIONS" and isinstance(value, ast.List):
            return SaverSchema(POSTGRES_SAVER, version, len(value.elts))
    return None


def describe_setup(applied: int | None) -> str | None:
    """One line on which saver generation set the tables up, or None when nothing can be said."""
    if applied is None:
        return None
    installed = installed_postgres_schema()
    if installed is None:
        return f"{applied} saver migrations applied"
    mine = f"the installed {installed.distribution} {installed.version} has {installed.migrations}"
    if applied < installed.migrations:
        return f"{applied} saver migrations applied ({mine}): set up by an older saver, later columns may be absent"
    if applied > installed.migrations:
        return f"{applied} saver migrations applied ({mine}): set up by a newer saver"
    return f"{applied} saver migrations applied ({mine})"
