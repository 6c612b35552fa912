"""deerflow_ckpt.dataclass against the standard library's dataclass: the same class written twice, once with each,
must repr, compare and hash alike for every option and field setting ckpt uses."""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deerflow_ckpt import dataclass as ours

OPTIONS: list[dict[str, Any]] = [
    {},
    {"frozen": True},
    {"slots": True},
    {"frozen": True, "slots": True},
    {"kw_only": True},
    {"eq": False},
    {"repr": False},
    {"frozen": True, "eq": False},
]


def _plain(decorator: Callable[..., Any], options: dict[str, Any]) -> type:
    @decorator(**options)
    class Point:
        """A value with every kind of field."""

        x: int
        y: float = 0.0
        label: str = dataclasses.field(default="", compare=False)
        secret: str = dataclasses.field(default="", repr=False)
        tags: list[str] = dataclasses.field(default_factory=list, hash=False)
        weight: int = dataclasses.field(default=0, compare=False, hash=True)

    return Point


def _with_own_methods(decorator: Callable[..., Any], options: dict[str, Any]) -> type:
    @decorator(**options)
    class Own:
        x: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

    return Own


def _with_own_hash(decorator: Callable[..., Any], options: dict[str, Any]) -> type:
    @decorator(**options)
    class Hashed:
        x: int

        def __hash__(self) -> int:
            return 7

    return Hashed


def _child(decorator: Callable[..., Any], options: dict[str, Any]) -> type:
    parent = _plain(decorator, {key: value for key, value in options.items() if key != "slots"})

    @decorator(**{key: value for key, value in options.items() if key != "slots"})
    class Child(parent):  # type: ignore[valid-type,misc]
        z: int = 5

    return Child


def _no_fields(decorator: Callable[..., Any], options: dict[str, Any]) -> type:
    @decorator(**options)
    class Empty:
        pass

    return Empty


def _instances(cls: type, options: dict[str, Any]) -> list[Any]:
    if cls.__name__ == "Empty":
        return [cls(), cls()]
    if cls.__name__ in ("Own", "Hashed"):
        return [cls(x=1), cls(x=1), cls(x=2)]
    made = [
        cls(x=1, y=2.0, label="a", secret="s", tags=["t"], weight=3),
        cls(x=1, y=2.0, label="b", secret="s", tags=["t"], weight=4),  # differs only in uncompared fields
        cls(x=1, y=2.0, label="a", secret="other", tags=["t"], weight=3),
        cls(x=2, y=float("nan"), tags=[]),
    ]
    shared_nan = float("nan")  # one NaN object in two instances: tuples compare it by identity first
    made += [cls(x=3, y=shared_nan), cls(x=3, y=shared_nan)]
    return made


def _behaviour(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    instances = _instances(cls, options)
    seen: dict[str, Any] = {"hash is None": cls.__hash__ is None}
    # An object's own repr holds its address: left out.
    seen["repr"] = [
        re.sub(r" at 0x[0-9a-f]+", "", repr(instance).replace(cls.__qualname__, "C")) for instance in instances
    ]
    seen["eq"] = [[a == b for b in instances] for a in instances]
    seen["eq other"] = [instance.__eq__(object()) for instance in instances] if "__eq__" in vars(cls) else None
    seen["same nan"] = instances[-1] == instances[-1]
    if cls.__hash__ is not None:
        # Which instances hash alike (an identity hash differs between the two classes' instances anyway).
        hashes = [_hash_or_error(instance) for instance in instances]
        seen["hash"] = [[a == b for b in hashes] for a in hashes]
        seen["own hash"] = hashes if "__hash__" in vars(cls) and cls.__name__ == "Hashed" else None
    if options.get("frozen") and dataclasses.fields(cls):
        with pytest.raises(dataclasses.FrozenInstanceError):
            instances[0].x = 9
        # A copy goes through the same state protocol as pickle (a frozen class with slots has its own).
        seen["copied"] = [_copied_or_error(instance) for instance in instances]
        if not options.get("slots"):  # with slots the standard library's __setattr__ fails otherwise (see ours)
            seen["frozen acts"] = _frozen_acts(cls, instances[0])
    seen["fields"] = [(f.name, f.repr, f.compare, f.hash) for f in dataclasses.fields(cls)]
    return seen


def _frozen_acts(cls: type, instance: Any) -> list[str]:
    """What deleting a field, and setting and deleting another attribute, do on a frozen instance and on one of a
    plain subclass."""

    class Plain(cls):  # type: ignore[valid-type,misc]
        pass

    other = copy.copy(instance)
    object.__setattr__(other, "__class__", Plain)  # past the frozen __setattr__, which refuses __class__ too
    acts: list[Callable[[Any], None]] = [
        lambda target: delattr(target, "x"),
        lambda target: setattr(target, "other", 1),
        lambda target: delattr(target, "other"),
    ]
    seen = []
    for target in (instance, other):
        for act in acts:
            try:
                act(target)
                seen.append("done")
            except AttributeError as exc:  # FrozenInstanceError is one
                seen.append(f"{type(exc).__name__}: {exc}")
    return seen


def _copied_or_error(instance: Any) -> bool | str:
    try:
        return bool(copy.deepcopy(instance) == instance)
    except TypeError as exc:  # the standard library's own failure (frozen, slots, no fields) must be ours too
        return f"TypeError: {exc}"


def _hash_or_error(instance: Any) -> int | str:
    try:
        return hash(instance)
    except TypeError as exc:  # a field that does not hash (a list) in a hashed class
        return f"TypeError: {exc}"


@pytest.mark.parametrize("options", OPTIONS, ids=lambda options: ",".join(options) or "default")
@pytest.mark.parametrize("shape", [_plain, _with_own_methods, _with_own_hash, _child, _no_fields])
def test_a_class_behaves_as_the_standard_librarys(shape: Callable[..., type], options: dict[str, Any]) -> None:
    standard = _behaviour(shape(dataclasses.dataclass, options), options)
    assert _behaviour(shape(ours.dataclass, options), options) == standard


def _parent_and_child_compared(decorator: Callable[..., Any]) -> list[bool]:
    @decorator(frozen=True)
    class Parent:
        x: int

    @decorator(frozen=True)
    class Child(Parent):
        pass

    # The decorator is a parameter here: the type checker cannot see the fields it makes.
    parent, child = Parent(1), Child(1)  # type: ignore[call-arg]
    return [parent == child, child == parent, parent != child, hash(parent) == hash(child)]


def test_an_instance_of_a_subclass_compares_as_the_standard_librarys() -> None:
    assert _parent_and_child_compared(ours.dataclass) == _parent_and_child_compared(dataclasses.dataclass)


def test_a_repr_that_leads_back_to_itself_shows_dots() -> None:
    @ours.dataclass
    class Node:
        children: list[Any]

    node = Node([])
    node.children.append(node)
    assert repr(node) == "test_a_repr_that_leads_back_to_itself_shows_dots.<locals>.Node(children=[...])"


def _abstract_repr_implemented(decorator: Callable[..., Any]) -> str:
    import abc

    class Shown(abc.ABC):
        @abc.abstractmethod
        def __repr__(self) -> str: ...

    @decorator
    class Point(Shown):
        x: int

    # The decorator is a parameter here: the type checker cannot see the fields or methods it makes.
    return repr(Point(1)).rsplit(".", 1)[-1]  # type: ignore[call-arg,abstract]


def test_a_generated_method_implements_an_abstract_one() -> None:
    assert _abstract_repr_implemented(ours.dataclass) == _abstract_repr_implemented(dataclasses.dataclass)


class _Verdict:
    """What a field's `==` returns: an object that refuses to be taken as true or false."""

    def __bool__(self) -> bool:
        raise ValueError("no truth value")


class _Odd:
    def __eq__(self, other: object) -> Any:
        return _Verdict()


def _compared_with_an_odd_field(decorator: Callable[..., Any]) -> str:
    @decorator
    class Holder:
        first: int
        odd: Any

    try:
        outcome = Holder(1, _Odd()) == Holder(1, _Odd())
    except ValueError as exc:
        return f"ValueError: {exc}"
    return type(outcome).__name__


def test_a_field_whose_comparison_is_no_bool_compares_as_the_standard_librarys() -> None:
    """Python 3.11 and 3.12 compare tuples (each element taken as a bool); 3.13 returns the last `==` as it is."""
    assert _compared_with_an_odd_field(ours.dataclass) == _compared_with_an_odd_field(dataclasses.dataclass)


def test_options_ckpt_does_not_use_are_refused() -> None:
    with pytest.raises(TypeError, match="order"):
        ours.dataclass(order=True)


def test_the_package_declares_its_dataclasses_through_deerflow_ckpt_dataclass() -> None:
    """The standard library's decorator imported anywhere else would compile the three methods again."""
    package = Path(ours.__file__).resolve().parent
    direct = []
    for source in package.rglob("*.py"):
        if source.name == "dataclass.py" and source.parent == package:
            continue
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.ImportFrom):
                named = node.module == "dataclasses" and any(alias.name == "dataclass" for alias in node.names)
            elif isinstance(node, ast.Attribute):
                named = node.attr == "dataclass" and ast.unparse(node.value) == "dataclasses"
            else:
                continue
            if named:
                direct.append(f"{source.relative_to(package)}:{node.lineno}")
    assert direct == []


def _init_shapes(decorator: Callable[..., Any], options: dict[str, Any]) -> list[type]:
    """Classes whose __init__ does each thing the standard library's does."""

    @decorator(**options)
    class Built:
        x: int
        tags: list[str] = dataclasses.field(default_factory=list)
        y: float = 1.5
        cache: dict[str, int] = dataclasses.field(default_factory=dict, init=False)
        note: str = dataclasses.field(default="n", init=False)
        later: int = dataclasses.field(default=0, kw_only=True)
        must: int = dataclasses.field(kw_only=True, default=-1)

    @decorator(**options)
    class Posted:
        x: int
        doubled: int = dataclasses.field(init=False, default=0)

        def __post_init__(self) -> None:
            object.__setattr__(self, "doubled", self.x * 2)

    @decorator(**options)
    class Selfish:
        self: int
        other: int = 2

    return [Built, Posted, Selfish]


def _calls(cls: type) -> list[Any]:
    """What each way of calling the class makes, or the error it raises (its text as the standard library's)."""
    name = cls.__name__
    arguments: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
        "Built": [((1,), {}), ((1, ["a"], 2.0), {"later": 3, "must": 4}), ((), {}), ((1, [], 2.0, 9), {})],
        "Posted": [((4,), {}), ((), {"x": 5}), ((1, 2), {})],
        "Selfish": [((1,), {}), ((), {"self": 3, "other": 4})],
    }
    made: list[Any] = []
    for args, kwargs in arguments[name]:
        try:
            instance = cls(*args, **kwargs)
        except TypeError as exc:
            made.append(f"TypeError: {str(exc).replace(cls.__qualname__, 'C')}")
            continue
        values = {f.name: getattr(instance, f.name) for f in dataclasses.fields(cls)}
        made.append(values)
        if name == "Built":  # a factory's value is made for each instance
            made.append(cls(1).tags is not cls(1).tags)
    return made


def _described(cls: type) -> list[str]:
    """A docstring-less class's __doc__ (read first: ours is made when read), then its signature once it was built."""
    import inspect

    doc = str(cls.__doc__).replace(cls.__qualname__, "C")
    return [doc, str(inspect.signature(cls))]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda options: ",".join(options) or "default")
def test_init_behaves_as_the_standard_librarys(options: dict[str, Any]) -> None:
    standard = [_described(cls) + _calls(cls) for cls in _init_shapes(dataclasses.dataclass, options)]
    assert [_described(cls) + _calls(cls) for cls in _init_shapes(ours.dataclass, options)] == standard


def _class_errors(decorator: Callable[..., Any]) -> list[str]:
    """The errors the standard library raises while it makes a class, with their text."""
    attempts: list[Callable[[], Any]] = []

    def default_then_none() -> Any:
        @decorator
        class Bad:
            x: int = 0
            y: int

    def frozen_over_mutable() -> Any:
        @decorator
        class Base:
            x: int

        @decorator(frozen=True)
        class Child(Base):
            pass

    def mutable_over_frozen() -> Any:
        @decorator(frozen=True)
        class Base:
            x: int

        @decorator
        class Child(Base):
            pass

    def own_setattr_frozen() -> Any:
        @decorator(frozen=True)
        class Own:
            x: int

            def __setattr__(self, name: str, value: Any) -> None:
                pass

    def keyword_after_default() -> Any:
        @decorator
        class Fine:
            x: int = 0
            y: int = dataclasses.field(kw_only=True)

    def own_init_default_then_none() -> Any:
        @decorator
        class OwnInit:
            x: int = 0
            y: int

            def __init__(self) -> None:
                pass

    def own_setattr_over_mutable() -> Any:
        @decorator
        class Base:
            x: int

        @decorator(frozen=True)
        class Child(Base):
            def __setattr__(self, name: str, value: Any) -> None:
                pass

    def init_var_like_name() -> Any:
        @decorator
        class Named:
            x: InitVarLike = 0  # noqa: F821  (a name that only looks like InitVar, never evaluated)

    attempts += [default_then_none, frozen_over_mutable, mutable_over_frozen, own_setattr_frozen]
    attempts += [keyword_after_default, own_init_default_then_none, own_setattr_over_mutable, init_var_like_name]
    seen = []
    for attempt in attempts:
        try:
            attempt()
            seen.append("made")
        except TypeError as exc:
            seen.append(f"TypeError: {exc}")
    return seen


def test_a_class_is_refused_as_the_standard_library_refuses_it() -> None:
    assert _class_errors(ours.dataclass) == _class_errors(dataclasses.dataclass)


def _over_a_standard_frozen_class(decorator: Callable[..., Any]) -> list[Any]:
    @dataclasses.dataclass(frozen=True)
    class Standard:
        x: int

    @decorator(frozen=True)
    class Child(Standard):
        y: int = 2

    child = Child(1)  # type: ignore[call-arg]
    try:
        child.y = 3
        assigned = "assigned"
    except dataclasses.FrozenInstanceError as exc:
        assigned = str(exc)
    return [repr(child).rsplit(".", 1)[-1], child == Child(1), hash(child) == hash(Child(1)), assigned]  # type: ignore[call-arg]


def test_a_frozen_class_over_the_standard_librarys_frozen_one() -> None:
    """typer's RuntimeParam is frozen by the standard library itself: cli/params.py's _DirectParam is made over it."""
    assert _over_a_standard_frozen_class(ours.dataclass) == _over_a_standard_frozen_class(dataclasses.dataclass)


def test_init_is_compiled_at_the_first_instance_and_once() -> None:
    @ours.dataclass(frozen=True, slots=True)
    class Lazy:
        x: int
        y: int = 2

    waiting = vars(Lazy)["__init__"]
    assert Lazy(1) == Lazy(x=1, y=2)
    compiled = vars(Lazy)["__init__"]
    assert compiled is not waiting
    Lazy(3)
    assert vars(Lazy)["__init__"] is compiled
    assert compiled.__qualname__ == f"{Lazy.__qualname__}.__init__"


def test_init_var_fields_are_refused() -> None:
    with pytest.raises(TypeError, match="InitVar"):

        @ours.dataclass
        class WithInitVar:
            x: dataclasses.InitVar[int]


@ours.dataclass(frozen=True)
class _OursFrozen:
    x: int
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class _StandardFrozen:
    x: int
    tags: tuple[str, ...] = ()


@ours.dataclass(frozen=True, slots=True, weakref_slot=True)
class _OursSlotted:
    x: int
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True, weakref_slot=True)
class _StandardSlotted:
    x: int
    tags: tuple[str, ...] = ()


@ours.dataclass(frozen=True, slots=True)
class _OursNoFields:
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class _StandardNoFields:
    pass


def _pickled(cls: type, *args: Any) -> list[Any]:
    import pickle

    seen: list[Any] = []
    for protocol in (0, 2, pickle.HIGHEST_PROTOCOL):
        instance = cls(*args)
        try:
            back = pickle.loads(pickle.dumps(instance, protocol))
        except Exception as exc:  # the standard library's own failure must be ours too
            seen.append(f"{type(exc).__name__}: {str(exc).replace(cls.__qualname__, 'C')}")
            continue
        seen.append([type(back) is cls, back == instance, [getattr(back, f.name) for f in dataclasses.fields(cls)]])
    return seen


def test_pickling_is_the_standard_librarys() -> None:
    assert _pickled(_OursFrozen, 1, ("a",)) == _pickled(_StandardFrozen, 1, ("a",))
    assert _pickled(_OursSlotted, 1, ("a",)) == _pickled(_StandardSlotted, 1, ("a",))
    assert _pickled(_OursNoFields) == _pickled(_StandardNoFields)


def test_init_has_the_standard_librarys_module_and_type_hints() -> None:
    import typing

    for ours_class, standard in ((_OursFrozen, _StandardFrozen), (_OursSlotted, _StandardSlotted)):
        ours_class(1)
        assert typing.get_type_hints(ours_class.__init__) == typing.get_type_hints(standard.__init__)
        assert ours_class.__init__.__module__ == standard.__init__.__module__ == __name__


def _docless_without_init(decorator: Callable[..., Any]) -> str:
    @decorator(init=False)
    class Bare:
        x: int = 0

    return str(Bare.__doc__)


def test_a_docless_class_without_init_has_the_standard_librarys_doc() -> None:
    assert _docless_without_init(ours.dataclass) == _docless_without_init(dataclasses.dataclass)


def test_threads_that_build_a_class_first_at_once_all_get_its_init() -> None:
    import sys
    import threading

    failures: list[BaseException] = []
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: inside the first compile, too
    try:
        for _ in range(40):
            wide = {f"f{i}": int for i in range(40)}
            cls = ours.dataclass(frozen=True)(type("Wide", (), {"__annotations__": wide}))
            start = threading.Barrier(3)

            def build(cls: type = cls, start: threading.Barrier = start) -> None:
                start.wait()
                try:
                    cls(*range(40))
                except BaseException as exc:  # any failure fails the test below
                    failures.append(exc)

            threads = [threading.Thread(target=build) for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        sys.setswitchinterval(previous)
    assert failures == []


def test_a_compile_cut_short_leaves_the_init_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal that interrupts the first compile (Ctrl-C, ckpt's Interrupted) must not break the class."""

    @ours.dataclass(frozen=True)
    class Cut:
        x: int

    compile_it = ours._compiled_init
    calls = 0

    def interrupted_once(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyboardInterrupt
        return compile_it(*args)

    monkeypatch.setattr(ours, "_compiled_init", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        Cut(1)
    assert Cut(2).x == 2


def _docless_over_a_waiting_parent(decorator: Callable[..., Any]) -> str:
    @decorator
    class Parent:
        x: int

    @decorator(init=False)
    class Child(Parent):
        pass

    return str(Child.__doc__).replace("Child", "C")


def test_a_docless_class_over_a_parent_not_yet_built_has_the_standard_librarys_doc() -> None:
    assert _docless_over_a_waiting_parent(ours.dataclass) == _docless_over_a_waiting_parent(dataclasses.dataclass)


def _wrapped_init_calls(decorator: Callable[..., Any]) -> list[Any]:
    import functools

    @decorator
    class Wrapped:
        x: int

    calls = []
    original = Wrapped.__init__

    @functools.wraps(original)
    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(args)
        original(self, *args, **kwargs)

    Wrapped.__init__ = counted  # type: ignore[method-assign]
    made = [Wrapped(1).x, Wrapped(2).x]  # type: ignore[call-arg]
    return [made, calls, Wrapped.__init__ is counted]


def test_an_init_wrapped_before_the_first_instance_stays_wrapped() -> None:
    assert _wrapped_init_calls(ours.dataclass) == _wrapped_init_calls(dataclasses.dataclass)


def _own_slots_with_a_default_outside_init(decorator: Callable[..., Any]) -> list[Any]:
    @decorator
    class OwnSlots:
        __slots__ = ("y",)
        y: int
        x: int = dataclasses.field(init=False, default=5)

    try:
        made = OwnSlots(1)  # type: ignore[call-arg]
    except AttributeError as exc:
        return [f"AttributeError: {exc}"]
    return [made.x, made.y]


def test_hand_written_slots_take_the_default_as_the_standard_library_does() -> None:
    """Only the slots option makes __init__ set an init=False default; a class's own __slots__ keeps the class
    attribute (which then shadows the slot, and the standard library fails the same way)."""
    standard = _own_slots_with_a_default_outside_init(dataclasses.dataclass)
    assert _own_slots_with_a_default_outside_init(ours.dataclass) == standard


def test_a_frozen_class_is_not_kept_alive() -> None:
    import gc
    import weakref

    @ours.dataclass(frozen=True)
    class Passing:
        x: int

    Passing(1)
    gone = weakref.ref(Passing)
    del Passing
    gc.collect()
    assert gone() is None
