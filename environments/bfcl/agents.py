"""Scripted agents for BFCL tasks: the gold oracle, perturbations of the gold, trivial agents.

They drive :class:`~environments.bfcl.env.BFCLEnv` through ``act(observation, info)`` like
any rods agent (:func:`rods_env.oracle.run_episode`). The oracle is ``rods eval --engine
oracle``'s agent; the perturbations and trivial agents are the trajectories on which the
tests hold rods' verdicts against BFCL's own checker.

A **plan** gives, per turn, the steps of tool calls the agent makes before replying in
text (which ends the turn). Every agent here writes only function names of the eight API
classes and JSON arguments.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from environments.bfcl.tasks import BFCLTask
from rods_env.parsing import MAX_CALLS
from rods_env.task import ToolCall

Step = tuple[ToolCall, ...]
Plan = tuple[tuple[Step, ...], ...]
"""Per turn, the tool-calling steps made before the reply that ends the turn."""

READ_ONLY: frozenset[str] = frozenset({
    "cat", "cd", "check_tire_pressure", "compute_exchange_rate", "contact_customer_support",
    "diff", "displayCarStatus", "du", "estimate_distance",
    "estimate_drive_feasibility_by_mileage", "find", "find_nearest_tire_shop",
    "gallon_to_liter", "get_account_info", "get_available_stocks", "get_credit_card_balance",
    "get_current_time", "get_flight_cost", "get_nearest_airport_by_city",
    "get_order_details", "get_outside_temperature_from_google", "get_stock_info",
    "get_ticket", "get_user_id", "get_watchlist", "get_zipcode_based_on_city", "grep",
    "list_all_airports", "liter_to_gallon", "logarithm", "ls", "mean", "retrieve_invoice",
    "sort", "standard_deviation", "tail", "verify_traveler_information",
    "view_messages_sent", "wc",
})  # fmt: skip
"""Functions whose gold calls never change the public state (checked over all 4,625 gold
calls by the tests); the read-only-gold exploit makes only these."""

REPLY = "Done."
"""The oracle's reply after a turn's calls (its text is not scored)."""

DECLINE = "I cannot do that with the functions I have; could you tell me more?"
"""The reply in a turn without gold calls (ask, or say a function is missing)."""


def tool_calls_text(calls: Sequence[ToolCall]) -> str:
    """The calls as completion text: one ``<tool_call>`` block each."""
    return "".join(
        "<tool_call>"
        + json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False)
        + "</tool_call>"
        for c in calls
    )


def _chunked(plan: Plan) -> Plan:
    """Steps of more than :data:`~rods_env.parsing.MAX_CALLS` calls (one action's bound)
    split into consecutive steps (a few long-context gold turns make 34 calls)."""
    return tuple(
        tuple(step[i : i + MAX_CALLS] for step in steps for i in range(0, len(step), MAX_CALLS))
        for steps in plan
    )


class PlanAgent:
    """Follows a plan: each turn's steps in order, then a text reply.

    Args:
        plan: The steps of each turn (a step of more than 16 calls is split, since one
            action holds at most :data:`~rods_env.parsing.MAX_CALLS`).
        as_messages: Send steps as OpenAI-style message dicts instead of text.
    """

    def __init__(self, plan: Plan, *, as_messages: bool = False) -> None:
        self.plan = _chunked(plan)
        self.as_messages = as_messages
        self._turn = -1
        self._next = 0

    def act(self, observation: str, info: Mapping[str, Any]) -> Any:
        """The next step of the current turn, or the reply that ends it."""
        turn = int(info["turn"])
        if turn != self._turn:
            self._turn, self._next = turn, 0
        steps = self.plan[turn] if turn < len(self.plan) else ()
        if self._next < len(steps):
            step = steps[self._next]
            self._next += 1
            if self.as_messages:
                return {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in step
                    ],
                }
            return tool_calls_text(step)
        return REPLY if steps else DECLINE


def gold_plan(task: BFCLTask) -> Plan:
    """Each turn's gold calls in one step (BFCL's own ground truth as a trajectory)."""
    return tuple(((calls,) if calls else ()) for calls in task.gold)


class OracleAgent(PlanAgent):
    """Replays a task's gold calls: each turn's calls in one step, then a reply.

    Args:
        task: The task.
    """

    def __init__(self, task: BFCLTask) -> None:
        super().__init__(gold_plan(task))


# -- perturbations of the gold -------------------------------------------------------------
def _one_per_step(task: BFCLTask, rng: random.Random) -> Plan:
    return tuple(tuple((c,) for c in calls) for calls in task.gold)


def _reversed(task: BFCLTask, rng: random.Random) -> Plan:
    return tuple(((tuple(reversed(calls)),) if calls else ()) for calls in task.gold)


def _repeated(task: BFCLTask, rng: random.Random) -> Plan:
    return tuple(((calls, calls) if calls else ()) for calls in task.gold)


def _drop_one(task: BFCLTask, rng: random.Random) -> Plan:
    turns = [list(calls) for calls in task.gold]
    checked = [i for i, calls in enumerate(turns) if calls]
    turn = rng.choice(checked)
    del turns[turn][rng.randrange(len(turns[turn]))]
    return tuple(((tuple(calls),) if calls else ()) for calls in turns)


def _late(task: BFCLTask, rng: random.Random) -> Plan:
    gold = task.gold
    return tuple(((gold[i - 1],) if i > 0 and gold[i - 1] else ()) for i in range(len(gold)))


def _mutate(value: Any, rng: random.Random) -> Any:
    if isinstance(value, str):
        return value + "_x" if value else "x"
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice((-1, 1))
    if isinstance(value, float):
        return value * 1.5 + 1.0
    if isinstance(value, list):
        return [*value, value[0]] if value else ["x"]
    return value


def _wrong_argument(task: BFCLTask, rng: random.Random) -> Plan:
    turns = [list(calls) for calls in task.gold]
    candidates = [
        (t, i) for t, calls in enumerate(turns) for i, c in enumerate(calls) if c.arguments
    ]
    if candidates:
        t, i = rng.choice(candidates)
        call = turns[t][i]
        key = rng.choice(sorted(call.arguments))
        args = {**call.arguments, key: _mutate(call.arguments[key], rng)}
        turns[t][i] = ToolCall(name=call.name, arguments=args)
    return tuple(((tuple(calls),) if calls else ()) for calls in turns)


def _act_in_empty_turn(task: BFCLTask, rng: random.Random) -> Plan:
    """In a turn without gold calls, make the next checked turn's calls already (acting
    before the user gave the value, or before the function was revealed)."""
    gold = task.gold
    plan: list[tuple[Step, ...]] = [((calls,) if calls else ()) for calls in gold]
    for i, calls in enumerate(gold):
        if not calls:
            nxt = next((gold[j] for j in range(i + 1, len(gold)) if gold[j]), ())
            plan[i] = (nxt,) if nxt else ()
    return tuple(plan)


PERTURBATIONS: Mapping[str, Callable[[BFCLTask, random.Random], Plan]] = {
    "one_call_per_step": _one_per_step,
    "reversed": _reversed,
    "repeated": _repeated,
    "drop_one_call": _drop_one,
    "late_by_one_turn": _late,
    "wrong_argument": _wrong_argument,
    "act_in_empty_turn": _act_in_empty_turn,
}
"""Gold trajectories changed in one way each; some keep BFCL's verdict, most lose it."""


def perturbed(name: str, task: BFCLTask, seed: int = 0) -> PlanAgent:
    """The agent following perturbation ``name`` of the task's gold (seeded by ``seed`` and
    the task id)."""
    rng = random.Random(f"{seed}:{name}:{task.id}")
    return PlanAgent(PERTURBATIONS[name](task, rng))


# -- trivial agents ------------------------------------------------------------------------
def silent_plan(task: BFCLTask) -> Plan:
    """No call in any turn (every turn answered in text)."""
    return tuple(() for _ in task.turns)


def first_turn_plan(task: BFCLTask) -> Plan:
    """The first checked turn's gold calls, then nothing."""
    first = task.checked_turns[0]
    return tuple(((task.gold[i],) if i == first else ()) for i in range(len(task.turns)))


def read_only_plan(task: BFCLTask) -> Plan:
    """Only the gold calls of read-only functions (:data:`READ_ONLY`), in their turns."""
    out = []
    for calls in task.gold:
        reads = tuple(c for c in calls if c.name in READ_ONLY)
        out.append((reads,) if reads else ())
    return tuple(out)


_WORDS = ("a", "b", "temp", "report", "note.txt", "alpha", "1", "x")


class RandomAgent:
    """Calls random visible tools with arguments drawn from their schemas, one or two steps
    of one or two calls per turn, then replies. Argument strings are plain words.

    Args:
        seed: Seed of its choices (an int or a string, e.g. ``"0:multi_turn_base_3"``).
    """

    def __init__(self, seed: int | str = 0) -> None:
        self.rng = random.Random(seed)
        self._turn = -1
        self._left = 0

    def _value(self, prop: Mapping[str, Any]) -> Any:
        kind = prop.get("type")
        rng = self.rng
        if prop.get("enum"):
            return rng.choice(list(prop["enum"]))
        if kind == "integer":
            return rng.randint(0, 12)
        if kind == "number":
            return round(rng.uniform(0, 100), 2)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "array":
            return [rng.choice(_WORDS) for _ in range(rng.randint(1, 2))]
        if kind == "object":
            return {}
        return rng.choice(_WORDS)

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """A step of random calls, or the reply that ends the turn."""
        turn = int(info["turn"])
        if turn != self._turn:
            self._turn, self._left = turn, self.rng.randint(0, 2)
        tools = info["tools"]
        if self._left <= 0 or not tools:
            return "I have done what I could."
        self._left -= 1
        calls = []
        for _ in range(self.rng.randint(1, 2)):
            fn = self.rng.choice(tools)["function"]
            params = fn["parameters"]
            required = set(params.get("required", ()))
            args = {
                name: self._value(prop)
                for name, prop in params["properties"].items()
                if name in required or self.rng.random() < 0.3
            }
            calls.append(ToolCall(name=fn["name"], arguments=args))
        return tool_calls_text(calls)


TRIVIAL: Mapping[str, Callable[[BFCLTask, int], Any]] = {
    "silent": lambda task, seed: PlanAgent(silent_plan(task)),
    "first_turn_only": lambda task, seed: PlanAgent(first_turn_plan(task)),
    "read_only_gold": lambda task, seed: PlanAgent(read_only_plan(task)),
    "random_calls": lambda task, seed: RandomAgent(f"{seed}:{task.id}"),
}
"""Agents that do not do the task: silent, the first turn only, only the gold's read-only
calls (the cheapest exploit of BFCL's checker), and random calls."""
