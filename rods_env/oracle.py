"""Scripted agents: the gold oracle and simple baselines.

:class:`OracleAgent` replays a task's gold calls through ``env.step`` the way a careful
agent would: it asks the user for the facts the next call needs (those not yet said in the
conversation), asks for confirmation before the first write of a turn, makes the call, and
finally reports the turn's required outputs. It is the reference policy in tests and the
validity check of synthesized tasks.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from typing import Any

from rods_env.rewards import mentions
from rods_env.task import Task, ToolCall, Turn


def _leaf_strings(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaf_strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaf_strings(v)
    elif isinstance(value, str) and value:
        yield value


def tool_call_text(call: ToolCall) -> str:
    """The ``<tool_call>`` text of a call."""
    body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"<tool_call>{body}</tool_call>"


class OracleAgent:
    """Replays the gold calls of ``task``, talking to the user as the policy asks.

    Args:
        task: The task to solve.
        write_tools: Names of the domain's write tools (confirmation is asked before them).
    """

    def __init__(self, task: Task, write_tools: frozenset[str] | set[str]) -> None:
        self.task = task
        self.write_tools = frozenset(write_tools)
        self._turn = -1

    def _start_turn(self, turn: int) -> None:
        self._turn = turn
        self._next_call = 0
        self._confirmed = False
        self._asked: set[str] = set()

    def missing_facts(self, call: ToolCall, seen: str) -> list[str]:
        """Labels of the user's facts that hold argument values not yet said in ``seen``."""
        labels: list[str] = []
        for leaf in _leaf_strings(call.arguments):
            if leaf in seen:
                continue
            for label, value in self.task.user.facts.items():
                if leaf in value and label not in labels:
                    labels.append(label)
                    break
        return labels

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next action, given the last observation and the env's ``info``."""
        turn = int(info["turn"])
        if turn != self._turn:
            self._start_turn(turn)
        spec = self.task.turns[turn]
        seen = "\n".join(str(m.get("content") or "") for m in info["messages"])
        while self._next_call < len(spec.calls):
            call = spec.calls[self._next_call]
            missing = [m for m in self.missing_facts(call, seen) if m not in self._asked]
            if missing:
                self._asked.update(missing)
                return f"Could you please tell me your {' and '.join(missing)}?"
            if call.name in self.write_tools and not self._confirmed:
                self._confirmed = True
                args = json.dumps(call.arguments, ensure_ascii=False)
                return f"Here is what I will do: {call.name} with {args}. Shall I proceed?"
            self._next_call += 1
            return tool_call_text(call)
        return closing_message(spec)


def closing_message(turn: Turn) -> str:
    """What the oracle says once a turn's calls are made: "All done." (or, for a turn whose
    tools are withheld, a refusal naming them) and the turn's required outputs."""
    if turn.withheld_tools:
        # a refusal names the operation it refuses (the reward requires it)
        names = " and ".join(t.replace("_", " ") for t in turn.withheld_tools)
        lead = f"I'm sorry, I cannot do that for you right now: {names} is not available."
    else:
        lead = "All done."
    # an output with alternatives ("cannot|unable") is said once, in its first form
    said = [o.split("|")[0] for o in turn.outputs if not mentions(lead, o)]
    return " ".join([lead, *said])


def oracle_agent(domain: Any, task: Task) -> OracleAgent:
    """The oracle of ``task`` in ``domain``: it confirms before writes only where the
    domain's agents do (:attr:`rods_env.domain.Domain.confirm_writes`)."""
    writes = domain.toolkit.write_names() if domain.confirm_writes else frozenset()
    return OracleAgent(task, writes)


class TalkOnlyAgent:
    """A baseline that never calls a tool: it answers every message politely."""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Always the same reassuring message."""
        return "I understand. I have taken care of that for you."


class RandomToolAgent:
    """A baseline that calls random tools with arguments copied from the conversation.

    Args:
        seed: Seed of its random choices.
    """

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """A random tool call, or now and then a message to the user."""
        tools = info["tools"]
        if not tools or self.rng.random() < 0.25:
            return "Is there anything else I can do?"
        fn = self.rng.choice(tools)["function"]
        words = [w.strip(".,:;!?\"'") for w in observation.split()]
        words = [w for w in words if w] or ["x"]
        args = {
            name: (self.rng.choice(words) if prop.get("type") == "string" else 1)
            for name, prop in fn["parameters"]["properties"].items()
            if name in fn["parameters"].get("required", [])
        }
        return tool_call_text(ToolCall(name=fn["name"], arguments=args))


def run_episode(
    env: Any, agent: Any, *, task: Task | str | None = None, seed: int | None = None
) -> dict[str, Any]:
    """Run one episode of ``agent`` (anything with ``act(obs, info)``) in ``env``.

    Returns:
        The final info dict plus ``return`` (sum of rewards) and ``truncated``.
    """
    options = {"task": task} if task is not None else None
    obs, info = env.reset(seed=seed, options=options)
    total = 0.0
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        total += reward
    return {**info, "return": total, "truncated": truncated}
