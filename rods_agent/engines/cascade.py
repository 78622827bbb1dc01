"""Decoding with the shared opening read once: a batch's common prompt prefix attended as one
product for all rows (cascade attention), in a decode step written for the model's layers.

In a GRPO step or an evaluation every conversation opens with the same policy and tool
schemas (1-5k tokens). transformers' decode step attends each row to its own copy of those
keys and values; at 16 conversations of ~1.2k tokens that read outweighs the weights'
(SmolLM2-135M in bf16: 0.43 GB of keys and values against 0.27 GB of weights a step). Here
a batch is split into **groups of rows that share a prefix** (a cached opening, see
``TransformersEngine``'s shared heads) and each row's **own suffix** (its tokens after the
prefix, then the tokens it decodes). Per layer and step:

* the prefix part: all the group's rows' query heads against the group's single prefix
  key/value head, one batched matrix product (``[kv_heads, rows x group, d] @ [kv_heads, d,
  P]``), so the prefix is read once for the group, not once per row;
* the suffix part: each row against its own buffer (preallocated for the tokens to come,
  read whole, positions not written yet masked);
* the two merged exactly by their log-sum-exp (the softmax over the concatenation).

The step itself multiplies by the model's weights directly (the model's own norms and rotary
embedding), not through the model's ``forward``: at 135M parameters a decode step is dozens
of small operations per layer and the per-call overhead of transformers' module stack (mask
building, cache bookkeeping, keyword plumbing) was most of it. The weights it multiplies by
are copies prepared once per set of weights (:class:`Weights`: q|k|v and gate|up
concatenated, on a CPU packed into oneDNN's layout; 0.89x the step's time in bf16, 0.68x in
float32, on SmolLM2 with 16 rows of ~1.1k tokens). It supports the Llama-style decoders (Llama, SmolLM2, Qwen2, Qwen2.5, Qwen3, Mistral)
whose layers are all full attention with plain ``nn.Linear`` projections;
:func:`unsupported` names what stops another model, which then decodes through its
``forward`` as before.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

ARCHITECTURES = ("llama", "qwen2", "qwen3", "mistral")
"""``config.model_type`` values whose decoder layers :class:`CascadeDecoder` runs."""


def unsupported(model: Any) -> str | None:
    """Why :class:`CascadeDecoder` cannot run ``model`` (None: it can)."""
    import torch

    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in ARCHITECTURES:
        return f"model type {kind!r} is not one of {ARCHITECTURES}"
    act = getattr(config, "hidden_act", "silu")
    if act != "silu":
        return f"activation {act!r}"
    if getattr(config, "use_sliding_window", False) or any(
        t != "full_attention" for t in getattr(config, "layer_types", None) or ()
    ):
        return "sliding-window attention layers"
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if inner is None or layers is None or not hasattr(inner, "rotary_emb"):
        return "not a Llama-style decoder (model.model.layers, rotary_emb)"
    if not isinstance(getattr(model, "lm_head", None), torch.nn.Linear):
        return "the output head is not a plain linear layer"
    for layer in layers:
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        names = ("q_proj", "k_proj", "v_proj", "o_proj")
        if attn is None or mlp is None:
            return "a layer without self_attn/mlp"
        mods = [getattr(attn, n, None) for n in names]
        mods += [getattr(mlp, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
        if any(type(m) is not torch.nn.Linear for m in mods):
            return "a projection that is not a plain nn.Linear (LoRA adapters, quantized)"
    return None


@dataclass
class Group:
    """Rows ``start:end`` (in the decoder's order) that share the prefix ``layers``
    (per layer ``(keys, values)`` of shape ``[kv_heads, P, d]``), or no prefix (empty)."""

    start: int
    end: int
    length: int
    layers: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass
class DecodeState:
    """A batch being decoded: its prefix groups and each row's own suffix buffer."""

    groups: list[Group]
    keys: list[Any]  # per layer [rows, kv_heads, width, d]
    values: list[Any]
    lengths: Any  # [rows] long: tokens written in each row's suffix buffer
    positions: Any  # [rows] long: the position of each row's next token
    width: int

    def nbytes(self) -> int:
        """Bytes of the suffix buffers (the prefixes belong to the engine's cache)."""
        return sum(k.numel() * k.element_size() * 2 for k in self.keys)


@dataclass
class LayerWeights:
    """One layer's projections as the decode step multiplies by them (see :class:`Weights`)."""

    qkv: list[tuple[Any, Any]]  # [(weight, bias)]: one fused q|k|v, or q, k, v
    o: tuple[Any, Any]
    gate_up: list[tuple[Any, Any]]  # one fused gate|up, or gate, up
    down: tuple[Any, Any]


class Weights:
    """The decode step's linear weights, prepared once per set of model weights.

    * **fused**: q, k and v concatenated into one ``[q + 2 kv, hidden]`` weight, gate and
      up into one ``[2 inter, hidden]`` (one product instead of three and two);
    * **packed**: on a CPU, each weight reordered once into oneDNN's blocked layout
      (``torch.ops.mkldnn._reorder_linear_weight``), the layout its matrix product reads
      without repacking the weight on every call (as ``torch.compile`` with freezing
      does); the residual additions ride on the products (oneDNN's ``add`` post-op).

    Both are copies of the model's weights: :meth:`current` tells when the model's
    parameters were changed (an optimizer step bumps a tensor's version counter; a load
    replaces its storage) so that the copies are made again before the next batch.
    """

    def __init__(self, model: Any, *, fuse: bool, pack: bool) -> None:
        import torch

        self.fuse = fuse
        self.pack = pack and _packing_works(model)
        self.signature = _signature(model)
        self.layers: list[LayerWeights] = []
        with torch.no_grad():
            for layer in model.model.layers:
                attn, mlp = layer.self_attn, layer.mlp
                qkv = [attn.q_proj, attn.k_proj, attn.v_proj]
                gate_up = [mlp.gate_proj, mlp.up_proj]
                self.layers.append(
                    LayerWeights(
                        qkv=self._prepare(qkv, fuse),
                        o=self._prepare([attn.o_proj], False)[0],
                        gate_up=self._prepare(gate_up, fuse),
                        down=self._prepare([mlp.down_proj], False)[0],
                    )
                )
            self.head = self._prepare([model.lm_head], False)[0]

    def _prepare(self, mods: list[Any], fuse: bool) -> list[tuple[Any, Any]]:
        import torch

        pairs = [(m.weight.detach(), None if m.bias is None else m.bias.detach()) for m in mods]
        if fuse and len(pairs) > 1:
            bias = None
            if any(b is not None for _, b in pairs):
                bias = torch.cat(
                    [b if b is not None else w.new_zeros(w.shape[0]) for w, b in pairs]
                )
            pairs = [(torch.cat([w for w, _ in pairs]), bias)]
        if self.pack:
            pairs = [(torch.ops.mkldnn._reorder_linear_weight(w, 16), b) for w, b in pairs]
        return pairs

    def current(self, model: Any) -> bool:
        """Whether these copies still match ``model``'s parameters."""
        return self.signature == _signature(model)

    def nbytes(self) -> int:
        """Bytes of the copies (fused or packed weights; 0 when neither)."""
        if not self.fuse and not self.pack:
            return 0
        total = 0
        for lw in self.layers:
            pairs = [*lw.qkv, lw.o, *lw.gate_up, lw.down]
            if not self.pack:
                pairs = [*lw.qkv, *lw.gate_up] if len(lw.qkv) == 1 else []
            total += sum(w.numel() * w.element_size() for w, _ in pairs)
        if self.pack:
            total += self.head[0].numel() * self.head[0].element_size()
        return total

    def linear(self, x: Any, weight: tuple[Any, Any]) -> Any:
        """``x @ weight.T + bias``."""
        import torch
        import torch.nn.functional as F

        if self.pack:
            return torch.ops.mkldnn._linear_pointwise(x, weight[0], weight[1], "none", [], "")
        return F.linear(x, weight[0], weight[1])

    def linear_add(self, x: Any, weight: tuple[Any, Any], residual: Any) -> Any:
        """``residual + x @ weight.T + bias`` (one call when packed)."""
        import torch
        import torch.nn.functional as F

        if self.pack:
            return torch.ops.mkldnn._linear_pointwise.binary(
                x, residual, weight[0], weight[1], "add"
            )
        return residual + F.linear(x, weight[0], weight[1])


def _signature(model: Any) -> tuple[tuple[int, int], ...]:
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


def _packing_works(model: Any) -> bool:
    """Whether oneDNN's packed linear products run here for ``model``'s weights (a CPU
    build with oneDNN, a float32 or bfloat16 model)."""
    import torch

    weight = model.lm_head.weight
    if weight.device.type != "cpu" or weight.dtype not in (torch.float32, torch.bfloat16):
        return False
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        w = torch.ones(8, 8, dtype=weight.dtype)
        packed = torch.ops.mkldnn._reorder_linear_weight(w, 2)
        x = torch.ones(2, 8, dtype=weight.dtype)
        y = torch.ops.mkldnn._linear_pointwise.binary(x, x, packed, None, "add")
        return bool(torch.equal(y, torch.full((2, 8), 9.0, dtype=weight.dtype)))
    except (RuntimeError, AttributeError):
        return False


class CascadeDecoder:
    """A decode step for the Llama-style ``model`` (see the module doc).

    Args:
        model: The model (weights shared, read at each batch's start).
        fuse: Fused q|k|v and gate|up weights (:class:`Weights`).
        pack: oneDNN-packed weights on a CPU (:class:`Weights`).
    """

    def __init__(self, model: Any, *, fuse: bool = True, pack: bool = True) -> None:
        reason = unsupported(model)
        if reason is not None:
            raise ValueError(f"cascade decoding does not support this model: {reason}")
        self.model = model
        self.inner = model.model
        config = model.config
        attn = self.inner.layers[0].self_attn
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(config.num_key_value_heads)
        self.head_dim = int(attn.head_dim)
        self.group = self.heads // self.kv_heads
        self.scaling = float(attn.scaling)
        module = sys.modules[type(attn).__module__]
        self._rope = module.apply_rotary_pos_emb
        self._qk_norm = hasattr(attn, "q_norm")
        self.fuse, self.pack = fuse, pack
        self._weights: Weights | None = None

    def weights(self) -> Weights:
        """The prepared weights, made again when the model's parameters changed."""
        if self._weights is None or not self._weights.current(self.model):
            self._weights = None  # drop the old copies before making new ones
            self._weights = Weights(self.model, fuse=self.fuse, pack=self.pack)
        return self._weights

    # -- the batch -------------------------------------------------------------------------
    def start(
        self,
        rows: list[list[tuple[Any, Any]]],
        lengths: list[int],
        groups: list[tuple[int, int, list[tuple[Any, Any]]]],
        extra: int,
    ) -> DecodeState:
        """Lay out a batch: ``rows[r]`` are row r's keys and values after its prefix (per
        layer ``[1, kv_heads, n, d]``), ``lengths[r]`` its whole prompt's length, ``groups``
        ``(start, end, prefix layers)`` over consecutive rows, ``extra`` the most tokens a
        row decodes."""
        import torch

        own = [kv[0][0].shape[2] for kv in rows]
        width = max(own) + extra
        first = rows[0][0][0]
        n, layers = len(rows), len(rows[0])
        keys, values = [], []
        for layer in range(layers):
            k = first.new_zeros((n, self.kv_heads, width, self.head_dim))
            v = first.new_zeros((n, self.kv_heads, width, self.head_dim))
            for r, kv in enumerate(rows):
                if own[r]:
                    k[r, :, : own[r]] = kv[layer][0][0]
                    v[r, :, : own[r]] = kv[layer][1][0]
            keys.append(k)
            values.append(v)
        state_groups = []
        for start, end, prefix in groups:
            plen = prefix[0][0].shape[-2] if prefix else 0
            # contiguous: a batched product copies a strided operand on every call
            flat = [(pk.reshape(self.kv_heads, plen, -1).contiguous(),
                     pv.reshape(self.kv_heads, plen, -1).contiguous()) for pk, pv in prefix]  # fmt: skip
            state_groups.append(Group(start, end, plen, flat))
        device = first.device
        self.weights()  # prepared (or made again) before the first step
        return DecodeState(
            groups=state_groups,
            keys=keys,
            values=values,
            lengths=torch.tensor(own, dtype=torch.long, device=device),
            positions=torch.tensor(lengths, dtype=torch.long, device=device),
            width=width,
        )

    # -- one step --------------------------------------------------------------------------
    def step(self, state: DecodeState, tokens: Any) -> Any:
        """Feed each row's next token (``[rows]``); returns the next logits ``[rows, vocab]``."""
        import torch
        import torch.nn.functional as F

        inner, weights = self.inner, self._weights
        assert weights is not None  # made by start()
        n = tokens.shape[0]
        kvh, g, d = self.kv_heads, self.group, self.head_dim
        x = inner.embed_tokens(tokens)  # [n, hidden]
        cos, sin = inner.rotary_emb(x[:, None], state.positions[:, None])
        # the positions each row may attend to in its own buffer, the new token included
        valid = torch.arange(state.width, device=tokens.device)[None, :] <= state.lengths[:, None]
        masked = ~valid[:, None, None, :]  # [n, 1, 1, width]
        # where each row's new key/value goes in a layer's buffer seen as [n*kvh*width, d]
        heads = torch.arange(kvh, device=tokens.device)
        rows = torch.arange(n, device=tokens.device)
        slots = (rows[:, None] * kvh + heads[None, :]) * state.width
        at = (slots + state.lengths[:, None]).view(-1)
        sizes = [self.heads * d, kvh * d, kvh * d]
        for index, layer in enumerate(inner.layers):
            attn, lw = layer.self_attn, weights.layers[index]
            h = layer.input_layernorm(x)
            if len(lw.qkv) == 1:
                q, k, v = weights.linear(h, lw.qkv[0]).split(sizes, dim=-1)
            else:
                q, k, v = (weights.linear(h, w) for w in lw.qkv)
            q, k = q.reshape(n, 1, self.heads, d), k.reshape(n, 1, kvh, d)
            if self._qk_norm:
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = self._rope(q.transpose(1, 2), k.transpose(1, 2), cos, sin)  # [n, h, 1, d]
            keys, values = state.keys[index], state.values[index]
            keys.view(-1, d).index_copy_(0, at, k.reshape(n * kvh, d))
            values.view(-1, d).index_copy_(0, at, v.reshape(n * kvh, d))
            out = self._attend(q.reshape(n, kvh, g, d), keys, values, masked, state.groups, index)
            x = weights.linear_add(out.reshape(n, self.heads * d), lw.o, x)
            h = layer.post_attention_layernorm(x)
            if len(lw.gate_up) == 1:
                gate, up = weights.linear(h, lw.gate_up[0]).chunk(2, dim=-1)
            else:
                gate, up = (weights.linear(h, w) for w in lw.gate_up)
            x = weights.linear_add(F.silu(gate) * up, lw.down, x)
        state.lengths += 1
        state.positions += 1
        return weights.linear(inner.norm(x), weights.head)

    def _attend(
        self, q: Any, keys: Any, values: Any, masked: Any, groups: list[Group], layer: int
    ) -> Any:
        """Attention of ``q [n, kv_heads, group, d]`` over each row's prefix and own buffer,
        merged by log-sum-exp; returns ``[n, kv_heads, group, d]``."""
        import torch

        _, kvh, g, d = q.shape
        # own suffix: [n, kvh, g, width]
        scores = torch.matmul(q, keys.transpose(-1, -2)).float().mul_(self.scaling)
        scores.masked_fill_(masked, float("-inf"))
        top = scores.amax(-1, keepdim=True)
        probs = scores.sub_(top).exp_()
        total = probs.sum(-1, keepdim=True)
        out = torch.matmul(probs.to(values.dtype), values).float()
        for grp in groups:
            if not grp.length:
                continue
            pk, pv = grp.layers[layer]
            m = grp.end - grp.start
            # every row's query heads of one kv head as one block of rows: [kvh, m*g, d]
            qg = q[grp.start : grp.end].permute(1, 0, 2, 3).reshape(kvh, m * g, d)
            ps = torch.matmul(qg, pk.transpose(-1, -2)).float().mul_(self.scaling)
            ptop = ps.amax(-1, keepdim=True)
            pprobs = ps.sub_(ptop).exp_()
            ptotal = pprobs.sum(-1, keepdim=True)
            pout = torch.matmul(pprobs.to(pv.dtype), pv).float()

            def rows_first(t: Any, m: int = m) -> Any:  # [kvh, m*g, x] -> [m, kvh, g, x]
                return t.view(kvh, m, g, t.shape[-1]).permute(1, 0, 2, 3)

            ptop, ptotal, pout = rows_first(ptop), rows_first(ptotal), rows_first(pout)
            s = slice(grp.start, grp.end)
            best = torch.maximum(top[s], ptop)
            a, b = (top[s] - best).exp_(), (ptop - best).exp_()
            out[s] = out[s] * a + pout * b
            total[s] = total[s] * a + ptotal * b
        return out.div_(total).to(q.dtype)
