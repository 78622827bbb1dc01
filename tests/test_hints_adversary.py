"""Adversary tests of ``actionable_hints`` (rods_env/hints.py) on every kind of id: rods'
own domains, BFCL multi-turn's categories and τ²-bench's domains.

1. **A hint never hands over the answer.** Gold calls are perturbed at random (a required
   argument dropped, the name misspelt, a value of the wrong type, a wrong value, an
   argument that does not exist) and played where the gold would play them (after the
   gold calls before them); no hint may hold a gold argument value of the task that is not
   already in the conversation so far (the system prompt, the user's messages, earlier
   tool outputs, the agent's own calls, the tool schemas).
2. **Hints change no reward.** The same actions give the same rewards, ends, progress and
   success with hints on and off.
3. **Trivial agents gain nothing.** A silent agent, an echo agent and a spraying agent that
   reads the hints (it makes failing calls, then states every value any observation,
   hints included, showed it) get the same progress and success with hints on as off.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rods_env
from rods_env.exploits import EchoAgent, SilentAgent
from rods_env.hints import HINT_HEAD
from rods_env.oracle import run_episode

IDS = [
    "rods/Retail-v0",
    "rods/Airline-v0",
    "rods/BFCL-API-v0",
    "rods/BFCL-MultiTurn-Base-v0",
    "rods/BFCL-MultiTurn-MissParam-v0",
    "rods/BFCL-MultiTurn-MissFunc-v0",
    "rods/BFCL-MultiTurn-LongContext-v0",
    "rods/Tau2-Retail-v0",
    "rods/Tau2-Airline-v0",
    "rods/Tau2-Telecom-v0",
]
"""One id of each kind of environment (each BFCL category: its hints differ by category)."""

KINDS = ("drop", "misspell", "wrong_type", "wrong_value", "extra")
"""The perturbations of a gold call."""

MIN_VALUE_CHARS = 3
"""Gold values shorter than this are too common to count as handed over ("1", "a")."""


@pytest.fixture(params=IDS)
def env_id(request: pytest.FixtureRequest) -> str:
    env_id = request.param
    # every id is declared by this project's entry points: a missing one is a bug, not a skip
    assert env_id in rods_env.ENV_IDS + rods_env.BENCHMARK_ENV_IDS, f"{env_id} is not registered"
    domain = rods_env.load_any_domain(env_id)
    reason = domain.missing() if isinstance(domain, rods_env.BenchmarkDomain) else None
    if reason is not None:
        from tests.requires import require

        require(False, f"{env_id}: {reason}", "bash scripts/setup.sh tests")
    return env_id


_ENVS: dict[tuple[str, bool], Any] = {}


def _env(env_id: str, hints: bool) -> Any:
    """One environment per id and setting (``reset`` makes every episode fresh)."""
    key = (env_id, hints)
    if key not in _ENVS:
        _ENVS[key] = gym.make(env_id, split=None, actionable_hints=hints).unwrapped
    return _ENVS[key]


def _gold(task: Any) -> list[list[Any]]:
    """Each turn's gold calls (``ToolCall``: ``name``, ``arguments``)."""
    if hasattr(task, "ground_truth"):  # a BFCL task as BFCL has it
        return [list(calls) for calls in task.gold]
    return [list(turn.calls) for turn in task.turns]


def _call(name: str, arguments: Mapping[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif value is not None and not isinstance(value, bool):
        text = str(value)
        if len(text) >= MIN_VALUE_CHARS:
            yield text


def _schema(info: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for tool in info["tools"]:
        if tool["function"]["name"] == name:
            return tool["function"].get("parameters") or {}
    return {}


def perturb(call: Any, kind: str, rng: random.Random, info: Mapping[str, Any]) -> tuple[str, dict]:
    """The gold ``call`` changed by ``kind`` (see :data:`KINDS`)."""
    name, args = call.name, dict(call.arguments)
    params = _schema(info, name)
    if kind == "misspell" or (kind in ("drop", "wrong_type", "wrong_value") and not args):
        i = rng.randrange(len(name))
        return name[:i] + name[i + 1 :] + ("x" if len(name) < 3 else ""), args
    if kind == "drop":
        required = [p for p in params.get("required", ()) if p in args] or list(args)
        del args[rng.choice(required)]
        return name, args
    if kind == "extra":
        args["zq_" + rng.choice(["mode", "id", "value"])] = "zq"
        return name, args
    key = rng.choice(sorted(args))
    value = args[key]
    if kind == "wrong_type":
        args[key] = ["zq"] if isinstance(value, (str, int, float)) else 70_000_123
        return name, args
    if isinstance(value, bool):
        args[key] = not value
    elif isinstance(value, (int, float)):
        args[key] = value + 7
    elif isinstance(value, str):
        args[key] = value[::-1] + "zq"
    else:
        args[key] = "zq"
    return name, args


def _hints_of(message: Mapping[str, Any]) -> list[str]:
    content = str(message.get("content") or "")
    return [line[len(HINT_HEAD) :] for line in content.split("\n") if line.startswith(HINT_HEAD)]


def _handed_over(hints: Sequence[str], gold_values: set[str], known: str) -> list[str]:
    """Gold values a hint states (as a whole token) that the conversation did not hold."""
    found = []
    for value in gold_values:
        if value in known:
            continue
        token = re.compile(rf"(?<![\w]){re.escape(value)}(?![\w])")
        if any(token.search(h) for h in hints):
            found.append(value)
    return found


def _prefix_actions(env: Any, gold: list[list[Any]], turn: int, index: int) -> list[Any]:
    """The actions that bring an episode to where gold call ``index`` of ``turn`` runs: a
    BFCL episode plays each earlier turn's gold and ends it with a reply; the others play
    the gold calls before it in order (a user simulator moves on when it will)."""
    actions: list[Any] = []
    bfcl = hasattr(env, "holdout")
    for t in range(turn):
        actions += [_call(c.name, c.arguments) for c in gold[t]]
        if bfcl:
            actions.append("Done.")
    actions += [_call(c.name, c.arguments) for c in gold[turn][:index]]
    return actions


def _play(env: Any, task: Any, actions: Sequence[Any]) -> tuple[list[tuple], dict[str, Any]]:
    _, info = env.reset(options={"task": task})
    trace = []
    for action in actions:
        if info["termination"]:
            break
        _, reward, terminated, truncated, info = env.step(action)
        trace.append((reward, terminated, truncated))
    return trace, info


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_no_hint_hands_over_a_gold_value_and_rewards_stay(env_id: str, data: Any) -> None:
    on, off = _env(env_id, True), _env(env_id, False)
    pool = on.tasks
    task = pool[data.draw(st.integers(0, len(pool) - 1), label="task")]
    gold = _gold(task)
    places = [(t, k) for t, calls in enumerate(gold) for k in range(len(calls))]
    if not places:
        return
    turn, index = places[data.draw(st.integers(0, len(places) - 1), label="call")]
    kind = data.draw(st.sampled_from(KINDS), label="perturbation")
    rng = random.Random(data.draw(st.integers(0, 2**16), label="seed"))
    actions = _prefix_actions(on, gold, turn, index)
    _, info = _play(on, task, actions)
    if info["termination"]:
        return
    name, args = perturb(gold[turn][index], kind, rng, info)
    actions.append(_call(name, args))
    trace_on, info_on = _play(on, task, actions)
    trace_off, info_off = _play(off, task, actions)
    assert trace_on == trace_off
    for key in ("progress", "success", "termination", "turn"):
        assert info_on[key] == info_off[key], key

    gold_values = {v for calls in gold for c in calls for v in _leaves(c.arguments)}
    messages = info_on["messages"]
    tools = json.dumps(info_on["tools"], ensure_ascii=False)
    for i, message in enumerate(messages):
        hints = _hints_of(message) if message.get("role") == "tool" else []
        if not hints:
            continue
        known = tools + json.dumps(list(messages[:i]), ensure_ascii=False, default=str)
        known += str(message.get("content")).split("\n" + HINT_HEAD)[0]  # the reply itself
        leaked = _handed_over(hints, gold_values, known)
        assert not leaked, (task.id, name, args, hints, leaked)


class HintSprayAgent:
    """Reads everything, hints included: each turn it makes failing calls (each shown tool
    under a misspelt name, then without its arguments), then states every quoted value and
    every word any observation showed it."""

    def __init__(self) -> None:
        self._turn = -1
        self._step = 0
        self._seen: dict[str, None] = {}

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        for word in re.findall(r"'([^']{1,60})'|([A-Za-z0-9_#.\-]{3,})", observation):
            self._seen.setdefault(word[0] or word[1], None)
        if info["turn"] != self._turn:
            self._turn, self._step = info["turn"], 0
        self._step += 1
        names = sorted(t["function"]["name"] for t in info["tools"])
        if self._step == 1 and names:
            return "".join(_call(n + "_", {}) for n in names[:4])
        if self._step == 2 and names:
            return "".join(_call(n, {}) for n in names[:6])
        return "Here is everything: " + ", ".join(self._seen)[:4000]


AGENTS = {"silent": SilentAgent, "echo": EchoAgent, "hint_spray": HintSprayAgent}


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_trivial_agents_gain_nothing_from_hints(env_id: str, agent: str) -> None:
    pool = _env(env_id, False).tasks
    for task in pool[:: max(1, len(pool) // 3)][:3]:
        results = {}
        for hints in (False, True):
            env = gym.make(env_id, split=None, max_steps=12, actionable_hints=hints).unwrapped
            final = run_episode(env, AGENTS[agent](), task=task)
            results[hints] = (final["progress"], final["success"], final["return"])
        assert results[True] == results[False], (task.id, results)
