"""rods environments as ``verifiers.v1`` tasksets (Prime Intellect's Environments Hub).

This package is the taskset plugin: verifiers imports it by id
(``vf-eval rods_agent.integrations.verifiers``) and takes the classes ``__all__`` exports:
the taskset and its bundled harness (verifiers' chat loop). verifiers 0.4 lives in a venv of
its own (``.venv-verifiers``, ``bash scripts/setup_verifiers.sh``); :mod:`.episode` is the
part that needs no verifiers. docs/hubs.md
"""

from __future__ import annotations

from rods_agent.integrations.verifiers.taskset import (
    RodsHarness,
    RodsTask,
    RodsTaskData,
    RodsTaskset,
    RodsTasksetConfig,
)

__all__ = ["RodsHarness", "RodsTask", "RodsTaskData", "RodsTaskset", "RodsTasksetConfig"]
