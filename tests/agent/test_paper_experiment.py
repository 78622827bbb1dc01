"""configs/paper.yaml, the RODS paper's setting as a ``rods experiment``: Qwen3-4B-Instruct-2507
on ``bfcl-paper`` (BFCL's 400 train tasks, the other 400 held out), static / envtuning / rods
from the base model, scored by BFCL's own numbers per category beside the paper's rows.

The whole protocol runs here with the tiny random model on a CPU (the mechanics: pools, the
base model's evaluation, every arm, each run's last checkpoint on the test split, the
summary); what it learns is not the point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rods_agent.experiment.config import load_experiment
from rods_env.errors import ConfigError
from rods_env.fileio import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "configs" / "paper.yaml"

TINY = [
    # the tiny random model (train.model.path null: built once under <out>/tiny-model), small
    "train.model.path=null", "train.model.device=cpu", "train.model.engine=transformers",
    "train.model.gradient_checkpointing=false", "train.model.threads=1",
    "runs.seeds=[0]", "runs.steps=1",
    "pool.rl_tasks=2",          # spread over categories: 2 train tasks
    "eval.test_tasks=4",        # the test split in turns by category: one of each
    "train.rollout.tasks_per_step=2", "train.rollout.group_size=2",
    "train.rollout.max_turns=2", "train.rollout.max_new_tokens=8",
    # BFCL's openings take 3.3-7.8k of the tiny tokenizer's tokens (its tools' schemas)
    "train.rollout.max_tokens=12000", "train.rollout.batch_size=0",
    "train.grpo.micro_batch_size=4", "train.log.tensorboard=false",
]  # fmt: skip


@pytest.fixture(scope="module")
def bfcl():
    from environments.bfcl.apis import bfcl_missing
    from tests.requires import require

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup_bfcl.sh")


# -- the configuration ---------------------------------------------------------------------------
def test_the_paper_config_is_the_papers_setting_with_equal_rollouts_across_arms():
    config = load_experiment(PAPER)
    assert config.env == "bfcl-paper" and config.benchmark and config.start == "base"
    assert config.runs.modes == ["static", "envtuning", "rods"]
    assert not config.train.warm_start.enabled and config.pool.validation == 0
    assert config.pool.rl_tasks == 0 and config.eval.test_tasks == 0  # all 400 and 400
    train = config.train
    assert (train.rollout.tasks_per_step, train.rollout.group_size) == (32, 16)
    assert (train.grpo.lr, train.grpo.kl_coef) == (1e-6, 0.1)
    assert (train.grpo.clip_low, train.grpo.clip_high) == (0.2, 0.28)
    assert train.grpo.loss_agg == "seq-mean-token-mean" and train.data.capacity == 800
    assert train.model.device == "cuda" and train.model.path.endswith("Qwen3-4B-Instruct-2507")


def test_every_value_of_the_paper_config_names_its_source():
    """Each setting line carries a comment that starts with its source."""
    sources = ("RODS (abstract)", "ET ", "ours", "replace:")
    for number, line in enumerate(PAPER.read_text().splitlines(), 1):
        text = line.split("#", 1)
        _key, _, value = text[0].partition(":")
        if not value.strip():  # a section, a comment or a blank line
            continue
        assert len(text) == 2, f"configs/paper.yaml:{number}: {line.strip()} has no source"
        assert text[1].strip().startswith(sources), f"configs/paper.yaml:{number}: {text[1]}"


@pytest.mark.parametrize(
    ("override", "refusal"),
    [
        (
            "train.warm_start.enabled=true",
            "train.warm_start.enabled: env bfcl-paper is a benchmark",
        ),
        ("pool.validation=4", "pool.validation: without a warm start"),
        ("runs.modes=[static,rods-expand]", "runs.modes has rods-expand"),
        ("eval.final_variants=2", "eval.final_variants / eval.final_fresh synthesize"),
        ("pool.rl_from=synthesized", "pool.rl_from: synthesized are the warm start's tasks"),
        ("env=bfcl", "env: bfcl has no train split of its own"),
    ],
)
def test_meaningless_combinations_are_refused_in_one_line(override, refusal):
    with pytest.raises(ConfigError, match=refusal.replace("(", r"\(").replace(".", r"\.")) as exc:
        load_experiment(PAPER, [override])
    assert "\n" not in str(exc.value)


# -- the whole protocol on a CPU -----------------------------------------------------------------
@pytest.mark.slow
def test_the_paper_experiment_runs_end_to_end_with_a_tiny_model(tmp_path, bfcl):
    """Pools from bfcl-paper's halves, the base model on the test split, static / envtuning /
    rods for a step each, each run's last checkpoint on the test split, and the summary:
    BFCL's numbers per category per arm with the paper's rows; no test task in any pool;
    optimizer steps by the one rule; a rerun finds everything done."""
    out = tmp_path / "paper"
    command = [
        sys.executable,
        "-m",
        "rods_agent.cli",
        "experiment",
        str(PAPER),
        f"out={out}",
        *TINY,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runs: rods seed 0 (run 3 of 3)" in proc.stderr

    from environments.bfcl.split import paper_split

    split = paper_split()
    pools = json.loads((out / "pools" / "done.json").read_text())
    assert pools == {"train_seeds": 400, "rl_pool": 2, "validation": 0, "test": 400,
                     "synthesized": 0}  # fmt: skip
    test_ids = {t["id"] for t in read_jsonl(out / "pools" / "test.jsonl")}
    assert test_ids == {t for t, side in split.items() if side == "test"}
    first = [t["skill"] for t in read_jsonl(out / "pools" / "test.jsonl")[:4]]
    assert sorted(first) == ["base", "long_context", "miss_func", "miss_param"]

    summary = json.loads((out / "summary.json").read_text())
    for mode in ("static", "envtuning", "rods"):
        run = out / "runs" / f"{mode}-s0"
        # no test task entered the run's pool: not at the start, not after it
        started = {t["id"] for t in read_jsonl(run / "pool.jsonl")}
        assert started and not started & test_ids, mode
        for task in read_jsonl(run / "pool.jsonl"):
            parent = (task.get("provenance") or {}).get("parent_id") or task["id"]
            assert split.get(parent) == "train", (mode, task["id"])
        rows = [r for r in read_jsonl(run / "metrics.jsonl") if "step" in r]
        assert [r["step"] for r in rows] == [0] and rows[0]["terminations"]["error"] == 0
        # the one update rule: an optimizer step exactly when a group had reward variance
        # (a token with a non-zero advantage; the KL term alone takes none), in every arm
        for r in rows:
            assert r["optimizer_steps"] == (1 if r["effective_group_ratio"] > 0 else 0), mode
            episodes = sum(r["terminations"].values())
            assert episodes == 2 * 2, mode  # tasks_per_step x group_size: equal rollouts
        assert summary["modes"][mode]["optimizer_steps"] == sum(r["optimizer_steps"] for r in rows)
        exported = out / "final" / "test-split" / "step-1" / "models" / f"{mode}-s0"
        assert json.loads((exported / "rods_export.json").read_text())["steps"] == 1
    assert [r["mode"] for r in _configs(out)] == ["static", "envtuning", "rods"]
    same = {(c["rollout"]["tasks_per_step"], c["rollout"]["group_size"], c["steps"],
             c["grpo"]["epochs"]) for c in _configs(out)}  # fmt: skip
    assert same == {(2, 2, 1, 1)}  # equal rollouts and optimizer-step rule across arms

    bench = summary["benchmark"]
    assert bench["title"] == "BFCL-Paper" and bench["tasks"] == 4
    assert bench["columns"] == ["overall", "base", "miss_func", "miss_param", "long_context"]
    assert list(bench["models"]) == ["base", "static", "envtuning", "rods"]
    for name, m in bench["models"].items():
        assert m["scores"]["overall"] is None  # 4 of 400: BFCL computes no overall
        assert all(m["scores"][c] is not None for c in bench["columns"][1:]), name
    table = (out / "summary.md").read_text()
    assert "## BFCL-Paper: the benchmark's own numbers on the test split" in table
    assert "| model | overall | base | miss_func | miss_param | long_context |" in table
    assert (
        "| paper: RODS (Qwen3-4B-Instruct-2507) | 56.00 | 68.00 | 59.00 | 44.00 | 53.00 |" in table
    )
    assert "| paper: base model (Qwen3-4B-Instruct-2507) | 22.13 | - |" in table
    assert "not confirmed" in table
    again = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "evaluating" not in again.stderr and "runs: static" not in again.stderr


def _configs(out: Path) -> list[dict]:
    import yaml

    return [
        yaml.safe_load((out / "runs" / f"{mode}-s0" / "run.yaml").read_text())
        for mode in ("static", "envtuning", "rods")
    ]
