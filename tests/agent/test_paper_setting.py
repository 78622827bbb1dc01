"""The RODS paper's setting, ``env=[bfcl-paper]``: training starts from BFCL multi-turn's
400 train tasks (100 per category, environments/bfcl/paper_split.json), mode rods grows the
pool with resampled variants of them that BFCL's own checker passes on their gold, and the
evaluation scores the other 400, which never enter a pool."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rods_agent.training.config import load_config
from rods_agent.training.loop import train
from rods_agent.training.pools import load_pools
from rods_env.errors import ConfigError
from rods_env.fileio import read_jsonl
from rods_env.task import load_tasks

ROOT = Path(__file__).resolve().parents[2]
SIMULATED = ROOT / "configs" / "train" / "simulated.yaml"


@pytest.fixture(scope="module")
def split():
    from environments.bfcl.apis import bfcl_missing
    from tests.requires import require

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")
    from environments.bfcl.split import paper_split

    return paper_split()


def _ids(split, half: str) -> set[str]:
    return {task_id for task_id, side in split.items() if side == half}


def test_the_pool_is_bfcls_train_half_and_the_test_split_its_other_half(split):
    train_tasks, test_tasks = load_pools(load_config(SIMULATED, ["env=[bfcl-paper]"]))
    assert len(train_tasks) == 400 and len(test_tasks) == 400
    assert {t.id for t in train_tasks} == _ids(split, "train")
    assert {t.id for t in test_tasks} == _ids(split, "test")
    assert Counter(t.skill for t in train_tasks) == {
        "base": 100,
        "miss_param": 100,
        "miss_func": 100,
        "long_context": 100,
    }
    assert {t.split for t in train_tasks} == {"train"} and {t.split for t in test_tasks} == {"test"}
    assert {t.domain for t in train_tasks + test_tasks} == {"bfcl-paper"}


def test_expansion_is_refused_on_bfcl_tasks(split):
    from rods_agent.data import DataEngine
    from rods_env.registry import load_any_domain

    domain = load_any_domain("bfcl-paper")
    with pytest.raises(ConfigError, match="use mode=rods"):
        DataEngine(mode="rods-expand", tasks=domain.seed_tasks("train"))


def test_a_rods_run_grows_the_pool_with_variants_bfcls_checker_passes(tmp_path, split):
    import gymnasium

    import rods_env  # noqa: F401  (registers the ids)
    from rods_env.registry import load_any_domain

    out = tmp_path / "run"
    overrides = [
        "env=[bfcl-paper]", "mode=rods", "steps=3", f"out={out}", "seed=0",
        "rollout.tasks_per_step=4", "rollout.group_size=4",
        "data.capacity=420", "data.admit_per_step=4", "data.max_candidates=8",
        "data.synth_per_boundary=1", "log.eval_every=3", "log.eval_tasks=8",
        "log.progress=false", "log.checkpoint_every=0",
    ]  # fmt: skip
    train(load_config(SIMULATED, overrides))
    rows = read_jsonl(out / "metrics.jsonl")
    assert rows[-1]["synth_modes"] == ["resample"]
    pool = load_tasks(out / "pool.jsonl")  # written as JSON and read back: payloads survive
    synthesized = [t for t in pool if t.provenance.origin == "synthesized"]
    assert synthesized, "no resampled BFCL variant entered the pool"
    test_ids = _ids(split, "test")
    parents = {t.id: t for t in load_any_domain("bfcl-paper").seed_tasks("train")}
    env = gymnasium.make("rods/BFCL-Paper-v0")
    oracle_of = load_any_domain("bfcl-paper").oracle_agent
    for task in synthesized:
        assert task.id not in test_ids and task.provenance.parent_id in parents
        parent = parents[task.provenance.parent_id]
        assert len(task.turns) == len(parent.turns)
        assert [[c.name for c in t.calls] for t in task.turns] == [
            [c.name for c in t.calls] for t in parent.turns
        ]
        assert task.payload != parent.payload and task.turns != parent.turns  # new values
        agent = oracle_of(task)
        obs, info = env.reset(options={"task": task})
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
            done = terminated or truncated
        assert info["success"], f"{task.id}: BFCL's checker fails its own gold"
    evals = [r["eval"] for r in rows if "eval" in r]
    assert evals and all(e["tasks"] == 8 for e in evals)
