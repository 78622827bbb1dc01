"""Traceable values: the leaves of tool outputs and arguments that value flow is traced on.

Leaves are strings of 3+ characters and numbers of magnitude >= 10 (small quantities and
flags would make spurious edges), found anywhere in a JSON value except in object keys.
Synthesis asks for them thousands of times a second, so a value is walked once, iteratively
and dispatching on exact types (a fifth to a tenth of the time of serializing it and
scanning the text), and the leaves of a container are remembered by its identity. Gold
replays dump each returned record once per process (:func:`record_json`: a domain's records
are immutable and shared by every episode), so a look-up of the same record again costs
nothing.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel

from rods_env.records import plain_dump


def _scalar_leaf(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return repr(value) if abs(value) >= 10 else None
    if isinstance(value, str):
        return value if len(value) >= 3 else None
    return None


_LEAVES: OrderedDict[int, tuple[Any, frozenset[str]]] = OrderedDict()
"""Leaves of recently seen containers, by identity (the value is kept with its leaves, so an
id is never reused while cached): a gold replay's outputs are read again by the critique,
the expansion steps and the next generation's composition."""


def value_leaves(value: Any) -> frozenset[str]:
    """The traceable scalar values inside a JSON value (see module docstring).

    A container is walked once (object keys are skipped; see :func:`_leaves_of`). The value
    must not be changed afterwards (tool outputs and gold calls never are): the leaves of a
    container are remembered by its identity.
    """
    if not isinstance(value, (dict, list, tuple)):
        leaf = _scalar_leaf(value)
        return frozenset() if leaf is None else frozenset((leaf,))
    hit = _LEAVES.get(id(value))
    if hit is not None and hit[0] is value:
        _LEAVES.move_to_end(id(value))
        return hit[1]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
        # a list of records: the union of theirs (each remembered: records repeat)
        found = frozenset().union(*(value_leaves(v) for v in value))
    else:
        found = frozenset(_leaves_of(value))
    _LEAVES[id(value)] = (value, found)
    while len(_LEAVES) > 16384:
        _LEAVES.popitem(last=False)
    return found


def _leaves_of(value: Any) -> set[str]:
    """The leaves of a JSON value, by an iterative walk (the definition, at C-dispatch speed:
    exact types first, subclasses such as an ``IntEnum`` as JSON would write them)."""
    found: set[str] = set()
    add = found.add
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            if len(item) >= 3:
                add(item)
        elif kind is dict:
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        elif kind is int:
            if item >= 10 or item <= -10:
                add(int.__repr__(item))
        elif kind is float:
            if (item >= 10 or item <= -10) and item not in _INFINITE:
                add(float.__repr__(item))
        elif item is None or kind is bool:
            continue
        else:
            push(_as_json(item))
    return found


_INFINITE = (math.inf, -math.inf)  # written Infinity in JSON: not a number leaf


def _as_json(item: Any) -> Any:
    """A value of a subclass of a JSON type as JSON writes it (a dict or list subclass as its
    items), so the walk treats it as :func:`json.dumps` would; any other type is an error."""
    if isinstance(item, str):
        return str.__str__(item)
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return int(int.__repr__(item))
    if isinstance(item, float):
        return float(float.__repr__(item))
    if isinstance(item, dict):
        return dict(item)
    if isinstance(item, (list, tuple)):
        return list(item)
    raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")


_DUMPS: OrderedDict[int, tuple[Any, Any]] = OrderedDict()


def record_json(value: Any) -> Any:
    """:func:`rods_env.tools.to_jsonable` of a tool's return value, with each returned
    record dumped once per process (by identity; records are immutable), so its leaves are
    remembered too. The result is shared: treat it as read-only, as gold outputs are."""
    if isinstance(value, BaseModel):
        hit = _DUMPS.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        dumped = plain_dump(value)  # nested records' dumps shared (rods_env.records)
        if dumped is None:
            dumped = value.model_dump(mode="json")
        _DUMPS[id(value)] = (value, dumped)
        while len(_DUMPS) > 65536:
            _DUMPS.popitem(last=False)
        return dumped
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, BaseModel) for v in value):
        return [record_json(v) for v in value]
    from rods_env.tools import to_jsonable

    return to_jsonable(value)
