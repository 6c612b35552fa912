"""DeerFlow's `database:` models as ckpt checks them: every key and its pydantic type.

Mirrors DatabaseConfig and its three nested models in deerflow/config/database_config.py. None of them
sets `model_config`, so pydantic's default extra="ignore" drops every other key without a word.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from deerflow_ckpt.config.keys import CADENCE_KEY, CHANNEL_MODE_KEY, CHANNEL_MODES, DELTA_SECTION

if TYPE_CHECKING:
    from pydantic import TypeAdapter

GRAPH_CACHE_SECTION = "checkpoint_graph_cache"
HISTORY_CACHE_SECTION = "checkpoint_cache"
BACKENDS = ("memory", "sqlite", "postgres")
# The Literal fields' values, exact and case-sensitive as pydantic checks them.
LITERALS: dict[str, tuple[str, ...]] = {
    "backend": BACKENDS,
    "channel_mode": CHANNEL_MODES,
    "cache_type": ("memory", "redis"),
}
# deerflow/config/postgres_schema.py: an empty string, or a plain lowercase identifier.
POSTGRES_SCHEMA_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# Each key maps to a type name `check` knows ("section" for a nested model, "cadence" for read_cadence).
DATABASE_FIELDS: dict[str, str] = {
    "backend": "backend",
    CHANNEL_MODE_KEY: "channel_mode",
    DELTA_SECTION: "section",
    GRAPH_CACHE_SECTION: "section",
    HISTORY_CACHE_SECTION: "section",
    "sqlite_dir": "str",
    "postgres_url": "str",
    "echo_sql": "bool",
    "pool_size": "int",
    "pool_recycle": "positive_int",
    "command_timeout": "optional_positive_float",
    "postgres_schema": "str",
}

SECTION_FIELDS: dict[str, dict[str, str]] = {
    DELTA_SECTION: {CADENCE_KEY: "cadence"},
    GRAPH_CACHE_SECTION: {"accessor_graph_max": "int_ge1"},
    HISTORY_CACHE_SECTION: {
        "type": "cache_type",
        "max_entries": "non_negative_int",
        "redis_url": "optional_str",
        "ttl_seconds": "non_negative_int",
        "key_prefix": "str",
    },
}


@functools.cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    # pydantic costs ~0.2 s to import; only files with values to check pay it.
    from typing import Annotated, Literal

    from pydantic import Field as PydanticField
    from pydantic import TypeAdapter

    types: dict[str, Any] = {
        **{kind: Literal[choices] for kind, choices in LITERALS.items()},
        "str": str,
        "optional_str": str | None,
        "bool": bool,
        "int": int,
        "int_ge1": Annotated[int, PydanticField(ge=1)],
        "positive_int": Annotated[int, PydanticField(gt=0)],
        "non_negative_int": Annotated[int, PydanticField(ge=0)],
        "optional_positive_float": Annotated[float, PydanticField(gt=0)] | None,
    }
    return TypeAdapter(types[kind])


def check(kind: str, value: object) -> str | None:
    """pydantic's complaint about `value` for a field of this kind (lax mode, as DeerFlow validates), or None."""
    from pydantic import ValidationError

    try:
        _adapter(kind).validate_python(value)
    except ValidationError as exc:
        return str(exc.errors()[0]["msg"])
    return None


def literal_hint(kind: str, value: object) -> str:
    """`Delta` for `delta`: pydantic's literals are case-sensitive."""
    choices = LITERALS.get(kind, ())
    if isinstance(value, str):
        for choice in choices:
            if value.strip().lower() == choice and value != choice:
                return f" (the values are case-sensitive and exact: write {choice})"
    return ""


def schema_problem(value: str) -> str | None:
    if value and not POSTGRES_SCHEMA_PATTERN.fullmatch(value):
        return (
            "postgres_schema must be a plain lowercase PostgreSQL identifier matching "
            f"{POSTGRES_SCHEMA_PATTERN.pattern}; got {value!r}"
        )
    return None
