"""``rods demo``: the oracle and simple baselines on a seed split, with success and progress.

It needs no model: it shows what the environments reward. The oracle should score 1.0 on
both; a talk-only agent and a random tool caller show how far from that doing little gets.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import Literal, Protocol

from rods_agent.console.options import add_options, option, options_from


@dataclass(frozen=True)
class DemoOptions:
    """What ``rods demo`` runs."""

    env: tuple[str, ...] | None = field(
        default=None,
        metadata=option(
            "environment id or domain name, e.g. rods/Retail-v0 or retail (repeatable; "
            "default: every installed domain)"
        ),
    )
    split: Literal["train", "test", "all"] = field(
        default="test", metadata=option("split of the seed tasks")
    )
    limit: int | None = field(
        default=None, metadata=option("at most this many tasks per domain", metavar="N")
    )
    seed: int = field(default=0, metadata=option("seed of the random baseline"))


@dataclass(frozen=True)
class DemoRow:
    """One agent on one domain's split.

    Attributes:
        env: Environment id.
        split: The seed split run.
        agent: ``oracle``, ``random`` or ``talk-only``.
        tasks: Episodes run (one per task).
        success: Share of episodes that succeeded.
        progress: Mean final progress.
        episodes_per_s: Episodes per second (gold replays done up front are not counted).
    """

    env: str
    split: str
    agent: str
    tasks: int
    success: float
    progress: float
    episodes_per_s: float


class _Agent(Protocol):
    def act(self, observation: str, info: dict[str, object]) -> str: ...


def run_demo(options: DemoOptions) -> list[DemoRow]:
    """Run the oracle, a random tool caller and a talk-only agent on each domain's seeds.

    Raises:
        ConfigError: for a bad limit or a split without tasks.
        UnknownDomainError: for a domain that is not installed (naming those that are).
    """
    from rods_env import RandomToolAgent, TalkOnlyAgent, run_episode
    from rods_env.env import ToolEnv
    from rods_env.errors import BenchmarkUnavailableError, ConfigError
    from rods_env.gold import GOLD_CACHE
    from rods_env.oracle import oracle_agent
    from rods_env.registry import domain_names, load_domain

    if options.limit is not None and options.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {options.limit}")
    split = None if options.split == "all" else options.split
    rows = []
    for name in options.env or domain_names():
        try:
            domain = load_domain(name)
        except BenchmarkUnavailableError as exc:
            if options.env:
                raise
            print(f"rods demo: skipping {name}: {exc}", file=sys.stderr)  # not installed
            continue
        env = ToolEnv(domain, split=split)
        tasks = env.tasks[: options.limit]
        if not tasks:
            raise ConfigError(f"{domain.env_id} has no seed tasks in split '{options.split}'")
        for task in tasks:  # replay gold once up front, so episodes/s measures episodes only
            GOLD_CACHE.get(domain, task)
        stats: dict[str, list[tuple[float, bool]]] = {}
        elapsed: dict[str, float] = {}
        for i, task in enumerate(tasks):
            agents: dict[str, _Agent] = {
                "oracle": oracle_agent(domain, task),
                "random": RandomToolAgent(options.seed + i),
                "talk-only": TalkOnlyAgent(),
            }
            for agent_name, agent in agents.items():
                t0 = time.perf_counter()
                out = run_episode(env, agent, task=task)
                elapsed[agent_name] = elapsed.get(agent_name, 0.0) + time.perf_counter() - t0
                stats.setdefault(agent_name, []).append((out["progress"], out["success"]))
        for agent_name, results in stats.items():
            n = len(results)
            seconds = elapsed[agent_name]
            rows.append(
                DemoRow(
                    env=domain.env_id,
                    split=options.split,
                    agent=agent_name,
                    tasks=n,
                    success=sum(s for _, s in results) / n,
                    progress=sum(p for p, _ in results) / n,
                    episodes_per_s=n / seconds if seconds > 0 else float("inf"),
                )
            )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``rods demo`` options."""
    add_options(parser, DemoOptions)


def run(args: argparse.Namespace) -> int:
    """Run the demo and print one row per (environment, agent)."""
    rows = run_demo(options_from(DemoOptions, args))
    print(
        f"{'env':<18} {'split':<6} {'agent':<10} {'tasks':>5} {'success':>8} {'progress':>9} "
        f"{'episodes/s':>11}"
    )
    for r in rows:
        print(
            f"{r.env:<18} {r.split:<6} {r.agent:<10} {r.tasks:>5} {r.success:>8.3f} "
            f"{r.progress:>9.3f} {r.episodes_per_s:>11.1f}"
        )
    return 0
