"""The boundary detector: where a task sits relative to the policy, from its last group.

Each step already rolls out G episodes of every sampled task for the GRPO update; their
rewards say, with no extra inference, how the policy does on that task now. A group whose
mean reward is high is *mastered*, one whose mean is low is *hard*, and one in between
whose rewards differ is at the capability *boundary*: the only groups that carry a
learning signal under GRPO's group-normalized advantages.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rods_env.errors import ConfigError

Zone = Literal["mastered", "boundary", "hard"]
ZONES: tuple[Zone, ...] = ("mastered", "boundary", "hard")


@dataclass(frozen=True)
class GroupStats:
    """Mean and spread of one task's group of rewards.

    Attributes:
        mean: Mean reward.
        std: Population standard deviation (n in the denominator). The zones use it; GRPO's
            advantages divide by the sample (n - 1, Bessel-corrected) standard deviation, as
            TRL does (:func:`rods_agent.training.grpo.group_advantages`).
        n: Rollouts in the group.
    """

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, rewards: Iterable[float]) -> GroupStats:
        """The statistics of ``rewards`` (an empty group has mean and std 0)."""
        values = [float(r) for r in rewards]
        if not values:
            return cls(0.0, 0.0, 0)
        mean = math.fsum(values) / len(values)
        var = math.fsum((r - mean) ** 2 for r in values) / len(values)
        return cls(mean, math.sqrt(var), len(values))

    @property
    def variance(self) -> float:
        """Population variance of the rewards."""
        return self.std * self.std


@dataclass(frozen=True)
class Thresholds:
    """Where the zones begin.

    Attributes:
        mastered: A group whose mean reward is at or above this is mastered.
        hard: A group whose mean reward is at or below this is hard.
        min_std: A group whose reward std is not above this carries no signal.
    """

    mastered: float = 0.85
    hard: float = 0.1
    min_std: float = 1e-6

    def __post_init__(self) -> None:
        if not 0.0 <= self.hard < self.mastered <= 1.0:
            raise ConfigError(
                f"zone thresholds need 0 <= hard < mastered <= 1, got hard={self.hard}, "
                f"mastered={self.mastered}"
            )
        if self.min_std < 0:
            raise ConfigError(f"min_std must be 0 or more, got {self.min_std}")

    def has_signal(self, stats: GroupStats) -> bool:
        """Whether the group's rewards differ (a non-zero GRPO advantage somewhere)."""
        return stats.std > self.min_std

    def zone(self, stats: GroupStats) -> Zone:
        """The zone of a group.

        A group between the thresholds whose rewards are all equal (every rollout passes
        the same turns and fails the same others) is *hard*: the policy is stuck on it and
        GRPO gets no signal from it, exactly as from a group that always fails.
        """
        if stats.mean >= self.mastered:
            return "mastered"
        if stats.mean <= self.hard or not self.has_signal(stats):
            return "hard"
        return "boundary"
