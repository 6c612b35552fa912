"""Option values coerced with typer's own pydantic-free functions, so a short command never imports pydantic.

typer 0.29 coerces each option's value through a pydantic TypeAdapter it builds on the first parse: importing
pydantic and building the adapters costs more than the rest of `ckpt migrate-config`, which pre-commit runs on
every commit, and a third of verify-shape's start-up. For ckpt's kinds of options (text, flags, paths, choices,
and lists of them) those adapters wrap typer's `coerce_cli_path` and `coerce_cli_choice`, so these are called
directly; an integer (--jobs, --cadence, --top) written as plain decimal digits within the option's bounds is
that number. A value the direct path does not take (a sign, a space, a bound crossed) goes through typer's own
coercion, so what is accepted stays exactly what typer accepts (`tests/test_cli_params.py` compares the two on
every option of every command).

Refusals are worded here, never by pydantic: typer words a choice it refuses "Value error, 'jsn' is not one of
..." and an integer "Input should be greater than or equal to 1", pydantic's phrasing; ckpt says "'jsn' is not
one of 'text', 'json', ... (did you mean json?)" and "0 is not in the range x>=1", as Click words its own.

typer's coercion layer is private, and typer 0.29 offers no public way around its adapters (a `parser=` is
wrapped in one too): pyproject.toml pins typer to the minor version this was tested on (>=0.29,<0.30),
tests/test_cli_params.py fails on any other, and cli/app.py imports this module under typer 0.29 only.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import typer
from typer._coercion import RuntimeParam, build_runtime_param
from typer._param_types import coerce_cli_choice, coerce_cli_path
from typer.core import TyperArgument, TyperOption

from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.errors import did_you_mean
from deerflow_ckpt.redact import redact


class _Refused(Exception):
    """The direct path does not take this value: typer's own coercion decides (ckpt words a refusal)."""


class _NotAChoice(Exception):
    """A choice option given none of its values: refused here, in ckpt's words."""


def _choices(annotation: Any) -> list[str] | None:
    """The values a choice option takes (an Enum's or a Literal's), None for another kind."""
    if get_origin(annotation) is Literal:
        return [str(arg) for arg in get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(member.value) for member in annotation]
    return None


def _quoted(value: Any) -> str:
    """`value` as a refusal quotes it, any password in it masked: an operator may type a DSN in any option."""
    return repr(redact(value)) if isinstance(value, str) else redact(repr(value))


def _not_a_choice(value: Any, choices: list[str]) -> str:
    listed = ", ".join(repr(choice) for choice in choices)
    close = did_you_mean(value, choices) if isinstance(value, str) else ""
    return f"{_quoted(value)} is not one of {listed}{close}."


def _direct(annotation: Any, parameter_info: Any, value: Any, param: Any, ctx: Any) -> Any:
    if get_origin(annotation) is Literal:
        # A choice spelled as its values (--mode full|delta): one of them, or none given.
        if value is None or value in get_args(annotation):
            return value
        raise _NotAChoice if isinstance(value, str) else _Refused
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
        raise _NotAChoice from None


# More digits than any count ckpt takes: such a value is left to typer (and Python's own digit limit).
_MAX_DIGITS = 18


def _plain_integer(value: Any, parameter_info: Any) -> int:
    """An int default, or a string of ASCII digits, inside the option's bounds; pydantic's lax spellings
    ("+5", " 5", "1_000", "1.0") and every value out of bounds are left to typer's coercion."""
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


# An integer as pydantic's lax reading may take it (sign, spaces, underscores, a zero fraction): such a value typer
# refused for its bounds, any other for not being a number.
_LAX_INTEGER = re.compile(r"\s*[+-]?[0-9]+(?:_[0-9]+)*(?:\.0*)?\s*", re.ASCII)


def _number_range(parameter_info: Any) -> str:
    """The bounds as --help shows them: x>=1, x<=9, 1<=x<=9."""
    low, high = parameter_info.min, parameter_info.max
    if high is None:
        return f"x>={low}"
    return f"x<={high}" if low is None else f"{low}<=x<={high}"


def _refusal(annotation: Any, parameter_info: Any, value: Any) -> str:
    """Why `value` is refused, in ckpt's words, for a value typer's coercion refused."""
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        items = value if isinstance(value, list | tuple) else [value]
        # The first item the direct path does not take is the one typer stopped at.
        return next(
            (_refusal(item, parameter_info, one) for one in items if not _takes(item, parameter_info, one)),
            f"{_quoted(value)} is not a valid value.",
        )
    choices = _choices(annotation)
    if choices is not None:
        return _not_a_choice(value, choices)
    if annotation is int:
        bounded = parameter_info.min is not None or parameter_info.max is not None
        in_words = isinstance(value, str) and _LAX_INTEGER.fullmatch(value)
        if bounded and (in_words or (isinstance(value, int | float) and float(value).is_integer())):
            return f"{_quoted(value)} is not in the range {_number_range(parameter_info)}."
        return f"{_quoted(value)} is not a valid integer."
    return f"{_quoted(value)} is not a valid value."


def _takes(annotation: Any, parameter_info: Any, value: Any) -> bool:
    """Whether the direct path takes `value` (without a context: only what needs none is asked)."""
    try:
        _direct(annotation, parameter_info, value, None, None)
    except (_Refused, _NotAChoice, typer.BadParameter):
        return False
    return True


@dataclass(frozen=True)
class _DirectParam(RuntimeParam):
    """typer's coercion contract, through typer's pydantic-free functions, every refusal in ckpt's words."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        try:
            return _direct(self.annotation, self.parameter_info, value, param, ctx)
        except _NotAChoice:
            # typer's adapter would call the same choice function and refuse too, in pydantic's words.
            raise typer.BadParameter(
                _refusal(self.annotation, self.parameter_info, value), ctx=ctx, param=param
            ) from None
        except _Refused:
            pass
        try:
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)
        except typer.BadParameter:
            # typer's refusal is pydantic's sentence ("Input should be ..."): say it as ckpt says the rest.
            raise typer.BadParameter(
                _refusal(self.annotation, self.parameter_info, value), ctx=ctx, param=param
            ) from None


def install_direct_coercion(params: list[Any]) -> None:
    """Give each option and argument of a kind the direct path knows its direct coercion."""
    for param in params:
        if not isinstance(param, TyperOption | TyperArgument) or param._runtime_param is not None:
            continue
        descriptor = param.type_descriptor
        info = descriptor.parameter_info
        if _handled(descriptor.annotation) and info.parser is None and descriptor.file_annotation is None:
            param._runtime_param = _DirectParam(parameter_info=info, annotation=descriptor.annotation)
