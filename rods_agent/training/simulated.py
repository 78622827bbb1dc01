"""A simulated learner: the training loop and the data engine at work, without a model.

**This is a simulation, not a trained model.** No text is generated and no environment is
stepped. ``policy: simulated`` replaces the model with a stand-in whose success on a task is
a number, so the whole of ``rods train`` except the model (sampling, zones, synthesis,
injection and retirement, metrics, checkpoints, reports) runs in seconds on a laptop. Every
metrics line, report and progress bar of such a run says ``simulated``.

The stand-in:

- Each *action* of a task succeeds with probability ``sigmoid(skill + structure + offset)``:
  ``skill`` is a logit per (domain, skill), drawn once from
  ``N(initial_logit, skill_spread)``; ``structure`` is a logit per (skill, variant,
  signature), 0 until trained; ``offset`` is a fixed per-task logit from
  ``N(0, task_spread)`` (tasks of one structure differ by their entities).
- A turn needs every one of its actions: its gold calls, each fact the user holds back
  (the agent must ask), saying the required outputs, and refusing a withheld tool. So a
  turn with ``a`` actions passes with probability ``p ** a``, and a task synthesized one
  step harder (*expand*: one more item, order or turn) is harder for the same skill.
- An episode's progress is its share of passed turns; success is all turns passed.
- The update follows the expected GRPO gradient on this model: for a success logit, the
  group-normalized policy gradient of a group is proportional to the group's reward std,
  and zero for a group whose rewards are all equal. Each group of the update raises its
  skill's logit by ``skill_lr * std`` and its structure's by ``signature_lr * std``,
  averaged over the groups in the update (the loss is a mean over the batch, so
  zero-variance groups kept in the batch dilute it, as in the ``token-mean`` loss).

Nothing here knows about the data engine or the modes: ``rods`` keeps the effective group
ratio high only if the tasks it synthesizes really sit at this learner's boundary.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rods_agent.config import TrainConfig
from rods_agent.rollout import EpisodeRecord
from rods_agent.training.policy import Group, RolloutBatch
from rods_env.errors import ConfigError, RodsError
from rods_env.fileio import write_json
from rods_env.task import Task, Turn

STATE_FILE = "simulated_policy.json"


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def turn_actions(turn: Turn) -> int:
    """Actions a turn needs: its gold calls, each held-back fact to ask for, the required
    outputs (said once), and a refusal when a tool is withheld; at least one."""
    actions = len(turn.calls) + len(turn.hidden_facts)
    actions += 1 if turn.outputs else 0
    actions += 1 if turn.withheld_tools else 0
    return max(1, actions)


def skill_key(task: Task) -> str:
    """The skill a task exercises: ``domain/skill``."""
    return f"{task.domain}/{task.skill}"


def structure_key(task: Task) -> str:
    """The task's structure: skill, variant and signature (or shape when it has none)."""
    if task.signature is not None:
        sig = task.signature.key
    else:
        sig = "shape:" + json.dumps(task.shape, sort_keys=True)
    return f"{skill_key(task)}/{task.variant}/{sig}"


SIMULATED_FAILURE = {
    "rule": "simulated",
    "values": [],
    "text": "the simulated learner's draw failed this turn (no reward rule ran: no model, no env)",
}
"""Why a simulated turn failed, in the shape of :class:`rods_env.rewards.Failure`."""


class SimulatedPolicy:
    """A stand-in learner implementing :class:`rods_agent.training.policy.Policy` (a simulation).

    Args:
        config: The run's configuration (``simulated``, ``rollout``, ``log``, ``seed``).
        out_dir: The run directory (unused: the learner's state goes into checkpoints).

    Raises:
        ConfigError: when the configuration asks for a warm start (a simulated learner
            has none).
    """

    simulated = True

    def __init__(self, config: TrainConfig, out_dir: Path | None = None) -> None:
        if config.warm_start.enabled:
            raise ConfigError(
                "warm_start.enabled: the simulated policy has no warm start "
                "(set warm_start.enabled=false, or policy=model)"
            )
        self.config = config.simulated
        self.seed = config.seed
        self.group_size = config.rollout.group_size
        self.reward = config.rollout.reward
        self.eval_k = config.log.eval_k
        self.skill_logit: dict[str, float] = {}
        self.structure_logit: dict[str, float] = {}
        self.updates = 0
        self._offsets: dict[str, float] = {}  # derived from the seed, not state

    # -- the learner's competence ----------------------------------------------------------
    def _skill(self, task: Task) -> float:
        """The skill's logit: its initial draw until an update changes it (a read stores
        nothing, so evaluating never changes the learner's state)."""
        key = skill_key(task)
        logit = self.skill_logit.get(key)
        if logit is None:
            rng = random.Random(f"rods-sim:skill:{self.seed}:{key}")
            logit = rng.gauss(self.config.initial_logit, self.config.skill_spread)
        return logit

    def _offset(self, task: Task) -> float:
        offset = self._offsets.get(task.id)
        if offset is None:
            rng = random.Random(f"rods-sim:task:{self.seed}:{task.content_hash()}")
            offset = self._offsets[task.id] = rng.gauss(0.0, self.config.task_spread)
        return offset

    def action_probability(self, task: Task) -> float:
        """Probability that one action of ``task`` is done right, now."""
        logit = self._skill(task) + self.structure_logit.get(structure_key(task), 0.0)
        return _sigmoid(logit + self._offset(task))

    def turn_probabilities(self, task: Task) -> list[float]:
        """Probability that each turn of ``task`` passes, now."""
        p = self.action_probability(task)
        return [p ** turn_actions(turn) for turn in task.turns]

    def expected(self, task: Task) -> tuple[float, float]:
        """Expected progress and success probability of ``task``, now."""
        probs = self.turn_probabilities(task)
        return sum(probs) / len(probs), math.prod(probs)

    # -- the Policy protocol ---------------------------------------------------------------
    def _episode(self, task: Task, probs: list[float], rng: random.Random, trial: int) -> Any:
        passed = [rng.random() < q for q in probs]
        progress = sum(passed) / len(passed)
        return EpisodeRecord(
            task_id=task.id,
            trial=trial,
            rewards=[progress],
            progress=progress,
            success=all(passed),
            termination="simulated",
            turn_results=[
                {"turn": i, "passed": ok, "failures": [] if ok else [SIMULATED_FAILURE]}
                for i, ok in enumerate(passed)
            ],
        )

    def rollouts(self, tasks: Sequence[Task], *, step: int) -> RolloutBatch:
        """Draw ``group_size`` simulated episodes of each task (seeded by run, step, task,
        trial)."""
        started = time.perf_counter()
        groups = []
        for task in tasks:
            probs = self.turn_probabilities(task)
            episodes = []
            for trial in range(self.group_size):
                rng = random.Random(f"rods-sim:rollout:{self.seed}:{step}:{task.id}:{trial}")
                episodes.append(self._episode(task, probs, rng, trial))
            rewards = [
                e.progress if self.reward == "progress" else float(e.success) for e in episodes
            ]
            groups.append(Group(task=task, episodes=episodes, rewards=rewards))
        return RolloutBatch(groups, {"generate": time.perf_counter() - started, "env": 0.0}, 0)

    def update(self, groups: Sequence[Group], *, step: int) -> dict[str, float]:
        """Raise the skill and structure logits of each group by its reward std (see the
        module docstring); returns the update's size."""
        if not groups:
            return {"groups": 0.0, "signal": 0.0}
        cfg = self.config
        n = len(groups)
        signal = 0.0
        for group in groups:
            task = group.task
            std = group.std
            signal += std
            key = skill_key(task)
            self.skill_logit[key] = self._skill(task) + cfg.skill_lr * std / n
            skey = structure_key(task)
            self.structure_logit[skey] = (
                self.structure_logit.get(skey, 0.0) + cfg.signature_lr * std / n
            )
        self.updates += 1
        skills = list(self.skill_logit.values())  # the skills trained so far
        return {
            "groups": float(n),
            "signal": signal / n,
            "trained_skill_p": sum(_sigmoid(x) for x in skills) / len(skills),
        }

    def evaluate(self, tasks: Sequence[Task], *, step: int) -> dict[str, Any]:
        """Expected progress and success on ``tasks`` (exact, from the learner's
        probabilities), and ``eval_k`` sampled episodes per task."""
        if not tasks:
            return {"simulated": True, "tasks": 0}
        expected = [self.expected(t) for t in tasks]
        sampled = []
        for task in tasks:
            probs = self.turn_probabilities(task)
            for trial in range(self.eval_k):
                rng = random.Random(f"rods-sim:eval:{self.seed}:{step}:{task.id}:{trial}")
                sampled.append(self._episode(task, probs, rng, trial))
        return {
            "simulated": True,
            "tasks": len(tasks),
            "progress": sum(e[0] for e in expected) / len(expected),
            "success": sum(e[1] for e in expected) / len(expected),
            "sampled_progress": sum(e.progress for e in sampled) / len(sampled),
            "sampled_success": sum(e.success for e in sampled) / len(sampled),
        }

    def save(self, directory: Path) -> None:
        """Write the learner's logits."""
        write_json(
            Path(directory) / STATE_FILE,
            {
                "simulated": True,
                "skill_logit": self.skill_logit,
                "structure_logit": self.structure_logit,
                "updates": self.updates,
            },
        )

    def load(self, directory: Path) -> None:
        """Restore what :meth:`save` wrote."""
        path = Path(directory) / STATE_FILE
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise RodsError(f"{path}: cannot read the simulated policy's state ({exc})") from None
        self.skill_logit = {k: float(v) for k, v in state["skill_logit"].items()}
        self.structure_logit = {k: float(v) for k, v in state["structure_logit"].items()}
        self.updates = int(state["updates"])

    def close(self) -> None:
        """Nothing to release."""
