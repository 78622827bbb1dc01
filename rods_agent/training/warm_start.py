"""Warm start: supervised fine-tuning on oracle transcripts (before GRPO, and ``rods sft``).

The oracle (:class:`rods_env.oracle.OracleAgent`) solves every task from its gold calls, so
perfect trajectories cost nothing but environment steps. They are collected with the same
rollout code as RL episodes (:func:`rods_agent.rollouts.batch.run_rollouts` with the oracle wearing
the engine interface and the learner's chat template), so a transcript is tokenized exactly
as a rollout is: the same template, the same incremental observation tokens, and the same
assistant mask (the completion tokens and their end-of-turn token carry loss, prompts and
observations do not).

The loss is the mean negative log-likelihood of the assistant tokens (temperature 1), over
batches of ``batch_size`` transcripts accumulated in micro-batches. On GPU this is the cold
start before GRPO; on CPU it lifts the tiny random model off zero, so that GRPO groups have
reward variance and the data engine a boundary to find.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rods_agent.console.progress import Progress
from rods_agent.engines.base import SamplingParams, derive_seed
from rods_agent.engines.chat import ChatTemplate
from rods_agent.rollouts.batch import (
    DomainRouter,
    EpisodeRecord,
    EpisodeSpec,
    RolloutConfig,
    run_rollouts,
)
from rods_agent.training.config import TrainConfig
from rods_agent.training.generator import turn_tokens
from rods_agent.training.numerics import LRSchedule, clip_gradients, make_optimizer
from rods_env.errors import ConfigError
from rods_env.task import Task


def oracle_transcripts(
    tasks: Sequence[Task],
    chat: ChatTemplate,
    *,
    max_tokens: int = 16_384,
    max_turns: int = 60,
    batch_size: int = 32,
    prompt: str = "full",
    on_record: Callable[[EpisodeRecord], None] | None = None,
) -> list[EpisodeRecord]:
    """The oracle's episode of each task, tokenized with ``chat`` as a rollout is.

    Args:
        tasks: Tasks of any registered domains.
        chat: The learner's chat template.
        max_tokens: Transcripts are cut at this many tokens (the episode ends there, as a
            rollout's token cap ends it).
        max_turns: Most oracle steps per episode.
        batch_size: Episodes run at once.
        prompt: What the environments show (``full`` or ``brief``; see
            :class:`rods_env.env.ToolEnv`): the transcripts carry the prompt the model will
            see in its rollouts.
        on_record: Called with each transcript as soon as its episode ends.
    """
    from rods_agent.engines import oracle_agents
    from rods_agent.engines.scripted import ScriptedEngine

    engine = ScriptedEngine(oracle_agents(tasks), chat=chat)
    config = RolloutConfig(
        sampling=SamplingParams(max_tokens=max_tokens),
        max_turns=max_turns,
        max_tokens=max_tokens,
        batch_size=batch_size,
        prompt=prompt,
    )
    return run_rollouts(
        engine,
        lambda: DomainRouter(max_steps=max_turns, prompt=prompt),
        [EpisodeSpec(t) for t in tasks],
        config,
        on_record=on_record,
    )


@dataclass
class SFTResult:
    """What a warm start did.

    Attributes:
        steps: Optimizer steps.
        transcripts: Transcripts trained on.
        tokens: Assistant (loss) tokens per epoch.
        loss_first: Mean loss of the first step.
        loss_last: Mean loss of the last epoch's steps.
        seconds: Wall time of the training (collecting the transcripts not included).
    """

    steps: int
    transcripts: int
    tokens: int
    loss_first: float
    loss_last: float
    seconds: float

    def metrics(self) -> dict[str, float]:
        """As a flat dict of floats (for metrics.jsonl)."""
        return {k: float(v) for k, v in self.__dict__.items()}


def supervised_finetune(
    model: Any,
    records: Sequence[EpisodeRecord],
    *,
    epochs: int = 1,
    lr: float = 1e-4,
    schedule: str = "constant",
    batch_size: int = 4,
    micro_batch_size: int = 2,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    device: Any = "cpu",
    share_heads: bool = True,
    master_weights: bool = True,
    on_step: Callable[[int, float], None] | None = None,
) -> SFTResult:
    """Fine-tune ``model`` in place on the assistant tokens of ``records``.

    Args:
        model: A causal LM (a peft model trains its adapters).
        records: Transcripts with ``token_ids`` and ``assistant_mask``.
        epochs: Passes over the transcripts (shuffled each epoch by ``seed``).
        lr: AdamW learning rate.
        schedule: ``constant``, or ``linear`` / ``cosine`` decay to 0 over the steps (a
            memorizing fit settles instead of bouncing at the end).
        batch_size: Transcripts per optimizer step.
        micro_batch_size: Transcripts per forward/backward.
        max_grad_norm: Gradient clipping.
        seed: Shuffling seed.
        device: Where the model is.
        share_heads: Run a prompt head shared by many transcripts once per step
            (:func:`rods_agent.training.grpo.scored_micro_batches`).
        master_weights: AdamW on float32 copies of bf16/fp16 weights
            (:class:`rods_agent.training.numerics.MasterWeightAdamW`).
        on_step: Called with (step, loss) after each optimizer step.

    Raises:
        ConfigError: when no transcript has an assistant token.
    """
    import torch

    from rods_agent.training.grpo import Sampling, micro_batches, scored_micro_batches

    rows = [
        (torch.tensor(r.token_ids, dtype=torch.long), torch.tensor(r.assistant_mask))
        for r in records
        if any(r.assistant_mask)
    ]
    if not rows:
        longest = max((len(r.token_ids) for r in records), default=0)
        raise ConfigError(
            "no oracle transcript has an assistant token to train on: each was cut before "
            f"the first reply (the opening prompt alone takes about {longest} tokens; raise "
            "warm_start.max_tokens)"
        )
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, lr=lr, weight_decay=0.0, master_weights=master_weights)
    total_steps = max(1, epochs * -(-len(rows) // batch_size))
    scheduler = LRSchedule(optimizer, total=total_steps, schedule=schedule)
    rng = random.Random(seed)
    t0 = time.perf_counter()
    step, first = 0, float("nan")
    last_epoch: list[float] = []
    model.train()
    try:
        for _ in range(epochs):
            order = list(range(len(rows)))
            rng.shuffle(order)
            last_epoch = []
            for batch in micro_batches(order, batch_size):
                n_tokens = float(sum(int(rows[i][1].sum()) for i in batch))
                optimizer.zero_grad(set_to_none=True)
                scheduler.apply(step)
                total = 0.0
                for _, logp, _, mask in scored_micro_batches(
                    model,
                    [rows[i][0] for i in batch],
                    [rows[i][1] for i in batch],
                    Sampling(),
                    micro_batch_size=micro_batch_size,
                    device=device,
                    share_heads=share_heads,
                ):
                    loss = -(logp * mask.float()).sum() / n_tokens
                    loss.backward()
                    total += float(loss.item())
                clip_gradients(optimizer, max_grad_norm)
                optimizer.step()
                scheduler.stepped()
                if step == 0:
                    first = total
                last_epoch.append(total)
                step += 1
                if on_step is not None:
                    on_step(step, total)
        optimizer.zero_grad(set_to_none=True)
    finally:
        optimizer.close()
    model.eval()
    return SFTResult(
        steps=step,
        transcripts=len(rows),
        tokens=sum(int(m.sum()) for _, m in rows),
        loss_first=first,
        loss_last=sum(last_epoch) / max(len(last_epoch), 1),
        seconds=time.perf_counter() - t0,
    )


def mean_progress(
    engine: Any,
    tasks: Sequence[Task],
    sampling: SamplingParams,
    *,
    max_turns: int,
    max_tokens: int,
    seed: int = 0,
    batch_size: int = 32,
    trials: int = 1,
    prompt: str = "full",
) -> float:
    """Mean progress of ``trials`` seeded episodes per task with ``engine`` (``prompt``:
    what the environments show)."""
    specs = [
        EpisodeSpec(t, trial, sampling_seed=derive_seed(seed, "progress", t.id, trial))
        for t in tasks
        for trial in range(trials)
    ]
    config = RolloutConfig(
        sampling=sampling,
        max_turns=max_turns,
        max_tokens=max_tokens,
        batch_size=batch_size,
        prompt=prompt,
    )
    records = run_rollouts(
        engine, lambda: DomainRouter(max_steps=max_turns, prompt=prompt), specs, config
    )
    return sum(r.progress for r in records) / len(records) if records else 0.0


def complete(record: EpisodeRecord) -> bool:
    """Whether an oracle transcript is whole: the episode ended by itself (the user was done
    or a terminal tool ran), with no error, every turn passed. A transcript cut by the token
    or turn cap would teach the model to stop mid-task."""
    return (
        record.termination in ("user_stop", "terminal_tool")
        and not record.errors
        and record.progress == 1.0
    )


def cut_message(records: Sequence[EpisodeRecord], max_tokens: int, *, every: bool = False) -> str:
    """One line saying which oracle transcripts were left out and why."""
    bad = [r for r in records if not complete(r)]
    capped = [r for r in bad if r.termination in ("max_tokens", "max_turns", "max_steps")]
    what = (
        "every oracle transcript" if every else f"{len(bad)} of {len(records)} oracle transcripts"
    )
    if capped and len(capped) == len(bad):
        longest = max(len(r.token_ids) for r in capped)
        return (
            f"{what} cut at warm_start.max_tokens={max_tokens} (cut after {longest} tokens; "
            "raise warm_start.max_tokens)" + ("" if every else ": left out of the warm start")
        )
    first = bad[0]
    return (
        f"{what} did not finish ({first.task_id}: termination {first.termination}, progress "
        f"{first.progress:.2f}{', ' + first.errors[-1] if first.errors else ''})"
        + ("" if every else ": left out of the warm start")
    )


def warm_start(
    config: TrainConfig,
    model: Any,
    chat: ChatTemplate,
    tasks: Sequence[Task],
    *,
    generator: Callable[[], Any],
    device: str,
    on_fitted: Callable[[], None],
    master_weights: bool = True,
    before_fit: Callable[[Sequence[EpisodeRecord]], None] | None = None,
) -> dict[str, float]:
    """Fine-tune ``model`` on the oracle's transcripts of ``tasks`` (``warm_start`` section:
    its ``tasks`` of them, by ``select``), and measure the mean progress of the generator on
    the tasks trained on before and after (``warm_start.measure``; ``rollout.group_size``
    seeded episodes each, with the rollout's sampling).

    Args:
        config: The run's configuration.
        model: The learner (trained in place, left in training mode).
        chat: The generator's chat template (it tokenizes the transcripts).
        tasks: The pool to transcribe.
        generator: Returns the generator; called only to measure (``warm_start.measure``),
            so a warm start that measures nothing starts no engine.
        device: Where ``model`` is.
        on_fitted: Called after the fit, before the second measurement (the generator
            catches up with the new weights).
        master_weights: Float32 master weights for a bf16/fp16 model.
        before_fit: Called with the transcripts to train on, before anything is measured
            or fitted (the learner's owner checks its memory against their real lengths).

    Only whole transcripts are trained on (:func:`complete`): one cut by
    ``warm_start.max_tokens`` (or the turn cap) is left out with a line on stderr, and
    counted in ``transcripts_cut``; when every one is cut the warm start stops with a
    one-line error.

    Returns:
        ``tasks``, ``pool_tasks``, ``transcripts_cut``, ``progress_before``/
        ``progress_after``, the fit (``steps``, ``transcripts``, ``tokens``, ``loss_first``,
        ``loss_last``, ``seconds``), ``oracle_progress`` and ``total_seconds``.

    Raises:
        ConfigError: no tasks, or no whole transcript to train on.
    """
    ws = config.warm_start
    pool = list(tasks)
    if not pool:
        raise ConfigError("warm_start: no tasks to transcribe")
    t0 = time.perf_counter()
    collected = Progress(len(pool), "oracle transcripts", "episode", show=False)  # to a parent
    records = oracle_transcripts(
        pool, chat, max_tokens=ws.max_tokens, prompt=config.rollout.prompt,
        on_record=lambda record: collected.update(),
    )  # fmt: skip
    collected.close()
    whole = [i for i, r in enumerate(records) if complete(r)]
    cut = len(pool) - len(whole)
    if not whole:
        raise ConfigError(cut_message(records, ws.max_tokens, every=True))
    if cut:
        print(f"rods: warm start: {cut_message(records, ws.max_tokens)}", file=sys.stderr)
    if ws.select == "shortest":
        order = sorted(whole, key=lambda i: (sum(records[i].assistant_mask), pool[i].id))
    else:
        order = whole
    order = order[: ws.tasks] if ws.tasks else order
    chosen = [pool[i] for i in order]
    records = [records[i] for i in order]
    if before_fit is not None:
        before_fit(records)
    rc = config.rollout
    measure_sampling = SamplingParams(
        max_tokens=turn_tokens(config, chat), temperature=rc.temperature, top_p=rc.top_p
    )

    def progress() -> float:
        return mean_progress(
            generator(), chosen, measure_sampling, max_turns=rc.max_turns,
            max_tokens=rc.max_tokens, seed=config.seed, trials=rc.group_size,
            prompt=rc.prompt,
        )  # fmt: skip

    out: dict[str, float] = {
        "tasks": float(len(chosen)),
        "pool_tasks": float(len(pool)),
        "transcripts_cut": float(cut),
    }
    if ws.measure:
        out["progress_before"] = progress()
    n_steps = ws.epochs * -(-len(records) // ws.batch_size)
    # shown unless log.progress is off; reported to a parent (rods experiment) either way
    bar = Progress(n_steps, "warm start (SFT)", "batch", leave=False, show=config.log.progress)

    def on_step(step: int, loss: float) -> None:
        bar.update(loss=f"{loss:.3f}")

    result = supervised_finetune(
        model,
        records,
        on_step=on_step,
        epochs=ws.epochs,
        lr=ws.lr,
        schedule=ws.scheduler,
        batch_size=ws.batch_size,
        micro_batch_size=ws.micro_batch_size,
        seed=config.seed,
        device=device,
        share_heads=config.model.share_heads,
        master_weights=master_weights,
    )
    bar.close()
    model.train()
    on_fitted()
    out.update(result.metrics())
    out["oracle_progress"] = sum(r.progress for r in records) / len(records)
    if ws.measure:
        out["progress_after"] = progress()
    out["total_seconds"] = time.perf_counter() - t0
    return out
