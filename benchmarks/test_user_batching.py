"""LLMUser batched across episodes (UserBatcher) against one reply at a time (the baseline).

The agent is the oracle (free), so the time is the simulated user's: the tiny local model
plays every user of 8 retail episodes, 16 tokens a reply. Both sides run the same episodes
with the same seeds in the same process; the records must be identical.

    pytest benchmarks/test_user_batching.py --benchmark-only -s
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pytest

N_EPISODES = 8


@pytest.fixture(scope="module")
def user_engine(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import torch

    from rods_agent.engines.hf import TransformersEngine
    from rods_agent.models.tiny import build_tiny_model

    torch.set_num_threads(1)
    path: Path = build_tiny_model(tmp_path_factory.mktemp("tiny-user"))
    return TransformersEngine(path)


def run(engine: Any, batched: bool) -> tuple[float, list[Any], Any]:
    """One rollout of the episodes; returns (seconds, records, batcher)."""
    import gymnasium as gym

    import rods_env
    from rods_agent.engines import SamplingParams
    from rods_agent.engines.scripted import ScriptedEngine
    from rods_agent.rollouts.batch import EpisodeSpec, RolloutConfig, run_rollouts
    from rods_agent.rollouts.user import LLMUser, UserBatcher
    from rods_env import OracleAgent
    from rods_env.registry import load_domain

    assert rods_env.ENV_IDS
    retail = load_domain("retail")
    tasks = retail.seed_tasks("test")[:N_EPISODES]
    by_id = {t.id: t for t in tasks}
    writes = retail.toolkit.write_names()
    agent = ScriptedEngine(lambda info: OracleAgent(by_id[info["task_id"]], writes))
    sampling = SamplingParams(max_tokens=16, temperature=0.7)
    batcher = UserBatcher(engine, sampling) if batched else None

    def make_env() -> Any:
        user = LLMUser(engine, sampling=sampling, patience=6, batcher=batcher)
        return gym.make("rods/Retail-v0", user=user, disable_env_checker=True)

    specs = [EpisodeSpec(t, sampling_seed=i) for i, t in enumerate(tasks)]
    t0 = time.perf_counter()
    records = run_rollouts(
        agent, make_env, specs, RolloutConfig(batch_size=N_EPISODES), users=batcher
    )
    return time.perf_counter() - t0, records, batcher


def test_batched_users_against_one_reply_at_a_time(benchmark: Any, user_engine: Any) -> None:
    """Same episodes, same seeds: the batched users give the same records, faster."""
    run(user_engine, True)  # warm-up
    batched: list[float] = []
    outcome: dict[str, Any] = {}

    def once() -> None:
        seconds, records, batcher = run(user_engine, True)
        batched.append(seconds)
        outcome.update(records=records, batcher=batcher)

    benchmark.pedantic(once, rounds=3, iterations=1)
    alone = [run(user_engine, False) for _ in range(3)]
    base = statistics.median(s for s, _, _ in alone)
    fast = statistics.median(batched)
    assert [r.comparable() for r in outcome["records"]] == [r.comparable() for r in alone[0][1]]
    batcher = outcome["batcher"]
    benchmark.extra_info.update(
        batched_s=fast,
        one_at_a_time_s=base,
        replies=batcher.requests,
        generate_calls=batcher.batches,
    )
    print(
        f"\n| users | seconds | replies | generate calls |\n|---|---|---|---|\n"
        f"| one at a time (baseline) | {base:.2f} | {batcher.requests} | {batcher.requests} |\n"
        f"| batched | {fast:.2f} | {batcher.requests} | {batcher.batches} |\n"
        f"speed-up {base / fast:.1f}x"
    )
