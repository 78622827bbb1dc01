"""``GRPOTrainer`` with the data engine's group filter applied to the loss.

Modes ``filter``, ``rods`` and ``rods-expand`` train only on the groups
:meth:`DataEngine.keep` keeps (those whose rewards differ); ``static`` and ``envtuning``
keep every group (``EngineDataset.filters_groups``), so their batches are TRL's own. In GRPO a zero-variance group already has zero advantage, so its
completions push the policy nowhere, but with TRL's default token-level normalisation
(``loss_type="dapo"``) their tokens still count in the denominator and dilute every other
group's gradient; with a KL term (``beta > 0``) they still pull toward the reference. This
subclass masks them out of the loss, as ``rods train`` leaves them out of its batch, and is
the only change to TRL's trainer.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from trl import GRPOTrainer

from rods_agent.integrations.trl.engine import EngineDataset


class RodsGRPOTrainer(GRPOTrainer):
    """A ``GRPOTrainer`` whose loss leaves out the groups the data engine does not keep.

    Args:
        *args: As ``GRPOTrainer``.
        rods_view: The :class:`EngineDataset` the trainer trains on (None: plain GRPO).
        **kwargs: As ``GRPOTrainer``.
    """

    def __init__(self, *args: Any, rods_view: EngineDataset | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rods_view = rods_view
        self.rods_dropped = 0
        """Completions left out of the loss so far (this process)."""
        self.rods_seconds = {"rollout": 0.0, "env": 0.0}
        """Time in TRL's rollout phase (generation, tools, rewards, log-probs) and, within
        it, in the environments (this process)."""

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        started = time.perf_counter()
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        training = bool(getattr(self.model, "training", False))
        if training:
            self.rods_seconds["rollout"] += time.perf_counter() - started
            environments: list[Any] = list(self.environments or [])
            self.rods_seconds["env"] += sum(float(env.seconds) for env in environments)
        view = self.rods_view
        if view is None or not view.filters_groups or not training:
            return output
        view.gather()  # collective: every process generates every round
        keep = []
        for row in inputs:
            r = int(row["rods_round"])
            task = view.tasks_for_round(r)[int(row["rods_slot"])]
            keep.append(view.keep(r, task.id))
        mask = output["completion_mask"]
        kept = torch.tensor(keep, device=mask.device, dtype=mask.dtype).unsqueeze(1)
        output["completion_mask"] = mask * kept
        loss_mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            loss_mask = loss_mask * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        self.rods_dropped += len(keep) - sum(keep)
        return output
