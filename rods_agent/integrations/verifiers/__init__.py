"""rods environments as ``verifiers.v1`` tasksets (Prime Intellect's Environments Hub).

The taskset itself (:mod:`.taskset`, :mod:`.toolset`) needs verifiers 0.4, which lives in a
venv of its own (``.venv-verifiers``, ``bash scripts/setup.sh verifiers``); the hub package
``rods-tasks`` (hubs/verifiers) gives it the module name verifiers resolves a taskset id to.
:mod:`.episode`, the rods half shared by the tools and the rubric, imports without verifiers;
the names below load on first use. docs/hubs.md
"""

from __future__ import annotations

from typing import Any

__all__ = ["RodsHarness", "RodsTask", "RodsTaskData", "RodsTaskset", "RodsTasksetConfig"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rods_agent.integrations.verifiers import taskset

    return getattr(taskset, name)
