"""The transformers engine: batched generation with a local model, on CPU or GPU."""

from __future__ import annotations

import datetime
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rods_agent.engines.base import (
    Completion,
    EngineError,
    GenerationRequest,
    SamplingParams,
    derive_seed,
    request_max_tokens,
    stop_end,
)
from rods_agent.engines.chat import ChatTemplate
from rods_agent.engines.sampling import sample_next

log = logging.getLogger(__name__)


@dataclass
class _KV:
    """Keys and values of a token sequence: per layer ``(keys, values)`` of shape
    ``[1, heads, n, head_dim]`` for its positions from ``len(head.ids)`` on (all of them
    without a ``head``: a conversation kept after a shared opening holds only its own
    tokens, the opening's keys and values once for all of them)."""

    ids: list[int]
    layers: list[tuple[Any, Any]]
    head: _KV | None = None

    @property
    def start(self) -> int:
        """The first position ``layers`` hold."""
        return len(self.head.ids) if self.head is not None else 0

    @property
    def own_tokens(self) -> int:
        return len(self.ids) - self.start

    def pieces(self, start: int, layer: int) -> list[tuple[Any, Any]]:
        """Keys and values of positions ``start:`` of one layer, as views in order."""
        out = self.head.pieces(start, layer) if self.head is not None and start < self.start else []
        k, v = self.layers[layer]
        skip = min(max(0, start - self.start), k.shape[2])
        if k.shape[2] > skip or not out:
            out.append((k[:, :, skip:], v[:, :, skip:]))
        return out

    def full(self) -> list[tuple[Any, Any]]:
        """Per layer the keys and values of every position (a copy when there is a head)."""
        if self.head is None:
            return self.layers
        import torch

        out = []
        for layer in range(len(self.layers)):
            parts = self.pieces(0, layer)
            out.append(
                (torch.cat([p[0] for p in parts], dim=2), torch.cat([p[1] for p in parts], dim=2))
            )
        return out


_MIN_SHARED_PREFIX = 256
_MAX_PREFIXES = 32  # openings and shared heads kept (least recently used dropped)
_MAX_GROUPS = 8  # prefix groups of one decoding batch (more rows decode without a prefix)

MMAP_THRESHOLD = 1 << 16
"""Allocations of at least this many bytes get pages of their own (glibc's mmap threshold)."""


def return_freed_memory() -> bool:
    """Make glibc give freed tensor memory back to the system (Linux; once per process).

    glibc raises its mmap threshold after each large block it frees, so that tensors of
    varying sizes (a training step's sequences differ in length) end up carved from a heap
    that never shrinks: SmolLM2's warm start grew to 17 GB of resident memory on CPU. A fixed
    threshold keeps large blocks mapped on their own and returned when freed (measured: 1.9
    GB against 0.8 GB for the same 24 forward and backward passes, at no measurable cost in
    time). Returns whether the setting took (False off glibc).
    """
    global _MALLOC_SET
    if _MALLOC_SET is not None:
        return _MALLOC_SET
    import ctypes
    import ctypes.util
    import sys

    _MALLOC_SET = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _MALLOC_SET = bool(libc.mallopt(-3, MMAP_THRESHOLD))  # M_MMAP_THRESHOLD
        except (OSError, AttributeError):
            _MALLOC_SET = False
    return _MALLOC_SET


_MALLOC_SET: bool | None = None


def _preallocated(cache: Any, extra: int) -> Any:
    """``cache`` with room for ``extra`` more tokens per layer, written in place.

    The default cache concatenates each new token's keys and values onto the whole cache,
    a copy of every row's full context per decoding step; with a batch of long
    conversations that copy, not the model, dominated decoding on CPU.
    """
    from transformers.cache_utils import DynamicLayer

    class _Layer(DynamicLayer):
        def __init__(self, keys: Any, values: Any) -> None:
            super().__init__()
            b, h, n, d = keys.shape
            self._k = keys.new_zeros((b, h, n + extra, d))
            self._v = values.new_zeros((b, values.shape[1], n + extra, values.shape[3]))
            self._k[:, :, :n] = keys
            self._v[:, :, :n] = values
            self._n = n
            self.dtype, self.device = keys.dtype, keys.device
            self.is_initialized = True
            self.keys, self.values = self._k[:, :, :n], self._v[:, :, :n]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            m = key_states.shape[-2]
            self._k[:, :, self._n : self._n + m] = key_states
            self._v[:, :, self._n : self._n + m] = value_states
            self._n += m
            self.keys, self.values = self._k[:, :, : self._n], self._v[:, :, : self._n]
            return self.keys, self.values

    cache.layers = [_Layer(layer.keys, layer.values) for layer in cache.layers]
    return cache


def _joined(pieces: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """One ``(keys, values)`` from consecutive pieces along the positions."""
    if len(pieces) == 1:
        return pieces[0]
    import torch

    return torch.cat([p[0] for p in pieces], dim=2), torch.cat([p[1] for p in pieces], dim=2)


def kv_token_bytes(model: Any) -> int:
    """Bytes of one token's keys and values in ``model``'s cache, over all its layers."""
    config = getattr(model, "config", None)
    text = getattr(config, "text_config", None) or config
    layers = int(getattr(text, "num_hidden_layers", 0) or 0)
    heads = int(getattr(text, "num_attention_heads", 1) or 1)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = getattr(text, "head_dim", None) or int(getattr(text, "hidden_size", 0)) // heads
    try:
        size = next(model.parameters()).element_size()
    except (StopIteration, AttributeError, TypeError):
        size = 4
    return 2 * layers * kv_heads * int(head_dim) * size


class TransformersEngine:
    """Generates with a Hugging Face causal LM (left-padded batches, KV cache).

    Decoding is its own short loop rather than ``model.generate``, for two reasons that
    training needs: each request draws from its own random stream (``request.seed``), so an
    episode's completions do not depend on what else is in the batch; and the log-probability
    of each sampled token is taken from exactly the distribution it was drawn from
    (temperature, then top-p: :mod:`rods_agent.engines.sampling`), with no processor from
    the model's generation config slipped in. A row stops at an end-of-turn token, at the
    token that completes one of ``SamplingParams.stop`` in its decoded tail (kept, as
    sampled), or at its token cap.

    The model may be shared with a learner (``ModelPolicy``): generation switches it to
    eval mode and back, and ``weights_version`` (set by the owner after each update) is
    recorded with every rollout.

    Args:
        model: A model folder or hub-style name already on disk, or a loaded model.
        tokenizer: A loaded tokenizer (default: loaded from ``model``).
        device: ``"cpu"``, ``"cuda"``, ...
        dtype: Torch dtype name for loading (``"float32"``, ``"bfloat16"``, ``"auto"``).
        max_batch_size: Most sequences per generation batch.
        max_batch_tokens: Most padded prompt tokens (rows x longest prompt) per batch. A
            left-padded batch needs an explicit attention mask, which on CPU is slower than
            one unpadded prompt at a time once prompts are long (8 prompts of 6,400 tokens:
            9.1 s batched, 3.2 s one by one), while short prompts gain from batching (8 of
            ~100 tokens: 0.12 s batched, 0.33 s one by one). Default: 4,096 on CPU,
            65,536 elsewhere.
        gguf_file: Name of a GGUF file inside ``model`` to load from.
        reuse_kv: Keep each conversation's keys and values between calls (by request
            ``key``) and share those of a common prompt prefix (a domain's policy and tool
            schemas) across conversations, so a turn prefills only its new tokens. The
            cache is dropped when ``weights_version`` changes, by :meth:`reset_kv`, and per
            conversation by :meth:`end_episode`. Models whose layers all use full attention
            only (Qwen2/3, Llama, ...).
        max_cached_tokens: Most tokens kept in that cache (least recently used dropped).
        max_cached_bytes: Most bytes of keys and values kept in that cache (None: no bound
            but ``max_cached_tokens``); with the decoding batch's own buffers, sized to the
            batch's real lengths, this bounds the engine's memory beside the weights.
        cascade: Decode with :class:`~rods_agent.engines.cascade.CascadeDecoder` where the
            model allows it (Llama-style, full attention, plain linear layers) and with
            ``reuse_kv``: the opening a batch shares is read once per step for all its rows,
            each row keeps only its own tokens, and the step runs the layers without
            transformers' per-call machinery. False: the model's ``forward`` over one
            left-padded cache (the path before, kept for comparison).
        thinking: The chat template's ``enable_thinking`` switch (None: its default).
        template_date: The day a template that prints the date shows (None: today).
    """

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any | None = None,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        max_batch_size: int = 64,
        max_batch_tokens: int | None = None,
        gguf_file: str | None = None,
        reuse_kv: bool = False,
        max_cached_tokens: int = 1 << 20,
        max_cached_bytes: int | None = None,
        cascade: bool = True,
        thinking: bool | None = None,
        template_date: datetime.date | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._torch = torch
        if isinstance(model, (str, Path)):
            kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
            try:
                if tokenizer is None:
                    tokenizer = AutoTokenizer.from_pretrained(str(model), **kwargs)
                model = AutoModelForCausalLM.from_pretrained(
                    str(model), dtype=getattr(torch, dtype) if dtype != "auto" else "auto", **kwargs
                )
            except OSError as exc:
                raise EngineError(f"cannot load model '{model}': {exc}") from None
        elif tokenizer is None:
            raise EngineError("pass the tokenizer along with a loaded model")
        loaded: Any = model
        self.model = loaded.to(device).eval()
        if str(device).startswith("cpu"):
            return_freed_memory()
            from rods_agent.engines.decode_attention import use_for

            # a decoding step's attention without the key/value copies of sdpa's (it
            # hands anything longer than a few query tokens to sdpa as before)
            use_for(self.model)
        self.tokenizer = tokenizer
        self.device = device
        self.max_batch_size = int(max_batch_size)
        if max_batch_tokens is None:
            max_batch_tokens = 4096 if str(device).startswith("cpu") else 65536
        self.max_batch_tokens = int(max_batch_tokens)
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        gen_eos = [gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])
        self.chat = ChatTemplate(tokenizer, stop_ids=gen_eos, thinking=thinking, date=template_date)
        self._stop_ids = sorted(self.chat.end_of_turn_ids)
        pad = tokenizer.pad_token_id
        self._pad_id = int(pad if pad is not None else self._stop_ids[0])
        self._max_positions = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        self._calls = 0
        self.weights_version = 0
        layer_types = getattr(self.model.config, "layer_types", None) or ()
        self.full_attention = all(t == "full_attention" for t in layer_types) and not getattr(
            self.model.config, "use_sliding_window", False
        )
        """Every layer attends to the whole context (no sliding window): what the kept and
        preallocated keys and values assume."""
        if reuse_kv and not self.full_attention:
            log.info("reuse_kv is off: the model has sliding-window attention layers")
        self.reuse_kv = bool(reuse_kv) and self.full_attention
        self.max_cached_tokens = int(max_cached_tokens)
        self.kv_token_bytes = kv_token_bytes(self.model)
        """Bytes of one token's keys and values over all layers."""
        if max_cached_bytes is not None:
            bound = int(max_cached_bytes) // max(1, self.kv_token_bytes)
            self.max_cached_tokens = min(self.max_cached_tokens, bound)
        self._decoder: Any = None
        if cascade and self.reuse_kv:
            from rods_agent.engines.cascade import CascadeDecoder, unsupported

            reason = unsupported(self.model)
            if reason is None:
                self._decoder = CascadeDecoder(self.model)
            else:
                log.info("cascade decoding is off: %s", reason)
        self.peak_decode_bytes = 0
        """The largest decoding batch's own key/value buffers so far, in bytes."""
        self._kv: OrderedDict[str, _KV] = OrderedDict()  # conversation key -> its prompt's KV
        self._prefixes: OrderedDict[tuple[int, ...], _KV] = OrderedDict()  # shared prompt heads
        self._last_opening: list[int] = []
        self._kv_version = 0
        self.kv_stats = {"prefilled": 0, "reused": 0}

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        """One completion per request (see :class:`~rods_agent.engines.base.Engine`)."""
        out: list[Completion | None] = [None] * len(requests)
        prompts: list[tuple[int, list[int], int]] = []
        for i, req in enumerate(requests):
            try:
                ids = (
                    list(req.prompt_token_ids)
                    if req.prompt_token_ids is not None
                    else self.chat.prompt_ids(req.messages, req.tools)
                )
            except Exception as exc:  # a template error on odd messages is data
                out[i] = Completion.failed(f"chat template failed: {exc}")
                continue
            cap = request_max_tokens(req, params)
            if self._max_positions:
                cap = min(cap, self._max_positions - len(ids))
            if cap < 1:
                out[i] = Completion.failed(
                    f"prompt of {len(ids)} tokens leaves no room in the model's "
                    f"{self._max_positions} positions"
                )
                continue
            prompts.append((i, ids, cap))
        self._calls += 1
        for chunk in self._chunks(prompts):
            seeds = self._row_seeds(chunk, [requests[i].seed for i, _, _ in chunk], params)
            try:
                keys = [requests[i].key for i, _, _ in chunk]
                results = self._generate_batch(chunk, params, seeds, keys)
            except Exception as exc:  # out of memory, a bad prompt: data, not a crash
                results = [
                    Completion.failed(f"generation failed: {type(exc).__name__}: {exc}")
                ] * len(chunk)
            for (i, _, _), comp in zip(chunk, results, strict=True):
                out[i] = comp
        return [c if c is not None else Completion.failed("no completion") for c in out]

    def _chunks(
        self, prompts: list[tuple[int, list[int], int]]
    ) -> list[list[tuple[int, list[int], int]]]:
        """Batches of similar lengths within the row and padded-token budgets."""
        chunks: list[list[tuple[int, list[int], int]]] = []
        for p in sorted(prompts, key=lambda p: len(p[1])):
            cur = chunks[-1] if chunks else None
            # Sorted by length, so the newest prompt is the longest of its batch.
            if (
                cur is not None
                and len(cur) < self.max_batch_size
                and (self.reuse_kv or (len(cur) + 1) * len(p[1]) <= self.max_batch_tokens)
            ):
                cur.append(p)
            else:
                chunks.append([p])
        return chunks

    def _row_seeds(
        self,
        chunk: list[tuple[int, list[int], int]],
        requests_seeds: list[int | None],
        params: SamplingParams,
    ) -> list[int]:
        torch = self._torch
        seeds = []
        for (i, _, _), seed in zip(chunk, requests_seeds, strict=True):
            if seed is None and params.seed is not None:
                seed = derive_seed(params.seed, self._calls, i)
            if seed is None:  # unseeded: drawn from torch's global stream
                seed = int(torch.randint(0, 2**62, (1,)).item())
            seeds.append(int(seed))
        return seeds

    def _prefill_padded(self, chunk: list[tuple[int, list[int], int]]) -> tuple[Any, Any, Any]:
        """One left-padded forward pass over the whole prompts."""
        torch = self._torch
        rows = len(chunk)
        width = max(len(ids) for _, ids, _ in chunk)
        input_ids = torch.full((rows, width), self._pad_id, dtype=torch.long)
        attention = torch.zeros((rows, width), dtype=torch.long)
        for row, (_, ids, _) in enumerate(chunk):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids) :] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
        )
        self.kv_stats["prefilled"] += int(attention.sum().item())
        return out, attention, positions[:, -1:]

    # -- keys and values kept between calls ----------------------------------------------------
    def set_cache_budget(self, max_bytes: int) -> None:
        """Bound the keys and values kept between calls to ``max_bytes`` (a run's memory
        budget less its weights and optimizer; least recently used dropped first)."""
        bound = max(0, int(max_bytes)) // max(1, self.kv_token_bytes)
        self.max_cached_tokens = min(self.max_cached_tokens, bound)

    def reset_kv(self) -> None:
        """Forget every kept key/value (the weights changed)."""
        self._kv.clear()
        self._prefixes.clear()
        self._last_opening = []

    def end_episode(self, key: str) -> None:
        """Forget a finished conversation's keys and values."""
        self._kv.pop(key, None)

    def _cached_tokens(self) -> int:
        """Tokens whose keys and values the cache holds (a shared head counted once)."""
        heads = {id(kv): kv for kv in self._prefixes.values()}
        own = 0
        for kv in self._kv.values():
            own += kv.own_tokens
            head = kv.head
            while head is not None:
                heads.setdefault(id(head), head)
                head = head.head
        return own + sum(h.own_tokens for h in heads.values())

    def cached_bytes(self) -> int:
        """Bytes of the keys and values kept between calls."""
        return self._cached_tokens() * self.kv_token_bytes

    def _head_of(self, ids: list[int]) -> _KV | None:
        """The longest kept shared head that ``ids`` start with (a whole opening included)."""
        best: _KV | None = None
        for head, kv in self._prefixes.items():
            longer = best is None or len(head) > len(best.ids)
            if kv.head is None and longer and tuple(ids[: len(head)]) == head:
                best = kv
        return best

    def _lookup(self, key: str | None, ids: list[int]) -> _KV | None:
        """The longest kept KV whose tokens start ``ids``: the conversation's own, else a
        shared prompt head."""
        best: _KV | None = None
        mine = self._kv.get(key) if key is not None else None
        if mine is not None and len(mine.ids) < len(ids) and ids[: len(mine.ids)] == mine.ids:
            best = mine
            self._kv.move_to_end(key)  # type: ignore[arg-type]
        found = None
        for head, kv in self._prefixes.items():
            # a head as long as the prompt (the same opening again: a GRPO group) is used
            # to its last token but one: the prompt's last position must run for its logits
            usable = min(len(head), len(ids) - 1)
            longer = best is None or usable > len(best.ids)
            if longer and len(head) <= len(ids) and tuple(ids[: len(head)]) == head:
                best, found = (kv if usable == len(head) else _KV(kv.ids[:usable], [
                    (k[:, :, :usable], v[:, :, :usable]) for k, v in kv.layers
                ])), head  # fmt: skip
        if found is not None:
            self._prefixes.move_to_end(found)
        return best

    def _remember(self, key: str | None, kv: _KV, fresh: bool) -> None:
        """Keep a conversation's KV; keep a fresh opening whole (the other episodes of its
        GRPO group open the same way) and learn a shared prompt head from two fresh
        openings."""
        if fresh and len(kv.ids) >= _MIN_SHARED_PREFIX and tuple(kv.ids) not in self._prefixes:
            if self._decoder is not None:  # read whole by batched products: contiguous
                kv = _KV(kv.ids, [(k.contiguous(), v.contiguous()) for k, v in kv.layers])
            self._prefixes[tuple(kv.ids)] = kv  # its tensors are never written to
        if fresh:
            other, self._last_opening = self._last_opening, kv.ids
            n = 0
            for a, b in zip(other, kv.ids, strict=False):
                if a != b:
                    break
                n += 1
            if n >= _MIN_SHARED_PREFIX and tuple(kv.ids[:n]) not in self._prefixes:
                head = [(k[:, :, :n].clone(), v[:, :, :n].clone()) for k, v in kv.layers]
                self._prefixes[tuple(kv.ids[:n])] = _KV(kv.ids[:n], head)
        if key is not None:
            shared = self._head_of(kv.ids) if self._decoder is not None else None
            if shared is not None and shared is not kv:
                # only the conversation's own tokens; the head's are kept once
                n = len(shared.ids)
                own = [(k[:, :, n:].clone(), v[:, :, n:].clone()) for k, v in kv.layers]
                kv = _KV(kv.ids, own, shared)
            self._kv[key] = kv
            self._kv.move_to_end(key)
        while len(self._prefixes) > _MAX_PREFIXES:
            self._prefixes.popitem(last=False)
        while self._cached_tokens() > self.max_cached_tokens and (self._kv or self._prefixes):
            (self._kv if self._kv else self._prefixes).popitem(last=False)

    def _prefill_rows(
        self, chunk: list[tuple[int, list[int], int]], keys: list[str | None]
    ) -> tuple[list[_KV], Any]:
        """Prefill each prompt alone from its longest kept prefix; returns each row's keys
        and values (as kept) and the rows' last logits ``[rows, 1, vocab]``."""
        from transformers import DynamicCache

        torch = self._torch
        if self.weights_version != self._kv_version:
            self.reset_kv()
            self._kv_version = self.weights_version
        rows: list[_KV] = []
        last_logits = []
        for (_, ids, _), key in zip(chunk, keys, strict=True):
            kept = self._lookup(key, ids)
            start = len(kept.ids) if kept is not None else 0
            past = DynamicCache(ddp_cache_data=kept.full()) if kept is not None else None
            out = self.model(
                input_ids=torch.tensor([ids[start:]], device=self.device),
                position_ids=torch.arange(start, len(ids), device=self.device)[None],
                past_key_values=past,
                use_cache=True,
                logits_to_keep=1,
            )
            cache = out.past_key_values
            layers = [(layer.keys, layer.values) for layer in cache.layers]
            kv = _KV(list(ids), layers)
            self._remember(key, kv, fresh=kept is None or kept is not self._kv.get(key or ""))
            rows.append(self._kv.get(key, kv) if key is not None else kv)
            last_logits.append(out.logits[:, -1:, :])
            self.kv_stats["prefilled"] += len(ids) - start
            self.kv_stats["reused"] += start
            del out, cache, layers, past
        return rows, torch.cat(last_logits)

    def _prefill_reusing(
        self, chunk: list[tuple[int, list[int], int]], keys: list[str | None]
    ) -> tuple[Any, Any, Any]:
        """Prefill each prompt alone from its longest kept prefix, then stack the rows'
        keys and values left-padded into one batch cache for decoding."""
        from transformers import DynamicCache

        torch = self._torch
        rows, logits = self._prefill_rows(chunk, keys)
        full = [kv.full() for kv in rows]
        width = max(len(kv.ids) for kv in rows)
        stacked = []
        for layer in range(len(rows[0].layers)):
            ks, vs = [], []
            for kv_layers in full:
                k, v = kv_layers[layer]
                pad = width - k.shape[2]
                if pad:
                    k = torch.nn.functional.pad(k, (0, 0, pad, 0))
                    v = torch.nn.functional.pad(v, (0, 0, pad, 0))
                ks.append(k)
                vs.append(v)
            stacked.append((torch.cat(ks), torch.cat(vs)))
        attention = torch.zeros((len(rows), width), dtype=torch.long, device=self.device)
        for row, kv in enumerate(rows):
            attention[row, width - len(kv.ids) :] = 1
        positions = torch.tensor([[len(kv.ids) - 1] for kv in rows], device=self.device)

        class _Out:
            past_key_values = DynamicCache(ddp_cache_data=stacked)

        _Out.logits = logits  # type: ignore[attr-defined]

        return _Out(), attention, positions

    def _start_plain(
        self, chunk: list[tuple[int, list[int], int]], keys: list[str | None], extra: int
    ) -> tuple[Any, Any]:
        """Prefill, then decode through the model's ``forward`` over one left-padded cache:
        the first logits ``[rows, vocab]`` and the step (next tokens -> next logits)."""
        torch = self._torch
        if self.reuse_kv:
            out, attention, positions = self._prefill_reusing(chunk, keys)
        else:
            out, attention, positions = self._prefill_padded(chunk)
        cache = out.past_key_values
        if self.full_attention:
            cache = _preallocated(cache, extra)
            self.peak_decode_bytes = max(
                self.peak_decode_bytes,
                sum(layer._k.nbytes + layer._v.nbytes for layer in cache.layers),
            )
        state = {"attention": attention, "positions": positions}

        def advance(nxt: Any) -> Any:
            attention = state["attention"]
            state["attention"] = torch.cat([attention, attention.new_ones((len(chunk), 1))], dim=1)
            state["positions"] = state["positions"][:, -1:] + 1
            out = self.model(
                input_ids=nxt[:, None],
                attention_mask=state["attention"],
                position_ids=state["positions"],
                past_key_values=cache,
                use_cache=True,
            )
            return out.logits[:, -1, :]

        return out.logits[:, -1, :], advance

    def _start_cascade(
        self, chunk: list[tuple[int, list[int], int]], keys: list[str | None], extra: int
    ) -> tuple[Any, Any]:
        """Prefill, then decode with the shared openings read once
        (:class:`~rods_agent.engines.cascade.CascadeDecoder`): rows that start with the same
        kept head form a group attending to that head's single copy; each row's buffer holds
        only its tokens after the head and the ``extra`` it may decode."""
        torch = self._torch
        rows, logits = self._prefill_rows(chunk, keys)
        groups = self._prefix_groups([kv.ids for kv in rows])
        order = [r for members, _ in groups for r in members]
        own, bounds, start = [], [], 0
        for members, head in groups:
            n = len(head.ids) if head is not None else 0
            for r in members:
                kv = rows[r]
                own.append([_joined(kv.pieces(n, layer)) for layer in range(len(kv.layers))])
            prefix = [(k[0], v[0]) for k, v in head.layers] if head is not None else []
            bounds.append((start, start + len(members), prefix))
            start += len(members)
        del rows
        state = self._decoder.start(own, [len(chunk[r][1]) for r in order], bounds, extra)
        del own
        self.peak_decode_bytes = max(self.peak_decode_bytes, state.nbytes())
        perm = torch.tensor(order, device=self.device)
        back = torch.argsort(perm)
        decoder = self._decoder

        def advance(nxt: Any) -> Any:
            return decoder.step(state, nxt[perm])[back]

        return logits[:, -1, :], advance

    def _prefix_groups(self, ids: list[list[int]]) -> list[tuple[list[int], _KV | None]]:
        """Rows grouped by the kept head they read once: each row takes its longest head
        that another row of the batch shares (a GRPO group's whole opening before the
        domain's common head); rows left alone decode without a prefix (head None). At
        most :data:`_MAX_GROUPS` groups, those that save the most reads first."""
        heads = [kv for kv in self._prefixes.values() if kv.head is None]

        def matching(row: list[int]) -> list[int]:
            found = [h for h, kv in enumerate(heads) if row[: len(kv.ids)] == kv.ids]
            return sorted(found, key=lambda h: -len(heads[h].ids))

        options = [matching(row) for row in ids]
        choice = [0] * len(ids)  # index into each row's options
        for _ in range(len(heads) + 1):
            count: dict[int, int] = {}
            for r, opts in enumerate(options):
                if choice[r] < len(opts):
                    count[opts[choice[r]]] = count.get(opts[choice[r]], 0) + 1
            moved = False
            for r, opts in enumerate(options):
                if choice[r] < len(opts) and count[opts[choice[r]]] < 2:
                    choice[r] += 1  # alone with this head: try a shorter one
                    moved = True
            if not moved:
                break
        members: dict[int, list[int]] = {}
        free = []
        for r, opts in enumerate(options):
            if choice[r] < len(opts):
                members.setdefault(opts[choice[r]], []).append(r)
            else:
                free.append(r)
        ranked = sorted(members.items(), key=lambda m: -(len(m[1]) - 1) * len(heads[m[0]].ids))
        groups: list[tuple[list[int], _KV | None]] = []
        for h, rows in ranked:
            if len(groups) < _MAX_GROUPS and len(rows) > 1:
                groups.append((rows, heads[h]))
            else:
                free += rows
        if free:
            groups.append((sorted(free), None))
        return groups

    def _generate_batch(
        self,
        chunk: list[tuple[int, list[int], int]],
        params: SamplingParams,
        seeds: list[int],
        keys: list[str | None],
    ) -> list[Completion]:
        """Left-padded batched decoding with a KV cache, one random stream per row."""
        torch = self._torch
        device = self.device
        rows = len(chunk)
        generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        caps = [cap for _, _, cap in chunk]
        stop = set(self._stop_ids)
        stops = params.stop
        # a stop string of n characters ends within the last 4n + 1 tokens (a character
        # may take up to four byte-level tokens)
        window = 4 * max((len(s) for s in stops), default=0) + 1
        tokens: list[list[int]] = [[] for _ in range(rows)]
        logprobs: list[list[float]] = [[] for _ in range(rows)]
        finish = ["length"] * rows
        live = [True] * rows
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                if self.reuse_kv and self._decoder is not None:
                    logits, advance = self._start_cascade(chunk, keys, max(caps))
                else:
                    logits, advance = self._start_plain(chunk, keys, max(caps))
                for t in range(max(caps)):
                    nxt, lps = sample_next(logits, params.temperature, params.top_p, generators)
                    nxt_list, lp_list = nxt.tolist(), lps.tolist()
                    for row in range(rows):
                        if not live[row]:
                            continue
                        tokens[row].append(nxt_list[row])
                        logprobs[row].append(float(lp_list[row]))
                        tail = self.chat.decode(tokens[row][-window:]) if stops else ""
                        if nxt_list[row] in stop or stop_end(tail, stops) is not None:
                            live[row], finish[row] = False, "stop"
                        elif t + 1 >= caps[row]:
                            live[row] = False
                    if not any(live):
                        break
                    logits = advance(nxt)
        finally:
            if was_training:
                self.model.train()
        return [
            Completion(
                text=self.chat.completion_text(tokens[row]),
                token_ids=tokens[row],
                logprobs=logprobs[row],
                finish_reason=finish[row],
                prompt_tokens=len(chunk[row][1]),
            )
            for row in range(rows)
        ]

    def close(self) -> None:
        """Drop the model."""
        self.model = None

    def __repr__(self) -> str:
        name = getattr(getattr(self.model, "config", None), "_name_or_path", "?")
        return f"TransformersEngine({name!r}, device={self.device!r})"
