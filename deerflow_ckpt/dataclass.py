"""ckpt's `dataclass`: the standard library's fields, with ckpt's own methods instead of compiled ones where it can.

`dataclasses.dataclass` writes each method it adds as source text and compiles it with `exec` (one `exec` a method
before Python 3.13, one a class from it): for the 56 classes of ckpt's a `verify-shape` run imports, 144 methods on
Python 3.11, about a fifth of the instructions of a run on a small store (`valgrind --tool=callgrind`,
docs/architecture.md). Here the standard library only collects the fields (and makes the slots); then:

- `__repr__`, `__eq__` and `__hash__` are one function each, made from a tuple of the class's field names; a frozen
  class's `__setattr__` and `__delattr__` are closures over the class and its field names, and with slots its
  `__getstate__` and `__setstate__` are the two functions below;
- `__init__` is still compiled, as it runs for every instance, but only when the class is first instantiated (or
  its `__doc__` first read): a run builds about half the classes it imports (33 on a clean store);
- a class without a docstring gets the standard library's `__doc__` text when it is first read (the standard
  library computes it for each class, through `inspect.signature`, which parses text).

A class over a base the standard library froze itself (typer's `RuntimeParam`) is left to the standard library but
for `__repr__`, `__eq__` and `__hash__`.

They behave as the standard library's do, for the options ckpt uses (`tests/test_dataclass.py` holds them side by
side, on Python 3.11, 3.12 and 3.13): the same repr text (`...` where it recurs); equality only with the same class,
then by the compared fields in order (as tuples before Python 3.13; from it, after an identity test, as
`a == a' and b == b' and ...`); the same hash action (`__hash__` of the hashed fields for frozen classes, None for the
others, a `__hash__` of the class's own kept); the same `__init__` parameters, defaults, factories, `init=False`
fields, keyword-only fields and `__post_init__` call, compiled in the class's module (once compiled: the same
signature and type hints); the same `__doc__`; `FrozenInstanceError` on a frozen field's assignment or deletion; the
same pickling and copying; the same class-making errors, in the same order (but for the slots options' own,
which come first). What differs:
- `__dataclass_params__` records init, repr, eq and frozen as False (but for the classes left to the standard
  library), so a class made by the standard library's own decorator over a frozen one of these is judged as over a
  non-frozen one (ckpt declares none: a test holds every dataclass to this module);
- `inspect.signature` of a class not yet instantiated shows `(*args, **kwargs)`, and a field's default or factory is
  read at the first instance, not when the class is made;
- on a frozen class with slots, assigning an attribute that is no field raises FrozenInstanceError (a plain subclass
  may), where the standard library's `__setattr__` (Python 3.11 to 3.13) names the class as it was before its slots
  were made and fails with TypeError;
- InitVar fields are refused (ckpt has none).
"""

from __future__ import annotations

import abc
import dataclasses
import re
import sys
import weakref
from _thread import get_ident
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, field, fields, replace
from operator import attrgetter
from types import FunctionType
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["dataclass", "field", "fields", "replace"]

Cls = TypeVar("Cls", bound=type)
# The options passed on to the standard library as given; init, repr, eq and frozen are taken here.
_PASSED_ON = frozenset({"kw_only", "slots", "match_args", "weakref_slot"})
# (id of the instance, thread) for each repr running: a field that leads back to it shows as "...".
_REPR_RUNNING: set[tuple[int, int]] = set()
# The frozen classes made here (the standard library's record of them says False).
_FROZEN: weakref.WeakSet[type] = weakref.WeakSet()
# Each waiting __init__ (the function itself, not a wrapper of it), held weakly; its attribute _INSTALL compiles
# and puts in place its class's real one.
_WAITING: weakref.WeakSet[Callable[..., None]] = weakref.WeakSet()
_INSTALL = "_ckpt_install"
# An InitVar annotation as text (the standard library matches `InitVar[...]` or `module.InitVar[...]` too).
_INIT_VAR_TEXT = re.compile(r"\s*(?:\w+\s*\.\s*)?InitVar\b")


class _Factory:
    """A factory field's default in a compiled __init__: "not given, call the factory"."""

    def __repr__(self) -> str:
        return "<factory>"  # as the standard library's sentinel shows in a signature


_HAS_FACTORY = _Factory()


@overload
def dataclass(cls: Cls, /) -> Cls: ...


@overload
def dataclass(
    *, init: bool = True, repr: bool = True, eq: bool = True, frozen: bool = False, **options: Any
) -> Callable[[Cls], Cls]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(
    cls: Any = None, /, *, init: bool = True, repr: bool = True, eq: bool = True, frozen: bool = False, **options: Any
) -> Any:
    """`dataclasses.dataclass(cls, **options)`, with the methods described above."""
    unknown = set(options) - _PASSED_ON
    if unknown:  # order and unsafe_hash are not used in ckpt: the standard library's then, not a copy here
        raise TypeError(f"deerflow_ckpt.dataclass does not take {', '.join(sorted(unknown))}")

    def wrap(cls: Any) -> Any:
        # Read before the standard library touches the class: a __hash__ (or __eq__) of the class's own.
        class_hash = cls.__dict__.get("__hash__", MISSING)
        explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in cls.__dict__))
        own = {name for name in ("__init__", "__repr__", "__eq__", "__getstate__", "__setstate__") if name in vars(cls)}
        if _over_standard_frozen(cls):
            # A base the standard library froze itself (typer's RuntimeParam): its inheritance rule reads its own flag.
            made = dataclasses.dataclass(cls, init=init, repr=False, eq=False, frozen=frozen, **options)
        else:
            made = _with_own_init_and_frozen(cls, init, frozen, own, options)
        described = fields(made)
        if repr and "__repr__" not in own:
            _add(made, _repr_of(tuple(f.name for f in described if f.repr)))
        if eq:
            if "__eq__" not in own:
                _add(made, _eq_of(tuple(f.name for f in described if f.compare)))
            if not explicit_hash and not frozen:
                made.__hash__ = None  # equal by value, mutable: unhashable, as the standard library makes it
            elif not explicit_hash:
                hashed = tuple(f.name for f in described if (f.compare if f.hash is None else f.hash))
                _add(made, _hash_of(_values_of(hashed)))
        # An abstract method of a base class is now implemented (the standard library checks this after it adds its
        # methods; they were not there yet).
        return abc.update_abstractmethods(made)

    return wrap if cls is None else wrap(cls)


def _add(cls: Any, method: Callable[..., Any]) -> None:
    method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"  # as tracebacks name the standard ones
    setattr(cls, method.__name__, method)


def _over_standard_frozen(cls: Any) -> bool:
    return any(getattr(base, "__dataclass_params__", None) and base.__dataclass_params__.frozen for base in cls.__mro__)


def _with_own_init_and_frozen(cls: Any, init: bool, frozen: bool, own: set[str], options: dict[str, Any]) -> Any:
    """The standard library's fields and slots, then the lazily compiled __init__ and the shared frozen methods; the
    class-making errors in the standard library's order."""
    docless = not vars(cls).get("__doc__")
    if docless:  # the standard library would compute one at once, through inspect.signature (see _SignatureDoc)
        cls.__doc__ = "..."
    made = dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=False, **options)
    if docless:
        made.__doc__ = _SignatureDoc()
    _check_frozen_bases(made, frozen)
    described = fields(made)
    if any(_is_init_var(f) for f in vars(made)["__dataclass_fields__"].values() if f not in described):
        raise TypeError("deerflow_ckpt.dataclass does not take InitVar fields")
    if init:
        _check_default_order(described)  # the standard library checks it even where the class has its own __init__
        if "__init__" not in own:
            slotted = bool(options.get("slots"))
            _add(made, _init_on_first_call(made, frozen, hasattr(made, "__post_init__"), slotted))
    if frozen:
        for name in ("__setattr__", "__delattr__"):
            if name in vars(made):
                raise TypeError(f"Cannot overwrite attribute {name} in class {made.__name__}")
        _FROZEN.add(made)
        names = frozenset(f.name for f in described)
        _add(made, _frozen_setattr(made, names))
        _add(made, _frozen_delattr(made, names))
        if options.get("slots"):  # pickle and copy set a frozen slotted instance's fields through these
            if "__getstate__" not in own:
                made.__getstate__ = _frozen_getstate
            if "__setstate__" not in own:
                made.__setstate__ = _frozen_setstate
    return made


def _check_frozen_bases(cls: Any, frozen: bool) -> None:
    """The standard library's rule: a frozen dataclass only over frozen ones, a non-frozen one only over non-frozen."""
    bases = [base for base in cls.__mro__[1:] if hasattr(base, "__dataclass_fields__")]
    if not bases:
        return
    any_frozen = any(base in _FROZEN or base.__dataclass_params__.frozen for base in bases)
    if any_frozen and not frozen:
        raise TypeError("cannot inherit non-frozen dataclass from a frozen one")
    if frozen and not any_frozen:
        raise TypeError("cannot inherit frozen dataclass from a non-frozen one")


def _check_default_order(described: tuple[dataclasses.Field[Any], ...]) -> None:
    """The standard library's rule for positional parameters, checked when the class is made, as it checks it."""
    seen: dataclasses.Field[Any] | None = None
    for f in described:
        if not f.init or f.kw_only:
            continue
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen = f
        elif seen is not None:
            after = f" {seen.name!r}" if sys.version_info >= (3, 13) else ""
            raise TypeError(f"non-default argument {f.name!r} follows default argument{after}")


def _init_on_first_call(cls: Any, frozen: bool, post_init: bool, slots: bool) -> Callable[..., None]:
    """The class's __init__ until it is built: compiles the real one, puts it in place of itself (not of a wrapper
    someone set since), and calls it. Threads that meet it at once each compile it (the same function); a signal
    mid-compile leaves it waiting."""
    compiled: Callable[..., None] | None = None

    def install() -> Callable[..., None]:
        nonlocal compiled
        if compiled is None:
            compiled = _compiled_init(cls, frozen, post_init, slots)
            if vars(cls).get("__init__") is __init__:
                _add(cls, compiled)
        return compiled

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        install()(self, *args, **kwargs)

    setattr(__init__, _INSTALL, install)
    _WAITING.add(__init__)
    return __init__


def _installed_init(cls: Any) -> None:
    """The __init__ the class's instances run (its own or a base's) compiled, if it is still waiting."""
    for base in cls.__mro__:
        if "__init__" in vars(base):
            init = vars(base)["__init__"]
            if isinstance(init, FunctionType) and init in _WAITING:  # object's __init__ takes no weak reference
                getattr(init, _INSTALL)()
            return


class _SignatureDoc:
    """A docstring-less class's __doc__, the standard library's text (its name and its __init__'s signature), made
    when first read: the standard library computes it for every such class it makes (25 on a verify-shape run's
    path), and inspect.signature of a class parses text."""

    def __get__(self, instance: Any, owner: Any) -> str:
        import inspect

        _installed_init(owner)
        try:
            signature = str(inspect.signature(owner)).replace(" -> None", "")
        except (TypeError, ValueError):  # as the standard library gives up on a signature
            signature = ""
        text: str = owner.__name__ + signature
        type.__setattr__(owner, "__doc__", text)
        return text


def _compiled_init(cls: Any, frozen: bool, post_init: bool, slots: bool) -> Callable[..., None]:
    """The class's __init__, as the standard library writes it: parameters for the init fields (keyword-only ones
    after `*`), a factory called where its field was not given, `init=False` fields set from their factory (or, with
    slots, their default), frozen fields set through object.__setattr__, then __post_init__."""
    described = fields(cls)
    this = "__dataclass_self__" if any(f.name == "self" for f in described) else "self"
    names: dict[str, Any] = {"__dataclass_HAS_FACTORY__": _HAS_FACTORY, "__dataclass_setattr__": object.__setattr__}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in described:
        default = f"__dataclass_dflt_{f.name}__"
        if f.default_factory is not MISSING:
            names[default] = f.default_factory
            value = f"{default}() if {f.name} is __dataclass_HAS_FACTORY__ else {f.name}" if f.init else f"{default}()"
            parameter = f"{f.name}=__dataclass_HAS_FACTORY__"
        elif f.default is not MISSING:
            names[default] = f.default
            value, parameter = (f.name, f"{f.name}={default}") if f.init else (default, "")
            if not f.init and not slots:
                continue  # read from the class attribute that holds the default, as the standard library leaves it
        else:
            if not f.init:
                continue
            value, parameter = f.name, f.name
        if f.init:
            (keyword if f.kw_only else positional).append(parameter)
        body.append(f"__dataclass_setattr__({this}, {f.name!r}, {value})" if frozen else f"{this}.{f.name} = {value}")
    if post_init:
        body.append(f"{this}.__post_init__()")
    parameters = [this, *positional, *(["*", *keyword] if keyword else [])]
    lines = "\n".join(f"  {line}" for line in body or ["pass"])
    # As the standard library does: the helpers are the closure of a function defined in the class's module, so the
    # __init__ has that module's globals and name (get_type_hints resolves its annotations there).
    text = f"def __create_fn__({', '.join(names)}):\n def __init__({', '.join(parameters)}):\n{lines}\n return __init__"
    module = sys.modules.get(cls.__module__)
    made: dict[str, Any] = {}
    exec(text, module.__dict__ if module is not None else {}, made)
    compiled: Callable[..., None] = made["__create_fn__"](**names)
    # Annotated as the standard library's, in parameter order, so inspect.signature shows the same (no parsing here).
    by_name = {f.name: f.type for f in described if f.init}
    order = [f.name for f in described if f.init and not f.kw_only] + [
        f.name for f in described if f.init and f.kw_only
    ]
    compiled.__annotations__ = {**{name: by_name[name] for name in order}, "return": None}
    return compiled


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


def _frozen_setattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__


def _frozen_getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in fields(self)]


def _frozen_setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)  # the class is frozen


def _is_init_var(f: dataclasses.Field[Any]) -> bool:
    """A pseudo-field (not in fields()) of InitVar, its annotation evaluated or (under `from __future__ import
    annotations`) text; the others are ClassVars."""
    if isinstance(f.type, str):
        return _INIT_VAR_TEXT.match(f.type) is not None
    return isinstance(f.type, dataclasses.InitVar) or f.type is dataclasses.InitVar
