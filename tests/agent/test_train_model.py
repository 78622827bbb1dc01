"""``rods train`` with the model policy (tiny model) in a subprocess: warm start, GRPO steps,
checkpoints, kill -9, ``--resume`` gives the unbroken run's metrics, ``rods report``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rods_agent.training.metrics import TIMING_FIELDS
from rods_agent.training.run_dir import checkpoint_dirs
from rods_env.fileio import read_jsonl

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).with_name("model_train.py")


def settings(model: Path, out: Path) -> list[str]:
    return [
        "policy=model", "mode=filter", "steps=3", f"out={out}", "env=[airline]", "seed=3",
        f"model.path={model}", "model.threads=1",
        "rollout.tasks_per_step=2", "rollout.group_size=3", "rollout.max_turns=2",
        "rollout.max_new_tokens=6", "rollout.max_tokens=12000",
        "grpo.lr=0.01", "grpo.micro_batch_size=3",
        "warm_start.enabled=true", "warm_start.tasks=2", "warm_start.epochs=1",
        "warm_start.batch_size=2", "warm_start.max_tokens=12000", "warm_start.measure=false",
        "log.checkpoint_every=1", "log.keep_checkpoints=3", "log.progress=false",
        "log.eval_every=3", "log.eval_tasks=2",
    ]  # fmt: skip


def run(kill: str, at: int, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, str(LAUNCHER), kill, str(at), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200)


def untimed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in rows]


def test_model_policy_run_killed_and_resumed_matches_an_unbroken_run(tiny_model_dir, tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = run("none", -1, *settings(tiny_model_dir, whole))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_jsonl(whole / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(r["policy"] == "model" and r["tokens"] > 0 and r["tokens_per_s"] > 0 for r in rows)
    updated = [r for r in rows if r["update"]]
    assert updated and all(r["update"]["weights_version"] >= 1 for r in updated)
    versions = [r["update"]["weights_version"] for r in updated]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert all({"generate", "env", "update", "synthesis"} <= set(r["time"]) for r in rows)
    warm = json.loads((whole / "warm_start.json").read_text())
    assert warm["transcripts"] == 2 and warm["steps"] == 1
    assert [n for n, _ in checkpoint_dirs(whole)] == [1, 2, 3]
    evaluation = rows[-1]["eval"]  # at the last step, seeded: part of the compared metrics
    assert evaluation["tasks"] == 2 and "progress" in evaluation and "gen_seconds" not in evaluation

    dead = run("rollouts", 2, *settings(tiny_model_dir, killed))
    assert dead.returncode == -signal.SIGKILL, dead.stderr[-3000:]
    assert [r["step"] for r in read_jsonl(killed / "metrics.jsonl")] == [0, 1]
    again = run("none", -1, "--resume", f"out={killed}")
    assert again.returncode == 0, again.stderr[-3000:]
    assert untimed(read_jsonl(killed / "metrics.jsonl")) == untimed(rows)
    final = checkpoint_dirs(killed)[-1][1] / "policy"
    expected = checkpoint_dirs(whole)[-1][1] / "policy"
    import torch

    got, want = torch.load(final / "trainable.pt"), torch.load(expected / "trainable.pt")
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in got)

    # rods export: the checkpoint's weights as a model folder rods eval loads
    exported = subprocess.run(
        [sys.executable, "-m", "rods_agent.cli", "export", str(whole), "--step", "2",
         "--out", str(tmp_path / "exported")],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr[-3000:]
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "exported")
    trained = torch.load(dict(checkpoint_dirs(whole))[2] / "policy" / "trainable.pt")
    params = dict(model.named_parameters())
    assert trained.keys() <= params.keys()
    assert all(torch.equal(params[k], v.to(params[k].dtype)) for k, v in trained.items())
    base = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir).named_parameters())
    assert any(not torch.equal(base[k], params[k]) for k in trained)  # it trained: not the base
    meta = json.loads((tmp_path / "exported" / "rods_export.json").read_text())
    assert meta["steps"] == 2
    missing = subprocess.run(
        [sys.executable, "-m", "rods_agent.cli", "export", str(whole), "--step", "7", "--out",
         str(tmp_path / "none")], capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert (
        missing.returncode == 2 and "no checkpoint after 7 steps (have: 1, 2, 3)" in missing.stderr
    )

    report = subprocess.run([sys.executable, "-m", "rods_agent.cli", "report", str(killed)],
                            capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert (killed / "report" / "reward.png").read_bytes()[:4] == b"\x89PNG"
