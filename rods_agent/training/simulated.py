"""A simulated learner: the training loop and the data engine at work, without a model.

**This is a simulation, not a trained model.** No text is generated and no environment is
stepped. ``policy: simulated`` replaces the model with a stand-in whose success on a task is
a number, so the whole of ``rods train`` except the model (sampling, zones, synthesis,
injection and retirement, metrics, checkpoints, reports) runs in seconds on a laptop. Every
metrics line, report and progress bar of such a run says ``simulated``.

The stand-in is honest about depth: a task's success follows from competence on its
parts (docs/training.md, "The simulated learner", gives the reasons and the parameters).

- A turn asks for a sequence of *actions* (:func:`turn_units`): an *intent* per request
  that opens in it (a unit per domain and skill), each gold *call* (per domain and tool),
  each *binding* (a signature edge into a call of the turn: carrying a found value), each
  held-back fact to *ask* for, *stating* the required outputs, *refusing* a withheld tool.
- Action ``a`` of task ``t`` succeeds with ``sigmoid(theta[unit(a)] + delta[t])``;
  ``theta[u]`` starts at a draw from ``N(initial_logit, unit_spread)``, ``delta[t]`` is a
  fixed draw from ``N(0, task_spread)``. A turn passes when all of its actions succeed (a
  chain of ``k`` calls: the product of per-call competences); progress is the share of
  passed turns, success is every turn.
- The update is the policy gradient of this factored Bernoulli policy with GRPO's
  group-normalized advantages: ``theta[u] += lr * mean over groups of (1/G) sum_e A_e *
  sum over the attempted actions of u in e of (s - p)``. Zero-variance groups teach nothing
  but count in the mean (``static`` keeps them: its updates are diluted). A batch with no
  non-zero advantage takes no step (``optimizer_step`` 0), as the model's GRPO does.

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

from rods_agent.rollouts.batch import EpisodeRecord
from rods_agent.training.config import TrainConfig
from rods_agent.training.policy import Group, RolloutBatch
from rods_env.errors import ConfigError, RodsError
from rods_env.fileio import write_json
from rods_env.task import Task

STATE_FILE = "simulated_policy.json"

ADVANTAGE_EPS = 1e-4
"""Added to a group's standard deviation, as :func:`rods_agent.training.grpo.group_advantages` does."""

Attempt = tuple[str, bool, float]
"""One attempted action: its unit, whether it succeeded, its probability then."""


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def turn_units(task: Task) -> list[list[str]]:
    """The competence unit of each action of each turn of ``task``, in order (see the module
    docstring): intents, then per call its bindings and the call, then asking for held-back
    facts, stating the outputs and refusing a withheld tool."""
    domain = task.domain
    requests = task.requests()
    signature = task.signature
    calls_before: list[int] = []
    count = 0
    for turn in task.turns:
        calls_before.append(count)
        count += len(turn.calls)
    into: dict[int, int] = {}
    for _, j in signature.edges if signature is not None else ():
        into[j] = into.get(j, 0) + 1
    out: list[list[str]] = []
    current = requests[0].skill
    for t, turn in enumerate(task.turns):
        opening = [r.skill for r in requests if r.turn == t]
        current = opening[-1] if opening else current
        units = [f"intent:{domain}/{skill}" for skill in (opening or [current])]
        for k, call in enumerate(turn.calls):
            units += [f"bind:{domain}"] * into.get(calls_before[t] + k, 0)
            units.append(f"call:{domain}/{call.name}")
        units += [f"ask:{domain}"] * len(turn.hidden_facts)
        if turn.outputs:
            units.append(f"say:{domain}")
        if turn.withheld_tools:
            units.append(f"refuse:{domain}")
        out.append(units)
    return out


def group_advantages(rewards: Sequence[float]) -> list[float]:
    """GRPO's advantages of one group: reward minus the group mean, over the sample standard
    deviation plus :data:`ADVANTAGE_EPS`; all zero for a group of one or of equal rewards."""
    n = len(rewards)
    if n < 2:
        return [0.0] * n
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))
    if std == 0.0:
        return [0.0] * n
    return [(r - mean) / (std + ADVANTAGE_EPS) for r in rewards]


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
        self.unit_logit: dict[str, float] = {}
        self.updates = 0
        self._offsets: dict[str, float] = {}  # derived from the seed, not state
        self._units: dict[str, list[list[str]]] = {}  # derived from the task, not state
        self._attempts: dict[tuple[int, str, int], list[Attempt]] = {}  # this step's

    # -- the learner's competence ----------------------------------------------------------
    def logit(self, unit: str) -> float:
        """A unit's logit: its initial draw until an update changes it (a read stores
        nothing, so evaluating never changes the learner's state)."""
        logit = self.unit_logit.get(unit)
        if logit is None:
            rng = random.Random(f"rods-sim:unit:{self.seed}:{unit}")
            logit = rng.gauss(self.config.initial_logit, self.config.unit_spread)
        return logit

    def _offset(self, task: Task) -> float:
        offset = self._offsets.get(task.id)
        if offset is None:
            rng = random.Random(f"rods-sim:task:{self.seed}:{task.content_hash()}")
            offset = self._offsets[task.id] = rng.gauss(0.0, self.config.task_spread)
        return offset

    def units(self, task: Task) -> list[list[str]]:
        """The task's actions by turn (:func:`turn_units`, kept per task)."""
        found = self._units.get(task.id)
        if found is None:
            found = self._units[task.id] = turn_units(task)
        return found

    def action_probabilities(self, task: Task) -> list[list[float]]:
        """Probability that each action of each turn of ``task`` succeeds, now."""
        offset = self._offset(task)
        return [[_sigmoid(self.logit(u) + offset) for u in turn] for turn in self.units(task)]

    def turn_probabilities(self, task: Task) -> list[float]:
        """Probability that each turn of ``task`` passes, now: the product of its actions'."""
        return [math.prod(turn) for turn in self.action_probabilities(task)]

    def expected(self, task: Task) -> tuple[float, float]:
        """Expected progress and success probability of ``task``, now."""
        probs = self.turn_probabilities(task)
        return sum(probs) / len(probs), math.prod(probs)

    # -- the Policy protocol ---------------------------------------------------------------
    def _episode(
        self, task: Task, rng: random.Random, trial: int
    ) -> tuple[EpisodeRecord, list[Attempt]]:
        attempts: list[Attempt] = []
        passed = []
        for units, probs in zip(self.units(task), self.action_probabilities(task), strict=True):
            ok = True
            for unit, p in zip(units, probs, strict=True):
                ok = rng.random() < p
                attempts.append((unit, ok, p))
                if not ok:
                    break  # the turn is lost: its later actions are not attempted
            passed.append(ok)
        progress = sum(passed) / len(passed)
        record = EpisodeRecord(
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
        return record, attempts

    def rollouts(self, tasks: Sequence[Task], *, step: int) -> RolloutBatch:
        """Draw ``group_size`` simulated episodes of each task (seeded by run, step, task,
        trial)."""
        started = time.perf_counter()
        self._attempts = {}
        groups = []
        for task in tasks:
            episodes = []
            for trial in range(self.group_size):
                rng = random.Random(f"rods-sim:rollout:{self.seed}:{step}:{task.id}:{trial}")
                record, attempts = self._episode(task, rng, trial)
                self._attempts[(step, task.id, trial)] = attempts
                episodes.append(record)
            rewards = [
                e.progress if self.reward == "progress" else float(e.success) for e in episodes
            ]
            groups.append(Group(task=task, episodes=episodes, rewards=rewards))
        return RolloutBatch(groups, {"generate": time.perf_counter() - started, "env": 0.0}, 0)

    def _attempts_of(self, task: Task, trial: int, step: int) -> list[Attempt]:
        found = self._attempts.get((step, task.id, trial))
        if found is None:  # not this step's rollout: draw the same episode again
            rng = random.Random(f"rods-sim:rollout:{self.seed}:{step}:{task.id}:{trial}")
            found = self._episode(task, rng, trial)[1]
        return found

    def update(self, groups: Sequence[Group], *, step: int) -> dict[str, float]:
        """One policy-gradient step on the unit logits (see the module docstring); returns
        the update's size."""
        if not groups:
            return {"groups": 0.0, "signal": 0.0, "optimizer_step": 0.0}
        grad: dict[str, float] = {}
        signal = 0.0
        for group in groups:
            advantages = group_advantages(group.rewards)
            signal += sum(abs(a) for a in advantages) / max(len(advantages), 1)
            size = len(group.episodes)
            for episode, advantage in zip(group.episodes, advantages, strict=True):
                if advantage == 0.0:
                    continue
                for unit, ok, p in self._attempts_of(group.task, episode.trial, step):
                    grad[unit] = grad.get(unit, 0.0) + advantage * ((1.0 if ok else 0.0) - p) / size
        n = len(groups)
        stepped = any(a != 0.0 for group in groups for a in group_advantages(group.rewards))
        for unit, g in grad.items():
            self.unit_logit[unit] = self.logit(unit) + self.config.lr * g / n
        self.updates += int(stepped)
        trained = list(self.unit_logit.values())
        return {
            "optimizer_step": float(stepped),
            "groups": float(n),
            "signal": signal / n,
            "trained_unit_p": sum(_sigmoid(x) for x in trained) / len(trained) if trained else 0.0,
        }

    def evaluate(self, tasks: Sequence[Task], *, step: int) -> dict[str, Any]:
        """Expected progress and success on ``tasks`` (exact, from the learner's
        probabilities), and ``eval_k`` sampled episodes per task."""
        if not tasks:
            return {"simulated": True, "tasks": 0}
        expected = [self.expected(t) for t in tasks]
        sampled = []
        for task in tasks:
            for trial in range(self.eval_k):
                rng = random.Random(f"rods-sim:eval:{self.seed}:{step}:{task.id}:{trial}")
                sampled.append(self._episode(task, rng, trial)[0])
        return {
            "simulated": True,
            "tasks": len(tasks),
            "progress": sum(e[0] for e in expected) / len(expected),
            "success": sum(e[1] for e in expected) / len(expected),
            "sampled_progress": sum(e.progress for e in sampled) / len(sampled),
            "sampled_success": sum(e.success for e in sampled) / len(sampled),
        }

    def save(self, directory: Path) -> None:
        """Write the learner's unit logits."""
        write_json(
            Path(directory) / STATE_FILE,
            {"simulated": True, "unit_logit": self.unit_logit, "updates": self.updates},
        )

    def load(self, directory: Path) -> None:
        """Restore what :meth:`save` wrote."""
        path = Path(directory) / STATE_FILE
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            self.unit_logit = {k: float(v) for k, v in state["unit_logit"].items()}
            self.updates = int(state["updates"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise RodsError(f"{path}: cannot read the simulated policy's state ({exc})") from None

    def close(self) -> None:
        """Nothing to release."""
