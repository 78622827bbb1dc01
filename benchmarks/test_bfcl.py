"""BFCL multi-turn speed: oracle episodes through ``gymnasium.make`` beside BFCL's own checker.

Both sides score the same thing, the ground truth of all 800 tasks, in one process on one
core: rods plays each task's gold through the environment (reset, one step per turn with
the turn's calls, a reply that ends the turn, BFCL's checks at each checked turn); BFCL's
``multi_turn_checker`` executes the same calls for the model and for the gold and compares
them. Gold replays are cached per process in rods (warmed first, as in training, where a
task is played many times), while BFCL replays the gold on every evaluation by design.
Each measure reports tasks per second in ``extra_info``. Goal (issue 17): >= 500 oracle
episodes/s.

    OMP_NUM_THREADS=1 .venv/bin/python -m pytest benchmarks/test_bfcl.py --benchmark-only
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import rods_env
from environments.bfcl.apis import bfcl_missing, call_text
from tests.requires import require


@pytest.fixture(autouse=True, scope="module")
def _bfcl_installed() -> None:
    """Skip without bfcl-eval on a developer's checkout; fail without it in CI."""
    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")


@pytest.fixture(scope="module")
def tasks(_bfcl_installed):
    from environments.bfcl.tasks import load_tasks

    return load_tasks()


@pytest.fixture(scope="module")
def env(tasks):
    from environments.bfcl.agents import OracleAgent

    assert "rods/BFCL-MultiTurn-v0" in rods_env.BENCHMARK_ENV_IDS
    env = gym.make("rods/BFCL-MultiTurn-v0")
    for task in tasks:  # warm the gold replays and the scenario templates
        _episode(env, OracleAgent(task), task)
    return env


def _episode(env, agent, task):
    obs, info = env.reset(options={"task": task})
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        done = terminated or truncated
    return info["success"]


def _rate(benchmark, n):
    benchmark.extra_info["tasks"] = n
    stats = getattr(benchmark, "stats", None)
    if stats is not None:  # None under --benchmark-disable (CI runs each once, untimed)
        benchmark.extra_info["tasks_per_s"] = round(n / stats.stats.mean, 1)


def test_oracle_episodes_through_gymnasium_make(benchmark, env, tasks):
    """All 800 tasks' gold through the Gymnasium wrappers (order enforcing, env checker)."""
    from environments.bfcl.agents import OracleAgent

    def run():
        return sum(_episode(env, OracleAgent(task), task) for task in tasks)

    assert benchmark.pedantic(run, rounds=3, iterations=1) == len(tasks)
    _rate(benchmark, len(tasks))


def test_oracle_episodes_long_context_only(benchmark, env, tasks):
    """The biggest states and outputs (the long-context category)."""
    from environments.bfcl.agents import OracleAgent

    longs = [t for t in tasks if t.category == "long_context"]

    def run():
        return sum(_episode(env, OracleAgent(task), task) for task in longs)

    assert benchmark.pedantic(run, rounds=3, iterations=1) == len(longs)
    _rate(benchmark, len(longs))


def test_bfcl_checker_on_ground_truth(benchmark, tasks):
    """BFCL's own checker on the same 800 gold trajectories (its instances removed after
    each round so rounds do not reuse them)."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    inputs = [
        (
            [[[call_text(c.name, c.arguments) for c in t]] if t else [] for t in task.gold],
            [list(t) for t in task.ground_truth],
            task.entry(),
            task.category,
        )
        for task in tasks
    ]
    rounds = iter(range(100))

    def run():
        name = f"bench{next(rounds)}"
        try:
            return sum(multi_turn_checker(*args, name)["valid"] for args in inputs)
        finally:
            space = vars(multi_turn_utils)
            for key in [k for k in space if k.startswith(name + "_")]:
                del space[key]

    assert benchmark.pedantic(run, rounds=3, iterations=1) == len(tasks)
    _rate(benchmark, len(tasks))
