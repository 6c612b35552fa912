"""DeerFlow's `$VAR` resolution for lint-config, keeping a record of every reference it resolved.

AppConfig.resolve_env_variables replaces every string value that starts with `$` (keys never) by that
environment variable, and fails the whole load when one is unset. ckpt resolves from the environment it
runs in; an unset variable becomes `Unset`, a value ckpt cannot know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow_ckpt.config.database import resolve_reference
from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.redact import remember_credential


@dataclass(frozen=True)
class Unset:
    """A `$VAR` whose variable is not set where ckpt runs."""

    name: str


@dataclass(frozen=True)
class Reference:
    # Keys from the top of the file down to the value (list items by index).
    path: tuple[Any, ...]
    name: str
    # The resolved string, or Unset.
    value: object


def resolve_tree(value: object, path: tuple[Any, ...], environ: Mapping[str, str], found: list[Reference]) -> object:
    """`value` with every `$VAR` string resolved, recursively through mappings and lists."""
    if isinstance(value, dict):
        return {key: resolve_tree(item, (*path, key), environ, found) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_tree(item, (*path, index), environ, found) for index, item in enumerate(value)]
    resolved, name = resolve_reference(value, environ)
    if name is None:
        return value
    outcome = Unset(name) if resolved is None else resolved
    if isinstance(outcome, str):
        remember_credential(path, outcome)  # a password from the environment is masked like one written here
    found.append(Reference(path, name, outcome))
    return outcome


def first_unset(data: object, environ: Mapping[str, str], assumed: frozenset[str] = frozenset()) -> Reference | None:
    """The `$VAR` DeerFlow's load fails on in `environ`, or None: resolve_env_variables walks the whole file
    (mappings in their order, lists item by item) before anything is validated, and raises at the first unset
    one, so no later step (the legacy-key shim and its warning included) runs. `assumed` names variables set
    where DeerFlow runs though unset here ("*": all)."""
    if "*" in assumed:
        return None
    found: list[Reference] = []
    resolve_tree(data, (), environ, found)
    return next((ref for ref in found if isinstance(ref.value, Unset) and ref.name not in assumed), None)
