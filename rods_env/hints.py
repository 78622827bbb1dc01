"""Actionable hints: what a failed tool call's observation gains with ``actionable_hints=True``.

This is the environment-augmentation baseline of the RODS paper, Environment Tuning's
"actionable environment augmentation" (arXiv 2510.10197): where a call fails with a vague
error, the environment says what to do instead. Every environment of rods takes the
keyword (``gymnasium.make(id, actionable_hints=True)``); it is off by default, and with it
off nothing here runs. :class:`rods_env.episode.EpisodeEnv` appends the hints to a call's
observation, after the benchmark has recorded the reply it scores, so hints change what
the agent reads and nothing else: not the state, not the reward, not the benchmark's
trajectory. ``docs/envtuning.md`` says which of Environment Tuning's augmentations are
reproduced.

**A hint never hands over the answer.** It is derived only from what the agent already
has or can ask for without the gold: the tool schemas it was shown (closest function
names, a parameter's type, description and allowed values), its own call (the values it
wrote), the error text the tool gave, and which tools are withheld in this turn. A hint
may *name the tool that finds a value* (``ls()``, ``get_user_id``); it never states a
value of the state the agent has not seen (no file listing, no "did you mean" among
records). The adversary tests (``tests/core/test_hints.py``) check that no hint holds a
gold argument value absent from the conversation so far.

The hint kinds (:data:`KINDS`) of this module, which every environment gets:

================== =====================================================================
kind               when, and what the hint says
================== =====================================================================
unknown_function   the name is not among the tools shown: the closest shown names
withheld_function  the name is a tool withheld in this turn: it is not available now,
                   say so instead of reaching the result another way
missing_argument   a required parameter is absent: its name, type and description
unexpected_argument a parameter the tool does not take: the closest parameter and the
                   tool's parameters
wrong_type         a value of the wrong JSON type: the expected type
not_allowed_value  a string outside the parameter's allowed values (a schema ``enum`` or
                   BFCL's ``[Enum]:`` in the description): the allowed values
login_first        the error says the user is not logged in (or a token is bad): the
                   shown tools that log in or authenticate
lookup             the error says an entity was not found: the shown tools that look that
                   kind of entity up
================== =====================================================================

An environment adds hints from its own state through
:meth:`rods_env.episode.EpisodeEnv._state_hints` (BFCL's file system and API classes:
:mod:`environments.bfcl.hints`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KINDS: tuple[str, ...] = (
    "unknown_function",
    "withheld_function",
    "missing_argument",
    "unexpected_argument",
    "wrong_type",
    "not_allowed_value",
    "login_first",
    "lookup",
)
"""The hint kinds every environment gives (see the module doc)."""

HINT_HEAD = "Hint: "
"""How each hint line starts in an observation."""

MAX_HINTS = 3
"""Most hints one call's observation gets (the first are the most specific)."""

MAX_HINT_CHARS = 400
"""Longest hint (a longer one is cut with an ellipsis)."""

MAX_LISTED = 12
"""Most names or values one hint lists."""


@dataclass(frozen=True)
class Hint:
    """One hint for one call.

    Attributes:
        kind: What it is about (:data:`KINDS`, or an environment's own kind).
        text: What the agent reads (without :data:`HINT_HEAD`).
    """

    kind: str
    text: str


@dataclass(frozen=True)
class ToolIndex:
    """The shown tools' schemas by name, read once per tool list.

    Attributes:
        functions: Tool name to its ``function`` part (``description``, ``parameters``).
        names: The names in the order shown.
    """

    functions: Mapping[str, Mapping[str, Any]]
    names: tuple[str, ...]


_INDEX: dict[int, tuple[Any, ToolIndex]] = {}
_INDEX_SIZE = 256


def tool_index(schemas: Sequence[Mapping[str, Any]]) -> ToolIndex:
    """The :class:`ToolIndex` of an OpenAI tool list (cached on the list's identity: the
    environments share read-only tool lists, so a list is indexed once)."""
    key = id(schemas)
    hit = _INDEX.get(key)
    if hit is not None and hit[0] is schemas:
        return hit[1]
    functions: dict[str, Mapping[str, Any]] = {}
    for schema in schemas:
        function = schema.get("function", schema) if isinstance(schema, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            functions.setdefault(function["name"], function)
    index = ToolIndex(functions, tuple(functions))
    if len(_INDEX) >= _INDEX_SIZE:
        _INDEX.clear()
    _INDEX[key] = (schemas, index)  # the list is kept alive, so its id is not reused
    return index


# -- the schema: what a call should have looked like ----------------------------------------
def schema_hints(
    name: str,
    arguments: Mapping[str, Any] | None,
    schemas: Sequence[Mapping[str, Any]],
    *,
    withheld: Collection[str] = (),
) -> list[Hint]:
    """What is wrong with a call against the tools shown, each with what to do instead.

    Args:
        name: The function name as the environment read it.
        arguments: The call's arguments (None: they could not be read).
        schemas: The tools shown now (OpenAI format).
        withheld: Tools withheld in this turn (a call to one is told it is not available).

    Returns:
        The hints, most specific first (empty when the call fits its schema).
    """
    index = tool_index(schemas)
    function = index.functions.get(name)
    if name in withheld and function is None:
        return [
            Hint(
                "withheld_function",
                f"'{_short(name)}' is not available in this turn (it is not among the "
                "functions you were given). Say that it cannot be done with the functions "
                "available, instead of reaching the same result another way.",
            )
        ]
    if function is None:
        close = difflib.get_close_matches(name, index.names, n=3, cutoff=0.6)
        if not close:
            lowered = name.lower()
            close = [n for n in index.names if n.lower() == lowered]
        text = f"'{_short(name)}' is not one of the functions you were given."
        if close:
            text += " Did you mean " + _or(close) + "?"
        else:
            text += " Call only functions listed in your tools, by their exact name."
        return [Hint("unknown_function", text)]
    if arguments is None:
        return []
    params = function.get("parameters") or {}
    props: Mapping[str, Any] = params.get("properties") or {}
    required = [p for p in params.get("required") or () if isinstance(p, str)]
    found: list[Hint] = []
    for param in required:
        if param not in arguments:
            found.append(Hint("missing_argument", _missing(name, param, props.get(param) or {})))
    for param in arguments:
        if param not in props:
            found.append(Hint("unexpected_argument", _unexpected(name, str(param), props)))
    for param, value in arguments.items():
        prop = props.get(param)
        if not isinstance(prop, Mapping) or value is None:
            continue
        expected = _type_problem(value, prop)
        if expected is not None:
            found.append(
                Hint(
                    "wrong_type",
                    f"'{_short(str(param))}' of {name} must be {expected}, not "
                    f"{_json_type(value)}.",
                )
            )
            continue
        allowed = allowed_values(prop)
        bad = _outside(value, allowed)
        if bad is not None:
            found.append(
                Hint(
                    "not_allowed_value",
                    f"'{_short(str(param))}' of {name} takes one of: {_listed(allowed)}; "
                    f"{json.dumps(bad, ensure_ascii=False)[:60]} is not one of them.",
                )
            )
    return found


def _missing(name: str, param: str, prop: Mapping[str, Any]) -> str:
    described = _describe(prop)
    return f"{name} needs '{param}'" + (f" ({described})" if described else "") + "."


def _unexpected(name: str, param: str, props: Mapping[str, Any]) -> str:
    text = f"{name} has no parameter '{_short(param)}'."
    close = difflib.get_close_matches(param, list(props), n=1, cutoff=0.6)
    if close:
        text += f" Did you mean '{close[0]}'?"
    if props:
        text += f" Its parameters: {_listed(list(props))}."
    else:
        text += " It takes no parameters."
    return text


def _describe(prop: Mapping[str, Any]) -> str:
    """A parameter's type and description, as the schema says them."""
    parts = []
    kind = _type_name(prop)
    if kind:
        parts.append(kind)
    description = str(prop.get("description") or "").strip()
    if description:
        parts.append(description)
    text = ": ".join(parts)
    allowed = allowed_values(prop)
    if allowed and "[Enum]" not in description:
        text += f"{'; ' if text else ''}one of: {_listed(allowed)}"
    return text


_JSON_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict, Mapping),
}


def _type_name(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    if isinstance(kind, str):
        if kind == "array" and isinstance(prop.get("items"), Mapping):
            inner = _type_name(prop["items"])
            return f"array of {inner}" if inner else "array"
        return "float" if kind == "number" and prop.get("format") == "float" else kind
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    options = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(options, list):
        names = [_type_name(o) for o in options if isinstance(o, Mapping)]
        return " or ".join(n for n in names if n and n != "null")
    return ""


def _matches(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    wanted = _JSON_TYPES.get(kind)
    if wanted is None:
        return True  # a type this check does not know is not judged
    if isinstance(value, bool):
        return kind == "boolean"
    return isinstance(value, wanted)


def _type_problem(value: Any, prop: Mapping[str, Any]) -> str | None:
    """The expected type when ``value`` is not of the type ``prop`` declares, else None
    (an unknown or absent type is not judged)."""
    kind = prop.get("type")
    kinds: list[str] = []
    if isinstance(kind, str):
        kinds = [kind]
    elif isinstance(kind, list):
        kinds = [k for k in kind if isinstance(k, str)]
    else:
        options = prop.get("anyOf") or prop.get("oneOf")
        if isinstance(options, list) and all(
            isinstance(o, Mapping) and isinstance(o.get("type"), str) for o in options
        ):
            kinds = [o["type"] for o in options]
    if not kinds or any(_matches(value, k) for k in kinds):
        if "array" in kinds and isinstance(value, (list, tuple)):
            items = prop.get("items")
            if isinstance(items, Mapping):
                for item in value:
                    if item is not None and _type_problem(item, items) is not None:
                        return _type_name(prop) or "array"
        return None
    return _type_name(prop) or " or ".join(kinds)


_ENUM = re.compile(r"\[Enum\]:\s*")


def allowed_values(prop: Mapping[str, Any]) -> list[Any]:
    """The values a parameter allows: its schema ``enum``, or the list BFCL writes in the
    description after ``[Enum]:`` (empty when neither is there)."""
    enum = prop.get("enum")
    if isinstance(enum, list):
        return list(enum)
    items = prop.get("items")
    if isinstance(items, Mapping) and isinstance(items.get("enum"), list):
        return list(items["enum"])
    description = prop.get("description")
    if not isinstance(description, str):
        return []
    match = _ENUM.search(description)
    if match is None:
        return []
    rest = description[match.end() :]
    if rest.startswith("["):
        end = rest.find("]")
        try:
            values = json.loads(rest[: end + 1]) if end > 0 else None
        except ValueError:
            values = None
        return list(values) if isinstance(values, list) else []
    head = rest.split("\n", 1)[0]
    values = [v.strip().strip("'\"").rstrip(".").strip() for v in head.split(",")]
    if any(not v or len(v.split()) > 3 for v in values):
        return []  # not a plain list: better no hint than a wrong one
    return values


def _outside(value: Any, allowed: Sequence[Any]) -> Any:
    """The first string of ``value`` (a string, or a list of them) not in ``allowed``; None
    when every one is allowed or the allowed values are not strings."""
    if not allowed or not all(isinstance(a, str) for a in allowed):
        return None
    values = value if isinstance(value, (list, tuple)) else [value]
    for item in values:
        if isinstance(item, str) and item not in allowed:
            return item
    return None


# -- the error text: what the failure says is missing ---------------------------------------
_LOGIN = re.compile(
    r"not (?:currently )?(?:logged in|authenticated)|log ?in (?:to|first)|please log ?in|"
    r"authenticate before|login required|access token|token (?:expired|not initialized)|"
    r"no user is currently logged in",
    re.IGNORECASE,
)
_LOGIN_TOOL = re.compile(r"(?:^|_)(?:log_?in|authenticate|auth)(?:_|$)", re.IGNORECASE)
_NOT_FOUND = re.compile(r"not found|does not exist|doesn't exist", re.IGNORECASE)
_NOT_ENTITY = frozenset(
    {"error", "the", "a", "an", "no", "this", "that", "given", "requested", "specified", "during",
     "execution", "with", "id", "name", "was", "is", "value", "tool", "function"}
)  # fmt: skip
_LOOKUP_VERBS = ("get", "find", "search", "list", "retrieve", "view", "display", "lookup")


def failure_hints(name: str, output: str, schemas: Sequence[Mapping[str, Any]]) -> list[Hint]:
    """Hints read from a failed call's error text: a login (or authentication) the call
    needs first, or the tools that look up an entity the error says was not found. Only
    tools shown now are named, never the one called."""
    index = tool_index(schemas)
    found: list[Hint] = []
    if _LOGIN.search(output):
        tools = [n for n in index.names if _LOGIN_TOOL.search(n) and n != name]
        tools = [n for n in tools if "status" not in n and "logout" not in n]
        if tools:
            found.append(
                Hint(
                    "login_first",
                    f"{name} needs a logged-in (authenticated) session: call "
                    f"{_or(tools)} first, then retry.",
                )
            )
    entity = _missing_entity(output)
    if entity is not None and not found:
        tools = _lookup_tools(entity, name, index)
        if tools:
            found.append(
                Hint(
                    "lookup",
                    f"Check the {entity} you used: {_or(tools)} can look it up "
                    "(or ask the user for it).",
                )
            )
    return found


def _missing_entity(output: str) -> str | None:
    """The kind of thing an error says was not found ("Reservation X not found" ->
    ``reservation``): the first word of its sentence that names no value, or None."""
    match = _NOT_FOUND.search(output)
    if match is None:
        return None
    head = output[: match.start()]
    start = max(head.rfind(c) for c in '.\n:{"') + 1
    unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", " ", head[start:])  # a quoted value is no kind
    for word in re.findall(r"[A-Za-z]+", unquoted):
        lowered = word.lower()
        if lowered not in _NOT_ENTITY and len(lowered) >= 3:
            return lowered.rstrip("s") if lowered.endswith("s") and len(lowered) > 4 else lowered
    return None


def _lookup_tools(entity: str, called: str, index: ToolIndex) -> list[str]:
    """Shown tools that look up ``entity``: a look-up verb and the entity in the name, or
    else in the description (``get_user_details``: "... including their reservations")."""
    lookups = [
        n for n in index.names if n != called and n.lower().split("_", 1)[0] in _LOOKUP_VERBS
    ]
    named = [n for n in lookups if entity in n.lower()]
    if named:
        return named[:3]
    word = re.compile(rf"\b{re.escape(entity)}(?:s|es)?\b", re.IGNORECASE)
    described = [n for n in lookups if word.search(str(index.functions[n].get("description")))]
    return described[:3]


def looks_failed(output: str) -> bool:
    """Whether a call's result text reports a failure: an error text (``Error...``) or a
    JSON object (or a list of one) with an ``"error"`` key, as BFCL's classes return it."""
    head = output[:16].lstrip()  # a result can be long: no copy of it on the hot path
    if head[:5].lower() == "error":
        return True
    if not head.startswith(("{", "[")) or '"error"' not in output:
        return False
    try:
        data = json.loads(output)
    except ValueError:
        return False
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]
    return isinstance(data, dict) and "error" in data


def with_hints(output: str, hints: Sequence[Hint], limit: int) -> str:
    """``output`` followed by the hints (at most :data:`MAX_HINTS`), one line each, the
    output shortened first when the whole would pass ``limit`` characters (the hints stay
    whole)."""
    lines = []
    for hint in hints[:MAX_HINTS]:
        text = hint.text if len(hint.text) <= MAX_HINT_CHARS else hint.text[:397] + "..."
        lines.append(HINT_HEAD + text)
    tail = "\n" + "\n".join(lines)
    room = max(limit - len(tail), 0)
    if len(output) > room:
        output = output[: max(room - 3, 0)] + "..."
    return output + tail


def unique(hints: Sequence[Hint]) -> list[Hint]:
    """``hints`` without repeats (same text), in order."""
    seen: set[str] = set()
    out = []
    for hint in hints:
        if hint.text not in seen:
            seen.add(hint.text)
            out.append(hint)
    return out


# -- wording ----------------------------------------------------------------------------------
def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _or(names: Sequence[str]) -> str:
    shown = [f"{n}" for n in names[:MAX_LISTED]]
    if len(shown) == 1:
        return shown[0]
    return ", ".join(shown[:-1]) + " or " + shown[-1]


def _listed(values: Sequence[Any]) -> str:
    shown = [v if isinstance(v, str) else json.dumps(v) for v in values[:MAX_LISTED]]
    more = len(values) - len(shown)
    return ", ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
