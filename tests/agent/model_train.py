"""Run ``rods train`` with the model policy for the resume test, optionally SIGKILLed.

Usage: ``python model_train.py {none,rollouts} STEP [rods train arguments...]``

The tiny random model scores 0 on every task, so every group would have zero variance and
no update would change a weight. To exercise the update (and its checkpoint) the episode
reward is replaced by a deterministic function of the episode's sampled tokens, in every
run of the test alike; everything else is the real model policy.
"""

from __future__ import annotations

import os
import signal
import sys

from rods_agent.cli import main
from rods_agent.training import model_policy


def arm(where: str, at: int) -> None:
    """Patch the reward, and die when step ``at``'s rollouts start (``where == "rollouts"``)."""
    policy = model_policy.ModelPolicy

    def reward(self, record):  # type: ignore[no-untyped-def]
        return float(sum(record.token_ids[-8:]) % 3) / 2.0

    real_rollouts = policy.rollouts

    def rollouts(self, tasks, *, step):  # type: ignore[no-untyped-def]
        if where == "rollouts" and step == at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_rollouts(self, tasks, step=step)

    policy.reward = reward  # type: ignore[method-assign]
    policy.rollouts = rollouts  # type: ignore[method-assign]


if __name__ == "__main__":
    arm(sys.argv[1], int(sys.argv[2]))
    sys.exit(main(["train", *sys.argv[3:]]))
