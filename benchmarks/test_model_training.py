"""The model policy on CPU: the warm start's effect and where a real tiny-model step's time goes.

Both take minutes, so they run only when asked (CI skips them):

    RODS_BENCH_MODEL=1 pytest benchmarks/test_model_training.py --benchmark-only -s

* ``test_warm_start_progress``: the tiny model of ``configs/train/cpu.yaml``, warm-started as the
  loop does (on the data engine's active pool), scored on every train seed of the domain
  before and after (one seeded episode each, the rollout's sampling).
* ``test_cpu_default_run``: ``rods train --config configs/train/cpu.yaml`` in a subprocess; its
  wall time, and the shares of a step (generation, environment, update, data engine and
  synthesis) from ``metrics.jsonl``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "configs" / "train" / "cpu.yaml"
pytestmark = pytest.mark.skipif(
    os.environ.get("RODS_BENCH_MODEL") != "1",
    reason="measurements, 5-10 minutes of CPU each: set RODS_BENCH_MODEL=1 (the code they time "
    "runs in CI in tests/agent/test_train_model.py and tests/agent/test_model_policy.py)",
)


def test_warm_start_progress(benchmark: Any, tmp_path: Path) -> None:
    """Mean progress on the train seeds, and on the warm-started tasks, before and after."""
    from rods_agent.data import DataEngine
    from rods_agent.engines import SamplingParams
    from rods_agent.training.config import load_config
    from rods_agent.training.model_policy import ModelPolicy
    from rods_agent.training.pools import load_pools
    from rods_agent.training.warm_start import mean_progress

    config = load_config(CPU, [f"out={tmp_path}", "log.progress=false"])
    train, test = load_pools(config)
    engine = DataEngine(config.data, mode=config.mode, tasks=train, reserved=test, seed=config.seed)
    policy = ModelPolicy(config, tmp_path)
    rc = config.rollout
    sampling = SamplingParams(max_tokens=rc.max_new_tokens, temperature=rc.temperature)

    def on_train_split() -> float:
        return mean_progress(
            policy.engine, train, sampling, max_turns=rc.max_turns, max_tokens=rc.max_tokens,
            seed=config.seed,
        )  # fmt: skip

    before = on_train_split()
    out: dict[str, float] = {}
    benchmark.pedantic(lambda: out.update(policy.warm_start(engine.active)), rounds=1, iterations=1)
    after = on_train_split()
    benchmark.extra_info.update(out, train_before=before, train_after=after, train_tasks=len(train))
    print(
        f"\nwarm start on {int(out['tasks'])} of {int(out['pool_tasks'])} active tasks, "
        f"{int(out['steps'])} steps in {out['seconds']:.0f} s (loss {out['loss_first']:.3f} -> "
        f"{out['loss_last']:.4f}):\n"
        f"| tasks | progress before | progress after |\n|---|---|---|\n"
        f"| the warm-started tasks | {out['progress_before']:.3f} | {out['progress_after']:.3f} |\n"
        f"| all {len(train)} train seeds | {before:.3f} | {after:.3f} |"
    )


def test_cpu_default_run(benchmark: Any, tmp_path: Path) -> None:
    """``rods train`` on configs/train/cpu.yaml: wall time and where a step's time goes."""
    out = tmp_path / "cpu"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "rods_agent.cli", "train", "--config", str(CPU), f"out={out}"]
    started = time.perf_counter()
    proc = benchmark.pedantic(
        lambda: subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT),
        rounds=1,
        iterations=1,
    )
    wall = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    warm = json.loads((out / "warm_start.json").read_text())
    total = {k: sum(r["time"].get(k, 0.0) for r in rows) for k in rows[0]["time"]}
    step = total["step"]
    data = total["engine"] + total["synthesis"]
    shares = {k: total[k] / step for k in ("generate", "env", "update", "eval")}
    benchmark.extra_info.update(
        wall_s=wall, warm_start_s=warm["total_seconds"], steps_s=step, data_share=data / step,
        **{f"{k}_share": v for k, v in shares.items()},
    )  # fmt: skip
    print(
        f"\nrods train --config configs/train/cpu.yaml: {wall:.0f} s wall ({warm['total_seconds']:.0f} s "
        f"warm start, {step:.0f} s in {len(rows)} steps)\n"
        "| part of the steps | seconds | share |\n|---|---|---|\n"
        + "".join(f"| {k} | {total[k]:.1f} | {v:.1%} |\n" for k, v in shares.items())
        + f"| data engine + synthesis | {data:.2f} | {data / step:.2%} |\n"
        f"mean reward by step: {[round(r['reward'], 3) for r in rows]}, effective group ratio "
        f"{[r['effective_group_ratio'] for r in rows]}"
    )
