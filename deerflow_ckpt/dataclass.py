"""ckpt's `dataclass`: the standard library's, with `__repr__`, `__eq__` and `__hash__` shared instead of compiled.

`dataclasses.dataclass` writes each method it adds as source text and compiles it with its own `exec`: a frozen
class costs about 0.45 ms (Python 3.11 to 3.13 alike), and the 55 classes a `verify-shape` run imports cost
about 29 ms of its start-up, a tenth of a 45,000-checkpoint store's whole run. Here the standard library still
writes `__init__` (which runs for every instance) and a frozen class's `__setattr__` and `__delattr__`; the other
three are one function each, made from a tuple of the class's field names, which takes a third off a frozen
class and half off another. They behave as the standard library's do, for the options ckpt uses
(`tests/test_dataclass.py` holds them side by side, on Python 3.11, 3.12 and 3.13): the same repr text (`...`
where it recurs); equality only with the same class, then by the compared fields in order (as tuples before
Python 3.13; from it, after an identity test, as `a == a' and b == b' and ...`); the same hash action
(`__hash__` of the hashed fields for frozen classes, None for the others, a `__hash__` of the class's own kept).
Only `__dataclass_params__` tells the difference: it records repr and eq as False.
"""

from __future__ import annotations

import abc
import dataclasses
import sys
from _thread import get_ident
from collections.abc import Callable
from dataclasses import field, fields, replace
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["dataclass", "field", "fields", "replace"]

Cls = TypeVar("Cls", bound=type)
# The options passed on to the standard library as given; repr and eq are taken here.
_PASSED_ON = frozenset({"init", "frozen", "kw_only", "slots", "match_args", "weakref_slot"})
# (id of the instance, thread) for each repr running: a field that leads back to it shows as "...".
_REPR_RUNNING: set[tuple[int, int]] = set()


@overload
def dataclass(cls: Cls, /) -> Cls: ...


@overload
def dataclass(*, repr: bool = True, eq: bool = True, **options: Any) -> Callable[[Cls], Cls]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: Any = None, /, *, repr: bool = True, eq: bool = True, **options: Any) -> Any:
    """`dataclasses.dataclass(cls, **options)`, its `__repr__`, `__eq__` and `__hash__` the shared ones."""
    unknown = set(options) - _PASSED_ON
    if unknown:  # order and unsafe_hash are not used in ckpt: the standard library's then, not a copy here
        raise TypeError(f"deerflow_ckpt.dataclass does not take {', '.join(sorted(unknown))}")

    def wrap(cls: Any) -> Any:
        # Read before the standard library touches the class: a __hash__ (or __eq__) of the class's own.
        class_hash = cls.__dict__.get("__hash__", dataclasses.MISSING)
        explicit_hash = not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in cls.__dict__))
        own = {name for name in ("__repr__", "__eq__") if name in cls.__dict__}
        made = dataclasses.dataclass(cls, repr=False, eq=False, **options)
        described = fields(made)
        if repr and "__repr__" not in own:
            _add(made, _repr_of(tuple(f.name for f in described if f.repr)))
        if eq:
            if "__eq__" not in own:
                _add(made, _eq_of(tuple(f.name for f in described if f.compare)))
            if not explicit_hash and not options.get("frozen"):
                made.__hash__ = None  # equal by value, mutable: unhashable, as the standard library makes it
            elif not explicit_hash:
                hashed = tuple(f.name for f in described if (f.compare if f.hash is None else f.hash))
                _add(made, _hash_of(_values_of(hashed)))
        # An abstract __repr__ or __eq__ of a base class is now implemented (the standard library checks this
        # after it adds its methods; they were not there yet).
        return abc.update_abstractmethods(made)

    return wrap if cls is None else wrap(cls)


def _add(cls: Any, method: Callable[..., Any]) -> None:
    method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"  # as tracebacks name the standard ones
    setattr(cls, method.__name__, method)


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The instance's values of `names`, as a tuple whatever their number."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return lambda instance: ()


def _repr_of(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        key = id(self), get_ident()
        if key in _REPR_RUNNING:
            return "..."
        _REPR_RUNNING.add(key)
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            _REPR_RUNNING.discard(key)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _eq_of(names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    if sys.version_info >= (3, 13):  # itself, then field by field (`self.a == other.a and ...`), as 3.13 compares
        return _eq_by_field(names)
    values = _values_of(names)

    def __eq__(self: Any, other: Any) -> Any:  # the tuples of both, as Python 3.11 and 3.12 compare
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _eq_by_field(names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    *first, last = names or ("",)

    def __eq__(self: Any, other: Any) -> Any:
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        if not names:
            return True
        for name in first:  # `a == a' and b == b' and ...`: the first false one, else the last one as it is
            same = getattr(self, name) == getattr(other, name)
            if not same:
                return same
        return getattr(self, last) == getattr(other, last)

    return __eq__


def _hash_of(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__
