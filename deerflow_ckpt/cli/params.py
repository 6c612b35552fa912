"""Option values coerced with typer's own pydantic-free functions, so a short command never imports pydantic.

typer 0.29 coerces each option's value through a pydantic TypeAdapter it builds on the first parse: importing
pydantic and building the adapters costs more than the rest of `ckpt migrate-config`, which pre-commit runs on
every commit, and a third of verify-shape's start-up. For ckpt's kinds of options (text, flags, paths, choices,
and lists of them) those adapters wrap typer's `coerce_cli_path` and `coerce_cli_choice`, so these are called
directly; an integer (--jobs, --cadence, --top) written as plain decimal digits within the option's bounds is
that number. A value the direct path does not take (a sign, a space, a bound crossed), and every other kind of
option, goes through typer's own coercion, with its own messages (`tests/test_cli_params.py` compares the two
on every option of every command).

typer's coercion layer is private, and typer 0.29 offers no public way around its adapters (a `parser=` is
wrapped in one too): pyproject.toml pins typer to the minor version this was tested on (>=0.29,<0.30),
tests/test_cli_params.py fails on any other, and cli/app.py imports this module under typer 0.29 only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from typer._coercion import RuntimeParam, build_runtime_param
from typer._param_types import coerce_cli_choice, coerce_cli_path
from typer.core import TyperArgument, TyperOption


class _Refused(Exception):
    """The direct path does not take this value: typer's own coercion decides (and words the error)."""


def _direct(annotation: Any, parameter_info: Any, value: Any, param: Any, ctx: Any) -> Any:
    if get_origin(annotation) is Literal:
        # A choice spelled as its values (--mode full|delta): one of them, or none given.
        if value is None or value in get_args(annotation):
            return value
        raise _Refused
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        return [_direct(item, parameter_info, one, param, ctx) for one in value]
    if annotation is bool and isinstance(value, bool):
        return value  # a flag: click parsed it already
    if annotation is int:
        return _plain_integer(value, parameter_info)
    if not isinstance(value, str):
        raise _Refused
    if annotation is str:
        return value
    if issubclass(annotation, Path):
        # Given a Path, typer's path coercion needs no adapter: the same checks, the same messages.
        return coerce_cli_path(annotation(value), parameter_info, path_type=annotation, param=param, ctx=ctx)
    try:
        return coerce_cli_choice(value, choices=tuple(annotation), case_sensitive=parameter_info.case_sensitive)
    except ValueError:
        raise _Refused from None


# More digits than any count ckpt takes: such a value is left to typer (and Python's own digit limit).
_MAX_DIGITS = 18


def _plain_integer(value: Any, parameter_info: Any) -> int:
    """An int default, or a string of ASCII digits, inside the option's bounds; pydantic's lax spellings
    ("+5", " 5", "1_000", "1.0") and every refusal are typer's to make."""
    if type(value) is int:
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= _MAX_DIGITS:
        number = int(value)
    else:
        raise _Refused
    low, high = parameter_info.min, parameter_info.max
    if parameter_info.clamp or (low is not None and number < low) or (high is not None and number > high):
        raise _Refused
    return number


def _handled(annotation: Any) -> bool:
    if get_origin(annotation) is Literal:
        return all(isinstance(arg, str) for arg in get_args(annotation))
    if get_origin(annotation) is list:
        return _handled(get_args(annotation)[0])
    return annotation in (str, bool, int) or (isinstance(annotation, type) and issubclass(annotation, (Path, Enum)))


@dataclass(frozen=True)
class _DirectParam(RuntimeParam):
    """typer's coercion contract, through typer's pydantic-free functions."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        try:
            return _direct(self.annotation, self.parameter_info, value, param, ctx)
        except _Refused:
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


def install_direct_coercion(params: list[Any]) -> None:
    """Give each option and argument of a kind the direct path knows its direct coercion."""
    for param in params:
        if not isinstance(param, TyperOption | TyperArgument) or param._runtime_param is not None:
            continue
        descriptor = param.type_descriptor
        info = descriptor.parameter_info
        if _handled(descriptor.annotation) and info.parser is None and descriptor.file_annotation is None:
            param._runtime_param = _DirectParam(parameter_info=info, annotation=descriptor.annotation)
