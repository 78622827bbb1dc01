"""Whether a hidden fact really has to be asked for: the no-ask agent.

A missing-parameter variant withholds a fact from the request (:attr:`Turn.hidden_facts`).
It tests asking only if an agent that never asks for that fact cannot pin its value down
from what it has: the request, the other facts, and read-only look-ups. Such an agent
sees the outputs of the gold's read-only calls that do not need the hidden value (the
customer's details list their orders) and of the domain's read-only tools that take no
argument (every airport and its city); every value there of the same kind as the hidden one
(same length and character classes) is a candidate. A candidate is ruled out when

- the tools reject the gold calls made with it (another order that holds none of the
  items to change), or
- the request states something about the true value that the candidate lacks: a string
  of the records around the true value (the record that lists it, and what the gold's
  look-ups of it return) that the request or another fact states as a whole token, but
  that the candidate's records do not hold (the request names the "Desk Lamp" of the
  order; the flight RD123 of the reservation; the city of the airport).

When no candidate survives, the no-ask agent finds the value by elimination and the variant
is rejected (``no_ask_passes``). :func:`no_ask_value` is that test.
"""

from __future__ import annotations

import json
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from rods_env.domain import Domain
from rods_env.gold import Gold, replay_gold
from rods_env.synthesis.text import states_folded
from rods_env.task import Task, ToolCall
from rods_env.tools import Toolkit, to_jsonable

CANDIDATES_TRIED = 8
"""Candidates replayed per hidden value before the value counts as pinned down."""

CANDIDATES_EXHAUSTIVE = 48
"""With ``exhaustive=True``, every candidate is replayed, up to this many (more: not
pinned down)."""

MIN_EVIDENCE = 3
"""Strings shorter than this in a record are not evidence (codes such as "no", "M")."""


@lru_cache(maxsize=65536)
def kind(value: str) -> tuple[int, bool, bool, bool, str]:
    """Length, character classes and punctuation of a value: ids of one kind share it
    (remembered: the no-ask check classifies the same output values for every variant)."""
    return (
        len(value),
        any(c.isupper() for c in value),
        any(c.islower() for c in value),
        any(c.isdigit() for c in value),
        "".join(sorted({c for c in value if not c.isalnum()})),
    )


def string_leaves(value: Any, *, keys: bool = True) -> list[str]:
    """Every non-empty string in a JSON value, object keys included unless ``keys=False``,
    in document order (an object's key before its value).

    Collected into one list by a plain recursive walk: a generator per nested value (what
    this was) cost a fifth of the missing-parameter augmentation on long-context outputs.
    """
    out: list[str] = []
    append = out.append

    def walk(value: Any) -> None:
        vtype = type(value)
        if vtype is str:
            if value:
                append(value)
        elif vtype is dict or (
            vtype is not list and vtype is not tuple and isinstance(value, Mapping)
        ):
            for k, v in value.items():
                if keys:
                    append(str(k))
                walk(v)
        elif vtype is list or vtype is tuple or isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value:
            append(value)

    walk(value)
    return out


def _records_holding(
    value: Any, wanted: str, parent: Mapping[str, Any] | None = None
) -> Iterator[Any]:
    """The innermost objects of a JSON value that hold ``wanted`` as a leaf."""
    if isinstance(value, Mapping):
        direct = any(v == wanted for v in value.values())
        if direct:
            yield value
        for v in value.values():
            if isinstance(v, (Mapping, list, tuple)):
                yield from _records_holding(v, wanted, value)
    elif isinstance(value, (list, tuple)):
        if wanted in value and parent is not None:
            return  # a list of ids: the record around it is shared by every candidate
        for v in value:
            yield from _records_holding(v, wanted, parent)


def _swap(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    return new if value == old else value


_FREE_LOOKUPS: dict[type[Toolkit], tuple[str, ...]] = {}


def _free_lookups(toolkit: type[Toolkit]) -> tuple[str, ...]:
    """Read-only tools that need no argument (lists of airports, of product types)."""
    cached = _FREE_LOOKUPS.get(toolkit)
    if cached is not None:
        return cached
    writes = toolkit.write_names()
    out = []
    for name, spec in toolkit.specs().items():
        params = spec.schema["function"]["parameters"]
        if name in writes or params.get("required") or params.get("properties"):
            continue
        out.append(name)
    found = _FREE_LOOKUPS[toolkit] = tuple(out)
    return found


_FREE_OUTPUTS: OrderedDict[tuple[str, int, str, frozenset[str] | None], tuple[Any, ...]] = (
    OrderedDict()
)
"""Recent worlds' free look-up outputs (bounded: a domain whose every task has a world of
its own draws thousands)."""

_REPLAYS: OrderedDict[tuple[object, ...], Gold | None] = OrderedDict()


def replay_variant(domain: Domain, task: Task) -> Gold | None:
    """The gold replay of ``task``, or None when a tool rejects its calls.

    The no-ask check and the guessing check both replay a task with one value swapped for
    another (often the same one); recent replays are kept, by the calls of each turn.
    """
    key = (
        domain.name,
        task.db_seed,
        task.db_size,
        tuple((tuple(c.key() for c in turn.calls), turn.withheld_tools) for turn in task.turns),
    )
    if key in _REPLAYS:
        _REPLAYS.move_to_end(key)
        return _REPLAYS[key]
    try:
        gold: Gold | None = replay_gold(domain, task)
    except Exception:  # GoldError, or a tool bug on odd input: the tools reject it
        gold = None
    _REPLAYS[key] = gold
    while len(_REPLAYS) > 256:
        _REPLAYS.popitem(last=False)
    return gold


def free_lookup_outputs(
    domain: Domain, seed: int, size: str, offered: frozenset[str] | None = None
) -> tuple[Any, ...]:
    """Outputs of the domain's argument-free read-only tools on the base state (cached):
    those of ``offered`` (the tools a task offers; None: every tool)."""
    key = (domain.name, seed, size, offered)
    out = _FREE_OUTPUTS.get(key)
    if out is None:
        tools = domain.tools(domain.database(seed, size))
        tools.on_reset()
        values = []
        for name in _free_lookups(domain.toolkit):
            if offered is not None and name not in offered:
                continue
            result = tools.call(name, {})
            if result.ok:
                values.append(to_jsonable(result.value))
        out = _FREE_OUTPUTS[key] = tuple(values)
        while len(_FREE_OUTPUTS) > 1024:
            _FREE_OUTPUTS.popitem(last=False)
    return out


def _leaves_of(call: ToolCall) -> set[str]:
    return {leaf for leaf in string_leaves(call.arguments)}


def _context(outputs: list[Any], lookups: list[Any], wanted: str) -> set[str]:
    """Strings of the records around ``wanted``: the objects that hold it, and the outputs
    of the look-ups made with it (lower-cased)."""
    found: set[str] = set()
    for out in outputs:
        for record in _records_holding(out, wanted):
            found.update(s.lower() for s in string_leaves(record))
    for out in lookups:
        found.update(s.lower() for s in string_leaves(out))
    return found


_VERDICTS: OrderedDict[tuple[object, ...], tuple[weakref.ref[Gold], str | None]] = OrderedDict()
"""Recent verdicts: the augmentation asks first, the critique asks again about the same
variant (a weak reference tells the same gold from a new one that reuses its id)."""


def no_ask_value(domain: Domain, task: Task, gold: Gold, *, exhaustive: bool = False) -> str | None:
    """A hidden fact that an agent which never asks for it can still pin down, or None.

    Returns ``"<label>: <value>"`` for the first hidden value whose every candidate is ruled
    out (see the module docstring), None when every hidden fact needs asking.

    Args:
        domain: The task's domain.
        task: The task, with hidden facts.
        gold: Its gold replay.
        exhaustive: Rule out every candidate before a value counts as pinned down (up to
            :data:`CANDIDATES_EXHAUSTIVE`), not the first :data:`CANDIDATES_TRIED`: the
            verdict "pinned down" is then sound, as *deepen* needs (the task must stay
            solvable); the missing-parameter check only needs "not pinned down" sound.
    """
    hidden = [(t, label) for t, turn in enumerate(task.turns) for label in turn.hidden_facts]
    if not hidden:
        return None
    key = (
        id(gold),
        exhaustive,
        domain.name,
        tuple(f"{t.request}\x1f{','.join(t.hidden_facts)}" for t in task.turns),
        tuple(sorted(task.user.facts.items())),
    )
    hit = _VERDICTS.get(key)
    if hit is not None and hit[0]() is gold:
        return hit[1]
    verdict = _no_ask_value(domain, task, gold, hidden, exhaustive)
    _VERDICTS[key] = (weakref.ref(gold), verdict)
    while len(_VERDICTS) > 64:
        _VERDICTS.popitem(last=False)
    return verdict


def _no_ask_value(
    domain: Domain, task: Task, gold: Gold, hidden: list[tuple[int, str]], exhaustive: bool
) -> str | None:
    writes = domain.toolkit.write_names()
    calls = task.gold_calls
    turn_of = [t for t, turn in enumerate(task.turns) for _ in turn.calls]
    hidden_labels = {label for _, label in hidden}
    for t, label in hidden:
        value = task.user.facts.get(label, "")
        leaves = {leaf for c in calls for leaf in _leaves_of(c) if leaf and leaf in value}
        known = " \x00 ".join(
            [turn.request for turn in task.turns[: t + 1]]
            + [v for lb, v in task.user.facts.items() if lb not in hidden_labels]
        )
        for leaf in sorted(leaves):
            if not _pinned(domain, task, gold, t, leaf, known, writes, calls, turn_of, exhaustive):
                break
        else:
            if leaves:
                return f"{label}: {value}"
    return None


def _pinned(
    domain: Domain,
    task: Task,
    gold: Gold,
    t: int,
    leaf: str,
    known: str,
    writes: frozenset[str],
    calls: tuple[ToolCall, ...],
    turn_of: list[int],
    exhaustive: bool = False,
) -> bool:
    """Whether the no-ask agent can tell ``leaf`` (part of a hidden fact) from every other
    candidate it sees."""
    visible: list[Any] = [
        gold.call_outputs[k]
        for k, call in enumerate(calls)
        if turn_of[k] <= t and call.name not in writes and leaf not in _leaves_of(call)
    ]
    offered = domain.tools_for(task) if domain.task_tools is not None else None
    visible.extend(free_lookup_outputs(domain, task.db_seed, task.db_size, offered))
    seen_text = json.dumps(visible, ensure_ascii=False)
    if leaf not in seen_text and not states_folded(known, leaf):
        return False  # nowhere to read it from: it must be asked for
    own_lookups = [
        gold.call_outputs[k]
        for k, call in enumerate(calls)
        if call.name not in writes and leaf in _leaves_of(call)
    ]
    evidence = {
        s
        for s in _context(visible, own_lookups, leaf)
        if len(s) >= MIN_EVIDENCE and s != leaf.lower() and states_folded(known, s)
    }
    target = kind(leaf)
    candidates = list(
        dict.fromkeys(
            s
            for out in visible
            for s in string_leaves(out)
            if len(s) == target[0] and s != leaf and kind(s) == target
        )
    )
    if exhaustive and len(candidates) > CANDIDATES_EXHAUSTIVE:
        return False  # too many to rule out one by one: not provably pinned down
    for cand in candidates if exhaustive else candidates[:CANDIDATES_TRIED]:
        trial = task.model_copy(
            update={
                "turns": tuple(
                    turn.model_copy(
                        update={
                            "calls": tuple(
                                ToolCall(name=c.name, arguments=_swap(c.arguments, leaf, cand))
                                for c in turn.calls
                            )
                        }
                    )
                    for turn in task.turns
                )
            }
        )
        other = replay_variant(domain, trial)
        if other is None:  # the tools rule it out
            continue
        lookups = [
            other.call_outputs[k]
            for k, call in enumerate(trial.gold_calls)
            if call.name not in writes and cand in _leaves_of(call)
        ]
        context = _context(visible, lookups, cand)
        if evidence <= context:
            return False  # a candidate the request does not rule out: asking is needed
    return True
