"""What the training loop asks of a policy: rollouts in groups, an update, an evaluation.

The loop in :mod:`rods_agent.training.loop` is written against :class:`Policy` only, so the same
loop trains a transformers model with GRPO (``policy: model``) and runs the simulated
learner that shows the data engine at work without a GPU (``policy: simulated``). The data
engine sees neither: it gets each group's rewards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rods_agent.rollouts.batch import EpisodeRecord
from rods_env.task import Task


@dataclass
class Group:
    """One task's G rollouts from one step.

    Attributes:
        task: The task.
        episodes: The G episode records.
        rewards: The reward of each episode used for advantages (its progress, or its
            strict success as 0/1, by ``rollout.reward``), aligned with ``episodes``.
    """

    task: Task
    episodes: list[EpisodeRecord]
    rewards: list[float]

    @property
    def mean(self) -> float:
        """Mean reward of the group."""
        return sum(self.rewards) / len(self.rewards) if self.rewards else 0.0

    @property
    def std(self) -> float:
        """Population standard deviation of the group's rewards."""
        if not self.rewards:
            return 0.0
        m = self.mean
        return (sum((r - m) ** 2 for r in self.rewards) / len(self.rewards)) ** 0.5


@dataclass
class RolloutBatch:
    """A step's rollouts.

    Attributes:
        groups: One group per task, in the order of the tasks asked for.
        seconds: Where the time went (``generate``, ``env``, ...).
        tokens: Completion tokens generated (0 for a simulated policy).
    """

    groups: list[Group]
    seconds: dict[str, float] = field(default_factory=dict)
    tokens: int = 0


@runtime_checkable
class Policy(Protocol):
    """A trainable agent as the training loop sees it.

    Implementations draw every random choice from ``(run seed, step, task, trial)``, never
    from a global stream, so a resumed run repeats exactly what an unbroken run does.
    """

    def rollouts(self, tasks: Sequence[Task], *, step: int) -> RolloutBatch:
        """Run ``rollout.group_size`` episodes of each task with the current weights."""
        ...

    def update(self, groups: Sequence[Group], *, step: int) -> dict[str, float]:
        """One policy update on the groups the data engine kept; returns its metrics."""
        ...

    def evaluate(self, tasks: Sequence[Task], *, step: int) -> dict[str, Any]:
        """Evaluate the current policy on ``tasks`` (``log.eval_k`` trials each)."""
        ...

    def save(self, directory: Path) -> None:
        """Write what a resume needs (weights, optimizer, scheduler, random states)."""
        ...

    def load(self, directory: Path) -> None:
        """Restore what :meth:`save` wrote."""
        ...

    def close(self) -> None:
        """Release what the policy holds (engines, memory)."""
        ...
