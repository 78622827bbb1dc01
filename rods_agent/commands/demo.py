"""``rods demo``: the oracle and simple baselines on a seed split, with success and progress.

It needs no model: it shows what the environments reward. The oracle should score 1.0 on
both; a talk-only agent and a random tool caller show how far from that doing little gets.
"""

from __future__ import annotations

import argparse
import time
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods demo`` options."""
    parser.add_argument(
        "--env",
        action="append",
        default=None,
        help="environment id (repeatable; default: every installed rods environment)",
    )
    parser.add_argument("--split", default="test", choices=["train", "test"], help="seed split")
    parser.add_argument("--limit", type=int, default=None, help="at most this many tasks per env")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random baseline")


def _agents(task: Any, write_tools: frozenset[str], seed: int) -> dict[str, Any]:
    from rods_env import OracleAgent, RandomToolAgent, TalkOnlyAgent

    return {
        "oracle": OracleAgent(task, write_tools),
        "random": RandomToolAgent(seed),
        "talk-only": TalkOnlyAgent(),
    }


def run(args: argparse.Namespace) -> int:
    """Run the demo and print one row per (environment, agent)."""
    import gymnasium as gym

    import rods_env
    from rods_env.errors import ConfigError
    from rods_env.gold import GOLD_CACHE

    env_ids = args.env or rods_env.ENV_IDS
    print(
        f"{'env':<18} {'agent':<10} {'tasks':>5} {'success':>8} {'progress':>9} {'episodes/s':>11}"
    )
    for env_id in env_ids:
        if env_id not in gym.registry:
            raise ConfigError(
                f"unknown environment '{env_id}'; installed: {', '.join(rods_env.ENV_IDS)}"
            )
        env = gym.make(env_id, split=args.split).unwrapped
        tasks = env.tasks[: args.limit] if args.limit else env.tasks
        if not tasks:
            raise ConfigError(f"{env_id} has no seed tasks in split '{args.split}'")
        writes = env.domain.toolkit.write_names()
        for task in tasks:  # replay gold once up front, so episodes/s measures episodes only
            GOLD_CACHE.get(env.domain, task)
        stats: dict[str, list[tuple[float, bool]]] = {}
        elapsed: dict[str, float] = {}
        for i, task in enumerate(tasks):
            for name, agent in _agents(task, writes, args.seed + i).items():
                t0 = time.perf_counter()
                out = rods_env.run_episode(env, agent, task=task)
                elapsed[name] = elapsed.get(name, 0.0) + time.perf_counter() - t0
                stats.setdefault(name, []).append((out["progress"], out["success"]))
        for name, rows in stats.items():
            n = len(rows)
            succ = sum(s for _, s in rows) / n
            prog = sum(p for p, _ in rows) / n
            rate = n / elapsed[name] if elapsed[name] > 0 else float("inf")
            print(f"{env_id:<18} {name:<10} {n:>5} {succ:>8.3f} {prog:>9.3f} {rate:>11.1f}")
    return 0
