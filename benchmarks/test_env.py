"""Environment speed on the default-size databases: reset, tool steps, reward, oracle episodes.

Each measure has an in-run baseline of the naive approach (deep-copying the database at
reset, hashing the whole database for the reward), so speed-ups are measured, not quoted.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json

import gymnasium as gym
import pytest

import rods_env
from rods_env import run_episode
from rods_env.gold import GOLD_CACHE
from rods_env.oracle import oracle_agent, tool_call_text
from rods_env.rewards import evaluate_turn, success

ENV_IDS = rods_env.ENV_IDS


@pytest.fixture(scope="module", params=ENV_IDS)
def env(request):
    env = gym.make(request.param, split="test").unwrapped
    for task in env.domain.seed_tasks():
        GOLD_CACHE.get(env.domain, task)  # warm: gold is replayed once per task, then cached
    env.reset(seed=0)
    return env


def _write_task(env):
    writes = env.domain.toolkit.write_names()
    for task in env.domain.seed_tasks("test"):
        calls = task.turns[0].calls
        idx = [i for i, c in enumerate(calls) if c.name in writes]
        if idx:
            return task, calls[: idx[0]], calls[idx[0]]
    raise AssertionError("no task with a write in its first turn")


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_database_generation(benchmark, domain):
    """A default-size database generated from its seed (``generator.generate``, uncached),
    as ``rods synth`` and a fresh process pay it once per seed; measured, not asserted."""
    generate = importlib.import_module(f"environments.{domain}.generator").generate
    tables = benchmark.pedantic(generate, args=(1, "default"), rounds=3, iterations=1)
    assert tables and all(tables.values()), sorted(tables)


def test_reset(benchmark, env):
    tasks = env.domain.seed_tasks("test")
    state = {"i": 0}

    def reset():
        state["i"] += 1
        return env.reset(options={"task": tasks[state["i"] % len(tasks)]})

    benchmark(reset)


def test_baseline_reset_by_deepcopy(benchmark, env):
    """What a reset costs when the database is deep-copied (tau-bench reloads it instead)."""
    tables = {t: dict(rows) for t, rows in env.domain.base(0, "default").items()}
    benchmark.pedantic(copy.deepcopy, args=(tables,), rounds=5, iterations=1)


def test_read_tool_step(benchmark, env):
    task = env.domain.seed_tasks("test")[0]
    action = tool_call_text(task.turns[0].calls[0])
    env.reset(options={"task": task})

    def setup():
        if env._steps >= env.max_steps - 1:
            env.reset(options={"task": task})

    benchmark.pedantic(lambda: env.step(action), setup=setup, rounds=2000, iterations=1)


def test_read_tool_call_without_env(benchmark, env):
    """The toolkit alone: the tool-call rate the env's bookkeeping is measured against."""
    task = env.domain.seed_tasks("test")[0]
    call = task.turns[0].calls[0]
    env.reset(options={"task": task})
    benchmark(env._tools.call, call.name, call.arguments)


def test_write_tool_step(benchmark, env):
    task, before, write = _write_task(env)
    action = tool_call_text(write)

    def setup():
        env.reset(options={"task": task})
        for c in before:
            env.step(tool_call_text(c))

    benchmark.pedantic(lambda: env.step(action), setup=setup, rounds=500, iterations=1)


def _finished(env):
    task, _, _ = _write_task(env)
    run_episode(env, oracle_agent(env.domain, task), task=task)
    return task


def test_reward_at_episode_end(benchmark, env):
    task = _finished(env)
    gold = GOLD_CACHE.get(env.domain, task)
    start = {}

    def reward():
        results = [evaluate_turn(i, g, env.db, start, "done") for i, g in enumerate(gold.turns)]
        return success(gold, env.db, results)

    benchmark(reward)


def test_baseline_reward_by_full_database_hash(benchmark, env):
    """The naive reward: hash the whole final database canonically (tau-bench does it twice)."""
    db = env.db

    def full_hash():
        h = hashlib.sha256()
        for table in db.tables:
            rows = {k: v.model_dump(mode="json") for k, v in db.items(table)}
            h.update(json.dumps(rows, sort_keys=True).encode())
        return h.hexdigest()

    benchmark.pedantic(full_hash, rounds=5, iterations=1)


def test_oracle_episode(benchmark, env):
    tasks = env.domain.seed_tasks("test")
    state = {"i": 0}

    def episode():
        state["i"] += 1
        task = tasks[state["i"] % len(tasks)]
        out = run_episode(env, oracle_agent(env.domain, task), task=task)
        assert out["success"]

    benchmark.pedantic(episode, rounds=len(tasks) * 2, iterations=1)
