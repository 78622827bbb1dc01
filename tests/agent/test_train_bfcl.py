"""``rods train env=[bfcl]``: the paper's setting. Training draws on the BFCL API world's
tasks (rods' own, over BFCL's API classes) and the data engine synthesizes more of them;
the evaluation is BFCL multi-turn's 800 tasks, which never enter the pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from rods_agent.training.config import load_config
from rods_agent.training.loop import train
from rods_agent.training.pools import load_pools
from rods_env.fileio import read_jsonl
from rods_env.task import load_tasks

ROOT = Path(__file__).resolve().parents[2]
SIMULATED = ROOT / "configs" / "train" / "simulated.yaml"


@pytest.fixture(scope="module")
def bfcl_ids():
    from environments.bfcl.apis import bfcl_missing
    from tests.requires import require

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")
    from environments.bfcl.tasks import task_index

    return set(task_index())


def test_the_pool_is_the_bfcl_api_world_and_the_test_split_is_bfcls_800(bfcl_ids):
    train_tasks, test_tasks = load_pools(load_config(SIMULATED, ["env=[bfcl]"]))
    assert train_tasks and {t.domain for t in train_tasks} == {"bfcl-api"}
    assert {t.split for t in train_tasks} == {"train"}
    assert len(test_tasks) == 800 and {t.id for t in test_tasks} == bfcl_ids
    assert {t.domain for t in test_tasks} == {"bfcl"}
    assert not {t.id for t in train_tasks} & bfcl_ids


def test_only_the_train_split_trains_for_bfcl(bfcl_ids):
    from rods_env.errors import ConfigError

    with pytest.raises(ConfigError, match="evaluated only"):
        load_pools(load_config(SIMULATED, ["env=[bfcl]", "data.split=all"]))


def test_a_simulated_run_grows_a_pool_free_of_bfcl_tasks_and_evaluates_on_bfcl(tmp_path, bfcl_ids):
    out = tmp_path / "run"
    overrides = [
        "env=[bfcl]", "mode=rods", "steps=8", f"out={out}", "seed=2",
        "rollout.tasks_per_step=4", "rollout.group_size=4",
        "data.capacity=40", "data.admit_per_step=4", "data.max_candidates=8",
        "data.synth_per_boundary=1", "log.eval_every=4", "log.progress=false",
        "log.checkpoint_every=0",
    ]  # fmt: skip
    train(load_config(SIMULATED, overrides))
    rows = read_jsonl(out / "metrics.jsonl")
    evals = [r["eval"] for r in rows if "eval" in r]
    assert evals and all(e["tasks"] == 800 for e in evals)
    pool = load_tasks(out / "pool.jsonl")
    assert pool and {t.domain for t in pool} == {"bfcl-api"}
    assert not {t.id for t in pool} & bfcl_ids
    synthesized = [t for t in pool if t.provenance.origin == "synthesized"]
    assert synthesized  # the data engine grew the world's tasks
    from environments.bfcl.world.contamination import report

    assert report(synthesized)["tasks_sharing_anything"] == 0


@pytest.mark.slow
def test_the_tiny_model_trains_on_the_world_and_is_evaluated_on_bfcl(
    tmp_path, tiny_model_dir, bfcl_ids
):
    pytest.importorskip("torch")
    out = tmp_path / "model-run"
    overrides = [
        "policy=model", "mode=filter", "env=[bfcl]", "steps=1", f"out={out}", "seed=1",
        f"model.path={tiny_model_dir}", "model.threads=1",
        "rollout.tasks_per_step=1", "rollout.group_size=2", "rollout.max_turns=2",
        "rollout.max_new_tokens=8", "rollout.max_tokens=32768",
        "log.eval_every=1", "log.eval_tasks=2", "log.progress=false", "log.tensorboard=false",
        "log.checkpoint_every=0",
    ]  # fmt: skip
    train(load_config(SIMULATED, overrides))
    (row,) = read_jsonl(out / "metrics.jsonl")
    assert row["policy"] == "model" and row["tokens"] > 0
    assert row["eval"]["tasks"] == 2
    assert set(row["eval"]["by_domain"]) == {"bfcl"}
    assert "BFCL" in row["eval"]["headline"]  # BFCL's own leaderboard numbers
