"""The model policy of ``rods train``: a transformers learner trained with GRPO, and its generator.

:class:`ModelPolicy` implements :class:`rods_agent.policy.Policy` for ``policy: model``:

* **Learner**: a Hugging Face causal LM, float32 on CPU and bfloat16 on GPU (``model.dtype:
  auto``), optionally with gradient checkpointing and LoRA adapters (peft). With
  ``model.path: null`` a tiny random chat model is built under ``<out>/tiny-model`` (CPU
  smoke runs and tests), its tokenizer trained with the domains' policies and tool schemas.
* **Generator**: ``model.engine: transformers`` samples with the learner itself (shared
  weights, nothing to sync); ``model.engine: vllm`` runs vLLM in-process and loads the
  learner's weights after every update (``VLLMEngine.load_weights``; with LoRA the adapters
  are merged into the synced weights), sleeping during the update on GPU.
* **Rollouts**: ``rollout.group_size`` episodes per task, every random choice derived from
  (run seed, step, task, trial), so a resumed run repeats an unbroken one. Each record
  carries the weights version that produced it.
* **Update**: the learner re-scores every sampled token before the update (the PPO
  denominator); the gap to the engine's log-probabilities is logged and corrected by the
  truncated importance weight; then :func:`rods_agent.grpo.grpo_step` (``grpo.epochs``
  times), a scheduler step, and the weights version goes up.
* **Checkpoints**: :meth:`save` / :meth:`load` write the trainable weights, the optimizer,
  the scheduler, the random states and the weights version, atomically.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rods_agent.config import TrainConfig
from rods_agent.engines.base import SamplingParams, derive_seed
from rods_agent.grpo import (
    LossConfig,
    Sampling,
    TrainSequence,
    group_advantages,
    grpo_step,
    mismatch_metrics,
    score_sequences,
)
from rods_agent.policy import Group, RolloutBatch
from rods_agent.progress import Progress
from rods_agent.rollout import (
    DomainRouter,
    EpisodeRecord,
    EpisodeSpec,
    RolloutConfig,
    RolloutStats,
    run_rollouts,
)
from rods_env.errors import ConfigError
from rods_env.fileio import atomic_write, write_json
from rods_env.task import Task

log = logging.getLogger(__name__)

WEIGHTS_FILE = "trainable.pt"
STATE_FILE = "policy_state.pt"
META_FILE = "policy.json"


def resolve_device(device: str) -> str:
    """``auto`` is ``cuda`` when a GPU is visible, else ``cpu``."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str) -> str:
    """``auto`` is float32 on CPU, bfloat16 on GPU."""
    if dtype != "auto":
        return dtype
    return "float32" if device.startswith("cpu") else "bfloat16"


def tokenizer_texts(domains: Sequence[str]) -> list[str]:
    """Text the tiny model's tokenizer is trained on besides its generic corpus: each
    domain's policy and tool schemas (weighted, so they take few tokens)."""
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain

    texts: list[str] = []
    for name in domains:
        domain = load_any_domain(name)
        texts.append(domain.policy)
        schemas = (
            domain.tool_schemas()
            if isinstance(domain, BenchmarkDomain)
            else domain.toolkit.schemas()
        )
        texts.extend(json.dumps(schema) for schema in schemas)
    return texts * 5


def ensure_model(config: TrainConfig, out_dir: Path) -> Path:
    """The model folder of ``config``: ``model.path``, or the tiny model under
    ``<out>/tiny-model`` (built once; a resumed run finds it)."""
    if config.model.path is not None:
        path = Path(config.model.path)
        if not path.is_dir():
            raise ConfigError(f"model.path: no model folder '{path}'")
        return path
    path = Path(out_dir) / "tiny-model"
    if not (path / "config.json").exists():
        from rods_agent.tiny_model import build_tiny_model

        mc = config.model
        build_tiny_model(
            path,
            hidden_size=mc.tiny_hidden_size,
            layers=mc.tiny_layers,
            heads=max(2, mc.tiny_hidden_size // 64),
            kv_heads=1,
            intermediate_size=2 * mc.tiny_hidden_size,
            seed=config.seed,
            extra_texts=tokenizer_texts([_domain_name(e) for e in config.env]),
        )
    return path


def _domain_name(env: str) -> str:
    from rods_env.registry import load_any_domain

    return load_any_domain(env).name


def _torch_bytes(obj: Any) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


class ModelPolicy:
    """A transformers model trained with GRPO (see the module doc).

    Args:
        config: The run's configuration.
        out_dir: The run directory (the tiny model is built under it).
    """

    def __init__(self, config: TrainConfig, out_dir: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.out_dir = Path(out_dir)
        mc, rc = config.model, config.rollout
        if rc.temperature <= 0:
            raise ConfigError(
                "rollout.temperature must be > 0 to train (greedy decoding has no policy "
                f"gradient); got {rc.temperature}"
            )
        self.device = resolve_device(mc.device)
        self.dtype_name = resolve_dtype(mc.dtype, self.device)
        if self.device.startswith("cpu"):
            torch.set_num_threads(mc.threads)
        self.model_path = ensure_model(config, self.out_dir)
        kwargs: dict[str, Any] = {"gguf_file": mc.gguf_file} if mc.gguf_file else {}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_path), **kwargs)
            model: Any = AutoModelForCausalLM.from_pretrained(
                str(self.model_path), dtype=getattr(torch, self.dtype_name), **kwargs
            )
        except OSError as exc:
            raise ConfigError(f"cannot load model '{self.model_path}': {exc}") from None
        model = model.to(self.device)
        if mc.gradient_checkpointing:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
            model.config.use_cache = True  # generation still uses the cache (eval mode)
        self.lora = mc.lora_rank > 0
        if self.lora:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(
                model,
                LoraConfig(
                    r=mc.lora_rank,
                    lora_alpha=mc.lora_alpha,
                    lora_dropout=mc.lora_dropout,
                    target_modules=list(mc.lora_target_modules),
                    task_type="CAUSAL_LM",
                ),
            )
        self.learner = model
        self.reference: Any = None
        if config.grpo.kl_coef > 0 and not self.lora:
            import copy

            self.reference = copy.deepcopy(model).eval()
            for p in self.reference.parameters():
                p.requires_grad_(False)
        params = [p for p in self.learner.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params, lr=config.grpo.lr, weight_decay=config.grpo.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.weights_version = 0
        self.update_seconds: dict[str, float] = {}
        """Where the last update's time went: ``score``, ``step``, ``sync``, ``total``."""
        self.engine = self._make_engine()
        self.sampling = Sampling(temperature=rc.temperature, top_p=rc.top_p)
        self.loss_config = LossConfig(
            clip_low=config.grpo.clip_low,
            clip_high=config.grpo.clip_high,
            kl_coef=config.grpo.kl_coef,
            loss_agg=config.grpo.loss_agg,
            tis_cap=config.grpo.tis_cap,
            max_grad_norm=config.grpo.max_grad_norm,
            micro_batch_size=config.grpo.micro_batch_size,
        )
        self.users: Any = None
        if rc.user == "llm":
            from rods_agent.user import UserBatcher

            self.users = UserBatcher(self.engine, SamplingParams(max_tokens=96, temperature=0.7))

    # -- construction helpers ----------------------------------------------------------------
    def _lr_factor(self, step: int) -> float:
        g = self.config.grpo
        if g.warmup_steps and step < g.warmup_steps:
            return (step + 1) / g.warmup_steps
        total = max(1, self.config.steps - g.warmup_steps)
        done = min(1.0, max(0, step - g.warmup_steps) / total)
        if g.scheduler == "linear":
            return 1.0 - done
        if g.scheduler == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * done))
        return 1.0

    def _make_engine(self) -> Any:
        mc = self.config.model
        if mc.engine == "transformers":
            from rods_agent.engines.hf import TransformersEngine

            engine: Any = TransformersEngine(
                self.learner, self.tokenizer, device=self.device, reuse_kv=mc.reuse_kv
            )
            self.learner.train()  # the engine switched it to eval; it switches per call
            return engine
        from rods_agent.engines.vllm_engine import VLLMEngine

        options: dict[str, Any] = {}
        if not self.device.startswith("cpu"):
            options = {
                "gpu_memory_utilization": mc.vllm_gpu_memory_utilization,
                "enable_sleep_mode": mc.vllm_sleep,
            }
        engine = VLLMEngine(
            self.model_path,
            dtype=self.dtype_name,
            max_model_len=self.config.rollout.max_tokens,
            seed=self.config.seed,
            **options,
        )
        if self.lora:
            self._sync_generator(engine)
        return engine

    # -- weights -------------------------------------------------------------------------------
    def generator_state(self) -> dict[str, Any]:
        """The learner's weights under the plain model's names (LoRA merged in), for vLLM."""
        import torch

        if not self.lora:
            return {k: v.detach() for k, v in self.learner.state_dict().items()}
        base = self.learner.get_base_model()
        state: dict[str, Any] = {}
        with torch.no_grad():
            for name, module in base.named_modules():
                if hasattr(module, "base_layer") and hasattr(module, "get_delta_weight"):
                    weight = module.base_layer.weight.detach().clone()
                    for adapter in module.active_adapters:
                        weight += module.get_delta_weight(adapter).to(weight.dtype)
                    state[f"{name}.weight"] = weight
            for key, value in base.state_dict().items():
                if "lora_" in key:
                    continue
                clean = key.replace(".base_layer", "")
                state.setdefault(clean, value.detach())
        return state

    def _sync_generator(self, engine: Any = None) -> None:
        engine = engine if engine is not None else self.engine
        engine.weights_version = self.weights_version
        reset_kv = getattr(engine, "reset_kv", None)
        if callable(reset_kv):  # kept keys and values belong to the old weights
            reset_kv()
        load = getattr(engine, "load_weights", None)
        if callable(load):
            load(self.generator_state())
            engine.weights_version = self.weights_version

    # -- Policy -------------------------------------------------------------------------------
    def rollout_config(self, batch_size: int) -> RolloutConfig:
        """The rollout limits and sampling of this run."""
        rc = self.config.rollout
        return RolloutConfig(
            sampling=SamplingParams(
                max_tokens=rc.max_new_tokens, temperature=rc.temperature, top_p=rc.top_p
            ),
            max_turns=rc.max_turns,
            max_tokens=rc.max_tokens,
            batch_size=max(1, batch_size),
            tool_format=rc.tool_format,
        )

    def _make_env(self) -> DomainRouter:
        from rods_agent.user import LLMUser

        users = self.users
        make_user = (lambda: LLMUser(self.engine, batcher=users)) if users is not None else None
        # The env's own step limit sits above the rollout's turn cap, which ends episodes.
        return DomainRouter(
            max_steps=self.config.rollout.max_turns + 1,
            make_user=make_user,
            solo=self.config.rollout.user == "solo",
        )

    def _bar(self, total: int, desc: str, unit: str) -> Any:
        """A tqdm bar on stderr (None when ``log.progress`` is off; hidden off a terminal)."""
        if not self.config.log.progress:
            return None
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, leave=False, disable=None, file=sys.stderr)

    def _run(
        self, specs: list[EpisodeSpec], stats: RolloutStats, desc: str = "rollouts"
    ) -> list[EpisodeRecord]:
        batch = self.config.rollout.batch_size or len(specs)
        bar = self._bar(len(specs), desc, "episode")
        try:
            return run_rollouts(
                self.engine,
                self._make_env,
                specs,
                self.rollout_config(batch),
                stats=stats,
                users=self.users,
                on_record=(lambda record: bar.update(1)) if bar is not None else None,
            )
        finally:
            if bar is not None:
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
        records = self._run(specs, stats)
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
        dropped = {"dropped_error": 0.0, "dropped_overlong": 0.0}
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
            sleep = getattr(self.engine, "sleep", None)
            if callable(sleep) and not self.device.startswith("cpu"):
                sleep()
        t_score = time.perf_counter()
        for s, lp in zip(seqs, self._score(self.learner, seqs), strict=True):
            s.old_logp = lp * s.loss_mask
        if self.config.grpo.kl_coef > 0:
            for s, lp in zip(seqs, self._reference_scores(seqs), strict=True):
                s.ref_logp = lp * s.loss_mask
        timings = {"score": time.perf_counter() - t_score}
        metrics.update(mismatch_metrics(seqs))
        step_metrics: dict[str, float] = {}
        t_step = time.perf_counter()
        for _ in range(self.config.grpo.epochs):
            step_metrics = grpo_step(
                self.learner, seqs, self.optimizer, self.loss_config, self.sampling,
                device=self.device, share_heads=self.config.model.share_heads,
            )  # fmt: skip
        timings["step"] = time.perf_counter() - t_step
        metrics["lr"] = float(self.optimizer.param_groups[0]["lr"])
        self.scheduler.step()
        self.weights_version += 1
        wake = getattr(self.engine, "wake_up", None)
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
        metrics["learner_tokens"] = float(
            sum(len(s.token_ids) for s in seqs) * (1 + self.config.grpo.epochs)
        )
        timings["total"] = time.perf_counter() - t0
        self.update_seconds = timings
        log.info("update %d: %s", step, {k: round(v, 2) for k, v in timings.items()})
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
        if self.lora:
            with self.learner.disable_adapter():
                return self._score(self.learner, seqs)
        return self._score(self.reference, seqs)

    def evaluate(self, tasks: Sequence[Task], *, step: int) -> dict[str, Any]:
        """``log.eval_k`` seeded episodes per task with the current weights, through
        :func:`rods_agent.evaluate.evaluate`: pass^k, mean progress and the breakdowns of
        ``rods eval`` (timings left out: the loop records them), plus ``progress`` and
        ``success`` as every policy reports them."""
        from rods_agent.evaluate import evaluate

        k = self.config.log.eval_k
        user: Any = "solo" if self.config.rollout.user == "solo" else "scripted"
        if self.config.rollout.user == "llm":
            from rods_agent.user import LLMUser

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
        ).to_dict()
        for timing in ("gen_seconds", "env_seconds"):
            summary.pop(timing, None)
        summary["progress"] = summary["mean_progress"]
        summary["success"] = summary["pass_k"]["1"]
        return summary

    def warm_start(self, tasks: Sequence[Task]) -> dict[str, float]:
        """Fine-tune on the oracle's transcripts of ``tasks`` (``warm_start`` section: its
        ``tasks`` of them, by ``select``), and measure the mean progress on the tasks
        trained on before and after (``warm_start.measure``; ``rollout.group_size`` seeded
        episodes each, with the rollout's sampling).

        Returns:
            ``tasks``, ``pool_tasks``, ``progress_before``/``progress_after``, the fit
            (``steps``, ``transcripts``, ``tokens``, ``loss_first``, ``loss_last``,
            ``seconds``), ``oracle_progress`` and ``total_seconds``.
        """
        from rods_agent.sft import mean_progress, oracle_transcripts, supervised_finetune

        ws = self.config.warm_start
        pool = list(tasks)
        if not pool:
            raise ConfigError("warm_start: no tasks to transcribe")
        t0 = time.perf_counter()
        records = oracle_transcripts(pool, self.engine.chat, max_tokens=ws.max_tokens)
        if ws.select == "shortest":
            order = sorted(
                range(len(pool)), key=lambda i: (sum(records[i].assistant_mask), pool[i].id)
            )
        else:
            order = list(range(len(pool)))
        order = order[: ws.tasks] if ws.tasks else order
        chosen = [pool[i] for i in order]
        records = [records[i] for i in order]
        rc = self.config.rollout
        measure_sampling = SamplingParams(
            max_tokens=rc.max_new_tokens, temperature=rc.temperature, top_p=rc.top_p
        )

        def progress() -> float:
            return mean_progress(
                self.engine, chosen, measure_sampling, max_turns=rc.max_turns,
                max_tokens=rc.max_tokens, seed=self.config.seed, trials=rc.group_size,
            )  # fmt: skip

        out: dict[str, float] = {"tasks": float(len(chosen)), "pool_tasks": float(len(pool))}
        if ws.measure:
            out["progress_before"] = progress()
        n_steps = ws.epochs * -(-len(records) // ws.batch_size)
        bar = (
            Progress(n_steps, "warm start", "step", leave=False)
            if self.config.log.progress
            else None
        )

        def on_step(step: int, loss: float) -> None:
            if bar is not None:
                bar.update(loss=f"{loss:.3f}")

        result = supervised_finetune(
            self.learner,
            records,
            on_step=on_step,
            epochs=ws.epochs,
            lr=ws.lr,
            schedule=ws.scheduler,
            batch_size=ws.batch_size,
            micro_batch_size=ws.micro_batch_size,
            seed=self.config.seed,
            device=self.device,
            share_heads=self.config.model.share_heads,
        )
        if bar is not None:
            bar.close()
        self.learner.train()
        self._sync_generator()
        out.update(result.metrics())
        out["oracle_progress"] = sum(r.progress for r in records) / len(records)
        if ws.measure:
            out["progress_after"] = progress()
        out["total_seconds"] = time.perf_counter() - t0
        return out

    # -- checkpoints ---------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Write the trainable weights, optimizer, scheduler, random states and weights
        version to ``directory`` (each file atomically)."""
        import torch

        directory = Path(directory)
        trainable = {
            n: p.detach().cpu() for n, p in self.learner.named_parameters() if p.requires_grad
        }
        atomic_write(directory / WEIGHTS_FILE, _torch_bytes(trainable))
        state = {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "torch_rng": torch.random.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "weights_version": self.weights_version,
        }
        atomic_write(directory / STATE_FILE, _torch_bytes(state))
        write_json(
            directory / META_FILE,
            {
                "model_path": str(self.model_path),
                "lora": self.lora,
                "weights_version": self.weights_version,
                "trainable_tensors": len(trainable),
            },
        )

    def load(self, directory: Path) -> None:
        """Restore what :meth:`save` wrote (and sync the generator)."""
        import torch

        directory = Path(directory)
        for name in (WEIGHTS_FILE, STATE_FILE):
            if not (directory / name).is_file():
                raise ConfigError(f"{directory}: not a model-policy checkpoint (no {name})")
        trainable = torch.load(directory / WEIGHTS_FILE, map_location=self.device)
        params = dict(self.learner.named_parameters())
        unknown = sorted(set(trainable) - set(params))
        if unknown:
            raise ConfigError(
                f"{directory}: checkpoint weights do not fit this model ({unknown[0]}, ...)"
            )
        with torch.no_grad():
            for name, value in trainable.items():
                params[name].copy_(value.to(params[name].dtype))
        state = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        torch.random.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.weights_version = int(state["weights_version"])
        self._sync_generator()

    def save_model(self, directory: Path) -> Path:
        """Save the learner as a plain model folder (LoRA merged in) with its tokenizer,
        loadable as ``model.path``."""
        directory = Path(directory)
        model = self.learner
        if self.lora:
            model = self.learner.merge_and_unload()
            self.learner = model
            self.lora = False
        # transformers writes the folder file by file: write it aside, then rename it into
        # place, so a kill never leaves a half-written model where a run would load it.
        tmp = directory.with_name(f".{directory.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        self.tokenizer.save_pretrained(tmp)
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(tmp, directory)
        return directory

    def close(self) -> None:
        """Release the generator and the models."""
        close = getattr(self.engine, "close", None)
        if callable(close):
            close()
        self.reference = None
