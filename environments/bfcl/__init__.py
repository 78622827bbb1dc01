"""BFCL multi-turn: the benchmark RODS is judged by, as rods environments scored by BFCL's rules.

The package exposes one :class:`~rods_env.benchmark.Benchmark`, ``BENCHMARK``, found through
the entry point ``bfcl = "environments.bfcl:BENCHMARK"`` of the group ``rods.benchmarks``.
Importing ``rods_env`` registers ``rods/BFCL-MultiTurn-v0`` (all 800 tasks) and one id per
category::

    import gymnasium, rods_env
    env = gymnasium.make("rods/BFCL-MultiTurn-MissFunc-v0")

The data, the API classes and the function docs come from the installed ``bfcl-eval``
package (``bash scripts/setup_bfcl.sh``); this module imports none of it until an
environment or the tasks are made.

Modules: :mod:`~environments.bfcl.apis` (the safe execution layer: dispatch, per-episode
instances, bounded MathAPI, result texts, state, gold replay), :mod:`~environments.bfcl.tasks`
(the tasks and BFCL's leaderboard numbers), :mod:`~environments.bfcl.env` (the environment),
:mod:`~environments.bfcl.agents` (oracle, perturbations, trivial agents) and
:mod:`~environments.bfcl.export` (BFCL result files from rods' episodes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rods_env.benchmark import Benchmark
from rods_env.registry import register_benchmark
from rods_env.tools import FrozenDict

ENV_IDS: Mapping[str, str | None] = FrozenDict(
    {
        "rods/BFCL-MultiTurn-v0": None,
        "rods/BFCL-MultiTurn-Base-v0": "base",
        "rods/BFCL-MultiTurn-MissParam-v0": "miss_param",
        "rods/BFCL-MultiTurn-MissFunc-v0": "miss_func",
        "rods/BFCL-MultiTurn-LongContext-v0": "long_context",
    }
)
"""Gymnasium id -> the category it serves (None: all 800 tasks)."""

MAX_STEPS = 8 * 21
"""The most agent steps a task can take under BFCL's rules (8 turns, 21 steps each)."""


def _missing() -> str | None:
    from environments.bfcl.apis import bfcl_missing

    return bfcl_missing()


def make_env(subset: str | None = None, **kwargs: Any) -> Any:
    """A :class:`~environments.bfcl.env.BFCLEnv` of one category (None: all)."""
    from environments.bfcl.env import BFCLEnv

    return BFCLEnv(subset, **kwargs)


def tasks(subset: str | None = None, split: str | None = None) -> list[Any]:
    """The tasks of a category (None: all 800) (:func:`environments.bfcl.tasks.load_tasks`)."""
    from environments.bfcl.tasks import load_tasks

    return list(load_tasks(subset, split))


def oracle(task: Any) -> Any:
    """The gold replay of ``task`` (:class:`environments.bfcl.agents.OracleAgent`)."""
    from environments.bfcl.agents import OracleAgent

    return OracleAgent(task)


def scores(successes: Mapping[str, Sequence[bool]]) -> Mapping[str, float | None]:
    """BFCL's leaderboard numbers (:func:`environments.bfcl.tasks.leaderboard`)."""
    from environments.bfcl.tasks import leaderboard

    return leaderboard(successes)


BENCHMARK = Benchmark(
    name="bfcl",
    title="BFCL multi-turn",
    env_ids=ENV_IDS,
    make_env=make_env,
    tasks=tasks,
    oracle=oracle,
    missing=_missing,
    scores=scores,
    max_steps=MAX_STEPS,
    description="BFCL v4 multi-turn (800 tasks, 8 API classes), scored by BFCL's checker rules",
)

register_benchmark(BENCHMARK)  # for `import environments.bfcl` before `import rods_env`

__all__ = ["BENCHMARK", "ENV_IDS", "MAX_STEPS"]
