"""``rods train``: GRPO with the RODS data engine in the loop, in one function, top to bottom.

One step::

    tasks  = engine.sample(B)                   the data engine picks the batch
    batch  = policy.rollouts(tasks)             G episodes per task -> one group each
    kept   = [g for g in groups if keep(g)]     filter / rods: drop zero-variance groups
    update = policy.update(kept)                GRPO (or the simulated learner's update)
    data   = engine.observe(groups)             zones -> synthesis -> inject / retire
    eval   = policy.evaluate(test)              every log.eval_every steps
    log, guard, checkpoint                      metrics.jsonl, TensorBoard, stop a run
                                                that cannot learn, checkpoints/

The modes are this loop with parts switched off (see :class:`DataEngine`): ``static``
trains on every group of a fixed pool, ``envtuning`` too but with Environment Tuning's
actionable hints in the training rollouts' environments, ``filter`` drops zero-variance
groups, ``rods`` also grows (same-structure variants of boundary tasks) and prunes the
pool, ``rods-expand`` grows harder neighbours too. Every mode takes an optimizer step by
one rule: only when a token of the kept groups has a non-zero advantage. The loop knows the policy only through
:class:`rods_agent.training.policy.Policy`, so it runs a transformers model (``policy:
model``) and the simulated learner (``policy: simulated``) alike.

The run directory holds ``config.yaml`` (resolved), ``metrics.jsonl`` (one line per step),
``tb/`` (TensorBoard events), ``checkpoints/step-NNNNNN/`` (policy, data engine, loop
state; written to a temporary folder and renamed, so a kill never leaves half a
checkpoint), ``rollouts/`` (a bounded sample of each step's episodes) and ``pool_events.jsonl``
(what each step changed in the pool), both for ``rods view``
(:mod:`rods_agent.training.transcripts`), and, at the end, ``pool.jsonl`` (the final active
pool). Every random choice
derives from ``(seed, step, ...)``, so ``--resume`` after a kill repeats exactly what the
unbroken run would have done (:mod:`rods_agent.training.run_dir`; the metrics line and
TensorBoard: :mod:`rods_agent.training.metrics`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rods_agent.console.progress import Progress
from rods_agent.data import DataEngine, GroupResult
from rods_agent.training.config import TrainConfig
from rods_agent.training.guards import StepGuard
from rods_agent.training.metrics import Scalars, progress_bar, step_metrics
from rods_agent.training.policy import Group, Policy
from rods_agent.training.pools import load_pools
from rods_agent.training.run_dir import (
    keep_metrics_before,
    latest_checkpoint,
    prepare_run_dir,
    restore,
    save_checkpoint,
    with_template_date,
    write_run_config,
)
from rods_agent.training.transcripts import RolloutLog, pool_statuses
from rods_env.errors import ConfigError
from rods_env.fileio import append_jsonl, read_jsonl, write_json
from rods_env.task import dump_tasks


def train(config: TrainConfig, *, resume: bool = False) -> Path:
    """Run (or resume) training as configured; returns the run directory.

    Args:
        config: The resolved configuration.
        resume: Continue the run in ``config.out`` from its last checkpoint (a fresh start
            when it has none).

    Raises:
        ConfigError: a bad pool, a run directory that already holds another run, a
            resume whose configuration differs from the saved one, or an opening prompt
            longer than the token caps.
        TrainingError: a step shows that the run cannot learn (see
            :mod:`rods_agent.training.guards`); its metrics line is written first.
    """
    out = Path(config.out)
    config = with_template_date(config, out, resume=resume)
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
        check_prompts = getattr(policy, "check_prompts", None)
        if callable(check_prompts):  # before anything is written: a bad cap leaves nothing
            check_prompts(train_tasks)
        write_run_config(config, out)
        checkpoint = latest_checkpoint(out) if resume else None
        start = restore(checkpoint, policy, engine) if checkpoint else 0
        keep_metrics_before(out / "metrics.jsonl", start)
        guard = StepGuard(
            config.grpo.max_untrained_steps, trains_tokens=not getattr(policy, "simulated", False)
        )
        stepped_total = 0  # optimizer steps of the run so far
        if start and (out / "metrics.jsonl").exists():
            done_rows = read_jsonl(out / "metrics.jsonl")
            guard.replay(done_rows)
            stepped_total = sum(int(r.get("optimizer_steps") or 0) for r in done_rows)
        if checkpoint is None and config.warm_start.enabled:
            warm_start = getattr(policy, "warm_start", None)
            if warm_start is None:
                raise ConfigError(f"warm_start.enabled: policy {config.policy} has no warm start")
            write_json(out / "warm_start.json", warm_start(engine.active))
        scalars = Scalars(out / "tb", purge_step=start) if config.log.tensorboard else None
        transcripts = RolloutLog(out, config.log, start=start)
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
            update_started = time.perf_counter()
            kept, update = update_on_kept(engine, policy, batch.groups, step=step)
            update_seconds = time.perf_counter() - update_started
            # 4. the data engine: zones, synthesis around the boundary, injection, retirement
            groups = [GroupResult(g.task.id, tuple(g.rewards)) for g in batch.groups]
            statuses, removed = pool_statuses(engine), len(engine.buffer.removed)
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
            row = step_metrics(
                config, step, batch, kept, update, data, evaluation, seconds,
                optimizer_steps_before=stepped_total,
            )  # fmt: skip
            stepped_total = row["optimizer_steps_total"]
            append_jsonl(out / "metrics.jsonl", [row])
            if scalars is not None:
                scalars.write(row, step)
            transcripts.write_step(step, batch.groups, kept, engine)  # for rods view
            transcripts.write_events(step, statuses, removed, engine)
            guard.check(row, batch)  # stops a run that cannot learn, naming the cause
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


def update_on_kept(
    engine: DataEngine, policy: Policy, groups: Sequence[Group], *, step: int
) -> tuple[list[Group], dict[str, float]]:
    """The groups the data engine keeps for the loss (every one in ``static`` and
    ``envtuning``, those with a reward variance in the other modes) and the policy's update
    on them: none when it keeps none. Whether the update steps the optimizer is the
    policy's one rule for every mode (a token with a non-zero advantage)."""
    kept = [g for g in groups if engine.keep(g.rewards)]
    return kept, (policy.update(kept, step=step) if kept else {})


def eval_due(config: TrainConfig, step: int) -> bool:
    """Whether the test split is evaluated after ``step`` (every N steps and at the end)."""
    every = config.log.eval_every
    return bool(every) and ((step + 1) % every == 0 or step + 1 == config.steps)


def build_policy(config: TrainConfig, out: Path) -> Policy:
    """The policy named by ``config.policy`` (the model policy is imported only when used)."""
    if config.policy == "simulated":
        from rods_agent.training.simulated import SimulatedPolicy

        return SimulatedPolicy(config, out)
    try:
        from rods_agent.training.model_policy import ModelPolicy
    except ModuleNotFoundError as exc:
        if exc.name != "rods_agent.training.model_policy":
            raise
        raise ConfigError(
            "policy: model needs rods_agent.training.model_policy, which this build does not have; "
            "use policy=simulated"
        ) from None
    policy: Policy = ModelPolicy(config, out)
    return policy
