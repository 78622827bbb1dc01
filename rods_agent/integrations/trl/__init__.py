"""rods inside TRL's ``GRPOTrainer``: environments, datasets and the RODS data engine.

Install the extra ``trl`` (``pip install -e ".[trl]"``). The pieces:

* :func:`environment_factory` -- the environment class of a rods env id (one method per
  domain tool, the simulated customer behind ``send_message_to_user``, ``get_reward``);
* :func:`task_dataset` / :func:`train_test_datasets` -- HF datasets of a task pool's ids;
* :class:`EngineDataset` and :class:`RodsCallback` -- the data engine's replay buffer as an
  endless dataset, and the callback that feeds it each step's group rewards.

See docs/scale-out.md.
"""

from rods_agent.integrations.trl.env import (
    RodsEnvironment,
    TaskTable,
    environment_factory,
    tool_docstring,
    tool_method,
)

__all__ = [
    "RodsEnvironment",
    "TaskTable",
    "environment_factory",
    "tool_docstring",
    "tool_method",
]
