"""Attention for decoding on a CPU: a few query tokens against a long cache, without copies.

transformers' ``sdpa`` path repeats each key/value head for its query heads
(``repeat_kv``: a copy of the whole cache per layer and step) and hands one query token to
PyTorch's CPU flash-attention kernel, which is built for blocks of queries. Measured on
SmolLM2-135M (9 query heads over 3 key/value heads), 16 conversations of 1,334 tokens, one
thread: 18.7 ms per layer in the kernel and another 18 ms in the copies, against 41 ms for
all 211 matrix products of the step together -- a decoding step of 1.16 s.

:func:`attention` computes the same attention for up to :data:`MAX_QUERIES` query tokens
with each key/value head read once: the query heads that share a key/value head are one
batch of rows against it (two batched matrix products and a float32 softmax). Longer
queries (prefill, training, scoring) go to transformers' ``sdpa`` unchanged, so a model
switched to it (:func:`use_for`) trains exactly as before.
"""

from __future__ import annotations

from typing import Any

NAME = "rods_decode_sdpa"
"""The attention implementation's name in transformers' registry."""

MAX_QUERIES = 8
"""Most query tokens handled here; more go to ``sdpa``."""

_registered = False


def attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """transformers' attention-function contract: ``query [B, H, q, d]``, ``key`` and
    ``value [B, kvH, L, d]``, a boolean ``attention_mask [B, 1, q, L]`` (True: attend) or
    None; returns ``([B, q, H, d], None)``."""
    import torch

    batch, heads, q, dim = query.shape
    kv_heads, length = key.shape[1], key.shape[2]
    if q > MAX_QUERIES or dropout or kwargs.get("output_attentions") or heads % kv_heads:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask,
            dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs,
        )  # fmt: skip
    group = heads // kv_heads
    scale = scaling if scaling is not None else dim**-0.5
    # A batched product on a strided view copies it first (bf16 on CPU: 5.7 ms against
    # 0.26 ms per layer); the cache's preallocated buffer is contiguous, so read it whole
    # and mask the positions not written yet.
    key, value, width = _whole(key), _whole(value), length
    if key.shape[2] != value.shape[2]:
        key, value = key[:, :, :length], value[:, :, :length]
    width = key.shape[2]
    # query head h reads key/value head h // group (transformers' repeat_kv layout)
    rows = query.reshape(batch, kv_heads, group * q, dim)
    scores = torch.matmul(rows, key.transpose(-1, -2)).float().mul_(scale)
    scores = scores.view(batch, kv_heads, group, q, width)
    if attention_mask is None:
        keep = torch.ones(q, width, dtype=torch.bool, device=query.device).tril(length - q)
        scores = scores.masked_fill(~keep, float("-inf"))
    else:
        mask = attention_mask[:, :, -q:, :]
        if width > length:  # the buffer's unwritten tail
            pad = (0, width - length)
            mask = torch.nn.functional.pad(
                mask, pad, value=False if mask.dtype == torch.bool else float("-inf")
            )
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask[:, :, None], float("-inf"))
        else:  # an additive mask
            scores = scores + mask[:, :, None].float()
    probs = torch.softmax(scores, dim=-1).to(value.dtype).view(batch, kv_heads, group * q, width)
    out = torch.matmul(probs, value).view(batch, heads, q, dim)
    return out.transpose(1, 2).contiguous(), None


def _whole(t: Any) -> Any:
    """``t`` widened to the contiguous buffer it is the first positions of (a cache
    preallocated for the tokens still to come), or ``t`` itself."""
    if t.is_contiguous() or t.dim() != 4:
        return t
    b, h, n, d = t.shape
    s0, s1, s2, s3 = t.stride()
    if s3 != 1 or s2 != d or s1 % d or s0 != h * s1:
        return t
    width = s1 // d
    end = (t.storage_offset() + b * s0) * t.element_size()
    if width < n or end > t.untyped_storage().nbytes():
        return t
    return t.as_strided((b, h, width, d), (s0, s1, s2, s3))


def register() -> None:
    """Make :data:`NAME` known to transformers (its masks are ``sdpa``'s boolean ones)."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    _registered = True


def use_for(model: Any) -> bool:
    """Switch ``model`` from ``sdpa`` to :data:`NAME`; False (nothing changed) for a model
    that uses another implementation or cannot switch."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return getattr(config, "_attn_implementation", None) == NAME
    register()
    try:
        model.set_attn_implementation(NAME)
    except (ValueError, AttributeError, NotImplementedError):
        return False
    return getattr(model.config, "_attn_implementation", None) == NAME
