"""What a training step reports: its ``metrics.jsonl`` line, TensorBoard scalars, a progress bar."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rods_agent.console.progress import Progress
from rods_agent.rollouts.batch import TERMINATIONS
from rods_agent.training.config import TrainConfig
from rods_agent.training.policy import RolloutBatch
from rods_env.errors import ConfigError

TIMING_FIELDS = ("time", "tokens_per_s")
"""Fields of a metrics line that measure the machine, not the run (they differ on resume)."""


def step_metrics(
    config: TrainConfig,
    step: int,
    batch: RolloutBatch,
    kept: Sequence[Any],
    update: Mapping[str, float],
    data: Mapping[str, Any],
    evaluation: Mapping[str, Any] | None,
    seconds: Mapping[str, float],
    *,
    optimizer_steps_before: int = 0,
) -> dict[str, Any]:
    """One ``metrics.jsonl`` line: the step's mode and the synthesis modes it used
    (``synth_modes``), its rewards, how its episodes ended (``terminations``), the tokens
    its update trained on (``loss_tokens``; 0 for the simulated learner, which trains
    none), the optimizer steps it took (``optimizer_steps``: 0 when no token had a non-zero
    advantage, in every mode) and the run's total so far (``optimizer_steps_total``, given
    the total before this step), the data engine's report, timings."""
    episodes = [e for g in batch.groups for e in g.episodes]
    rewards = [r for g in batch.groups for r in g.rewards]
    generate = seconds.get("generate", 0.0)
    stepped = optimizer_steps(update)
    row: dict[str, Any] = {
        "step": step,
        "mode": config.mode,
        "synth_modes": list(data.get("synth_modes", ())),
        "policy": config.policy,
        "reward": _mean(rewards),
        "progress": _mean([e.progress for e in episodes]),
        "success": _mean([float(e.success) for e in episodes]),
        "groups": len(batch.groups),
        "kept_groups": len(kept),
        "effective_group_ratio": data["effective_group_ratio"],
        "zones": data["zones"],
        "variance": data["variance"],
        "pool": data["pool"],
        "synthesized": data["synthesized"],
        "retired": data["retired"],
        "parked": data["parked"],
        "retried": data["retried"],
        "terminations": termination_counts(episodes),
        "loss_tokens": int(update.get("loss_tokens", 0)),
        "optimizer_steps": stepped,
        "optimizer_steps_total": optimizer_steps_before + stepped,
        "update": dict(update),
        "time": dict(seconds),
        "tokens": batch.tokens,
        "tokens_per_s": batch.tokens / generate if generate > 0 else 0.0,
    }
    if evaluation is not None:
        row["eval"] = dict(evaluation)
    return row


def optimizer_steps(update: Mapping[str, Any]) -> int:
    """The optimizer steps an update's metrics say it took (the model's ``optimizer_steps``
    over its epochs, the simulated learner's ``optimizer_step``; none without an update)."""
    if "optimizer_steps" in update:
        return int(update["optimizer_steps"])
    return int(update.get("optimizer_step", 0))


def termination_counts(episodes: Sequence[Any]) -> dict[str, int]:
    """How many episodes ended each way: every termination of the rollout (0 when none
    did), then any other (``simulated``)."""
    counts = dict.fromkeys(TERMINATIONS, 0)
    for episode in episodes:
        counts[episode.termination] = counts.get(episode.termination, 0) + 1
    return counts


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class Scalars:
    """Every number of a metrics line as a TensorBoard scalar (``zones/boundary``, ...).

    Uses TensorBoard's own event writer (no torch or TensorFlow import). On resume, a
    ``SessionLog.START`` event at the resume step tells TensorBoard to drop the events a
    killed run wrote after its last checkpoint.
    """

    def __init__(self, directory: Path, *, purge_step: int = 0) -> None:
        try:
            from tensorboard.compat.proto.event_pb2 import Event, SessionLog
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            raise ConfigError(
                "log.tensorboard needs the tensorboard package (pip install tensorboard), "
                "or set log.tensorboard=false"
            ) from None

        self._writer = EventFileWriter(str(directory))
        if purge_step:
            self._writer.add_event(
                Event(step=purge_step, session_log=SessionLog(status=SessionLog.START))
            )

    def write(self, row: Mapping[str, Any], step: int) -> None:
        """Add the numeric fields of ``row`` (nested dicts become ``a/b`` tags)."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [
            Summary.Value(tag=tag, simple_value=value)
            for tag, value in flatten(row)
            if tag != "step"
        ]
        self._writer.add_event(
            Event(wall_time=time.time(), step=step, summary=Summary(value=values))
        )
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the events file."""
        self._writer.close()


def flatten(row: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """``(tag, number)`` for every number in a nested dict (booleans as 0/1)."""
    for key, value in row.items():
        tag = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, tag + "/")
        elif isinstance(value, (bool, int, float)):  # booleans as 0/1
            yield tag, float(value)


def progress_bar(config: TrainConfig, start: int) -> Progress | None:
    """The steps' progress on stderr: a bar on a terminal, a line every 5% off it (None
    when ``log.progress`` is off)."""
    if not config.log.progress:
        return None
    from rods_agent.training.config import mode_label

    shown = mode_label(config.mode, config.data.synth_modes, synthesize=config.data.synthesize)
    label = f"train {shown}" + (" [simulated learner]" if config.policy == "simulated" else "")
    return Progress(config.steps, label, "step", initial=start)
