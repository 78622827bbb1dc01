"""rods environments on OpenEnv: ``rods serve``, the typed client, and TRL through it.

Install the extra ``openenv`` plus ``openenv`` itself (``bash scripts/setup.sh openenv``).
The pieces (docs/hubs.md):

* :class:`RodsEnvironment` / :func:`create_rods_app` / :func:`serve` -- any rods environment
  id served by OpenEnv's own server (an MCP environment whose tools are rods' tools), one
  episode per session, idle sessions expiring, every route bounded (:class:`ServeLimits`);
* :class:`RodsEnv` -- the typed client (``reset``, ``call_tool``, ``send_message``, ``state``);
* :class:`RodsAction`, :class:`RodsObservation`, :class:`RodsState` -- the wire contract;
* :func:`openenv_environment_factory` -- a class for TRL's ``GRPOTrainer(environment_factory=...)``
  that plays a served environment through the client.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "RodsAction": "rods_agent.integrations.openenv.models",
    "RodsObservation": "rods_agent.integrations.openenv.models",
    "RodsState": "rods_agent.integrations.openenv.models",
    "RodsEnvironment": "rods_agent.integrations.openenv.server",
    "create_rods_app": "rods_agent.integrations.openenv.server",
    "serve": "rods_agent.integrations.openenv.server",
    "ServeLimits": "rods_agent.integrations.openenv.limits",
    "RodsEnv": "rods_agent.integrations.openenv.client",
    "openenv_environment_factory": "rods_agent.integrations.openenv.trl",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
