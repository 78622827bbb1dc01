"""Command-line options derived from dataclasses: one typed source for the library and the CLI.

A dataclass field becomes ``--field-name``; its type, default and help text (from
:func:`option` metadata) say how it is parsed, so an option list is never kept in sync by
hand. Supported field types: ``str``, ``int``, ``float``, ``Path``, ``bool`` (a flag:
``--name`` when the default is False, ``--no-name`` when it is True), ``Literal[...]``
(choices), ``tuple[str, ...]`` (a repeatable option), ``X | None`` (default None) and
any type with a ``parse`` function::

    @dataclass(frozen=True)
    class Options:
        k: int = field(default=1, metadata=option("report pass^1..k"))

    add_options(parser, Options)
    opts = options_from(Options, parser.parse_args())
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    D = TypeVar("D", bound=DataclassInstance)
else:
    D = TypeVar("D")

Choices = Sequence[str] | Callable[[], Sequence[str]]

_META = "rods_option"


@dataclasses.dataclass(frozen=True)
class Option:
    """How a dataclass field appears on the command line.

    Attributes:
        help: Help text.
        flag: The flag (default ``--`` plus the field name with dashes).
        choices: Allowed values, or a function returning them (looked up when the parser
            is built, so plug-ins registered by then are listed).
        parse: Turns the option's text into the field's value (e.g. ``json.loads``).
        metavar: Name of the value in the help.
        hidden: Not on the command line (the field keeps its default).
    """

    help: str
    flag: str | None = None
    choices: Choices | None = None
    parse: Callable[[str], object] | None = None
    metavar: str | None = None
    hidden: bool = False


def option(
    help: str,
    *,
    flag: str | None = None,
    choices: Choices | None = None,
    parse: Callable[[str], object] | None = None,
    metavar: str | None = None,
    hidden: bool = False,
) -> dict[str, Option]:
    """Field metadata: ``field(default=..., metadata=option("help text"))``."""
    return {_META: Option(help, flag, choices, parse, metavar, hidden)}


def _spec(f: dataclasses.Field[Any]) -> Option:
    spec = f.metadata.get(_META)
    return spec if isinstance(spec, Option) else Option(help="")


def _flag(f: dataclasses.Field[Any], default: object, kind: object) -> str:
    spec = _spec(f)
    if spec.flag:
        return spec.flag
    name = f.name.replace("_", "-")
    return f"--no-{name}" if kind is bool and default is True else f"--{name}"


def _unwrap_optional(kind: object) -> tuple[object, bool]:
    """``X | None`` -> ``(X, True)``."""
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(kind)) == 2:
            return args[0], True
    return kind, False


def _default(f: dataclasses.Field[Any]) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def fields_of(cls: type[D]) -> list[tuple[dataclasses.Field[Any], object]]:
    """The command-line fields of ``cls`` with their resolved types."""
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if f.init and not _spec(f).hidden]


def add_options(
    parser: argparse.ArgumentParser, cls: type[D], title: str | None = None
) -> argparse._ArgumentGroup | argparse.ArgumentParser:
    """Add one option per field of the dataclass ``cls`` (in a group when ``title`` is given).

    Raises:
        TypeError: for a field type this module cannot parse (a bug in the dataclass).
    """
    target: argparse._ArgumentGroup | argparse.ArgumentParser = (
        parser.add_argument_group(title) if title else parser
    )
    for f, hint in fields_of(cls):
        spec = _spec(f)
        default = _default(f)
        kind, _ = _unwrap_optional(hint)
        kwargs: dict[str, Any] = {"dest": f.name, "help": spec.help}
        if spec.metavar:
            kwargs["metavar"] = spec.metavar
        choices = spec.choices() if callable(spec.choices) else spec.choices
        if typing.get_origin(kind) is typing.Literal:
            choices = [str(c) for c in typing.get_args(kind)]
            kind = str
        if kind is bool:
            kwargs["action"] = "store_false" if default is True else "store_true"
            kwargs.pop("metavar", None)
        elif typing.get_origin(kind) is tuple:
            kwargs["action"] = "append"
            kwargs["type"] = spec.parse or str
        elif spec.parse is not None:
            kwargs["type"] = _parser(spec.parse)
        elif kind in (str, int, float, Path):
            kwargs["type"] = kind
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: no command-line parser for {hint!r}")
        if choices is not None and kind is not bool:
            kwargs["choices"] = list(choices)
        if default is dataclasses.MISSING:
            kwargs["required"] = True
        else:
            kwargs["default"] = default
            if kind is not bool and default is not None and spec.help:
                kwargs["help"] = f"{spec.help} (default: {_shown(default)})"
        target.add_argument(_flag(f, default, kind), **kwargs)
    return target


def _parser(parse: Callable[[str], object]) -> Callable[[str], object]:
    """``parse`` with its ValueError shown by argparse as the option's error message."""

    def convert(text: str) -> object:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _shown(value: object) -> str:
    if isinstance(value, Mapping):
        return "{...}"
    return str(value)


def options_from(cls: type[D], args: argparse.Namespace | Mapping[str, object]) -> D:
    """Build ``cls`` from parsed arguments (fields that are not on the command line keep
    their defaults)."""
    values = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    kwargs = {}
    for f, _ in fields_of(cls):
        if f.name in values:
            value = values[f.name]
            kwargs[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**kwargs)


def option_table(cls: type[D]) -> list[tuple[str, str, str]]:
    """``(flag, default, help)`` of every option of ``cls`` (docs are checked against it)."""
    rows = []
    for f, hint in fields_of(cls):
        default = _default(f)
        kind, _ = _unwrap_optional(hint)
        if default is dataclasses.MISSING:
            shown = "required"
        elif kind is bool:
            shown = "off"  # a flag: absent by default
        elif default is None:
            shown = "none"
        else:
            shown = _shown(default)
        rows.append((_flag(f, default, kind), shown, _spec(f).help))
    return rows
