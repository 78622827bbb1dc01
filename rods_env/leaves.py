"""Traceable values: the leaves of tool outputs and arguments that value flow is traced on.

Leaves are strings of 3+ characters and numbers of magnitude >= 10 (small quantities and
flags would make spurious edges), found anywhere in a JSON value except in object keys.
Synthesis asks for them thousands of times a second, so they are computed from one JSON
dump and one regular expression, and remembered by the identity of a container. Gold
replays dump each returned record once per process (:func:`record_json`: a domain's records
are immutable and shared by every episode), so a look-up of the same record again costs
nothing.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel

# One pass over a serialized JSON value: a string token (group 1; group 2 is set when it is
# an object key), or a number outside strings (group 3). Strings are tried first at every
# position, so digits inside a string never count as a number.
_JSON_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)')


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

    Containers are serialized once and scanned with one regular expression (object keys are
    skipped): tool outputs can hold thousands of values, and a Python-level walk of them
    dominated synthesis time. The value must not be changed afterwards (tool outputs and
    gold calls never are): the leaves of a container are remembered by its identity.
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
    found: set[str] = set()
    for text, key, number in _JSON_TOKEN.findall(json.dumps(value, ensure_ascii=False)):
        if number:
            parsed = float(number) if any(c in number for c in ".eE") else int(number)
            leaf = _scalar_leaf(parsed)
            if leaf is not None:
                found.add(leaf)
        elif not key:
            if "\\" in text:
                text = json.loads(f'"{text}"')
            if len(text) >= 3:
                found.add(text)
    return found


_DUMPS: OrderedDict[int, tuple[Any, Any]] = OrderedDict()


def record_json(value: Any) -> Any:
    """:func:`rods_env.tools.to_jsonable` of a tool's return value, with each returned
    record dumped once per process (by identity; records are immutable), so its leaves are
    remembered too. The result is shared: treat it as read-only, as gold outputs are."""
    if isinstance(value, BaseModel):
        hit = _DUMPS.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        dumped = value.model_dump(mode="json")
        _DUMPS[id(value)] = (value, dumped)
        while len(_DUMPS) > 65536:
            _DUMPS.popitem(last=False)
        return dumped
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, BaseModel) for v in value):
        return [record_json(v) for v in value]
    from rods_env.tools import to_jsonable

    return to_jsonable(value)
