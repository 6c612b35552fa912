"""Inert reading of json-typed payloads: the LangChain objects LangGraph's loader would revive, named, never built.

JsonPlusSerializer.loads_typed reads a "json" payload with `json.loads(data, object_hook=reviver)`, and its
reviver builds LangChain's serialized objects whatever LANGGRAPH_STRICT_MSGPACK says (strict mode guards
msgpack only): `{"lc": 1, "type": "constructor", "id": [...], "kwargs": {...}}` through langchain_core's
Reviver (any class of its "core" mappings: prompts, documents, messages...), and `{"lc": 2, ...}` through its
own, for a type on the strict list (or any type allowed_json_modules admits). Here the same `json.loads`
runs with a hook that records what each such object names and leaves it the plain dict it is, so the
judge reads exactly the objects the loader would see, bottom-up, duplicate keys and all. One thing differs:
the loader has already rebuilt the inner objects when it reads an outer one's "lc", "type" and "id", so one
of those that is itself an object (or an id holding one) may compare equal to anything; such an object cannot
be judged.
"""

from __future__ import annotations

import json
from typing import Any

from deerflow_ckpt.store.peek import SAFE_TYPES, UndecodableError, UnjudgeableError

# The message classes of the strict list, each under the ids langchain_core's Reviver resolves to it.
_MESSAGE_TYPES = sorted((module, name) for module, name in SAFE_TYPES if module.startswith("langchain_core.messages."))
_DOCUMENT = ("langchain_core.documents.base", "Document")
# The lc 1 ids langchain_core's default Reviver (allowed_objects="core") admits and builds as a type of the
# strict list: the messages and Document under their own paths and their legacy serialization ids
# (langchain.schema...). tests/test_hardening_judge.py computes this set from the installed langchain_core's
# mappings, so a new langchain_core cannot change what an id builds unnoticed.
LC_SAFE_IDS = frozenset(
    {
        *((*module.split("."), name) for module, name in (*_MESSAGE_TYPES, _DOCUMENT)),
        *(
            (*prefix, name)
            for prefix in (("langchain_core", "messages"), ("langchain", "schema", "messages"))
            for _, name in _MESSAGE_TYPES
        ),
        *(
            ("langchain", "schema", name)
            for name in ("AIMessage", "ChatMessage", "FunctionMessage", "HumanMessage", "SystemMessage")
        ),
        ("langchain", "schema", "document", "Document"),
    }
)
# JSON values the loader may have rebuilt into objects by the time it reads them (scalars it never touches).
_CONTAINERS = (dict, list)
# A name from the database is shown at most this long in a finding.
_SHOWN_NAME = 120


def _shown(identifier: Any) -> str:
    """An object's id as a finding names it: dotted when it is a list of text, else its repr; cut short."""
    if type(identifier) is list and all(type(part) is str for part in identifier):
        text = ".".join(identifier)
    else:
        text = repr(identifier)
    return text if len(text) <= _SHOWN_NAME else text[: _SHOWN_NAME - 3] + "..."


def _trusted(version: int, identifier: Any) -> bool:
    """LangGraph builds only a type of the strict list from this id (a list of text, as the loaders read it)."""
    if type(identifier) is not list or not all(type(part) is str for part in identifier):
        return False  # the loaders take any iterable apart; ckpt trusts only the plain form
    if version == 2:
        return len(identifier) >= 2 and (".".join(identifier[:-1]), identifier[-1]) in SAFE_TYPES
    return tuple(identifier) in LC_SAFE_IDS


class JsonJudge:
    """Reads one json payload as LangGraph's loader does and names the LangChain objects it would revive.

    After `decode` (also when it raised: the loader builds what it met before the error), `untrusted` lists
    (lc version, shown id) of each object LangGraph would construct from a type outside the strict list,
    `refused` the ids of `not_implemented` objects, on which langchain_core's Reviver raises (so the read
    fails), and `unjudged` the keys of objects whose "lc", "type" or "id" the loader would have rebuilt first.
    """

    __slots__ = ("refused", "unjudged", "untrusted")

    def __init__(self) -> None:
        self.untrusted: list[tuple[int, str]] = []
        self.refused: list[str] = []
        self.unjudged: list[str] = []

    def decode(self, data: bytes | str) -> Any:
        """The payload as plain JSON values; UnjudgeableError past the decoder's depth, UndecodableError
        for text that is not JSON."""
        self.untrusted = []
        self.refused = []
        self.unjudged = []
        try:
            return json.loads(data, object_hook=self._hook)
        except RecursionError:
            # LangGraph's process may follow deeper nesting (its recursion limit, its stack): not garbage.
            raise UnjudgeableError("JSON nested deeper than ckpt's decoder follows") from None
        except ValueError as exc:  # UnicodeDecodeError and json.JSONDecodeError included
            raise UndecodableError(str(exc) or type(exc).__name__) from None

    def _hook(self, value: dict[str, Any]) -> dict[str, Any]:
        # The loaders' own tests, with Python's equality (so `"lc": true` is lc 1 and `"lc": 2.0` is lc 2).
        version = value.get("lc")
        if type(version) in _CONTAINERS:
            self.unjudged.append("lc")  # revived first, it may equal 1 or 2
            return value
        if version != 1 and version != 2:
            return value
        identifier = value.get("id")
        kind = value.get("type")
        if type(kind) in _CONTAINERS:
            self.unjudged.append("type")
            return value
        if type(identifier) is dict or (
            type(identifier) is list and any(type(part) in _CONTAINERS for part in identifier)
        ):
            self.unjudged.append("id")
            return value
        if identifier is None:
            return value
        if kind == "constructor":
            number = 1 if version == 1 else 2
            if not _trusted(number, value["id"]):
                self.untrusted.append((number, _shown(value["id"])))
        elif kind == "not_implemented" and version == 1:
            self.refused.append(_shown(value["id"]))
        return value

    def untrusted_names(self) -> list[tuple[int, str]]:
        return sorted(set(self.untrusted))
