"""rods eval, rods train and rollouts on a benchmark domain (the toy benchmark of
tests/core/toy_benchmark.py, so no real benchmark is needed)."""

from __future__ import annotations

import pytest

from rods_agent.data import DataEngine
from rods_agent.engines import oracle_engine
from rods_agent.evaluation.evaluate import evaluate, load_pool
from rods_agent.rollouts.batch import DomainRouter, EpisodeSpec, RolloutConfig, run_rollouts
from rods_agent.training.config import load_config
from rods_agent.training.pools import load_pools
from rods_env.errors import ConfigError
from rods_env.task import dump_tasks
from tests.core.toy_benchmark import TOY_BENCH, install, uninstall


@pytest.fixture
def toy(monkeypatch):
    install(monkeypatch)
    yield TOY_BENCH
    uninstall()


def test_evaluate_runs_a_benchmark_domain_through_its_own_environment(toy, tmp_path):
    tasks = load_pool("toy-bench", "seeds", "all")
    summary = evaluate(oracle_engine(tasks), tasks, k=1, out=tmp_path / "run")
    assert summary.pass_k[1] == 1.0 and summary.terminations == {"user_stop": len(tasks)}
    assert summary.by_skill.keys() == {"enter", "nothing"}
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "User: rods' scripted user (on a benchmark domain, a deterministic stand-in" in md


def test_a_user_mode_the_domain_lacks_is_refused(toy):
    tasks = load_pool("toy-bench", "seeds", "test")
    with pytest.raises(ConfigError, match="toy-bench takes the users scripted, llm, not 'solo'"):
        evaluate(oracle_engine(tasks), tasks, user="solo")


def test_the_rollout_router_builds_benchmark_environments(toy):
    tasks = TOY_BENCH.seed_tasks("train")
    records = run_rollouts(
        oracle_engine(tasks),
        lambda: DomainRouter(max_steps=5),
        [EpisodeSpec(t) for t in tasks],
        RolloutConfig(max_turns=5),
    )
    assert [r.success for r in records] == [True] * len(tasks)
    assert all(sum(r.rewards) == r.progress for r in records)
    with pytest.raises(ConfigError, match="retail has no solo mode"):
        from rods_env.registry import load_domain

        DomainRouter(solo=True).route(load_domain("retail").seed_tasks("train")[0])


def test_training_pools_take_the_train_split_without_exploitable_tasks(toy, tmp_path):
    config = load_config(None, ["env=[toy-bench]", "policy=simulated", "mode=static"])
    train, test = load_pools(config)
    assert [t.id for t in train] == ["toy-bench:1", "toy-bench:2", "toy-bench:3"]
    assert {t.split for t in test} == {"test"}
    train, _ = load_pools(load_config(None, ["env=[toy-bench]", "data.keep_exploitable=true"]))
    assert "toy-bench:0" in {t.id for t in train}
    with pytest.raises(ConfigError, match=r"data\.keep_trivial is now data\.keep_exploitable"):
        load_config(None, ["env=[toy-bench]", "data.keep_trivial=true"])
    with pytest.raises(ConfigError, match="train split only, not 'all'"):
        load_pools(load_config(None, ["env=[toy-bench]", "data.split=all"]))
    pool = tmp_path / "pool.jsonl"
    dump_tasks(TOY_BENCH.seed_tasks(), pool)
    with pytest.raises(ConfigError, match="holds toy-bench:4, a test task of toy-bench"):
        load_pools(load_config(None, ["env=[toy-bench]", f"data.pool={pool}"]))


def test_mode_rods_says_why_a_benchmark_cannot_be_synthesized(toy):
    with pytest.raises(ConfigError, match="mode=rods synthesizes tasks, but toy-bench cannot"):
        DataEngine(mode="rods", tasks=TOY_BENCH.training_tasks())
    for mode in ("static", "filter"):
        engine = DataEngine(mode=mode, tasks=TOY_BENCH.training_tasks())
        assert len(engine.sample(2, step=0)) == 2


def test_rods_train_runs_static_and_filter_on_a_benchmark(toy, tmp_path):
    from rods_agent.training.loop import train

    for mode in ("static", "filter"):
        config = load_config(
            "configs/train/simulated.yaml",
            [
                "env=[toy-bench]",
                f"mode={mode}",
                "steps=2",
                f"out={tmp_path / mode}",
                "log.tensorboard=false",
                "log.progress=false",
                "log.eval_every=1",
            ],
        )
        out = train(config)
        assert (out / "metrics.jsonl").read_text().count("\n") == 2
