"""Tools: typed toolkit methods whose OpenAI schemas come from their signatures and docstrings.

A domain's toolkit subclasses :class:`Toolkit` and marks methods with :func:`tool`::

    class RetailTools(Toolkit):
        @tool(writes=True)
        def cancel_pending_order(self, order_id: str, reason: Literal["no longer needed"]) -> dict:
            '''Cancel a pending order.

            Args:
                order_id: The order id, such as '#W0000001'.
                reason: Why the customer cancels.
            '''

Arguments are validated before the body runs; a write tool is atomic (if it raises, or its
result cannot be rendered, the database is unchanged); a :class:`~rods_env.errors.ToolError`
becomes an error observation, and so does any other exception (reported as an internal
error, so tests can tell a tool bug from an agent mistake). Observations are bounded: an
output or an error longer than its cap ends with a truncation note.

Schemas are handed out as read-only JSON data (:class:`FrozenDict`, :class:`FrozenList`):
editing one raises instead of changing the tool list of every environment in the process.
"""

from __future__ import annotations

import difflib
import inspect
import json
import logging
import re
import typing
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from threading import Lock
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from rods_env.database import Database
from rods_env.errors import (
    InternalToolError,
    InvalidArgumentError,
    ToolError,
    UnknownToolError,
)

log = logging.getLogger(__name__)

_TOOL_MARK = "__rods_tool__"

MAX_OUTPUT_CHARS = 60_000
"""Longest tool output handed to the agent; a longer one is cut and ends with a note."""

MAX_ERROR_CHARS = 2_000
"""Longest error observation; error messages echo the agent's values, which may be huge."""


def clip_text(text: str, limit: int, what: str = "output") -> str:
    """``text`` cut to at most ``limit`` characters, ending with a note of how much was cut.

    Args:
        text: The text.
        limit: Most characters of the result, note included.
        what: What was cut, for the note (``"output"``, ``"error"``...).
    """
    if len(text) <= limit:
        return text

    def note(cut: int) -> str:
        return f"... [{what} truncated: {cut:,} more characters]"

    keep = max(0, limit - len(note(len(text))))  # the longest note this cut can need
    return text[:keep] + note(len(text) - keep)


# -- read-only JSON data -----------------------------------------------------------------------
def _read_only(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise TypeError(
        f"this {type(self).__name__} is read-only data handed out by rods; "
        "copy.deepcopy() it to get an editable copy"
    )


class FrozenDict(dict[Any, Any]):
    """A ``dict`` that refuses changes: JSON data the environment hands out and keeps.

    It is still a ``dict`` (``json.dumps``, chat templates and equality work as usual);
    ``copy.deepcopy``, ``copy.copy`` and pickling give plain, editable dicts.
    """

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (thaw(self),))


class FrozenList(list[Any]):
    """A ``list`` that refuses changes (see :class:`FrozenDict`)."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _read_only
    clear = sort = reverse = __iadd__ = __imul__ = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (thaw(self),))


def freeze(value: Any) -> Any:
    """A read-only copy of JSON-like data: mappings become :class:`FrozenDict`, lists and
    tuples :class:`FrozenList`; scalars are returned as they are."""
    if isinstance(value, FrozenDict | FrozenList):
        return value
    if isinstance(value, Mapping):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, editable deep copy of JSON-like data (the inverse of :func:`freeze`)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


# -- marking tools -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _ToolMark:
    writes: bool
    terminal: bool
    operation: tuple[str, ...]


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    writes: bool = False,
    terminal: bool = False,
    operation: Sequence[str] = (),
) -> Any:
    """Mark a toolkit method as a tool.

    Args:
        fn: The method (when used as ``@tool`` without arguments).
        writes: Whether the tool may change the database (then it runs atomically).
        terminal: Whether a successful call ends the episode (e.g. a transfer to a human).
        operation: Word stems that name what the tool does, in lower case (``"cancel"``
            matches "cancel", "cancelled", "cancellation"). When the tool is withheld, the
            agent's refusal must name the operation with one of them (see
            :mod:`rods_env.rewards`). The first word of the tool's name is always one.
    """

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        stems = tuple(dict.fromkeys([f.__name__.split("_")[0], *(w.lower() for w in operation)]))
        setattr(f, _TOOL_MARK, _ToolMark(writes=writes, terminal=terminal, operation=stems))
        return f

    return mark(fn) if fn is not None else mark


@dataclass(frozen=True)
class ToolSpec:
    """Everything known about one tool, derived once per toolkit class."""

    name: str
    method: Callable[..., Any]
    writes: bool
    terminal: bool
    description: str
    params: type[BaseModel]
    schema: dict[str, Any]
    arg_help: str = ""
    operation: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call.

    Attributes:
        name: Tool name as called.
        output: The observation text for the agent (JSON for structured values).
        ok: False when the call was rejected (bad arguments, rule violation, unknown tool).
        value: The Python value the tool returned (None when not ok).
        writes: Whether the tool is a write tool.
        terminal: Whether the call ends the episode.
    """

    name: str
    output: str
    ok: bool
    value: Any = None
    writes: bool = False
    terminal: bool = False
    error: str | None = field(default=None)
    """Class name of the error when the call was rejected (``"InternalToolError"`` when the
    tool itself failed: a bug, never the agent's mistake)."""


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and ``Args:`` entries."""
    doc = inspect.cleandoc(doc or "")
    lines = doc.splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section = "description"
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        if re.fullmatch(r"(Args|Arguments|Parameters):", stripped):
            section = "args"
            continue
        if re.fullmatch(r"(Returns|Raises|Yields|Example|Examples|Note|Notes):", stripped):
            section = "other"
            continue
        if section == "description":
            description.append(line)
        elif section == "args":
            m = re.match(r"^\s{0,8}(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
            if m and not line.startswith(" " * 9):
                current = m.group(1)
                args[current] = m.group(2).strip()
            elif current and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
    text = " ".join(" ".join(description).split())
    return text, args


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if k != "title"}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _describe_type(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_describe_type(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_describe_type(schema.get('items', {}))}"
    return str(kind)


def _build_spec(name: str, method: Callable[..., Any], mark: _ToolMark) -> ToolSpec:
    description, arg_docs = _parse_docstring(method.__doc__ or "")
    if not description:
        raise TypeError(f"tool '{name}' needs a docstring: it is the tool's description")
    hints = typing.get_type_hints(method, include_extras=True)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(method).parameters.items():
        if pname == "self":
            continue
        if pname not in hints:
            raise TypeError(f"tool '{name}': parameter '{pname}' needs a type hint")
        if pname not in arg_docs:
            raise TypeError(f"tool '{name}': parameter '{pname}' is not described under Args:")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints[pname], default)
    params = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    raw = _strip_titles(params.model_json_schema())
    properties = raw.get("properties", {})
    for pname, prop in properties.items():
        prop["description"] = arg_docs[pname]
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": raw.get("required", []),
        "additionalProperties": False,
    }
    if "$defs" in raw:
        parameters["$defs"] = raw["$defs"]
    schema = {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }
    arg_help = ", ".join(
        f"{p} ({_describe_type(s)}{'' if p in parameters['required'] else ', optional'})"
        for p, s in properties.items()
    )
    return ToolSpec(
        name=name,
        method=method,
        writes=mark.writes,
        terminal=mark.terminal,
        description=description,
        params=params,
        schema=freeze(schema),
        arg_help=arg_help or "no arguments",
        operation=mark.operation,
    )


_ATOMS = frozenset({str, int, float, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    """Convert a tool's return value (records, tuples, mappings) to plain JSON data."""
    kind = type(value)  # plain data by exact type first (a long listing is most of it)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [to_jsonable(v) for v in value]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


_RENDERED: OrderedDict[int, tuple[BaseModel, str]] = OrderedDict()
_RENDERED_SIZE = 32_768
_RENDERED_LOCK = Lock()


def render_output(value: Any) -> str:
    """Render a tool's return value as the observation text the agent reads.

    An immutable record's text is remembered (by identity, a bounded cache): the shared
    base's records are shown again in every episode that looks them up."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        if not value.model_config.get("frozen"):
            return value.model_dump_json()
        hit = _RENDERED.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        text = value.model_dump_json()
        with _RENDERED_LOCK:
            _RENDERED[id(value)] = (value, text)
            if len(_RENDERED) > _RENDERED_SIZE:
                _RENDERED.popitem(last=False)
        return text
    return json.dumps(to_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def _format_validation_error(spec: ToolSpec, err: ValidationError) -> InvalidArgumentError:
    problems = []
    for e in err.errors():
        where = _shorten(".".join(str(p) for p in e["loc"]), 60) or "arguments"
        kind = e["type"]
        if kind == "missing":
            problems.append(f"'{where}' is required")
        elif kind == "extra_forbidden":
            problems.append(f"'{where}' is not an argument of this tool")
        else:
            got = e.get("input")
            shown = repr(got)
            if len(shown) > 60:
                shown = shown[:57] + "..."
            problems.append(f"'{where}' = {shown}: {e['msg']}")
    return InvalidArgumentError(
        f"Invalid arguments for '{spec.name}': {'; '.join(problems)}.",
        f"'{spec.name}' takes: {spec.arg_help}.",
    )


class Toolkit:
    """Base class of a domain's tools, bound to one :class:`Database`.

    Subclasses define methods marked with :func:`tool`. The specs are collected once per
    class; :meth:`call` validates arguments, runs write tools atomically and turns
    :class:`ToolError` into an observation.

    Args:
        db: The episode's database state.
    """

    _specs: ClassVar[dict[str, ToolSpec]] = {}

    vocabularies: ClassVar[tuple[tuple[str, ...], ...]] = ()
    """Closed sets of answer words of the domain (statuses, cabins). A required output that
    is one of them competes with the others: stating "delayed, cancelled or on time" is not
    an answer (see :mod:`rods_env.rewards`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        specs: dict[str, ToolSpec] = {}
        for klass in reversed(cls.__mro__):
            for attr, member in vars(klass).items():
                mark = getattr(member, _TOOL_MARK, None)
                if mark is not None:
                    specs[attr] = _build_spec(attr, member, mark)
        cls._specs = specs

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    def specs(cls) -> dict[str, ToolSpec]:
        """Tool name to :class:`ToolSpec`, in definition order."""
        return dict(cls._specs)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Names of the tools."""
        return tuple(cls._specs)

    @classmethod
    def write_names(cls) -> frozenset[str]:
        """Names of the tools that may change the database."""
        return frozenset(n for n, s in cls._specs.items() if s.writes)

    @classmethod
    def schemas(cls, names: Collection[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI function schemas, optionally restricted to ``names`` (definition order)."""
        return [s.schema for n, s in cls._specs.items() if names is None or n in names]

    def on_reset(self) -> None:
        """Hook run when an episode starts; override to clear per-episode tool state."""

    def hold(self) -> None:
        """Allow the toolkit to hold back writing its changes into the database until
        :meth:`sync` (a toolkit that keeps live objects then writes each changed record
        once, not after every call). Only for a caller that reads the database after
        :meth:`sync` and never rolls it back. The base toolkit writes at once."""

    def sync(self) -> None:
        """Write into the database what :meth:`hold` held back."""

    @classmethod
    def render(cls, value: Any) -> str:
        """The observation text of a tool's return value (:func:`render_output`); a toolkit
        that mirrors another system overrides it to write results as that system does."""
        return render_output(value)

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        available: Collection[str] | None = None,
        *,
        render: bool = True,
    ) -> ToolResult:
        """Run one tool call and return its result; never raises for the agent's mistakes.

        Args:
            name: Tool name.
            arguments: JSON arguments.
            available: When given, the tools the agent may call now; a tool of the toolkit
                outside it is answered as not available in this conversation.
            render: Render the value as the agent's observation (``output``). Gold replays
                and skills read ``value`` only and pass False: ``output`` is then ``""``
                (an error is always rendered).
        """
        spec = self._specs.get(name) if isinstance(name, str) else None
        if spec is None:
            shown = _shorten(str(name))
            allowed = [n for n in self._specs if available is None or n in available]
            close = difflib.get_close_matches(shown, allowed, n=1, cutoff=0.6)
            hint = f"Did you mean '{close[0]}'? " if close else ""
            unknown = UnknownToolError(
                f"Unknown tool '{shown}'.", f"{hint}Available tools: {', '.join(allowed)}."
            )
            return self._failed(str(name), unknown, False)
        err: ToolError
        if available is not None and name not in available:
            # never "did you mean <another write tool>": reaching the same result another way
            # is exactly what the policy forbids while a tool is withheld
            err = UnknownToolError(
                f"The tool '{name}' is not available in this conversation right now.",
                "Tell the customer that this cannot be done at the moment; do not try to reach "
                "the same result with other tools.",
            )
            return self._failed(name, err, spec.writes)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            err = InvalidArgumentError(
                f"Arguments of '{name}' must be a JSON object, got {type(arguments).__name__}.",
                f"'{name}' takes: {spec.arg_help}.",
            )
            return self._failed(name, err, spec.writes)
        try:
            parsed = spec.params.model_validate(
                arguments if type(arguments) is dict else dict(arguments)
            )
        except ValidationError as exc:
            return self._failed(name, _format_validation_error(spec, exc), spec.writes)
        kwargs = parsed.__dict__  # the validated field values, by name
        saved = self.db.checkpoint() if spec.writes else None
        try:
            value = spec.method(self, **kwargs)
            # rendering is part of the call: a value that cannot be shown must not stay written
            output = clip_text(self.render(value), MAX_OUTPUT_CHARS) if render else ""
        except ToolError as err:
            if saved is not None:
                self.db.rollback(saved)
            return self._failed(name, err, spec.writes)
        except Exception as exc:
            if saved is not None:
                self.db.rollback(saved)
            log.warning("tool %s failed: %s: %s", name, type(exc).__name__, exc)
            internal = InternalToolError(
                f"The tool '{name}' failed on these arguments ({type(exc).__name__}); "
                "nothing was changed.",
                "Check the arguments against the tool's description, or try another way.",
            )
            return self._failed(name, internal, spec.writes)
        return ToolResult(
            name,
            output,
            ok=True,
            value=value,
            writes=spec.writes,
            terminal=spec.terminal,
        )

    @staticmethod
    def _failed(name: str, err: ToolError, writes: bool) -> ToolResult:
        output = clip_text(f"Error: {err}", MAX_ERROR_CHARS, "error")
        return ToolResult(name, output, ok=False, writes=writes, error=type(err).__name__)


def _shorten(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."
