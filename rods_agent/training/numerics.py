"""The optimizer and its learning-rate schedule, shared by GRPO and the warm start.

One definition of the schedule serves both: linear warmup over ``warmup`` optimizer steps,
then ``constant``, ``linear`` or ``cosine`` decay to 0 at ``total`` steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

Schedule = Literal["constant", "linear", "cosine"]


def lr_factor(step: int, *, total: int, warmup: int = 0, schedule: str = "constant") -> float:
    """The learning rate's multiplier at optimizer step ``step`` (0-based).

    Args:
        step: Optimizer steps taken so far.
        total: Steps of the whole schedule (warmup included).
        warmup: Steps of linear warmup (the first step runs at ``1 / warmup``).
        schedule: ``constant``, ``linear`` or ``cosine`` after the warmup.
    """
    if warmup and step < warmup:
        return (step + 1) / warmup
    span = max(1, total - warmup)
    done = min(1.0, max(0, step - warmup) / span)
    if schedule == "linear":
        return 1.0 - done
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * done))
    return 1.0


def make_optimizer(params: Iterable[Any], *, lr: float, weight_decay: float) -> Any:
    """AdamW over ``params``."""
    import torch

    return torch.optim.AdamW(list(params), lr=lr, weight_decay=weight_decay)


def make_scheduler(
    optimizer: Any, *, total: int, warmup: int = 0, schedule: str = "constant"
) -> Any:
    """A ``LambdaLR`` following :func:`lr_factor` (one ``step()`` per optimizer step)."""
    import torch

    def factor(step: int) -> float:
        return lr_factor(step, total=total, warmup=warmup, schedule=schedule)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
