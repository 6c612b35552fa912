"""DeerFlow's `database:` models as ckpt checks them: every key, its pydantic type and its default.

Mirrors DatabaseConfig and its three nested models in deerflow/config/database_config.py. None of them
sets `model_config`, so pydantic's default extra="ignore" drops every other key without a word.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deerflow_ckpt.config.keys import (
    CADENCE_KEY,
    CHANNEL_MODE_KEY,
    DEFAULT_CADENCE,
    DEFAULT_CHANNEL_MODE,
    DELTA_SECTION,
    FILE_DATABASE_DEFAULTS,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

GRAPH_CACHE_SECTION = "checkpoint_graph_cache"
HISTORY_CACHE_SECTION = "checkpoint_cache"
BACKENDS = ("memory", "sqlite", "postgres")
# deerflow/config/postgres_schema.py: an empty string, or a plain lowercase identifier.
POSTGRES_SCHEMA_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True)
class Field:
    # One of the type names `check` knows ("section" for a nested model).
    kind: str
    default: object


DATABASE_FIELDS: dict[str, Field] = {
    "backend": Field("backend", FILE_DATABASE_DEFAULTS["backend"]),
    CHANNEL_MODE_KEY: Field("channel_mode", DEFAULT_CHANNEL_MODE),
    DELTA_SECTION: Field("section", {}),
    GRAPH_CACHE_SECTION: Field("section", {}),
    HISTORY_CACHE_SECTION: Field("section", {}),
    "sqlite_dir": Field("str", FILE_DATABASE_DEFAULTS["sqlite_dir"]),
    "postgres_url": Field("str", ""),
    "echo_sql": Field("bool", False),
    "pool_size": Field("int", 5),
    "pool_recycle": Field("positive_int", 300),
    "command_timeout": Field("optional_positive_float", 30),
    "postgres_schema": Field("str", ""),
}

SECTION_FIELDS: dict[str, dict[str, Field]] = {
    DELTA_SECTION: {CADENCE_KEY: Field("cadence", DEFAULT_CADENCE)},
    GRAPH_CACHE_SECTION: {"accessor_graph_max": Field("int_ge1", 64)},
    HISTORY_CACHE_SECTION: {
        "type": Field("cache_type", "memory"),
        "max_entries": Field("non_negative_int", 128),
        "redis_url": Field("optional_str", None),
        "ttl_seconds": Field("non_negative_int", 86400),
        "key_prefix": Field("str", ""),
    },
}


@functools.cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    # pydantic costs ~0.2 s to import; only files with values to check pay it.
    from typing import Annotated, Literal

    from pydantic import Field as PydanticField
    from pydantic import TypeAdapter

    types: dict[str, Any] = {
        "backend": Literal["memory", "sqlite", "postgres"],
        "channel_mode": Literal["full", "delta"],
        "cache_type": Literal["memory", "redis"],
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
    choices = {"backend": BACKENDS, "channel_mode": ("full", "delta"), "cache_type": ("memory", "redis")}.get(kind, ())
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
