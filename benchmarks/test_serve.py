"""``rods serve`` under concurrent sessions: steps a second and p50/p99 step latency at 1, 32
and 64 sessions, beside the in-process environment measured in the same run (the baseline).

The sessions share the oracle's episodes of the 30 retail test seeds (one session plays all
30 in turn, 32 or 64 play one each, seeds repeated past 30) through the typed client over
loopback; all sessions connect first, then play at once; a step's latency is its client round
trip (resets are not counted as steps). ``extra_info`` holds
``steps_per_s``, ``p50_ms`` and ``p99_ms`` of the last round (docs/hubs.md has the figures).
The client runs in this process: at 64 sessions its own event loop is part of what is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import Any

import gymnasium as gym
import pytest

from tests.agent.openenv_server import require_openenv, rods_server

require_openenv()

from rods_agent.integrations.openenv import RodsAction, RodsEnv  # noqa: E402
from rods_env.registry import load_any_domain  # noqa: E402
from tests.agent.test_openenv import as_action, solo_run  # noqa: E402

ENV_ID = "rods/Retail-v0"
MAKE = {"split": None, "max_steps": 200}


@pytest.fixture(scope="module")
def transcripts() -> list[tuple[str, list[Any]]]:
    """The oracle's actions on each retail test seed."""
    tasks = list(load_any_domain(ENV_ID).seed_tasks("test"))
    return [(task.id, solo_run(ENV_ID, task)["actions"]) for task in tasks]


@pytest.fixture(scope="module")
def url():
    # a cap above the largest wave: a wave's sockets may still be closing when the next opens
    with rods_server(
        ENV_ID, "--split", "all", "--max-steps", "200", "--max-sessions", "80"
    ) as base:
        yield base


def figures(latencies: list[float], wall_s: float) -> dict[str, float]:
    """Steps a second and the p50/p99 step latency in ms."""
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "steps": len(latencies),
        "steps_per_s": round(len(latencies) / wall_s, 1),
        "p50_ms": round(statistics.median(latencies) * 1e3, 3),
        "p99_ms": round(cuts[98] * 1e3, 3),
    }


def test_in_process_steps(benchmark, transcripts):
    """The baseline: the same actions through ``gymnasium.make`` in this process."""
    env = gym.make(ENV_ID, **MAKE)
    seen: dict[str, float] = {}

    def replay() -> None:
        latencies, wall = [], 0.0
        for task_id, actions in transcripts:
            env.reset(options={"task": task_id})
            for action in actions:
                start = time.perf_counter()
                env.step(action)
                latencies.append(time.perf_counter() - start)
                wall += latencies[-1]
        seen.update(figures(latencies, wall))

    benchmark.pedantic(replay, rounds=5, iterations=1)
    benchmark.extra_info.update(seen)


Episode = tuple[str, list[RodsAction]]


async def wave(url: str, plans: list[list[Episode]]) -> dict[str, float]:
    """Every session connects, then all play their episodes at once; their figures."""
    latencies: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        envs = await asyncio.gather(
            *(stack.enter_async_context(RodsEnv(base_url=url)) for _ in plans)
        )

        async def play(env: RodsEnv, episodes: list[Episode]) -> None:
            for task_id, actions in episodes:
                await env.reset(task_id=task_id)
                for action in actions:
                    start = time.perf_counter()
                    await env.step(action)
                    latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(play(env, p) for env, p in zip(envs, plans, strict=True)))
        wall = time.perf_counter() - start
    return figures(latencies, wall)


@pytest.mark.parametrize("sessions", [1, 32, 64])
def test_served_steps(benchmark, transcripts, url, sessions):
    wire = [(task_id, [as_action(a) for a in actions]) for task_id, actions in transcripts]
    total = max(sessions, len(wire))
    plans = [[wire[j % len(wire)] for j in range(i, total, sessions)] for i in range(sessions)]
    seen: dict[str, float] = {}

    def run() -> None:
        seen.update(asyncio.run(wave(url, plans)))

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info.update(seen, sessions=sessions)
    assert seen["steps"] == sum(len(a) for plan in plans for _, a in plan)
