"""What serving adds: the oracle's episodes of the retail test seeds through ``gymnasium.make``
in this process (the in-run baseline), through ``rods serve``'s WebSocket session over loopback
(OpenEnv's typed client), and whole sessions (open, reset, close) a second.

The per-step overhead of serving is (served - in-process) / steps; docs/hubs.md has the figures.
"""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest

from tests.agent.openenv_server import require_openenv, rods_server

require_openenv()

from rods_agent.integrations.openenv import RodsEnv  # noqa: E402
from rods_env.registry import load_any_domain  # noqa: E402
from tests.agent.test_openenv import as_action, solo_run  # noqa: E402

ENV_ID = "rods/Retail-v0"
MAKE = {"split": None, "max_steps": 200}


@pytest.fixture(scope="module")
def transcripts():
    """The oracle's actions on each retail test seed."""
    tasks = list(load_any_domain(ENV_ID).seed_tasks("test"))
    return [(task.id, solo_run(ENV_ID, task)["actions"]) for task in tasks]


@pytest.fixture(scope="module")
def url():
    with rods_server(ENV_ID, "--split", "all", "--max-steps", "200") as base:
        yield base


def test_oracle_episodes_in_process(benchmark, transcripts):
    env = gym.make(ENV_ID, **MAKE)

    def replay():
        for task_id, actions in transcripts:
            env.reset(options={"task": task_id})
            for action in actions:
                env.step(action)

    benchmark.extra_info["steps"] = sum(len(a) for _, a in transcripts)
    benchmark.pedantic(replay, rounds=10, iterations=1)


def test_oracle_episodes_served_over_loopback(benchmark, transcripts, url):
    wire = [(task_id, [as_action(a) for a in actions]) for task_id, actions in transcripts]
    client = RodsEnv(base_url=url).sync()
    client.connect()

    def replay():
        for task_id, actions in wire:
            client.reset(task_id=task_id)
            for action in actions:
                client.step(action)

    benchmark.extra_info["steps"] = sum(len(a) for _, a in wire)
    try:
        benchmark.pedantic(replay, rounds=10, iterations=1)
    finally:
        client.close()


def test_sessions_a_second(benchmark, url):
    """32 sessions opened at once, each a reset of its own task, then closed."""
    tasks = [t.id for t in load_any_domain(ENV_ID).seed_tasks("test")][:32]

    async def session(task_id: str) -> str:
        async with RodsEnv(base_url=url) as env:
            result = await env.reset(task_id=task_id)
            return str(result.observation.task_id)

    async def all_at_once() -> list[str]:
        return await asyncio.gather(*(session(t) for t in tasks))

    def run():
        return asyncio.run(all_at_once())

    benchmark.extra_info["sessions"] = len(tasks)
    served = benchmark.pedantic(run, rounds=3, iterations=1)
    assert served == tasks
