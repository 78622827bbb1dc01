"""The data engine's modes and the paper's ablations as settings (DataConfig).

``rods`` resamples only (the paper's RODS); ``rods-expand`` also grows harder neighbours;
``envtuning`` handles data as ``static``. Each ablation setting (``synth_cap``,
``parents``, ``synthesize``, ``retire_seeds``) changes what the engine does, and a resumed
engine does what the unbroken one would.
"""

from __future__ import annotations

import json
import random

import pytest

from rods_agent.data import DataEngine, GroupResult, GroupStats, ReplayBuffer, Thresholds
from rods_agent.training.config import DataConfig, load_config, mode_label
from rods_env.errors import ConfigError

from .data.conftest import synthetic

BOUNDARY = (1.0, 0.0, 1.0, 0.0)
SOLVED_MOSTLY = (1.0, 1.0, 1.0, 0.0)  # boundary, mean 0.75: rods-expand expands it first
MASTERED = (1.0, 1.0, 1.0, 1.0)
HARD = (0.0, 0.0, 0.0, 0.0)


def small(**overrides) -> DataConfig:
    base = {"synth_per_boundary": 1, "max_candidates": 16, "admit_per_step": 8}
    return DataConfig(**{**base, **overrides})


@pytest.fixture(scope="module")
def retail_train():
    from rods_env.registry import load_domain

    return load_domain("retail").seed_tasks("train")


def made_by(engine: DataEngine) -> list:
    return [e.task for e in engine.buffer if e.synthesized]


# -- modes ------------------------------------------------------------------------------------
def test_rods_resamples_only_and_rods_expand_grows_harder_neighbours(retail_train):
    parents = [t for t in retail_train if t.skill in ("cancel_order", "modify_payment")][:3]
    modes = {}
    for mode in ("rods", "rods-expand"):
        engine = DataEngine(small(synth_per_boundary=2), mode=mode, tasks=parents, seed=3)
        report = engine.observe([GroupResult(p.id, SOLVED_MOSTLY) for p in parents], step=0)
        assert report["synth_modes"] == (["resample"] if mode == "rods" else ["resample", "expand"])
        modes[mode] = {t.provenance.mode for t in made_by(engine)}
    assert modes["rods"] == {"resample"}
    assert "expand" in modes["rods-expand"]


def test_rods_never_expands_a_task_retired_as_mastered(retail_train):
    parent = retail_train[0]
    for mode, grows in (("rods", False), ("rods-expand", True)):
        engine = DataEngine(small(mastered_k=1), mode=mode, tasks=[parent, *retail_train[1:3]])
        report = engine.observe([GroupResult(parent.id, MASTERED)], step=0)
        assert report["retired"] == {"mastered": 1}
        assert bool(made_by(engine)) is grows, mode


def test_expansion_is_never_silently_mode_rods(retail_train):
    with pytest.raises(ConfigError, match="use mode rods-expand"):
        DataEngine(small(synth_modes=["resample", "expand"]), mode="rods", tasks=retail_train[:2])
    with pytest.raises(ConfigError, match="use mode rods-expand"):
        load_config(None, ["data.synth_modes=[resample,expand]"])
    with pytest.raises(ConfigError, match="without it use mode rods"):
        load_config(None, ["mode=rods-expand", "data.synth_modes=[resample]"])
    assert (
        load_config(None, ["mode=rods-expand", "data.synth_modes=[expand]"]).mode == "rods-expand"
    )
    assert DataConfig().synthesis_modes("rods") == ("resample",)
    assert DataConfig().synthesis_modes("rods-expand") == ("resample", "expand")
    assert DataConfig().synthesis_modes("static") == ()


def test_runs_are_labelled_as_they_ran():
    assert mode_label("rods") == "rods (resample)"
    assert mode_label("rods-expand") == "rods-expand (resample+expand)"
    assert mode_label("rods", ["resample"]) == "rods (resample)"
    assert mode_label("rods", ["resample", "expand"]).startswith("rods (with expansion")
    assert mode_label("rods", None, synthesize=False) == "rods (no synthesis)"
    assert mode_label("envtuning") == "envtuning"


def test_envtuning_handles_data_as_static(retail_train):
    tasks = retail_train[:8]
    a = DataEngine(small(mastered_k=1), mode="static", tasks=tasks, seed=1)
    b = DataEngine(small(mastered_k=1), mode="envtuning", tasks=tasks, seed=1)
    for step in range(4):
        batch = a.sample(4, step=step)
        assert [t.id for t in b.sample(4, step=step)] == [t.id for t in batch]
        groups = [GroupResult(t.id, (MASTERED, HARD, BOUNDARY)[i % 3]) for i, t in enumerate(batch)]
        assert [b.keep(g.rewards) for g in groups] == [True] * len(groups)
        ra, rb = a.observe(groups, step=step), b.observe(groups, step=step)
        ra.pop("seconds"), rb.pop("seconds")
        assert ra == rb
    assert len(b.active) == 8


def test_envtuning_with_the_simulated_learner_is_refused():
    with pytest.raises(ConfigError, match="simulated learner never sees"):
        load_config(None, ["mode=envtuning", "policy=simulated"])


# -- ablations --------------------------------------------------------------------------------
def test_synth_cap_is_a_hard_count_of_synthesized_tasks(retail_train):
    seeds = retail_train[:10]
    for cap, expected in ((None, 10), (3, 3), (0, 0)):
        buffer = ReplayBuffer(
            DataConfig(capacity=20, admit_per_step=20, p_max=0.5, synth_cap=cap), dynamic=True
        )
        for t in seeds:
            buffer.add_seed(t)
        assert buffer.synthesized_cap() == expected  # share rule: max(0.5 x 20, 20 - 10)
        for i in range(15):
            buffer.offer(synthetic(seeds[0], i), f"k{i}", step=0)
        buffer.admit(0)
        assert buffer.composition()["synthesized"] == expected


def test_uniform_parents_are_drawn_from_the_pool_not_the_boundary(retail_train):
    tasks = retail_train[:12]
    boundary = {t.id for t in tasks[:2]}
    parents = {}
    for how in ("boundary", "uniform"):
        engine = DataEngine(small(parents=how), mode="rods", tasks=tasks, seed=5)
        engine.observe(
            [GroupResult(t.id, BOUNDARY if t.id in boundary else HARD) for t in tasks], step=0
        )
        parents[how] = {t.provenance.parent_id for t in made_by(engine)}
    assert parents["boundary"] == boundary
    assert parents["uniform"] and len(parents["uniform"]) <= 2
    assert parents["uniform"] != boundary
    # no boundary task this step: no parent either way
    engine = DataEngine(small(parents="uniform"), mode="rods", tasks=tasks, seed=5)
    engine.observe([GroupResult(t.id, HARD) for t in tasks], step=0)
    assert not made_by(engine)


def test_synthesis_off_keeps_the_buffer_and_makes_no_task(retail_train):
    tasks = retail_train[:8]
    engine = DataEngine(small(synthesize=False, mastered_k=1), mode="rods", tasks=tasks)
    report = engine.observe(
        [GroupResult(tasks[0].id, MASTERED), GroupResult(tasks[1].id, BOUNDARY)], step=0
    )
    assert report["synth_modes"] == [] and report["synthesized"]["accepted"] == 0
    assert report["retired"] == {"mastered": 1} and not made_by(engine)
    assert not engine.synthesizes and engine.dynamic


def test_protected_seeds_are_never_retired(retail_train):
    tasks = retail_train[:4]
    for retire, left in ((True, 3), (False, 4)):
        engine = DataEngine(
            small(retire_seeds=retire, mastered_k=1, synthesize=False), mode="rods", tasks=tasks
        )
        engine.observe([GroupResult(tasks[0].id, MASTERED)], step=0)
        assert len(engine.active) == left
    # nor evicted from a full pool to make room for a candidate
    config = DataConfig(capacity=2, retire_seeds=False, mastered_k=5, admit_per_step=2, p_max=1.0)
    buffer = ReplayBuffer(config, dynamic=True)
    for t in tasks[:2]:
        buffer.add_seed(t)
    stats = GroupStats.of(MASTERED)
    buffer.visit(tasks[0].id, stats, Thresholds().zone(stats), step=0)
    buffer.offer(synthetic(tasks[0], 0), "k0", step=0)
    buffer.admit(0)
    assert buffer.composition()["seed"] == 2 and not buffer.removed


def rewards_for(task, step):
    rng = random.Random(f"{task.id}:{step}")
    return tuple(float(rng.random() < 0.5) for _ in range(4))


def run(engine, steps, start=0, n=4):
    out = []
    for step in range(start, start + steps):
        tasks = engine.sample(n, step=step)
        report = engine.observe([GroupResult(t.id, rewards_for(t, step)) for t in tasks], step=step)
        report.pop("seconds")
        out.append(([t.id for t in tasks], report))
    return out


@pytest.mark.parametrize(
    "mode, settings",
    [
        ("rods", {"parents": "uniform", "synth_cap": 2, "retire_seeds": False}),
        ("rods-expand", {"synth_cap": 3}),
        ("rods", {"synthesize": False}),
    ],
)
def test_a_resumed_engine_does_what_the_unbroken_one_would(retail_train, mode, settings):
    config = small(mastered_k=2, hard_m=2, park_steps=3, admit_per_step=2, **settings)

    def fresh():
        return DataEngine(config, mode=mode, tasks=retail_train[:12], seed=7)

    unbroken = fresh()
    first, rest = run(unbroken, 4), run(unbroken, 4, start=4)
    broken = fresh()
    assert run(broken, 4) == first
    resumed = fresh()
    resumed.load_state_dict(json.loads(json.dumps(broken.state_dict())))
    assert run(resumed, 4, start=4) == rest
    pools = [r["pool"] for _, r in first + rest]
    assert all(p["synthesized"] <= settings.get("synth_cap", 99) for p in pools)
    if settings.get("synthesize", True):
        assert any(r["synthesized"]["accepted"] for _, r in first + rest)
    other = DataEngine(small(), mode=mode, tasks=retail_train[:12], seed=7)
    if other.synth_modes != resumed.synth_modes:
        with pytest.raises(Exception, match="synthesized with"):
            other.load_state_dict(broken.state_dict())
