"""The RODS data engine: boundary detection, the replay buffer, synthesis in the loop.

Torch-free (the standard library, pydantic and :mod:`rods_env` only), so any trainer can
drive it::

    from rods_agent.data import DataEngine, GroupResult

    engine = DataEngine(config.data, mode="rods", tasks=train, reserved=test, seed=0)
    tasks = engine.sample(8, step=step)
    report = engine.observe([GroupResult(t.id, rewards[t.id]) for t in tasks], step=step)
"""

from rods_agent.data.boundary import ZONES, GroupStats, Thresholds, Zone
from rods_agent.data.engine import MODES, DataEngine, GroupResult, round_seed
from rods_agent.data.replay import Entry, ReplayBuffer

__all__ = [
    "MODES",
    "ZONES",
    "DataEngine",
    "Entry",
    "GroupResult",
    "GroupStats",
    "ReplayBuffer",
    "Thresholds",
    "Zone",
    "round_seed",
]
