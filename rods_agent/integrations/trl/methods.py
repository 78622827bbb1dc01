"""Tool methods for TRL: a Python method per tool, whose schema TRL derives back.

TRL exposes every public method of an environment class as a tool and derives its JSON
schema with ``transformers.utils.get_json_schema`` from the method's signature, type hints
and Google docstring. So a tool becomes a method carrying what the model must see:

* :func:`toolkit_method` -- a rods domain's tool (:class:`~rods_env.tools.ToolSpec`): the
  toolkit method's own signature and type hints, the schema's descriptions as the docstring;
* :func:`schema_method` -- any tool known only by its OpenAI function schema (a benchmark's
  tools, a served environment's): hints rebuilt from the schema (:func:`python_type`),
  optional arguments defaulting to None and left out of the call when not given.

Both methods run ``self._call_tool(name, arguments)``; the class supplies that. Needs
neither TRL nor torch.
"""

from __future__ import annotations

import inspect
import keyword
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

from rods_env.tool_session import MESSAGE_DESCRIPTION, SEND_MESSAGE_DESCRIPTION
from rods_env.tools import ToolSpec

JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict,
}


def docstring(description: str, arguments: Mapping[str, str]) -> str:
    """A Google docstring: the description, then ``Args:`` with one line per argument (its
    description on one line, as the docstring parser reads it)."""
    lines = [description]
    if arguments:
        lines += ["", "Args:"]
        lines += [
            f"    {name}: {' '.join(text.split()) or name}" for name, text in arguments.items()
        ]
    return "\n".join(lines) + "\n"


SEND_MESSAGE_DOC = docstring(SEND_MESSAGE_DESCRIPTION, {"message": MESSAGE_DESCRIPTION})
"""The docstring of ``send_message_to_user`` (the surface's description, one source)."""


def python_type(schema: Mapping[str, Any]) -> Any:
    """The type hint from which ``get_json_schema`` gives back ``schema`` as far as it can
    (enums, arrays of items, unions; nested objects stay ``dict``)."""
    if schema.get("enum"):
        return Literal.__getitem__(tuple(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [python_type(s) for s in schema[key] if s.get("type") != "null"]
            return typing.Union[tuple(options)] if options else Any  # noqa: UP007
    kind = schema.get("type")
    if isinstance(kind, list):
        options = [python_type({"type": k}) for k in kind if k != "null"]
        return typing.Union[tuple(options)] if options else Any  # noqa: UP007
    if kind == "array":
        return list.__class_getitem__(python_type(schema["items"])) if schema.get("items") else list
    return JSON_TYPES.get(str(kind), Any)


def _named(method: Callable[..., str], name: str, owner: str, doc: str) -> Callable[..., str]:
    method.__name__ = name
    method.__qualname__ = f"{owner}.{name}"
    method.__doc__ = doc
    return method


def toolkit_method(spec: ToolSpec, owner: str = "RodsEnvironment") -> Callable[..., str]:
    """A method that runs rods tool ``spec``, with the toolkit method's own signature.

    The signature (names, defaults, type hints) is the toolkit method's; the docstring holds
    the schema's descriptions, so ``get_json_schema`` derives the schema the environment
    shows in ``info["tools"]`` (as far as that function can express it: docs/scale-out.md).
    """
    name = spec.name

    def call_tool(self: Any, **arguments: Any) -> str:
        return str(self._call_tool(name, arguments))

    hints = typing.get_type_hints(spec.method)
    hints.pop("return", None)
    signature = inspect.signature(spec.method)
    call_tool.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[
            p.replace(annotation=hints.get(p.name, inspect.Parameter.empty))
            for p in signature.parameters.values()
        ],
        return_annotation=inspect.Signature.empty,
    )
    call_tool.__annotations__ = hints
    function = spec.schema["function"]
    properties = function["parameters"]["properties"]
    doc = docstring(function["description"], {a: p["description"] for a, p in properties.items()})
    return _named(call_tool, name, owner, doc)


def schema_method(
    function: Mapping[str, Any], owner: str = "RodsEnvironment"
) -> Callable[..., str]:
    """A method that runs the tool an OpenAI function schema describes.

    Required arguments are keyword-only without a default; optional ones default to None
    and are sent only when given. An argument whose name Python cannot take as a keyword
    (``from``, ``class``) is left out of the method (TRL could not pass it either).
    """
    name = str(function["name"])
    parameters = function.get("parameters") or {}
    properties: Mapping[str, Any] = {
        arg: schema
        for arg, schema in (parameters.get("properties") or {}).items()
        if arg.isidentifier() and not keyword.iskeyword(arg)
    }
    required = set(parameters.get("required") or ())

    def call_tool(self: Any, **arguments: Any) -> str:
        sent = {k: v for k, v in arguments.items() if k in required or v is not None}
        return str(self._call_tool(name, sent))

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    for arg, schema in properties.items():
        hint = python_type(schema)
        if arg in required:
            params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, annotation=hint))
        else:
            hint = hint | None
            params.append(
                inspect.Parameter(
                    arg, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=hint
                )
            )
        hints[arg] = hint
    call_tool.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    call_tool.__annotations__ = hints
    descriptions = {
        arg: str(schema.get("description") or arg) for arg, schema in properties.items()
    }
    doc = docstring(str(function.get("description") or name), descriptions)
    return _named(call_tool, name, owner, doc)
