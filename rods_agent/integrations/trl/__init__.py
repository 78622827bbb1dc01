"""rods inside TRL's ``GRPOTrainer``: environments, datasets and the RODS data engine.

Install the extra ``trl`` (``pip install -e ".[trl]"``). The pieces:

* :func:`environment_factory` -- the environment class of any rods env id (one method per
  tool, the simulated user behind ``send_message_to_user``, ``get_reward``): rods' episode
  as tools (:mod:`rods_env.tool_session`) in TRL's shape;
* :func:`task_dataset` / :func:`train_test_datasets` -- HF datasets of a task pool's ids;
* :class:`EngineDataset` and :class:`RodsCallback` -- the data engine's replay buffer as an
  endless dataset, and the callback that feeds it each step's group rewards;
* :class:`RodsGRPOTrainer` -- ``GRPOTrainer`` with the engine's group filter on the loss;
* :func:`build_tiny_trl_model` -- the tiny local model with a chat template TRL parses.

Only :mod:`.env`, :mod:`.methods` and :mod:`.data` import without TRL installed; the names below that need
it (and torch) load on first use. See docs/scale-out.md.
"""

from __future__ import annotations

from typing import Any

from rods_agent.integrations.trl.data import task_dataset, train_test_datasets
from rods_agent.integrations.trl.env import (
    RodsEnvironment,
    TaskTable,
    environment_factory,
)

_LAZY = {
    "EngineDataset": "rods_agent.integrations.trl.engine",
    "RodsCallback": "rods_agent.integrations.trl.engine",
    "rows_per_round": "rods_agent.integrations.trl.engine",
    "RodsGRPOTrainer": "rods_agent.integrations.trl.trainer",
    "build_tiny_trl_model": "rods_agent.integrations.trl.model",
}

__all__ = [
    "EngineDataset",
    "RodsCallback",
    "RodsEnvironment",
    "RodsGRPOTrainer",
    "TaskTable",
    "build_tiny_trl_model",
    "environment_factory",
    "rows_per_round",
    "task_dataset",
    "train_test_datasets",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
