"""scripts/gpu_check.sh on a CPU (``--device cpu``): the path the GPU check takes (a tiny
Qwen3, a warm start, GRPO steps in bf16 with the transformers engine), its report, its
verdict, and the bundled dependencies a GPU machine without network uses. The CUDA path
itself runs only on a GPU machine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.requires import REQUIRED, require

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
WHEELS = ROOT / ".gpu-check" / "wheels"
QWEN3 = ROOT / ".assets" / "tokenizers" / "qwen3"


def check(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, env=environ,
        timeout=900,
    )  # fmt: skip


def lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [x for x in proc.stdout.splitlines() if x.startswith("gpu_check: ")]


def require_qwen3() -> None:
    require((QWEN3 / "tokenizer.json").is_file(), f"no Qwen3 tokenizer at {QWEN3}",
            "bash scripts/setup.sh tokenizers")  # fmt: skip


def test_the_check_runs_on_a_cpu_with_qwen3s_tokenizer_and_reports_what_a_gpu_run_would(
    tmp_path,
):
    """Qwen3's real tokenizer and chat template; with the wheel bundle
    (``bash scripts/setup.sh gpu-check``, which CI runs) the check takes rods' dependencies
    from it, as on a GPU machine without them."""
    require_qwen3()
    bundled = (WHEELS / ".stamp").is_file()
    if REQUIRED and not bundled:
        pytest.fail(f"no wheel bundle at {WHEELS}: run `bash scripts/setup.sh gpu-check`")
    proc = check("--device", "cpu", "--out", str(tmp_path / "run"), OUT=str(tmp_path / "out"),
                 GPU_CHECK_VENDORED="1" if bundled else "0")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("rods' dependencies from" in proc.stdout) == bundled
    shown = "\n".join(lines(proc))
    for what in ("tokens/s: generation", "share of step time outside the model",
                 "peak GPU memory", "terminations", "verdict: ok"):  # fmt: skip
        assert what in shown, shown
    summary = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert summary == json.loads((tmp_path / "run" / "gpu_check.json").read_text())
    assert summary["steps"] == 2 and summary["terminations"]["error"] == 0
    assert sum(summary["terminations"].values()) == 8 and summary["loss_tokens"] > 0
    assert summary["generate_tokens_per_s"] > 0 and 0 < summary["outside_model_share"] < 1
    assert summary["warm_start"]["transcripts"] == 2 and summary["checkpoint_mb"] > 0


def test_an_episode_in_error_fails_the_check_with_the_cause(tmp_path):
    # Qwen3's template made to fail on any message after an assistant message (as Gemma 3's
    # fails on a tool message): the opening renders, every observation fails.
    require_qwen3()
    broken = tmp_path / "qwen3-broken"
    broken.mkdir()
    (broken / "tokenizer.json").write_bytes((QWEN3 / "tokenizer.json").read_bytes())
    config = json.loads((QWEN3 / "tokenizer_config.json").read_text())
    config["chat_template"] = (
        "{%- for m in messages %}{%- if not loop.first and loop.previtem.role == 'assistant' %}"
        "{{ raise_exception('Conversation roles must alternate') }}{%- endif %}{%- endfor %}"
        + config["chat_template"]
    )
    (broken / "tokenizer_config.json").write_text(json.dumps(config))
    proc = check("--device", "cpu", "--tokenizer", str(broken), "--out", str(tmp_path / "run"),
                 "--steps", "1")  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    [verdict] = [x for x in lines(proc) if "verdict" in x]
    # The warm start's oracle transcripts meet the broken template first and stop the run.
    assert verdict.startswith("gpu_check: verdict: FAILED: ")
    assert "Conversation roles must alternate" in verdict


def test_without_a_gpu_or_a_tokenizer_the_check_says_so(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here: the check would run")
    proc = check("--device", "cuda", "--tokenizer", str(tmp_path))
    assert proc.returncode == 2 and "torch sees no GPU" in proc.stderr
    proc = check("--device", "cpu", "--tokenizer", str(tmp_path))
    assert proc.returncode == 2 and "no tokenizer.json" in proc.stderr
    (tmp_path / "tokenizer.json").write_text("{}")  # not a tokenizer of Qwen3's kind
    proc = check("--device", "cpu", "--tokenizer", str(tmp_path), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "gpu_check: error: cannot build the tiny Qwen3" in proc.stderr


def test_the_experiment_check_runs_configs_gpu_yaml_protocol_on_a_cpu(tmp_path):
    """``--experiment``: configs/experiment/gpu.yaml's protocol (pools, warm start, every mode, held-out
    evaluation, the summary) with the tiny Qwen3, on the CPU here, on CUDA there."""
    require_qwen3()
    proc = check("--experiment", "--device", "cpu", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shown = "\n".join(lines(proc))
    assert "runs: rods seed 0 (run 3 of 3)" in shown and "verdict: ok" in shown, shown
    summary = json.loads((tmp_path / "run" / "experiment" / "summary.json").read_text())
    assert set(summary["modes"]) == {"static", "filter", "rods"}
    for mode in summary["modes"].values():
        assert [c["step"] for c in mode["curve"]] == [0, 1, 2]
        assert mode["terminations"].get("error", 0) == 0


def test_the_paper_check_runs_configs_paper_yaml_first_steps_on_a_cpu(tmp_path):
    """``--paper``: configs/experiment/paper.yaml (bfcl-paper; static, envtuning, rods; no warm start)
    with the tiny random model on the CPU here, a given model folder on CUDA there: every
    stage, and the summary's BFCL table with the paper's rows."""
    from environments.bfcl.apis import bfcl_missing

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")
    proc = check("--paper", "--device", "cpu", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shown = "\n".join(lines(proc))
    assert "runs: rods seed 0 (run 3 of 3)" in shown and "verdict: ok" in shown, shown
    assert "optimizer steps" in shown
    summary = json.loads((tmp_path / "run" / "paper" / "summary.json").read_text())
    assert list(summary["modes"]) == ["static", "envtuning", "rods"]
    assert list(summary["benchmark"]["models"]) == ["base", "static", "envtuning", "rods"]
    assert "| paper: RODS" in (tmp_path / "run" / "paper" / "summary.md").read_text()


def test_the_paper_check_needs_a_model_folder_on_a_gpu(tmp_path):
    proc = check("--paper", "--device", "cpu", "--model", str(tmp_path / "none"))
    assert proc.returncode == 2 and "no model folder" in proc.stderr
    proc = check("--device", "cpu", "--model", str(tmp_path))
    assert proc.returncode == 2 and "--model goes with --paper" in proc.stderr
