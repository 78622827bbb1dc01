"""Robustness at speed: fuzzed ``env.step`` throughput and parse time at 200,000 characters.

``RODS_FUZZ_ACTIONS`` sets how many fuzzed actions each domain gets (default 5,000, so the
CI pass with ``--benchmark-disable`` stays fast); the issue's figure is taken by hand with
``RODS_FUZZ_ACTIONS=1000000 pytest benchmarks/test_fuzz.py --benchmark-only -s``. Every step
is checked as in the tests: no exception, a bounded observation, no tool bug, a writable
history.
"""

from __future__ import annotations

import os
import random
import time

import gymnasium as gym
import pytest

import rods_env
from rods_env.parsing import parse_action
from rods_env.spaces import MAX_TEXT_CHARS
from tests.core.fuzz import random_action

ENV_IDS = rods_env.ENV_IDS
N_ACTIONS = int(os.environ.get("RODS_FUZZ_ACTIONS", "5000"))
SIZE = MAX_TEXT_CHARS  # 200,000 characters


CHUNK = 20_000


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_fuzzed_steps(benchmark, env_id):
    env = gym.make(env_id, split=None, max_steps=20).unwrapped
    names = sorted(env.domain.toolkit.names())
    rng = random.Random(0)

    def run() -> float:
        """Steps N distinct fuzzed actions; only the steps are timed (drawing them is not)."""
        env.reset(seed=0)
        stepping = 0.0
        done = 0
        while done < N_ACTIONS:
            actions = [
                random_action(rng, names, huge=True) for _ in range(min(CHUNK, N_ACTIONS - done))
            ]
            start = time.perf_counter()
            for action in actions:
                obs, _, terminated, truncated, info = env.step(action)
                if len(obs) > MAX_TEXT_CHARS or any(
                    c["error"] == "InternalToolError" for c in info["tool_calls"]
                ):
                    raise AssertionError(f"step {done}: {obs[:300]}")
                if terminated or truncated:
                    env.reset(seed=done)
                done += 1
            stepping += time.perf_counter() - start
        return stepping

    seconds = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info["actions"] = N_ACTIONS
    benchmark.extra_info["steps_per_s"] = round(N_ACTIONS / seconds)
    print(f"\n{env_id}: {N_ACTIONS:,} fuzzed actions, {N_ACTIONS / seconds:,.0f} steps/s")


SHAPES = {
    "unclosed tags": "<tool_call>" * (SIZE // 11),
    "closed empty blocks": "<tool_call></tool_call>" * (SIZE // 23),
    "open brackets": "[" * SIZE,
    "open braces after a tag": "<tool_call>" + "{" * (SIZE - 11),
    "digits in a call": '<tool_call>{"name": "x", "arguments": {"n": ' + "9" * (SIZE - 60) + "}}",
    "one long string argument": '{"name": "think", "arguments": {"thought": "'
    + "a" * (SIZE - 60)
    + '"}}',
    "fence of spaces": "```" + " " * (SIZE - 4) + "x",
    "plain text": "word " * (SIZE // 5),
    "quotes and backslashes": '{"name": "' + '\\"' * (SIZE // 2 - 10),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_parse_200k_characters(benchmark, shape):
    text = SHAPES[shape][:SIZE]
    parsed = benchmark(parse_action, text, SIZE)
    assert parsed.error is not None or parsed.calls or parsed.content
