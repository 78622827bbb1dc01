"""What a run's memory will hold, estimated before it starts, against a stated budget.

A ``rods train`` run holds the learner's weights, its optimizer (float32 master weights and
AdamW's two moments for bf16 training), the generator's keys and values and, with vLLM, a
second copy of the weights beside vLLM's fixed KV cache. The run with the transformers
engine before issue 41 kept every conversation's whole keys and values and stacked them into
one padded batch cache per generation call (a second copy, then a third preallocated one):
~10 GB at evaluation, so two runs side by side were killed by the kernel.

:func:`estimate` adds up the parts for the worst case the configuration allows (every
conversation of a generation batch at ``rollout.max_tokens``, or a micro-batch of the
update at its longest, whichever holds more: generation and update take turns; the
update's activations are measured on the model by the caller,
:class:`rods_agent.training.grpo.ActivationRates`); :func:`budget_warning` is
the one line a run prints before it starts when that worst case exceeds
``model.memory_budget_gb``; :func:`warm_start_warning` the warm start's, once its
transcripts (and so their real lengths) are known. The run **warns and goes on** rather than
refusing: the worst case is rarely reached (the conversations of a step end at different
lengths, most well short of the cap), and the transformers engine's kept cache is bounded
by what the budget leaves after the weights and optimizer (:meth:`TransformersEngine.set_cache_budget`:
least recently used conversations are dropped and prefilled again), so what the budget
cannot bound is the decoding batch's own buffers (rows x (own tokens + the turn's cap)) and
the update's activations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GB = 1e9


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a run holds, part by part (see :func:`estimate`)."""

    weights: float
    optimizer: float
    kv: float
    generator: float
    update: float = 0.0
    """What the update's forward pass keeps for its backward (one micro-batch)."""
    reference: float = 0.0
    """A frozen copy of the weights, the KL penalty's reference."""

    @property
    def held(self) -> float:
        """What the run holds throughout: weights, optimizer, generator, reference."""
        return self.weights + self.optimizer + self.generator + self.reference

    @property
    def total(self) -> float:
        """The peak: generation and update take turns, so the larger of the generation
        batch's keys and values and the update's activations counts, not both."""
        return self.held + max(self.kv, self.update)

    def line(self) -> str:
        return (
            f"{self.total / GB:.1f} GB = weights {self.weights / GB:.1f} + optimizer "
            f"{self.optimizer / GB:.1f} + generator {self.generator / GB:.1f}"
            + (f" + KL reference {self.reference / GB:.1f}" if self.reference else "")
            + " + the larger "
            f"of keys/values {self.kv / GB:.1f} and the update's activations "
            f"{self.update / GB:.1f}"
        )


def model_sizes(config: Any) -> tuple[int, int]:
    """``(parameters, key/value elements per token over all layers)`` of a transformers
    model config (its text config for a multimodal one)."""
    c = getattr(config, "text_config", None) or config
    hidden = int(c.hidden_size)
    heads = int(c.num_attention_heads)
    kv_heads = int(getattr(c, "num_key_value_heads", None) or heads)
    head = int(getattr(c, "head_dim", None) or hidden // heads)
    layers = int(c.num_hidden_layers)
    inter = int(getattr(c, "intermediate_size", 4 * hidden))
    attn = hidden * head * (2 * heads + 2 * kv_heads)
    params = layers * (attn + 3 * hidden * inter + 2 * hidden) + hidden
    embed = int(c.vocab_size) * hidden
    params += embed if getattr(c, "tie_word_embeddings", False) else 2 * embed
    return params, 2 * layers * kv_heads * head


def estimate(
    *,
    params: int,
    kv_per_token: int,
    dtype_bytes: int,
    trainable: int,
    master_weights: bool,
    batch: int,
    max_tokens: int,
    engine: str,
    vllm_kv_bytes: float | None = None,
    packed_copy: bool = False,
    update_bytes: float = 0.0,
    reference: bool = False,
) -> MemoryEstimate:
    """The worst case of a run: ``params`` weights of ``dtype_bytes``; AdamW over
    ``trainable`` parameters (two float32 moments, a float32 master copy when the weights
    are narrower and ``master_weights``, and the gradients); keys and values
    (``kv_per_token`` elements of ``dtype_bytes``) of ``batch`` conversations at
    ``max_tokens`` (the transformers engine), or vLLM's own weights copy and its fixed cache
    (``vllm_kv_bytes``; default ``batch x max_tokens`` of keys and values). With
    ``packed_copy`` the transformers engine's generator holds a second copy of the weights
    (cascade decoding's fused, oneDNN-packed products on a CPU: :mod:`~rods_agent.engines.cascade`).
    ``update_bytes``: what the update's forward keeps for its backward (measured on the
    model: :class:`rods_agent.training.grpo.ActivationRates`); ``reference``: a frozen copy of
    the weights for the KL penalty (full fine-tuning with ``grpo.kl_coef`` > 0)."""
    weights = float(params * dtype_bytes)
    optimizer = trainable * (8.0 + dtype_bytes + (4.0 if master_weights and dtype_bytes < 4 else 0))
    kv = float(batch) * max_tokens * kv_per_token * dtype_bytes
    generator = 0.0
    if engine == "vllm":
        generator = weights + (vllm_kv_bytes if vllm_kv_bytes is not None else kv)
        kv = 0.0
    elif packed_copy:
        generator = weights
    return MemoryEstimate(
        weights, optimizer, kv, generator, float(update_bytes), weights if reference else 0.0
    )


def budget_warning(est: MemoryEstimate, budget_gb: float) -> str | None:
    """The one line a run says before it starts when ``est`` exceeds ``budget_gb`` (None
    when it fits or the budget is 0: no check)."""
    if budget_gb <= 0 or est.total <= budget_gb * GB:
        return None
    return (
        f"memory: this run may hold {est.line()} (every conversation of a generation batch "
        f"at rollout.max_tokens, a micro-batch of the update at its longest), over "
        f"model.memory_budget_gb {budget_gb:g}; the kept keys and values are bounded by the "
        "budget, the rest is not: lower rollout.batch_size, rollout.max_tokens or "
        "grpo.micro_batch_size, turn on model.gradient_checkpointing, or raise the budget"
    )


def warm_start_warning(
    est: MemoryEstimate, budget_gb: float, *, rows: int, tokens: int
) -> str | None:
    """The one line the warm start says before it fits when ``est`` (its activations in
    ``update``: ``rows`` transcripts padded to its longest, ``tokens``) exceeds
    ``budget_gb`` (None when it fits or the budget is 0)."""
    if budget_gb <= 0 or est.total <= budget_gb * GB:
        return None
    return (
        f"memory: the warm start may hold {est.line()} (a micro-batch of {rows} transcripts "
        f"of its longest, {tokens} tokens), over model.memory_budget_gb {budget_gb:g}: lower "
        "warm_start.micro_batch_size or warm_start.max_tokens (longer transcripts are left "
        "out), turn on model.gradient_checkpointing, or raise the budget"
    )
