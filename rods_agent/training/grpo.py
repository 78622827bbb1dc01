"""GRPO: group-relative advantages and the clipped token-level policy loss, as tensor functions.

One function per piece, each with its formula; :func:`grpo_step` puts them together for one
optimizer step over micro-batches. The references are DeepSeekMath's GRPO, DAPO's decoupled
clip range (``clip_low`` 0.2 / ``clip_high`` 0.28) and TRL 1.16's ``GRPOTrainer`` (whose
advantage and loss formulas the tests check against).

**Sequences.** A whole multi-turn episode is one sequence: the prompt, every completion as
sampled, every observation as the model saw it. Only the tokens the model sampled carry
loss (the rollout's assistant mask); a token's log-probability is that of the distribution
it was sampled from (temperature, then top-p: :mod:`rods_agent.engines.sampling`), for the
engine and for the learner alike.

**Three log-probabilities per token.** ``engine_logp``: what the generator (the transformers
engine or vLLM) reported when it sampled; ``old_logp``: the same token scored by the learner
before the update (as verl does: it is the denominator of the PPO ratio, so the ratio is
exactly 1 at the first micro-step); ``logp``: the learner during the update. The gap between
the first two is the engine-vs-learner mismatch (kernels, precision, batching): the
truncated importance weight ``min(exp(old_logp - engine_logp), tis_cap)`` corrects the
policy gradient for it (Yao et al., "Your efficient RL framework secretly brings you
off-policy RL training", 2025).

**Normalizers are global.** The loss of a micro-batch is its share of the whole batch's
mean (divided by the batch's token count, or sequence count), so gradient accumulation over
any micro-batch size gives the same update as one big batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from rods_agent.engines.sampling import sampling_entropy, sampling_logprobs

if TYPE_CHECKING:
    import torch

LossAggregation = Literal["token-mean", "seq-mean-token-mean"]
LOSS_AGGREGATIONS: tuple[str, ...] = ("token-mean", "seq-mean-token-mean")


# -- advantages ---------------------------------------------------------------------------
def group_advantages(
    rewards: torch.Tensor, *, scale_std: bool = True, eps: float = 1e-4
) -> torch.Tensor:
    """Group-relative advantages: ``(r - mean(group)) / (std(group) + eps)``.

    The standard deviation is the unbiased (Bessel-corrected) one, as in TRL; a group of one
    has no spread, and a group whose rewards are all equal gets zero advantages.

    Args:
        rewards: ``[groups, G]`` rewards, one row per task.
        scale_std: Divide by the group's standard deviation (False: Dr. GRPO's centred
            rewards).
        eps: Added to the standard deviation.

    Returns:
        ``[groups, G]`` advantages.
    """
    import torch

    rewards = rewards.float()
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if not scale_std:
        return centred
    if rewards.shape[-1] < 2:
        return torch.zeros_like(rewards)
    std = rewards.std(dim=-1, keepdim=True, unbiased=True)
    return centred / (std + eps)


# -- per-token terms ------------------------------------------------------------------------
def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped objective per token, as a loss: ``-min(r A, clip(r, 1-lo, 1+hi) A)``.

    Args:
        logp: Learner log-probabilities (with gradient), ``[..., T]``.
        old_logp: The learner's log-probabilities before the update, same shape.
        advantages: Broadcastable to ``logp`` (one per sequence: ``[..., 1]``).
        clip_low: The ratio is clipped below at ``1 - clip_low``.
        clip_high: ... and above at ``1 + clip_high`` (DAPO's "clip higher").

    Returns:
        ``(loss, clipped)``: the per-token loss, and where the clipped term was the one
        taken (its gradient is zero there).
    """
    import torch

    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped_ratio = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clipped = clipped_ratio * advantages
    loss = -torch.min(unclipped, clipped)
    was_clipped = (clipped < unclipped).detach()
    return loss, was_clipped


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(policy || reference) per token:
    ``exp(ref - logp) - (ref - logp) - 1`` (non-negative, unbiased under the policy)."""
    import torch

    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1.0


def truncated_importance_weight(
    old_logp: torch.Tensor, engine_logp: torch.Tensor, cap: float | None
) -> torch.Tensor:
    """``min(exp(old_logp - engine_logp), cap)``: corrects for sampling from the engine's
    slightly different distribution (no gradient; 1 everywhere when ``cap`` is None)."""
    import torch

    if cap is None:
        return torch.ones_like(old_logp)
    return torch.exp(old_logp - engine_logp).clamp(max=cap).detach()


def aggregate_loss(
    token_loss: torch.Tensor,
    mask: torch.Tensor,
    mode: LossAggregation,
    *,
    n_tokens: float | None = None,
    n_sequences: float | None = None,
) -> torch.Tensor:
    """Reduce per-token losses ``[B, T]`` to a scalar.

    * ``token-mean``: every loss token of the batch weighs the same
      (``sum(loss * mask) / n_tokens`` over the whole accumulated batch; DAPO; TRL's
      ``dapo``, not ``bnpo``, which normalizes by each local micro-batch's tokens);
    * ``seq-mean-token-mean``: each sequence's token mean, averaged over sequences
      (``sum_i mean_t(loss_i) / n_sequences``; the original GRPO; TRL's ``grpo``).

    Args:
        token_loss: ``[B, T]``.
        mask: ``[B, T]``, 1 on tokens that carry loss.
        mode: One of :data:`LOSS_AGGREGATIONS`.
        n_tokens: The whole batch's loss tokens, when this is one micro-batch of it
            (default: this batch's).
        n_sequences: The whole batch's sequences with loss tokens (default: this batch's).
    """
    mask = mask.to(token_loss.dtype)
    if mode == "token-mean":
        denom = float(mask.sum().item()) if n_tokens is None else float(n_tokens)
        return (token_loss * mask).sum() / max(denom, 1.0)
    if mode == "seq-mean-token-mean":
        per_seq = (token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        has = (mask.sum(-1) > 0).to(token_loss.dtype)
        denom = float(has.sum().item()) if n_sequences is None else float(n_sequences)
        return (per_seq * has).sum() / max(denom, 1.0)
    raise ValueError(f"unknown loss aggregation {mode!r}; one of {', '.join(LOSS_AGGREGATIONS)}")


# -- sequences and scoring ------------------------------------------------------------------
@dataclass
class TrainSequence:
    """One episode as the update sees it.

    Attributes:
        token_ids: ``[T]`` the whole conversation.
        loss_mask: ``[T]`` 1 on sampled (assistant) tokens that carry loss.
        advantage: The episode's advantage (every loss token gets it).
        engine_logp: ``[T]`` the generator's log-probabilities (0 off the mask).
        old_logp: ``[T]`` the learner's before the update (filled by :func:`score_sequences`).
        ref_logp: ``[T]`` the frozen reference's (only with a KL penalty).
    """

    token_ids: torch.Tensor
    loss_mask: torch.Tensor
    advantage: float
    engine_logp: torch.Tensor
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None

    @property
    def n_loss_tokens(self) -> int:
        """Tokens that carry loss."""
        return int(self.loss_mask.sum().item())


@dataclass(frozen=True)
class Sampling:
    """The sampling distribution the engine drew from (the learner scores the same one)."""

    temperature: float = 1.0
    top_p: float = 1.0


def micro_batches(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    """Consecutive chunks of at most ``size``."""
    for start in range(0, len(items), max(1, size)):
        yield list(items[start : start + max(1, size)])


def pad_rows(rows: Iterable[torch.Tensor], value: float | int, device: Any) -> torch.Tensor:
    """1-D tensors right-padded with ``value`` into one ``[rows, longest]`` tensor on ``device``."""
    from torch.nn.utils.rnn import pad_sequence

    return pad_sequence(list(rows), batch_first=True, padding_value=value).to(device)


def score_tokens(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    sampling: Sampling,
    *,
    entropy: bool = False,
    head: SharedHead | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities ``[B, T]`` of each token under ``model``'s sampling distribution,
    computed only where ``loss_mask`` is 1 (0 elsewhere).

    Logits are computed only at the positions that predict a loss token
    (``logits_to_keep``), which keeps the vocabulary-sized tensors small: a conversation's
    prompt and observations are most of its tokens and carry no loss.

    Args:
        head: Keys and values of the rows' common first tokens (see :class:`SharedHead`);
            the forward pass then runs on the rest of each row only.

    Returns:
        ``(logp, entropy)``; the entropy ``[B, T]`` of the sampling distribution when asked.
    """
    import torch

    batch, length = input_ids.shape
    start = head.length if head is not None else 0
    positions = loss_mask[:, start + 1 :].bool().any(dim=0).nonzero().squeeze(-1)
    logp = torch.zeros((batch, length), dtype=torch.float32, device=input_ids.device)
    ent = torch.zeros_like(logp) if entropy else None
    if positions.numel() == 0:
        return logp, ent
    rest = input_ids[:, start:]
    if head is None:
        out = model(
            input_ids=rest,
            attention_mask=attention_mask,
            logits_to_keep=positions,
            use_cache=False,
        )
    else:
        out = model(
            input_ids=rest,
            attention_mask=attention_mask,
            position_ids=torch.arange(start, length, device=rest.device).expand(batch, -1),
            past_key_values=head.cache(batch),
            logits_to_keep=positions,
            use_cache=True,
        )
    logits = out.logits  # [B, n_positions, V]
    targets = rest[:, positions + 1]
    scored = sampling_logprobs(
        logits, targets, temperature=sampling.temperature, top_p=sampling.top_p
    )
    logp = logp.index_copy(1, start + positions + 1, scored)
    if ent is not None:
        h = sampling_entropy(logits, temperature=sampling.temperature, top_p=sampling.top_p)
        ent = ent.index_copy(1, start + positions + 1, h.float())
    keep = loss_mask.bool()
    return torch.where(keep, logp, torch.zeros_like(logp)), ent


def saved_bytes(model: Any, tokens: int, scored: int, sampling: Sampling) -> int:
    """Bytes that :func:`score_tokens` (with the entropy, as the update asks) keeps for the
    backward pass on one row of ``tokens`` tokens whose last ``scored`` carry the loss,
    measured on ``model`` itself: every tensor saved for the backward (PyTorch's
    ``saved_tensors_hooks``), each storage once, the weights and buffers left out.

    The model's own layers, dtype, attention and gradient checkpointing are what is
    counted, so no per-architecture formula is kept. Nothing moves: no backward runs, and
    the random state is restored (the token ids are a fixed ramp).
    """
    import torch

    params = next(iter(model.parameters()))
    owned = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr and ptr not in owned:
            kept[ptr] = max(kept.get(ptr, 0), storage.nbytes())
        return t

    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 0) or 2)
    ids = (torch.arange(tokens, device=params.device) % min(vocab, 1000)).unsqueeze(0)
    ones = torch.ones_like(ids)
    loss = torch.zeros_like(ids)
    loss[:, tokens - scored :] = 1
    training = model.training
    model.train()  # as the update runs (gradient checkpointing acts in training mode only)
    try:
        with (
            torch.random.fork_rng(devices=[]),
            torch.enable_grad(),
            torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        ):
            out = score_tokens(model, ids, ones, loss, sampling, entropy=True)
            del out
    finally:
        model.train(training)
    return sum(kept.values())


@dataclass(frozen=True)
class ActivationRates:
    """What the update keeps for its backward pass, per token of a row and per scored
    position (a logit row), measured on a model by :meth:`measure`."""

    per_token: float
    per_scored: float

    @classmethod
    def measure(cls, model: Any, sampling: Sampling) -> ActivationRates:
        """Three forward passes of at most 32 tokens on ``model`` (:func:`saved_bytes`):
        the differences give the rates, so the model's own layers are what count."""
        short, long, few, many = 16, 32, 2, 6
        base = saved_bytes(model, long, few, sampling)
        per_token = (base - saved_bytes(model, short, few, sampling)) / (long - short)
        per_scored = (saved_bytes(model, long, many, sampling) - base) / (many - few)
        return cls(max(0.0, per_token), max(0.0, per_scored))

    def update_bytes(self, *, rows: int, tokens: int, scored: int) -> float:
        """About what one micro-batch of the update keeps for its backward pass: ``rows``
        rows of ``tokens`` tokens, each with at most ``scored`` loss tokens (logits are
        computed where any row has a loss token: up to ``rows x scored`` positions).

        What the backward allocates as it goes is not counted: measured on SmolLM2-135M
        (float32, 2 rows of 1,024 and 2,048 tokens, a CPU), the process's peak rose
        1.5 and 1.3 times this."""
        positions = min(tokens, rows * scored)
        return rows * tokens * self.per_token + rows * positions * self.per_scored


MIN_SHARED_HEAD = 256
"""Fewest common first tokens worth a shared forward pass (a domain's policy and tool
schemas are thousands)."""


class SharedHead:
    """The keys and values of first tokens that several sequences share (the system prompt
    and tool schemas of a domain), computed once per step instead of once per sequence.

    With gradients on, the forward pass of the head keeps its graph; the micro-batches use
    leaf copies of its keys and values, whose gradients add up over micro-batches, and
    :meth:`backward` pushes the total through the head's graph once. The gradient is the
    same as running each whole sequence on its own (up to float rounding).
    """

    def __init__(self, model: Any, token_ids: torch.Tensor, device: Any) -> None:
        import torch

        self.length = int(token_ids.shape[0])
        out = model(input_ids=token_ids[None].to(device), use_cache=True, logits_to_keep=1)
        self._live = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        grad = torch.is_grad_enabled()
        self.layers = [
            (k.detach().requires_grad_(grad), v.detach().requires_grad_(grad))
            for k, v in self._live
        ]

    def cache(self, batch: int) -> Any:
        """A cache holding the head for ``batch`` rows (views: no copy)."""
        from transformers import DynamicCache

        return DynamicCache(
            ddp_cache_data=[
                (k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in self.layers
            ]
        )

    def backward(self) -> None:
        """Send the gradients gathered on the head's keys and values through its graph."""
        import torch

        outputs, grads = [], []
        for (k, v), (lk, lv) in zip(self._live, self.layers, strict=True):
            for live, leaf in ((k, lk), (v, lv)):
                if leaf.grad is not None and live.requires_grad:
                    outputs.append(live)
                    grads.append(leaf.grad)
        if outputs:
            torch.autograd.backward(outputs, grads)
        self._live, self.layers = [], []


def head_groups(
    token_rows: Sequence[torch.Tensor], loss_rows: Sequence[torch.Tensor], min_length: int
) -> list[tuple[int, list[int]]]:
    """Rows grouped by a common head: ``(head length, row indices)`` per group.

    A row joins the first group whose first row it shares at least ``min_length`` tokens
    with; the head stops before the group's first loss token (its logits come from the
    position before). Rows that share nothing long enough get a head of 0.
    """
    groups: list[tuple[int, list[int]]] = []
    for i, (ids, mask) in enumerate(zip(token_rows, loss_rows, strict=True)):
        nonzero = mask.nonzero()
        first_loss = int(nonzero[0].item()) if nonzero.numel() else len(ids)
        placed = False
        for g, (length, members) in enumerate(groups):
            lead = token_rows[members[0]]
            n = min(length, first_loss - 1, len(ids) - 1)
            if n < min_length:
                continue
            same = int((lead[:n] == ids[:n]).long().cumprod(0).sum().item())
            if same >= min_length:
                groups[g] = (same, [*members, i])
                placed = True
                break
        if not placed:
            groups.append((max(0, min(first_loss - 1, len(ids) - 1)), [i]))
    return [(length if len(m) > 1 and length >= min_length else 0, m) for length, m in groups]


def scored_micro_batches(
    model: Any,
    token_rows: Sequence[torch.Tensor],
    loss_rows: Sequence[torch.Tensor],
    sampling: Sampling,
    *,
    micro_batch_size: int,
    device: Any = "cpu",
    entropy: bool = False,
    share_heads: bool = True,
) -> Iterator[tuple[list[int], torch.Tensor, torch.Tensor | None, torch.Tensor]]:
    """Score rows micro-batch by micro-batch: yields ``(row indices, logp, entropy, mask)``
    with ``[B, T]`` tensors on ``device``.

    Rows are grouped by their shared head (:func:`head_groups`; a domain's system prompt
    and tools), whose forward pass runs once per group. A caller training on the scores
    calls ``backward`` on each micro-batch's loss before asking for the next; the heads'
    gradients are sent through at the end of each group. Gradient checkpointing disables the
    sharing (the checkpointed forward does not take a cache).
    """
    import torch

    share = share_heads and not getattr(model, "is_gradient_checkpointing", False)
    groups = (
        head_groups(token_rows, loss_rows, MIN_SHARED_HEAD)
        if share
        else [(0, list(range(len(token_rows))))]
    )
    for length, members in groups:
        head = SharedHead(model, token_rows[members[0]][:length], device) if length else None
        for mb in micro_batches(members, micro_batch_size):
            start = head.length if head is not None else 0
            ids = pad_rows([token_rows[i] for i in mb], 0, device)
            attn = pad_rows([torch.ones_like(token_rows[i][start:]) for i in mb], 0, device)
            if head is not None:
                attn = torch.cat([attn.new_ones((len(mb), start)), attn], dim=1)
            mask = pad_rows([loss_rows[i] for i in mb], 0, device)
            logp, ent = score_tokens(model, ids, attn, mask, sampling, entropy=entropy, head=head)
            yield mb, logp, ent, mask
        if head is not None:
            if torch.is_grad_enabled():
                head.backward()
            del head


def score_sequences(
    model: Any,
    sequences: Sequence[TrainSequence],
    sampling: Sampling,
    *,
    micro_batch_size: int,
    device: Any = "cpu",
    share_heads: bool = True,
) -> list[torch.Tensor]:
    """The model's log-probabilities of each sequence's loss tokens (no gradient, eval mode),
    as ``[T]`` CPU tensors aligned with ``token_ids``."""
    import torch

    was_training = model.training
    model.eval()
    out: list[torch.Tensor | None] = [None] * len(sequences)
    try:
        with torch.no_grad():
            for mb, logp, _, _ in scored_micro_batches(
                model,
                [s.token_ids for s in sequences],
                [s.loss_mask for s in sequences],
                sampling,
                micro_batch_size=micro_batch_size,
                device=device,
                share_heads=share_heads,
            ):
                for row, i in enumerate(mb):
                    out[i] = logp[row, : len(sequences[i].token_ids)].float().cpu()
    finally:
        if was_training:
            model.train()
    return [x for x in out if x is not None]


@dataclass(frozen=True)
class LossConfig:
    """The knobs of the GRPO loss (the ``grpo`` config section maps onto it)."""

    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    loss_agg: LossAggregation = "token-mean"
    tis_cap: float | None = 2.0
    max_grad_norm: float = 1.0
    micro_batch_size: int = 4


def grpo_step(
    model: Any,
    sequences: Sequence[TrainSequence],
    optimizer: Any,
    config: LossConfig,
    sampling: Sampling,
    *,
    device: Any = "cpu",
    share_heads: bool = True,
) -> dict[str, float]:
    """One optimizer step of GRPO over ``sequences``, accumulated over micro-batches, or
    none when no token carries a policy gradient.

    **The update rule, the same in every mode:** the optimizer steps only when some
    sequence with loss tokens has a non-zero advantage. A batch whose groups all tied
    (every advantage 0, whatever the KL term) takes no step: the weights, the optimizer's
    moments and its step count stay exactly as they were (AdamW stepping on a zero
    gradient would still move the weights by its moments), so a mode that keeps tied
    groups (``static``) takes no more optimizer steps than one that drops them.

    Each sequence needs ``old_logp`` (and ``ref_logp`` when ``config.kl_coef > 0``), except
    that a sequence whose ``old_logp`` is None takes it from this step's own forward pass
    (detached): the on-policy case of one update per batch, where a separate scoring pass
    would compute the same numbers again. Its ``old_logp`` is filled in on the way.

    The per-token loss is ``clipped_surrogate * tis_weight + kl_coef * k3``, aggregated by
    ``config.loss_agg`` with the whole batch's normalizer; gradients are clipped to
    ``config.max_grad_norm`` before the step. Without a KL term, a sequence whose advantage
    is 0 (a group whose rewards were all equal) has a loss of exactly 0 at every token: it
    is counted in the normalizer but not run through the model (``skipped``).

    Returns:
        Metrics: ``loss``, ``pg_loss``, ``kl``, ``clip_fraction``, ``ratio_mean``,
        ``entropy``, ``tis_weight_mean`` (over the tokens run), ``grad_norm``, ``tokens``,
        ``sequences``, ``skipped`` (sequences not run), ``forward_tokens`` (tokens of the
        sequences run), ``optimizer_step`` (1 when the optimizer stepped, else 0),
        ``seconds``.
    """
    import torch

    t0 = time.perf_counter()
    seqs = [s for s in sequences if s.n_loss_tokens > 0]
    n_tokens = float(sum(s.n_loss_tokens for s in seqs))
    n_seqs = float(len(seqs))
    signal = any(s.advantage != 0.0 for s in seqs)
    run: list[TrainSequence] = []  # no policy gradient anywhere: no pass, no step
    if signal:
        run = [s for s in seqs if s.advantage != 0.0] if config.kl_coef == 0 else list(seqs)
    skipped = len(seqs) - len(run)
    run_tokens = max(float(sum(s.n_loss_tokens for s in run)), 1.0)
    # Clip what the optimizer updates: with float32 master weights the gradients are there.
    params = [p for group in optimizer.param_groups for p in group["params"]]
    optimizer.zero_grad(set_to_none=True)
    sums = dict.fromkeys(("loss", "pg_loss", "kl", "clipped", "ratio", "entropy", "tis"), 0.0)
    model.train()
    for mb, logp, ent, mask in scored_micro_batches(
        model,
        [s.token_ids for s in run],
        [s.loss_mask for s in run],
        sampling,
        micro_batch_size=config.micro_batch_size,
        device=device,
        entropy=True,
        share_heads=share_heads,
    ):
        rows = [run[i] for i in mb]
        mask = mask.float()
        for row, s in enumerate(rows):
            if s.old_logp is None:  # on-policy: this forward pass is the old policy
                s.old_logp = (logp[row, : len(s.token_ids)].detach() * s.loss_mask).float()
        old = pad_rows([_required(s.old_logp, "old_logp") for s in rows], 0.0, device)
        eng = pad_rows([s.engine_logp for s in rows], 0.0, device)
        adv = torch.tensor([s.advantage for s in rows], dtype=torch.float32, device=device)
        adv = adv[:, None]
        pg, was_clipped = clipped_surrogate(
            logp, old, adv, clip_low=config.clip_low, clip_high=config.clip_high
        )
        tis = truncated_importance_weight(old, eng, config.tis_cap)
        token_loss = pg * tis
        kl = torch.zeros_like(logp)
        if config.kl_coef > 0:
            ref = pad_rows([_required(s.ref_logp, "ref_logp") for s in rows], 0.0, device)
            kl = k3_kl(logp, ref)
            token_loss = token_loss + config.kl_coef * kl
        loss = aggregate_loss(
            token_loss, mask, config.loss_agg, n_tokens=n_tokens, n_sequences=n_seqs
        )
        loss.backward()
        with torch.no_grad():
            sums["loss"] += float(loss.item())
            pg_share = aggregate_loss(
                pg * tis, mask, config.loss_agg, n_tokens=n_tokens, n_sequences=n_seqs
            )
            sums["pg_loss"] += float(pg_share.item())
            sums["kl"] += float((kl * mask).sum().item())
            sums["clipped"] += float((was_clipped.float() * mask).sum().item())
            sums["ratio"] += float((torch.exp(logp - old) * mask).sum().item())
            sums["tis"] += float((tis * mask).sum().item())
            if ent is not None:
                sums["entropy"] += float((ent * mask).sum().item())
    grad_norm = (
        float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm).item())
        if params and run
        else 0.0
    )
    if run:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {
        "loss": sums["loss"],
        "pg_loss": sums["pg_loss"],
        "kl": sums["kl"] / run_tokens,
        "clip_fraction": sums["clipped"] / run_tokens,
        "ratio_mean": sums["ratio"] / run_tokens if run else 1.0,
        "entropy": sums["entropy"] / run_tokens,
        "tis_weight_mean": sums["tis"] / run_tokens if run else 1.0,
        "grad_norm": grad_norm if math.isfinite(grad_norm) else float("nan"),
        "tokens": n_tokens,
        "sequences": n_seqs,
        "skipped": float(skipped),
        "forward_tokens": float(sum(len(s.token_ids) for s in run)),
        "optimizer_step": 1.0 if run else 0.0,
        "seconds": time.perf_counter() - t0,
    }


def _required(value: torch.Tensor | None, name: str) -> torch.Tensor:
    if value is None:
        raise ValueError(f"every sequence needs {name} before grpo_step (see score_sequences)")
    return value


def mismatch_metrics(sequences: Sequence[TrainSequence]) -> dict[str, float]:
    """How far the engine's log-probabilities are from the learner's before the update,
    over loss tokens: mean and max absolute difference, and the k3 estimate of
    KL(engine || learner)."""
    import torch

    diffs = []
    for s in sequences:
        if s.old_logp is None or s.n_loss_tokens == 0:
            continue
        m = s.loss_mask.bool()
        diffs.append((s.old_logp[m] - s.engine_logp[m]).float())
    if not diffs:
        return {"mismatch_mean_abs": 0.0, "mismatch_max_abs": 0.0, "mismatch_kl": 0.0}
    d = torch.cat(diffs)
    # k3 with the engine as the sampling policy: exp(learner - engine) - (learner - engine) - 1.
    k3 = torch.exp(d) - d - 1.0
    return {
        "mismatch_mean_abs": float(d.abs().mean().item()),
        "mismatch_max_abs": float(d.abs().max().item()),
        "mismatch_kl": float(k3.mean().item()),
    }
