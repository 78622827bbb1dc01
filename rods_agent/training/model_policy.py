"""The model policy of ``rods train``: a transformers learner trained with GRPO, and its generator.

:class:`ModelPolicy` implements :class:`rods_agent.training.policy.Policy` for ``policy:
model``. It composes the parts of this package:

* **Learner** (:mod:`~rods_agent.training.learner`): the Hugging Face model as configured
  (dtype, gradient checkpointing, LoRA; a tiny random model with ``model.path: null``), the
  KL reference, the optimizer and its schedule (:mod:`~rods_agent.training.numerics`).
* **Generator** (:mod:`~rods_agent.training.generator`): the learner itself
  (``model.engine: transformers``) or in-process vLLM, synced after every update.
* **Rollouts**: ``rollout.group_size`` episodes per task, every random choice derived from
  (run seed, step, task, trial), so a resumed run repeats an unbroken one. Each record
  carries the weights version that produced it.
* **Update**: the learner re-scores every sampled token before the update (the PPO
  denominator); the gap to the engine's log-probabilities is logged and corrected by the
  truncated importance weight; then :func:`rods_agent.training.grpo.grpo_step` (``grpo.epochs``
  times, each an optimizer step when a token has a non-zero advantage, in every mode: a
  batch whose groups all tied leaves the weights, the optimizer and the schedule as they
  were); the weights version goes up when a step happened.
* **Environments**: mode ``envtuning`` rolls out its training episodes in environments
  made with ``actionable_hints=True`` (Environment Tuning's corrective hints on failed
  calls); every evaluation, in every mode, runs in the plain environment.
* **Warm start** (:mod:`~rods_agent.training.warm_start`): supervised fine-tuning on the
  oracle's transcripts before GRPO.
* **Checkpoints** (:mod:`~rods_agent.training.model_checkpoint`): :meth:`save` /
  :meth:`load` write the trainable weights, the optimizer, the scheduler, the random states
  and the weights version, atomically.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from rods_agent.console.progress import Progress, is_terminal
from rods_agent.engines import quiet_transformers
from rods_agent.engines.base import SamplingParams, derive_seed
from rods_agent.engines.memory import (
    GB,
    MemoryEstimate,
    budget_warning,
    estimate,
    model_sizes,
    warm_start_warning,
)
from rods_agent.rollouts.batch import (
    DomainRouter,
    EpisodeRecord,
    EpisodeSpec,
    RolloutConfig,
    RolloutStats,
    run_rollouts,
)
from rods_agent.training.config import TrainConfig
from rods_agent.training.generator import (
    generator_state,
    learner_chat,
    make_engine,
    sync_generator,
    turn_tokens,
    vllm_cache_tokens,
)
from rods_agent.training.grpo import (
    ActivationRates,
    LossConfig,
    Sampling,
    TrainSequence,
    group_advantages,
    grpo_step,
    mismatch_metrics,
    score_sequences,
)
from rods_agent.training.learner import Learner, frozen_copy, load_learner
from rods_agent.training.model_checkpoint import (
    REFERENCE_FILE,
    load_tensors,
    load_training_state,
    save_model_folder,
    save_tensors,
    save_training_state,
    weights_fingerprint,
)
from rods_agent.training.numerics import LRSchedule, MasterWeightAdamW, make_optimizer
from rods_agent.training.policy import Group, RolloutBatch
from rods_env.errors import ConfigError
from rods_env.task import Task

log = logging.getLogger(__name__)


class ModelPolicy:
    """A transformers model trained with GRPO (see the module doc).

    Args:
        config: The run's configuration.
        out_dir: The run directory (the tiny model is built under it).
    """

    def __init__(self, config: TrainConfig, out_dir: Path) -> None:
        self.config = config
        self.out_dir = Path(out_dir)
        rc, g = config.rollout, config.grpo
        if rc.temperature <= 0:
            raise ConfigError(
                "rollout.temperature must be > 0 to train (greedy decoding has no policy "
                f"gradient); got {rc.temperature}"
            )
        if config.model.engine == "vllm":
            from rods_agent.engines.vllm_engine import require_vllm

            require_vllm()  # now, not at the first rollout after a warm start
        if not is_terminal(sys.stderr):
            quiet_transformers()  # their loading bars would only litter a log file
        loaded = load_learner(config, self.out_dir)
        self.device = loaded.device
        self.dtype_name = loaded.dtype
        self.model_path = loaded.path
        self.tokenizer = loaded.tokenizer
        self.lora = loaded.lora
        # adapters mean something on their base only: checkpoints record which base
        self.base_fingerprint = (
            weights_fingerprint(loaded.path) if loaded.lora and Path(loaded.path).is_dir() else None
        )
        self.learner = loaded.model
        self.reference: Any = None
        """The KL reference of full fine-tuning: a frozen copy of the model GRPO starts from."""
        self.reference_adapters: dict[str, Any] | None = None
        """With LoRA, the reference is the model with its adapters off, or, after a warm
        start, with these (the warm-started) adapter values."""
        self._reference_unsaved = False
        if g.kl_coef > 0 and not self.lora:
            self.reference = frozen_copy(self.learner)
        self.optimizer, self.scheduler = self._make_optimizer()
        self.weights_version = 0
        self.update_seconds: dict[str, float] = {}
        """Where the last update's time went: ``score``, ``step``, ``sync``, ``total``."""
        self.chat = learner_chat(config, loaded)
        """The generator's chat template, there before the generator is started."""
        self._engine: Any = None
        self.sampling = Sampling(temperature=rc.temperature, top_p=rc.top_p)
        self.loss_config = LossConfig(
            clip_low=g.clip_low,
            clip_high=g.clip_high,
            kl_coef=g.kl_coef,
            loss_agg=g.loss_agg,
            tis_cap=g.tis_cap,
            max_grad_norm=g.max_grad_norm,
            micro_batch_size=g.micro_batch_size,
        )
        self._users: Any = None
        self._rates: ActivationRates | None = None
        self.memory = self._memory_estimate()
        """The run's worst case in memory (:mod:`rods_agent.engines.memory`)."""
        warning = budget_warning(self.memory, config.model.memory_budget_gb)
        if warning is not None and self.device.startswith("cpu"):
            log.warning(warning)

    def _memory_estimate(self) -> MemoryEstimate:
        import os

        rc, mc, g = self.config.rollout, self.config.model, self.config.grpo
        params = list(self.learner.parameters())
        space = os.environ.get("VLLM_CPU_KVCACHE_SPACE")  # GiB, vLLM-CPU's own setting
        kv_per_token = model_sizes(self.learner.config)[1]
        vllm_kv = float(int(space) << 30) if space else float(1 << 30)
        tokens = vllm_cache_tokens(self.config, self.learner, self.dtype_name)
        if mc.engine == "vllm" and tokens is not None:  # what make_engine asks vLLM for
            size = 4 if self.dtype_name in ("float32", "auto") else 2
            vllm_kv = float(max(16 << 20, tokens * kv_per_token * size))
        # cascade decoding keeps a packed copy of the weights (a CPU, the kept-cache path)
        packed = mc.engine == "transformers" and mc.reuse_kv and self.device.startswith("cpu")
        # the update's activations, measured on the learner (CPU runs: the budget is the
        # machine's memory; on a GPU they live in the GPU's): a GRPO micro-batch; the
        # warm start's is checked when its transcripts are known (:meth:`warm_start`)
        update = 0.0
        if self.device.startswith("cpu"):
            self._rates = ActivationRates.measure(self.learner, self.sampling)
            scored = rc.max_turns * turn_tokens(self.config, self.chat)
            update = self._rates.update_bytes(
                rows=min(g.micro_batch_size, rc.tasks_per_step * rc.group_size),
                tokens=rc.max_tokens,
                scored=min(rc.max_tokens, scored),
            )
        return estimate(
            params=sum(p.numel() for p in params),
            kv_per_token=kv_per_token,
            dtype_bytes=params[0].element_size() if params else 4,
            trainable=sum(p.numel() for p in params if p.requires_grad),
            master_weights=mc.master_weights,
            batch=rc.batch_size or rc.tasks_per_step * rc.group_size,
            max_tokens=rc.max_tokens,
            engine=mc.engine,
            vllm_kv_bytes=vllm_kv,
            packed_copy=packed,
            update_bytes=update,
            reference=self.reference is not None,
        )

    @property
    def engine(self) -> Any:
        """The generator, started on first use (a ``rods sft`` that measures nothing never
        starts vLLM's engine and its KV cache) at the learner's current weights."""
        if self._engine is None:
            learner = Learner(
                self.learner, self.tokenizer, self.model_path, self.device, self.dtype_name,
                self.lora,
            )  # fmt: skip
            self._engine = make_engine(self.config, learner)
            budget = self.config.model.memory_budget_gb * GB
            set_budget = getattr(self._engine, "set_cache_budget", None)
            if budget > 0 and callable(set_budget):
                set_budget(budget - self.memory.held)
            # the learner may have left its folder's weights (a warm start, a checkpoint)
            self._sync_generator()
        return self._engine

    @property
    def generator_started(self) -> bool:
        """Whether the generator has been started (see :attr:`engine`)."""
        return self._engine is not None

    @property
    def users(self) -> Any:
        """The batcher of the LLM-played users' turns (``rollout.user: llm``), else None."""
        if self._users is None and self.config.rollout.user == "llm":
            from rods_agent.rollouts.user import SCENARIO_MAX_TOKENS, UserBatcher

            # rods' users cap their replies at 96 tokens themselves; a benchmark's scenario
            # users write up to SCENARIO_MAX_TOKENS
            self._users = UserBatcher(
                self.engine, SamplingParams(max_tokens=SCENARIO_MAX_TOKENS, temperature=0.7)
            )
        return self._users

    def _make_optimizer(self) -> tuple[MasterWeightAdamW, LRSchedule]:
        g = self.config.grpo
        params = [p for p in self.learner.parameters() if p.requires_grad]
        optimizer = make_optimizer(
            params,
            lr=g.lr,
            weight_decay=g.weight_decay,
            master_weights=self.config.model.master_weights,
        )
        schedule = LRSchedule(
            optimizer, total=self.config.steps, warmup=g.warmup_steps, schedule=g.scheduler
        )
        return optimizer, schedule

    def check_prompts(self, tasks: Sequence[Task]) -> dict[str, int]:
        """Stop now if an opening prompt of ``tasks`` does not fit the token caps (see
        :func:`rods_agent.training.guards.check_prompts_fit`); returns the longest opening
        of each domain, in tokens."""
        from rods_agent.training.guards import check_prompts_fit

        return check_prompts_fit(self.config, self.chat, tasks)

    # -- weights -------------------------------------------------------------------------------
    def generator_state(self) -> dict[str, Any]:
        """The learner's weights under the plain model's names (LoRA merged in), for vLLM."""
        return generator_state(self.learner, lora=self.lora)

    def _sync_generator(self) -> None:
        if self._engine is None:  # not started: it starts from the learner's weights then
            return
        sync_generator(self._engine, self.learner, lora=self.lora, version=self.weights_version)

    # -- Policy -------------------------------------------------------------------------------
    def rollout_config(self, batch_size: int) -> RolloutConfig:
        """The rollout limits and sampling of this run."""
        rc = self.config.rollout
        return RolloutConfig(
            sampling=SamplingParams(
                max_tokens=turn_tokens(self.config, self.chat),
                temperature=rc.temperature,
                top_p=rc.top_p,
            ),
            max_turns=rc.max_turns,
            max_tokens=rc.max_tokens,
            batch_size=max(1, batch_size),
            tool_format=rc.tool_format,
            prompt=rc.prompt,
            stop_at_call_end=rc.stop_at_call_end,
        )

    def env_kwargs(self, *, training: bool) -> dict[str, Any]:
        """Extra environment arguments of this run's rollouts: Environment Tuning's
        ``actionable_hints`` for mode ``envtuning``'s training rollouts only (an
        evaluation never gets hints)."""
        if training and self.config.mode == "envtuning":
            return {"actionable_hints": True}
        return {}

    def _make_env(self, *, training: bool = False) -> DomainRouter:
        from rods_agent.rollouts.user import LLMUser

        users = self.users
        make_user = (lambda: LLMUser(self.engine, batcher=users)) if users is not None else None
        # The env's own step limit sits above the rollout's turn cap, which ends episodes.
        return DomainRouter(
            max_steps=self.config.rollout.max_turns + 1,
            make_user=make_user,
            solo=self.config.rollout.user == "solo",
            prompt=self.config.rollout.prompt,
            **self.env_kwargs(training=training),
        )

    def _bar(self, total: int, desc: str, unit: str) -> Progress:
        """A bar on stderr when ``log.progress`` is on (hidden off a terminal); reported to
        a parent process (``rods experiment``) either way."""
        return Progress(total, desc, unit, lines=0, leave=False, show=self.config.log.progress)

    def _run(
        self,
        specs: list[EpisodeSpec],
        stats: RolloutStats,
        desc: str = "rollouts",
        *,
        training: bool = False,
    ) -> list[EpisodeRecord]:
        batch = self.config.rollout.batch_size or len(specs)
        bar = self._bar(len(specs), desc, "episode")
        try:
            return run_rollouts(
                self.engine,
                partial(self._make_env, training=training),
                specs,
                self.rollout_config(batch),
                stats=stats,
                users=self.users,
                on_record=lambda record: bar.update(1),
            )
        finally:
            bar.close()

    def reward(self, record: EpisodeRecord) -> float:
        """The episode's reward for advantages: its progress, or 0/1 success."""
        if self.config.rollout.reward == "success":
            return 1.0 if record.success else 0.0
        return float(record.progress)

    def rollouts(self, tasks: Sequence[Task], *, step: int) -> RolloutBatch:
        """``rollout.group_size`` seeded episodes of each task with the current weights."""
        g = self.config.rollout.group_size
        specs = [
            EpisodeSpec(
                task,
                trial,
                sampling_seed=derive_seed(self.config.seed, "rollout", step, task.id, trial),
            )
            for task in tasks
            for trial in range(g)
        ]
        stats = RolloutStats()
        records = self._run(specs, stats, training=True)
        groups = []
        for i, task in enumerate(tasks):
            episodes = records[i * g : (i + 1) * g]
            groups.append(Group(task, episodes, [self.reward(r) for r in episodes]))
        rest = max(
            0.0, stats.wall_seconds - stats.gen_seconds - stats.env_seconds - stats.user_seconds
        )
        return RolloutBatch(
            groups=groups,
            seconds={
                "generate": stats.gen_seconds,
                "env": stats.env_seconds,
                "user": stats.user_seconds,
                "rollout_other": rest,
            },
            tokens=stats.completion_tokens,
        )

    def _sequences(self, groups: Sequence[Group]) -> tuple[list[TrainSequence], dict[str, float]]:
        """The episodes as training sequences, with their group-relative advantages.

        Episodes that ended in an engine or environment error carry no loss (the failure is
        not the policy's doing), nor, with ``grpo.mask_truncated``, episodes with a completion
        cut by the token cap (DAPO's overlong filtering); both still count in their group's
        statistics.
        """
        import torch

        seqs: list[TrainSequence] = []
        dropped = {"dropped_error": 0.0, "dropped_overlong": 0.0, "dropped_empty": 0.0}
        for group in groups:
            adv = group_advantages(
                torch.tensor([group.rewards]), scale_std=self.config.grpo.scale_std
            )[0].tolist()
            for record, advantage in zip(group.episodes, adv, strict=True):
                if record.termination == "error":
                    dropped["dropped_error"] += 1
                    continue
                if self.config.grpo.mask_truncated and "length" in record.finish_reasons:
                    dropped["dropped_overlong"] += 1
                    continue
                if not any(record.assistant_mask):
                    dropped["dropped_empty"] += 1
                    continue
                mask = torch.tensor(record.assistant_mask, dtype=torch.long)
                seqs.append(
                    TrainSequence(
                        token_ids=torch.tensor(record.token_ids, dtype=torch.long),
                        loss_mask=mask,
                        advantage=float(advantage),
                        engine_logp=torch.tensor(record.logprobs, dtype=torch.float32) * mask,
                    )
                )
        return seqs, dropped

    def update(self, groups: Sequence[Group], *, step: int) -> dict[str, float]:
        """One GRPO update on the kept groups (see the module doc); returns its metrics."""
        t0 = time.perf_counter()
        seqs, dropped = self._sequences(groups)
        metrics: dict[str, float] = dict(dropped)
        if self.config.model.engine == "vllm" and self.config.model.vllm_sleep:
            sleep = getattr(self._engine, "sleep", None)
            if callable(sleep) and not self.device.startswith("cpu"):
                sleep()
        t_score = time.perf_counter()
        scored = self.config.grpo.epochs > 1 or not self.config.grpo.fused_scoring
        forward_tokens = float(sum(len(s.token_ids) for s in seqs)) if scored else 0.0
        if scored:
            for s, lp in zip(seqs, self._score(self.learner, seqs), strict=True):
                s.old_logp = lp * s.loss_mask
        # else one update per batch: grpo_step takes the old log-probabilities from its own
        # forward pass (the same weights), so no separate scoring pass runs
        if self.config.grpo.kl_coef > 0:
            for s, lp in zip(seqs, self._reference_scores(seqs), strict=True):
                s.ref_logp = lp * s.loss_mask
        timings = {"score": time.perf_counter() - t_score}
        step_metrics: dict[str, float] = {}
        t_step = time.perf_counter()
        stepped = 0
        for _ in range(self.config.grpo.epochs):
            metrics["lr"] = self.scheduler.apply(step)
            step_metrics = grpo_step(
                self.learner, seqs, self.optimizer, self.loss_config, self.sampling,
                device=self.device, share_heads=self.config.model.share_heads,
            )  # fmt: skip
            forward_tokens += step_metrics["forward_tokens"]
            if step_metrics["optimizer_step"]:  # else nothing changed: no schedule step
                self.scheduler.stepped()
                stepped += 1
        timings["step"] = time.perf_counter() - t_step
        metrics.update(mismatch_metrics([s for s in seqs if s.old_logp is not None]))
        metrics["optimizer_steps"] = float(stepped)
        metrics["loss_tokens"] = float(sum(s.n_loss_tokens for s in seqs))
        # of them, the tokens with a gradient: a row whose advantage is 0 has none (no KL)
        kl = self.config.grpo.kl_coef > 0
        metrics["signal_tokens"] = float(
            sum(s.n_loss_tokens for s in seqs if kl or s.advantage != 0.0)
        )
        if stepped:
            self.weights_version += 1
        wake = getattr(self._engine, "wake_up", None)
        if self.config.model.engine == "vllm" and callable(wake):
            wake(["weights"])
        t_sync = time.perf_counter()
        self._sync_generator()
        if self.config.model.engine == "vllm" and callable(wake):
            wake(["kv_cache"])
        timings["sync"] = time.perf_counter() - t_sync
        metrics.update({k: v for k, v in step_metrics.items() if k != "seconds"})
        metrics["weights_version"] = float(self.weights_version)
        # Tokens the learner ran forward (scoring, then each epoch): divide by the loop's
        # time.update for the learner's tokens/s. No wall-clock value goes into these
        # metrics, so a resumed run logs the same numbers as an unbroken one.
        metrics["learner_tokens"] = forward_tokens
        timings["total"] = time.perf_counter() - t0
        self.update_seconds = timings
        log.info(
            "step %d update: %s", step, ", ".join(f"{k} {v:.2f} s" for k, v in timings.items())
        )
        return metrics

    def _score(self, model: Any, seqs: Sequence[TrainSequence]) -> list[Any]:
        """Log-probabilities of each sequence's tokens under ``model`` (no gradient)."""
        return score_sequences(
            model,
            seqs,
            self.sampling,
            micro_batch_size=self.config.grpo.micro_batch_size,
            device=self.device,
            share_heads=self.config.model.share_heads,
        )

    def _reference_scores(self, seqs: Sequence[TrainSequence]) -> list[Any]:
        if not self.lora:
            return self._score(self.reference, seqs)
        if self.reference_adapters is None:
            with self.learner.disable_adapter():
                return self._score(self.learner, seqs)
        import torch

        adapters = self._trainable()
        current = {n: p.detach().clone() for n, p in adapters.items()}
        with torch.no_grad():
            for n, p in adapters.items():
                p.copy_(self.reference_adapters[n])
        try:
            return self._score(self.learner, seqs)
        finally:
            with torch.no_grad():
                for n, p in adapters.items():
                    p.copy_(current[n])

    def _trainable(self) -> dict[str, Any]:
        return {n: p for n, p in self.learner.named_parameters() if p.requires_grad}

    def _adopt_reference(self, trainable: dict[str, Any]) -> None:
        """Make ``trainable`` (values of the learner's trainable weights) the KL reference."""
        import torch

        if self.lora:
            self.reference_adapters = {
                n: v.detach().to(self.device).clone() for n, v in trainable.items()
            }
            return
        params = dict(self.reference.named_parameters())
        missing = sorted(set(trainable) - set(params))
        if missing:
            raise ConfigError(f"the KL reference does not fit this model ({missing[0]}, ...)")
        with torch.no_grad():
            for n, v in trainable.items():
                params[n].copy_(v)

    def evaluate(self, tasks: Sequence[Task], *, step: int) -> dict[str, Any]:
        """``log.eval_k`` seeded episodes per task with the current weights, through
        :func:`rods_agent.evaluation.evaluate.evaluate`: pass^k, mean progress and the breakdowns of
        ``rods eval`` (timings left out: the loop records them), plus ``progress`` and
        ``success`` as every policy reports them.

        The per-task results go to ``<out>/eval/step-NNNNNN/`` (``rods eval``'s files:
        confidence intervals over tasks and seeds are computed from them; a run killed
        mid-evaluation resumes it)."""
        from rods_agent.evaluation.evaluate import evaluate

        k = self.config.log.eval_k
        user: Any = "solo" if self.config.rollout.user == "solo" else "scripted"
        if self.config.rollout.user == "llm":
            from rods_agent.rollouts.user import LLMUser

            def user() -> LLMUser:
                return LLMUser(self.engine)

        summary = evaluate(
            self.engine,
            tasks,
            k=k,
            rollout=self.rollout_config(self.config.rollout.batch_size or len(tasks) * k),
            user=user,
            progress=self.config.log.progress,
            meta={"step": step, "weights_version": self.weights_version},
            seed=derive_seed(self.config.seed, "eval", step),
            out=self.out_dir / "eval" / f"step-{step:06d}",
        ).to_dict()
        for timing in ("gen_seconds", "env_seconds"):
            summary.pop(timing, None)
        summary["progress"] = summary["mean_progress"]
        summary["success"] = summary["pass_k"]["1"]
        return summary

    def warm_start(self, tasks: Sequence[Task]) -> dict[str, float]:
        """Fine-tune the learner on the oracle's transcripts of ``tasks`` and sync the
        generator (see :func:`rods_agent.training.warm_start.warm_start`).

        GRPO then starts afresh from the warm-started model: a new optimizer (its master
        weights copied from the warm-started weights) and, with ``grpo.kl_coef > 0``, the
        warm-started model as the KL reference (written to ``<out>/reference.pt`` with the
        first checkpoint, so a resumed run finds it).
        """
        from rods_agent.training.warm_start import warm_start

        self.optimizer.close()  # the warm start's own optimizer takes the gradients
        try:
            out = warm_start(
                self.config, self.learner, self.chat, tasks,
                generator=lambda: self.engine, device=self.device,
                on_fitted=self._sync_generator, master_weights=self.config.model.master_weights,
                before_fit=self._check_warm_start_memory,
            )  # fmt: skip
        finally:
            self.optimizer, self.scheduler = self._make_optimizer()
        if self.config.grpo.kl_coef > 0:
            self._adopt_reference(self._trainable())
            self._reference_unsaved = True
        return out

    def warm_start_memory(self, records: Sequence[EpisodeRecord]) -> MemoryEstimate:
        """The run's worst case while the warm start fits ``records``: :attr:`memory` with
        the update's activations of a micro-batch of its longest transcripts (padded to the
        longest; on a GPU the activations live in its memory and count 0 here)."""
        update = 0.0
        if self._rates is not None and records:
            update = self._rates.update_bytes(
                rows=min(self.config.warm_start.micro_batch_size, len(records)),
                tokens=max(len(r.token_ids) for r in records),
                scored=max(sum(r.assistant_mask) for r in records),
            )
        return replace(self.memory, update=update)

    def _check_warm_start_memory(self, records: Sequence[EpisodeRecord]) -> None:
        warning = warm_start_warning(
            self.warm_start_memory(records),
            self.config.model.memory_budget_gb,
            rows=min(self.config.warm_start.micro_batch_size, len(records)),
            tokens=max((len(r.token_ids) for r in records), default=0),
        )
        if warning is not None and self.device.startswith("cpu"):
            log.warning(warning)

    # -- checkpoints ---------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Write the trainable weights, optimizer, scheduler, random states and weights
        version to ``directory`` (each file atomically); the first time after a warm start
        with a KL penalty, also the reference (``<out>/reference.pt``)."""
        if self._reference_unsaved:
            if self.lora:
                reference = self.reference_adapters or {}
            else:
                names = set(self._trainable())
                reference = {
                    n: p.detach() for n, p in self.reference.named_parameters() if n in names
                }
            save_tensors(self.out_dir / REFERENCE_FILE, reference)
            self._reference_unsaved = False
        save_training_state(
            directory, self.learner, self.optimizer, self.scheduler,
            weights_version=self.weights_version, model_path=self.model_path, lora=self.lora,
            base_fingerprint=self.base_fingerprint,
        )  # fmt: skip

    def load(self, directory: Path) -> None:
        """Restore what :meth:`save` wrote (and sync the generator); a warm-started run
        with a KL penalty also gets its reference back from ``<out>/reference.pt``."""
        self.weights_version = load_training_state(
            directory, self.learner, self.optimizer, self.scheduler,
            base=Path(self.model_path), base_fingerprint=self.base_fingerprint,
        )  # fmt: skip
        if self.config.warm_start.enabled and self.config.grpo.kl_coef > 0:
            path = self.out_dir / REFERENCE_FILE
            if not path.is_file():
                raise ConfigError(
                    f"{path}: missing; a warm-started run with grpo.kl_coef > 0 keeps its KL "
                    "reference (the model after the warm start) there"
                )
            self._adopt_reference(load_tensors(path, device=self.device))
        self._sync_generator()

    def save_model(self, directory: Path) -> Path:
        """Save the learner as a plain model folder (LoRA merged in) with its tokenizer,
        loadable as ``model.path``."""
        if self.lora:
            self.learner = self.learner.merge_and_unload()
            self.lora = False
        return save_model_folder(self.learner, self.tokenizer, directory)

    def close(self) -> None:
        """Release the generator, the optimizer's hooks and the models."""
        self.optimizer.close()
        close = getattr(self._engine, "close", None)
        if callable(close):
            close()
        self._engine = None
        self.reference = None
