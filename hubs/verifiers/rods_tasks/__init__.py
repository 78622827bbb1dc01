"""rods-tasks: every rods environment as a verifiers v1 taskset (see README.md).

The taskset, its task and tools live in rods (``rods_agent.integrations.verifiers``); this
package gives them the plain module name verifiers resolves a taskset id to
(``rods-tasks`` -> ``rods_tasks``).
"""

from rods_agent.integrations.verifiers import (
    RodsHarness,
    RodsTask,
    RodsTaskData,
    RodsTaskset,
    RodsTasksetConfig,
)

__all__ = ["RodsHarness", "RodsTask", "RodsTaskData", "RodsTaskset", "RodsTasksetConfig"]
