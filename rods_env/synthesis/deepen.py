"""Deepen: a value the customer knows becomes one the agent must find with the tools.

A gold argument that takes a table's keys (an *entity* argument of the data-flow graph,
:mod:`rods_env.synthesis.flow`: ``get_order_details.order_id``) is often a fact of the
customer, told when asked ("my order id is #W123"), even when the request names the record
by what it holds ("the order with the desk lamp"). When an earlier gold look-up lists the
same key (``get_user_details`` lists the customer's orders), the customer need not know it:
the agent can follow the edge. *Deepen* drops such a value from the customer's facts (only
a value no request states: a request that says "#W123" is about that id), and keeps the
variant only when

- an agent that never asks can still pin the value down from the requests and the
  read-only look-ups, trying **every** other value of the same kind it sees
  (:func:`rods_env.synthesis.asking.no_ask_value` run exhaustively): the task stays
  solvable without guessing;
- the value flow now runs through the look-up, so the dependency chain is longer (the
  critique checks that the signature's depth grew and nothing else changed).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from rods_env.domain import Domain, Draft
from rods_env.errors import Reject
from rods_env.gold import GOLD_CACHE, Gold
from rods_env.leaves import value_leaves
from rods_env.synthesis.asking import no_ask_value
from rods_env.synthesis.flow import flow_graph
from rods_env.synthesis.text import states
from rods_env.task import Task


def _argument_leaves(arguments: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for name, value in arguments.items():
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, Mapping):
                stack.extend(item.values())
            elif isinstance(item, (list, tuple)):
                stack.extend(item)
            else:
                yield name, item


def candidates(domain: Domain, task: Task, gold: Gold) -> list[tuple[str, str]]:
    """``(fact label, value)`` pairs that *deepen* could drop: the value is a gold entity
    argument (:meth:`~rods_env.synthesis.flow.FlowGraph.entity`), a fact states exactly it,
    no request states it, and an earlier read-only gold call returned it."""
    graph = flow_graph(domain)
    writes = domain.toolkit.write_names()
    hidden = {label for turn in task.turns for label in turn.hidden_facts}
    by_value: dict[str, list[str]] = {}
    for label, value in task.user.facts.items():
        if label not in hidden:  # a fact held back until asked stays a fact
            by_value.setdefault(value, []).append(label)
    for turn in task.turns:
        for value in [v for v in by_value if states(turn.request, v)]:
            del by_value[value]
    tables = domain.base(task.db_seed, task.db_size)
    calls = task.gold_calls
    seen: list[frozenset[str]] = []
    found: dict[str, str] = {}
    for j, call in enumerate(calls):
        for name, leaf in _argument_leaves(call.arguments):
            if not isinstance(leaf, str) or leaf not in by_value or leaf in found:
                continue
            entity = graph.entity(call.name, name)
            if (
                entity is not None
                and leaf in tables.get(entity, {})  # the value itself is a key of it
                and any(leaf in earlier for earlier in seen)
            ):
                found[leaf] = by_value[leaf][0]
        seen.append(frozenset() if call.name in writes else value_leaves(gold.call_outputs[j]))
    return [(label, value) for value, label in found.items()]


_OPEN: OrderedDict[tuple[str, str], tuple[Task, bool]] = OrderedDict()


def can_deepen(domain: Domain, task: Task) -> bool:
    """Whether *deepen* has a value to try on ``task`` (see :func:`candidates`); kept for
    recent tasks (expand plans each variant and attempt of a parent)."""
    if not task.user.facts:
        return False
    key = (domain.name, task.id)
    hit = _OPEN.get(key)
    if hit is not None and hit[0] is task:
        return hit[1]
    verdict = bool(candidates(domain, task, GOLD_CACHE.get(domain, task)))
    _OPEN[key] = (task, verdict)
    while len(_OPEN) > 4096:
        _OPEN.popitem(last=False)
    return verdict


def deepen(domain: Domain, parent: Task, gold: Gold, rng: random.Random) -> Draft:
    """``parent`` with one stated value left for the agent to find (see the module
    docstring), as a draft of the same skill and shape.

    Raises:
        Reject: ``skill_unavailable`` when no value can be dropped while the task stays
            solvable without asking.
    """
    options = candidates(domain, parent, gold)
    rng.shuffle(options)
    why: list[str] = []
    for label, value in options:
        # the no-ask agent's test on a probe in which this fact alone is held back (any
        # other it could ask for): it must pin the value down from what the task leaves it
        first = next(
            i for i, t in enumerate(parent.turns) for c in t.calls if value in _strings(c.arguments)
        )
        probe_turns = tuple(
            t.model_copy(update={"hidden_facts": (label,) if i == first else ()})
            for i, t in enumerate(parent.turns)
        )
        probe = parent.model_copy(update={"turns": probe_turns})
        if no_ask_value(domain, probe, gold, exhaustive=True) is None:
            why.append(f"{label}: the agent could not tell it from the other candidates")
            continue
        facts = {k: v for k, v in parent.user.facts.items() if v != value}
        user = parent.user.model_copy(update={"facts": facts})
        return Draft(user=user, turns=parent.turns, shape=dict(parent.shape))
    raise Reject(
        "skill_unavailable",
        "no stated value can be left for the agent to find"
        + (f" ({'; '.join(why[:3])})" if why else ""),
    )


def _strings(value: Any) -> set[str]:
    return {leaf for _, leaf in _argument_leaves({"": value}) if isinstance(leaf, str)}
