"""benchmarks/rollout_speed.py at a tiny size (the tiny random model, a few tokens): the
JSON it prints has every field, each path's children ran, and without vLLM the baseline is
the transformers engine's plain path (CI runs this with ``--benchmark-disable``).

The measurement itself: ``.venv-vllm/bin/python benchmarks/rollout_speed.py --json``
(SmolLM2, minutes; docs/training.md, "Generation speed and memory").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIELDS = (
    "baseline_step_seconds", "step_seconds", "baseline_tokens_per_s", "tokens_per_s",
    "decode_fraction_of_bound", "peak_rss_gb", "matmul_gflops", "read_gb_s",
)  # fmt: skip


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from rods_agent.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def test_rollout_speed_json_at_a_tiny_size(benchmark: Any, tiny_model: Path) -> None:
    cmd = [
        sys.executable, str(ROOT / "benchmarks" / "rollout_speed.py"), "--json",
        "--model", str(tiny_model), "--tasks", "1", "--group", "2", "--turns", "1",
        "--new-tokens", "4", "--batch", "4", "--decode-tasks", "2", "--decode-steps", "2",
        "--reps", "1", "--timeout", "300", "--in-process",
    ]  # fmt: skip
    if sys.modules.get("vllm") is None:
        import importlib.util

        if importlib.util.find_spec("vllm") is not None:
            cmd += ["--baseline", "plain"]  # the tiny run stays off vLLM's start-up
    out: dict[str, Any] = {}

    def run() -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
        out.update(json.loads(proc.stdout.strip().splitlines()[-1]))

    benchmark.pedantic(run, rounds=1, iterations=1)
    for field in FIELDS:
        assert isinstance(out[field], float) and out[field] >= 0, field
    assert out["baseline"] == "plain" and out["new"] == "cascade"
    assert {len(v) for v in out["runs"].values()} == {1}
    for rows in out["runs"].values():
        assert all(r.get("errors", 0) == 0 for r in rows)
