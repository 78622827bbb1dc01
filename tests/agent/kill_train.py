"""Run ``rods train`` and SIGKILL the process at a chosen point (for the resume tests).

Usage: ``python kill_train.py {rollouts,save} STEP [rods train arguments...]``

``rollouts STEP`` dies when step STEP's rollouts start (mid-step, after the metrics of the
steps before it were written); ``save STEP`` dies while the checkpoint taken after STEP
steps is being written (its files are in the temporary folder, not yet published).
"""

from __future__ import annotations

import os
import signal
import sys

from rods_agent.cli import main
from rods_agent.training import simulated


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(where: str, at: int) -> None:
    """Patch the simulated policy so that the process dies at ``where`` / ``at``."""
    policy = simulated.SimulatedPolicy
    real_rollouts, real_save = policy.rollouts, policy.save
    last = {"step": -1}

    def rollouts(self, tasks, *, step):  # type: ignore[no-untyped-def]
        last["step"] = step
        if where == "rollouts" and step == at:
            _die()
        return real_rollouts(self, tasks, step=step)

    def save(self, directory):  # type: ignore[no-untyped-def]
        real_save(self, directory)
        if where == "save" and last["step"] + 1 == at:
            _die()

    policy.rollouts = rollouts  # type: ignore[method-assign]
    policy.save = save  # type: ignore[method-assign]


if __name__ == "__main__":
    arm(sys.argv[1], int(sys.argv[2]))
    sys.exit(main(["train", *sys.argv[3:]]))
