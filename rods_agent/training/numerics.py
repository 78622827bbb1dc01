"""Learner numerics: the optimizer (fp32 master weights for bf16 models) and its schedule.

**Master weights.** AdamW run on bfloat16 parameters loses small updates: an update below
half a bf16 ulp of a weight (2^-9 to 2^-8 of its magnitude) rounds away, so at GRPO's learning
rates (1e-6 on a 4B model) most of a step vanishes (issue 16 measured 1.7% of parameters
changed by one step at lr 1e-6, against 99.99% in float32). :class:`MasterWeightAdamW`
keeps a float32 copy of every low-precision trainable parameter: gradients are added into
the copy's float32 gradient as each backward pass ends (so accumulation over micro-batches
is float32 too), AdamW updates the copies, and the model's parameters are set to the
copies rounded to nearest. The model that generates and scores stays bf16; what it learns
accumulates in float32. Chosen over stochastic rounding (unbiased only in expectation,
and a random stream to checkpoint) and over Kahan-compensated bf16 AdamW (a
compensation buffer of the same size as a master copy, in a less common code path): the
float32 master is the standard mixed-precision recipe, exact to resume, and has no
dependency beyond torch.

**Schedule.** :class:`LRSchedule`: the learning rate is ``lr × warmup × decay``. The
warmup counts optimizer steps that really happened (a step whose groups all had zero
variance makes none); the decay follows the run's step, so the schedule ends at
``steps`` however many steps had nothing to train on. The warm start uses the same class
with its own optimizer steps as the run's steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

Schedule = Literal["constant", "linear", "cosine"]

LOW_PRECISION = ("bfloat16", "float16")
"""Parameter dtypes that get a float32 master copy."""


def lr_factor(step: int, *, total: int, warmup: int = 0, schedule: str = "constant") -> float:
    """The decay part of the schedule at run step ``step`` (0-based): 1 through the
    warmup, then ``constant``, ``linear`` or ``cosine`` towards 0 at ``total``.

    Args:
        step: The run's step.
        total: Steps of the whole run (the decay reaches 0 there).
        warmup: Warmup steps (the decay starts after them).
        schedule: ``constant``, ``linear`` or ``cosine``.
    """
    span = max(1, total - warmup)
    done = min(1.0, max(0, step - warmup) / span)
    if schedule == "linear":
        return 1.0 - done
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * done))
    return 1.0


def warmup_factor(optimizer_steps: int, warmup: int) -> float:
    """The warmup part of the schedule: ``(n + 1) / warmup`` for the ``n``-th optimizer
    step while ``n < warmup``, then 1."""
    if warmup and optimizer_steps < warmup:
        return (optimizer_steps + 1) / warmup
    return 1.0


class LRSchedule:
    """The learning rate of every optimizer step (see the module doc).

    Call :meth:`apply` with the run's step before an optimizer step, and :meth:`stepped`
    after one that happened; :meth:`state_dict` holds the optimizer-step count.

    Args:
        optimizer: Its ``param_groups`` get the rate; their ``lr`` at construction is the
            base rate.
        total: The run's steps.
        warmup: Optimizer steps of linear warmup.
        schedule: The decay: ``constant``, ``linear`` or ``cosine``.
    """

    def __init__(
        self, optimizer: Any, *, total: int, warmup: int = 0, schedule: str = "constant"
    ) -> None:
        self.optimizer = optimizer
        self.base = [float(g["lr"]) for g in optimizer.param_groups]
        self.total = total
        self.warmup = warmup
        self.schedule = schedule
        self.optimizer_steps = 0

    def factor(self, step: int) -> float:
        """The multiplier of the base rate for an optimizer step at run step ``step``."""
        decay = lr_factor(step, total=self.total, warmup=self.warmup, schedule=self.schedule)
        return warmup_factor(self.optimizer_steps, self.warmup) * decay

    def apply(self, step: int) -> float:
        """Set the rate for an optimizer step at run step ``step``; returns it (group 0)."""
        factor = self.factor(step)
        for group, base in zip(self.optimizer.param_groups, self.base, strict=True):
            group["lr"] = base * factor
        return float(self.optimizer.param_groups[0]["lr"])

    def stepped(self) -> None:
        """Count an optimizer step that happened."""
        self.optimizer_steps += 1

    def state_dict(self) -> dict[str, int]:
        """What a resume needs: the optimizer steps taken."""
        return {"optimizer_steps": self.optimizer_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.optimizer_steps = int(state["optimizer_steps"])


class MasterWeightAdamW:
    """AdamW whose arithmetic runs on float32 copies of low-precision parameters.

    Float32 parameters are optimized in place as by ``torch.optim.AdamW``. For a bfloat16
    or float16 parameter a float32 master copy is kept: a post-accumulate-grad hook adds
    each backward pass's gradient into the master's float32 ``grad`` and frees the
    parameter's, :meth:`step` runs AdamW on the masters and writes them back (rounded to
    nearest). ``param_groups`` are the masters' groups, so gradient clipping over them
    clips the float32 gradients. Call :meth:`close` when done (it removes the hooks; two
    optimizers must not hold hooks on one model).

    Args:
        params: The trainable parameters.
        lr: Learning rate.
        weight_decay: Decoupled weight decay.
        master_weights: Keep float32 masters of low-precision parameters (False: AdamW on
            the parameters as they are).
    """

    def __init__(
        self,
        params: Iterable[Any],
        *,
        lr: float,
        weight_decay: float,
        master_weights: bool = True,
    ) -> None:
        import torch

        self.params = list(params)
        self.masters: list[Any] = []
        self._pairs: list[tuple[Any, Any]] = []
        self._hooks: list[Any] = []
        for p in self.params:
            if master_weights and str(p.dtype).removeprefix("torch.") in LOW_PRECISION:
                master = p.detach().to(torch.float32).clone()
                self._hooks.append(p.register_post_accumulate_grad_hook(_into(master)))
                self._pairs.append((p, master))
                self.masters.append(master)
            else:
                self.masters.append(p)
        self.optimizer = torch.optim.AdamW(self.masters, lr=lr, weight_decay=weight_decay)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The optimizer's parameter groups (of the masters)."""
        return self.optimizer.param_groups

    @property
    def has_masters(self) -> bool:
        """Whether any parameter has a float32 master copy."""
        return bool(self._pairs)

    def parameters(self) -> list[Any]:
        """What the optimizer updates (masters where there are), for gradient clipping."""
        return list(self.masters)

    def step(self) -> None:
        """One AdamW step, then the model's low-precision parameters follow the masters."""
        import torch

        self.optimizer.step()
        with torch.no_grad():
            for p, master in self._pairs:
                p.copy_(master)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of the masters and of the parameters."""
        self.optimizer.zero_grad(set_to_none=set_to_none)
        for p, _ in self._pairs:
            p.grad = None

    def state_dict(self) -> dict[str, Any]:
        """AdamW's state and the masters (a bf16 model alone would lose what they hold)."""
        return {
            "adamw": self.optimizer.state_dict(),
            "masters": [master for _, master in self._pairs],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the model's parameters follow the masters)."""
        import torch

        masters = state["masters"]
        if len(masters) != len(self._pairs):
            raise ValueError(
                f"the state has {len(masters)} master weights, this optimizer {len(self._pairs)}"
            )
        with torch.no_grad():
            for (p, master), saved in zip(self._pairs, masters, strict=True):
                master.copy_(saved)
                p.copy_(master)
        self.optimizer.load_state_dict(state["adamw"])

    def close(self) -> None:
        """Remove the gradient hooks."""
        for hook in self._hooks:
            hook.remove()
        self._hooks = []


def _into(master: Any) -> Any:
    def accumulate(param: Any) -> None:
        if param.grad is None:
            raise RuntimeError(
                "a parameter's gradient was taken by another master-weight optimizer: close "
                "one optimizer (MasterWeightAdamW.close) before training with another"
            )
        if master.grad is None:
            master.grad = param.grad.to(master.dtype)
        else:
            master.grad.add_(param.grad)
        param.grad = None

    return accumulate


def make_optimizer(
    params: Iterable[Any], *, lr: float, weight_decay: float, master_weights: bool = True
) -> MasterWeightAdamW:
    """AdamW over ``params``, with float32 master weights for bf16/fp16 ones."""
    return MasterWeightAdamW(
        params, lr=lr, weight_decay=weight_decay, master_weights=master_weights
    )


def clip_gradients(optimizer: Any, max_norm: float) -> float:
    """Clip the gradients of what ``optimizer`` updates (the float32 masters where there
    are) to ``max_norm``; returns the norm before clipping."""
    import torch

    params = [p for group in optimizer.param_groups for p in group["params"]]
    return float(torch.nn.utils.clip_grad_norm_(params, max_norm).item())
