"""What the TRL adapter adds to an episode: the same oracle transcripts through
``gymnasium.make`` (the in-run baseline) and through the TRL environment's generated tools."""

from __future__ import annotations

import gymnasium as gym
import pytest

import rods_env
from rods_env import OracleAgent
from rods_env.gold import GOLD_CACHE
from rods_env.parsing import parse_action

pytest.importorskip("transformers")
from rods_agent.integrations.trl import environment_factory


@pytest.fixture(scope="module", params=rods_env.ENV_IDS)
def transcripts(request):
    """Oracle actions of the test seeds (gold warmed), and the env id."""
    env = gym.make(request.param, split=None, max_steps=200).unwrapped
    out = []
    for task in env.domain.seed_tasks("test"):
        GOLD_CACHE.get(env.domain, task)
        agent = OracleAgent(task, env.domain.toolkit.write_names())
        obs, info = env.reset(options={"task": task})
        actions, done = [], False
        while not done:
            action = agent.act(obs, info)
            obs, _, terminated, truncated, info = env.step(action)
            actions.append(action)
            done = terminated or truncated
        out.append((task, actions, [parse_action(a) for a in actions]))
    return request.param, out


def test_oracle_transcripts_through_gymnasium(benchmark, transcripts):
    env_id, items = transcripts
    env = gym.make(env_id, split=None, max_steps=200).unwrapped

    def replay():
        for task, actions, _ in items:
            env.reset(options={"task": task})
            for action in actions:
                env.step(action)

    benchmark.pedantic(replay, rounds=20, iterations=1)


def test_oracle_transcripts_through_the_trl_environment(benchmark, transcripts):
    env_id, items = transcripts
    env = environment_factory(env_id, max_steps=200)()

    def replay():
        for task, _, parsed in items:
            env.reset(task_id=task.id)
            for action in parsed:
                if action.calls:
                    for call in action.calls:
                        getattr(env, call.name)(**call.arguments)
                else:
                    env.send_message_to_user(action.content)
            env.get_reward()

    benchmark.pedantic(replay, rounds=20, iterations=1)
