"""``rods train``: GRPO with the RODS data engine in the loop, in one file, top to bottom.

One step::

    tasks  = engine.sample(B)                   the data engine picks the batch
    batch  = policy.rollouts(tasks)             G episodes per task -> one group each
    kept   = [g for g in groups if keep(g)]     filter / rods: drop zero-variance groups
    update = policy.update(kept)                GRPO (or the simulated learner's update)
    data   = engine.observe(groups)             zones -> synthesis -> inject / retire
    eval   = policy.evaluate(test)              every log.eval_every steps
    log, checkpoint                             metrics.jsonl, TensorBoard, checkpoints/

The three modes are this loop with parts switched off (see :class:`DataEngine`): ``static``
trains on every group of a fixed pool, ``filter`` drops zero-variance groups, ``rods``
also grows and prunes the pool. The loop knows the policy only through
:class:`rods_agent.policy.Policy`, so it runs a transformers model (``policy: model``) and
the simulated learner (``policy: simulated``) alike.

The run directory holds ``config.yaml`` (resolved), ``metrics.jsonl`` (one line per step),
``tb/`` (TensorBoard events), ``checkpoints/step-NNNNNN/`` (policy, data engine, loop
state; written to a temporary folder and renamed, so a kill never leaves half a
checkpoint) and, at the end, ``pool.jsonl`` (the final active pool). Every random choice
derives from ``(seed, step, ...)``, so ``--resume`` after a kill repeats exactly what the
unbroken run would have done.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rods_agent.config import TrainConfig, config_yaml, load_config
from rods_agent.data import DataEngine, GroupResult
from rods_agent.policy import Policy, RolloutBatch
from rods_agent.progress import Progress
from rods_env.errors import ConfigError, RodsError
from rods_env.fileio import (
    append_jsonl,
    atomic_write,
    fsync_dir,
    read_jsonl,
    write_json,
    write_jsonl,
)
from rods_env.task import Task, dump_tasks

TIMING_FIELDS = ("time", "tokens_per_s")
"""Fields of a metrics line that measure the machine, not the run (they differ on resume)."""

RESUMABLE_CHANGES = ("steps", "log.progress")
"""Config keys a resumed run may change (more steps, progress bars on or off)."""


def train(config: TrainConfig, *, resume: bool = False) -> Path:
    """Run (or resume) training as configured; returns the run directory.

    Args:
        config: The resolved configuration.
        resume: Continue the run in ``config.out`` from its last checkpoint (a fresh start
            when it has none).

    Raises:
        ConfigError: a bad pool, a run directory that already holds another run, or a
            resume whose configuration differs from the saved one.
    """
    out = Path(config.out)
    prepare_run_dir(config, out, resume=resume)
    train_tasks, test_tasks = load_pools(config)
    engine = DataEngine(
        config.data, mode=config.mode, tasks=train_tasks, reserved=test_tasks, seed=config.seed
    )
    eval_tasks = test_tasks[: config.log.eval_tasks or None]
    policy = build_policy(config, out)
    scalars: Scalars | None = None
    bar: Progress | None = None
    try:
        write_run_config(config, out)
        checkpoint = latest_checkpoint(out) if resume else None
        start = restore(checkpoint, policy, engine) if checkpoint else 0
        keep_metrics_before(out / "metrics.jsonl", start)
        if checkpoint is None and config.warm_start.enabled:
            warm_start = getattr(policy, "warm_start", None)
            if warm_start is None:
                raise ConfigError(f"warm_start.enabled: policy {config.policy} has no warm start")
            write_json(out / "warm_start.json", warm_start(engine.active))
        scalars = Scalars(out / "tb", purge_step=start) if config.log.tensorboard else None
        bar = progress_bar(config, start)
        for step in range(start, config.steps):
            # 1. the batch
            step_started = time.perf_counter()
            tasks = engine.sample(config.rollout.tasks_per_step, step=step)
            if not tasks:
                parked = engine.buffer.count("parked")
                print(
                    f"rods train: step {step}: the pool is exhausted (every task was retired"
                    + (f", or parked as hard: {parked}" if parked else "")
                    + "); stopping early",
                    file=sys.stderr,
                )
                save_checkpoint(out, step, policy, engine, config)
                break
            # 2. rollouts: one group of G episodes per task
            batch = policy.rollouts(tasks, step=step)
            # 3. the update, on the groups the data engine keeps
            kept = [g for g in batch.groups if engine.keep(g.rewards)]
            update_started = time.perf_counter()
            update = policy.update(kept, step=step) if kept else {}
            update_seconds = time.perf_counter() - update_started
            # 4. the data engine: zones, synthesis around the boundary, injection, retirement
            groups = [GroupResult(g.task.id, tuple(g.rewards)) for g in batch.groups]
            data = engine.observe(groups, step=step)
            # 5. periodic evaluation on the test split
            evaluation = None
            eval_seconds = 0.0
            if eval_due(config, step):
                eval_started = time.perf_counter()
                evaluation = policy.evaluate(eval_tasks, step=step)
                eval_seconds = time.perf_counter() - eval_started
            # 6. log
            seconds = {
                "generate": batch.seconds.get("generate", 0.0),
                "env": batch.seconds.get("env", 0.0),
                "update": update_seconds,
                "synthesis": data["seconds"]["synthesis"],
                "engine": data["seconds"]["engine"],
                "eval": eval_seconds,
                "step": time.perf_counter() - step_started,
            }
            row = step_metrics(config, step, batch, kept, update, data, evaluation, seconds)
            append_jsonl(out / "metrics.jsonl", [row])
            if scalars is not None:
                scalars.write(row, step)
            # 7. checkpoint
            done = step + 1
            every = config.log.checkpoint_every
            if (every and done % every == 0) or done == config.steps:
                save_checkpoint(out, done, policy, engine, config)
            if bar is not None:
                bar.update(
                    reward=f"{row['reward']:.3f}",
                    ratio=f"{row['effective_group_ratio']:.2f}",
                    pool=row["pool"]["active"],
                )
        dump_tasks(engine.active, out / "pool.jsonl")
    finally:
        if bar is not None:
            bar.close()
        if scalars is not None:
            scalars.close()
        policy.close()
    return out


# -- what goes into a step's metrics line ---------------------------------------------------
def step_metrics(
    config: TrainConfig,
    step: int,
    batch: RolloutBatch,
    kept: Sequence[Any],
    update: Mapping[str, float],
    data: Mapping[str, Any],
    evaluation: Mapping[str, Any] | None,
    seconds: Mapping[str, float],
) -> dict[str, Any]:
    """One ``metrics.jsonl`` line: the step's rewards, the data engine's report, timings."""
    episodes = [e for g in batch.groups for e in g.episodes]
    rewards = [r for g in batch.groups for r in g.rewards]
    generate = seconds.get("generate", 0.0)
    row: dict[str, Any] = {
        "step": step,
        "mode": config.mode,
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
        "update": dict(update),
        "time": dict(seconds),
        "tokens": batch.tokens,
        "tokens_per_s": batch.tokens / generate if generate > 0 else 0.0,
    }
    if evaluation is not None:
        row["eval"] = dict(evaluation)
    return row


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def eval_due(config: TrainConfig, step: int) -> bool:
    """Whether the test split is evaluated after ``step`` (every N steps and at the end)."""
    every = config.log.eval_every
    return bool(every) and ((step + 1) % every == 0 or step + 1 == config.steps)


# -- the pools and the policy ---------------------------------------------------------------
def load_pools(config: TrainConfig) -> tuple[list[Task], list[Task]]:
    """The starting pool and the test split (reserved from synthesis, used for evaluation).

    ``data.pool`` is ``seeds`` (each domain's seed tasks) or a JSONL task pool; a pool's
    tasks without a split (synthesized pools) count as train tasks. A benchmark domain
    gives its train split only, without the tasks an agent doing nothing passes (unless
    ``data.keep_trivial``), and refuses a pool that holds one of its test tasks.
    """
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain
    from rods_env.task import load_tasks

    data = config.data
    pool_file = None if data.pool == "seeds" else load_tasks(data.pool)
    train: list[Task] = []
    test: list[Task] = []
    for env in config.env:
        domain = load_any_domain(env)
        if isinstance(domain, BenchmarkDomain):
            if pool_file is None:
                tasks = domain.training_tasks(data.split, keep_trivial=data.keep_trivial)
            else:
                if data.split != "train":
                    domain.training_tasks(data.split)  # refuses with the reason
                tasks = [t for t in pool_file if t.domain == domain.name]
                domain.check_training_pool(tasks)
                if not data.keep_trivial:
                    trivial = domain.trivial_task_ids()
                    tasks = [t for t in tasks if t.id not in trivial]
            train.extend(tasks)
            test.extend(domain.seed_tasks("test"))
            continue
        if pool_file is None:
            tasks = domain.seed_tasks(None if data.split == "all" else data.split)
        else:
            wanted = {"train": ("train", None), "test": ("test",), "all": ("train", "test", None)}
            tasks = [
                t for t in pool_file if t.domain == domain.name and t.split in wanted[data.split]
            ]
        train.extend(tasks)
        if data.split == "train":
            test.extend(domain.seed_tasks("test"))
    if not train:
        where = "the seed sets" if pool_file is None else data.pool
        raise ConfigError(f"data.pool: no {data.split} tasks of {', '.join(config.env)} in {where}")
    return train, test


def build_policy(config: TrainConfig, out: Path) -> Policy:
    """The policy named by ``config.policy`` (the model policy is imported only when used)."""
    if config.policy == "simulated":
        from rods_agent.simulated import SimulatedPolicy

        return SimulatedPolicy(config, out)
    try:
        from rods_agent.model_policy import ModelPolicy
    except ModuleNotFoundError as exc:
        if exc.name != "rods_agent.model_policy":
            raise
        raise ConfigError(
            "policy: model needs rods_agent.model_policy, which this build does not have; "
            "use policy=simulated"
        ) from None
    policy: Policy = ModelPolicy(config, out)
    return policy


# -- the run directory ----------------------------------------------------------------------
def prepare_run_dir(config: TrainConfig, out: Path, *, resume: bool) -> None:
    """Check that ``out`` may hold this run (nothing is written here: the resolved
    ``config.yaml`` goes in once the policy has loaded, see :func:`write_run_config`).

    A fresh run refuses a directory that already holds a run's metrics or checkpoints
    (nothing is overwritten); a resumed run that has started refuses a configuration that
    differs from the saved one in anything but :data:`RESUMABLE_CHANGES`. A run that never
    reached its first step (a model that failed to load) has not started: ``--resume``
    begins it afresh with the configuration given.
    """
    saved = out / "config.yaml"
    started = (out / "metrics.jsonl").exists() or (out / "checkpoints").exists()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out: {out} is a file, not a directory")
    if resume and started and saved.exists():
        before = load_config(saved)
        changed = _differences(before.model_dump(mode="json"), config.model_dump(mode="json"))
        changed = [c for c in changed if c not in RESUMABLE_CHANGES]
        if changed:
            raise ConfigError(
                f"--resume: the configuration differs from {saved} in {', '.join(changed)}; "
                f"only {', '.join(RESUMABLE_CHANGES)} may change"
            )
    elif not resume and started:
        raise ConfigError(
            f"out: {out} already holds a run; pass --resume to continue it, or choose "
            "another out=DIR"
        )


def write_run_config(config: TrainConfig, out: Path) -> None:
    """Write the resolved configuration to ``out/config.yaml`` (atomically)."""
    atomic_write(out / "config.yaml", config_yaml(config))


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = list(dict.fromkeys([*a, *b]))
        return [d for k in keys for d in _differences(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]


def keep_metrics_before(path: Path, step: int) -> None:
    """Drop metrics lines of steps at or after ``step`` (written after the checkpoint that a
    resume starts from, and about to be written again)."""
    if not path.exists():
        return
    rows = read_jsonl(path)
    kept = [r for r in rows if isinstance(r.get("step"), int) and r["step"] < step]
    if len(kept) != len(rows) or path.read_bytes()[-1:] not in (b"", b"\n"):
        write_jsonl(path, kept)


def checkpoint_dirs(out: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run, oldest first, as ``(steps done, folder)``."""
    root = out / "checkpoints"
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        name = path.name
        if name.startswith("step-") and name[5:].isdigit() and (path / "loop.json").exists():
            found.append((int(name[5:]), path))
    return sorted(found)


def latest_checkpoint(out: Path) -> Path | None:
    """The newest complete checkpoint of the run in ``out``, or None."""
    found = checkpoint_dirs(out)
    return found[-1][1] if found else None


def save_checkpoint(
    out: Path, done: int, policy: Policy, engine: DataEngine, config: TrainConfig
) -> Path:
    """Write a checkpoint after ``done`` steps, atomically, and prune old ones.

    Everything goes into a temporary folder first (``policy.save``, the data engine's
    state, the loop's state); one rename then publishes it, so a kill mid-write leaves
    the previous checkpoint as the newest complete one.
    """
    root = out / "checkpoints"
    final = root / f"step-{done:06d}"
    tmp = root / f".step-{done:06d}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "policy").mkdir(parents=True)
    policy.save(tmp / "policy")
    write_json(tmp / "engine.json", engine.state_dict(), indent=None)
    write_json(tmp / "loop.json", {"step": done, "seed": config.seed, "mode": config.mode})
    if final.exists():  # a resumed run writing the same step again
        shutil.rmtree(final)
    os.replace(tmp, final)
    fsync_dir(root)
    for _, old in checkpoint_dirs(out)[: -config.log.keep_checkpoints]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def restore(checkpoint: Path, policy: Policy, engine: DataEngine) -> int:
    """Load a checkpoint into ``policy`` and ``engine``; returns the steps it had done."""
    try:
        loop = json.loads((checkpoint / "loop.json").read_text(encoding="utf-8"))
        state = json.loads((checkpoint / "engine.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RodsError(f"{checkpoint}: unreadable checkpoint ({exc})") from None
    policy.load(checkpoint / "policy")
    engine.load_state_dict(state)
    for stale in checkpoint.parent.glob(".step-*.tmp"):  # a checkpoint cut off by the kill
        shutil.rmtree(stale, ignore_errors=True)
    return int(loop["step"])


# -- TensorBoard and progress bars ----------------------------------------------------------
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
    label = f"train {config.mode}" + (
        " [simulated learner]" if config.policy == "simulated" else ""
    )
    return Progress(config.steps, label, "step", initial=start)
