"""The data engine's API: modes, synthesis around the boundary, reserved tasks, persistence."""

from __future__ import annotations

import json
import random
import sys

import pytest

from rods_agent.data import DataEngine, GroupResult, round_seed
from rods_agent.training.config import DataConfig
from rods_env.errors import ConfigError, RodsError

BOUNDARY = (1.0, 0.0, 1.0, 0.0)
MASTERED = (1.0, 1.0, 1.0, 1.0)
HARD = (0.0, 0.0, 0.0, 0.0)


def small(**overrides) -> DataConfig:
    base = {"synth_per_boundary": 1, "synth_modes": ["resample"], "max_candidates": 8}
    return DataConfig(**{**base, **overrides})


def rewards_for(task, step):
    """Deterministic stand-in rewards: a task's zone depends on its id and the step."""
    rng = random.Random(f"{task.id}:{step}")
    return tuple(float(rng.random() < 0.5) for _ in range(4))


def run(engine, steps, start=0, n=4):
    out = []
    for step in range(start, start + steps):
        tasks = engine.sample(n, step=step)
        groups = [GroupResult(t.id, rewards_for(t, step)) for t in tasks]
        report = engine.observe(groups, step=step)
        report.pop("seconds")
        out.append(([t.id for t in tasks], report))
    return out


def test_keep_drops_zero_variance_groups_except_in_static(retail_train):
    for mode, kept in [("static", [True, True, True]), ("filter", [True, False, False])]:
        engine = DataEngine(small(), mode=mode, tasks=retail_train[:4])
        assert [engine.keep(r) for r in (BOUNDARY, MASTERED, HARD)] == kept
    rods = DataEngine(small(), mode="rods", tasks=retail_train[:4])
    assert [rods.keep(r) for r in (BOUNDARY, MASTERED, HARD)] == [True, False, False]


def test_observe_reports_the_step(retail_train, retail_test):
    engine = DataEngine(small(), mode="rods", tasks=retail_train[:6], reserved=retail_test)
    tasks = engine.sample(3, step=0)
    report = engine.observe(
        [
            GroupResult(tasks[0].id, BOUNDARY),
            GroupResult(tasks[1].id, MASTERED),
            GroupResult(tasks[2].id, HARD),
        ],
        step=0,
    )
    assert report["effective_group_ratio"] == pytest.approx(1 / 3)
    assert report["zones"] == {"mastered": 1, "boundary": 1, "hard": 1}
    assert report["variance"] == {"mastered": 0.0, "boundary": 0.25, "hard": 0.0}
    assert report["synthesized"]["accepted"] == 1  # one resample around the boundary task
    assert report["synthesized"]["admitted"] == 1
    assert report["pool"]["synthesized"] == 1 and report["pool"]["seed"] == 6
    assert set(report["seconds"]) == {"engine", "synthesis"}
    (new,) = [t for t in engine.active if t.provenance.origin == "synthesized"]
    assert new.provenance.parent_id == tasks[0].id and new.provenance.generation == 1
    assert engine.task(new.id) == new
    json.dumps(report)


def test_fixed_pool_modes_never_synthesize_or_retire(retail_train):
    for mode in ("static", "filter"):
        engine = DataEngine(small(mastered_k=1, hard_m=1), mode=mode, tasks=retail_train[:10])
        for _, report in run(engine, 5):
            assert report["synthesized"]["accepted"] == 0
            assert report["pool"] == {**report["pool"], "seed": 10, "synthesized": 0, "parked": 0}
        assert len(engine.active) == 10


def test_each_round_draws_a_new_random_stream(retail_train):
    """The same boundary parent, round after round, keeps giving new tasks."""
    parent = next(t for t in retail_train if t.skill == "modify_items")
    engine = DataEngine(small(max_candidates=100, admit_per_step=0), mode="rods", tasks=[parent])
    for step in range(6):
        report = engine.observe([GroupResult(parent.id, BOUNDARY)], step=step)
        assert report["synthesized"]["accepted"] == 1, (step, report["synthesized"])
    waiting = engine.buffer.tasks("waiting")
    assert len({t.id for t in waiting}) == 6
    assert len({t.content_hash() for t in waiting}) == 6
    assert round_seed(0, 1) != round_seed(0, 2) != round_seed(1, 1)


def test_synthesized_tasks_never_duplicate_reserved_tasks(retail_train):
    parents = [t for t in retail_train if t.skill in ("cancel_order", "modify_payment")][:4]
    config = small(synth_per_boundary=2, max_candidates=100)

    def first_round(reserved):
        engine = DataEngine(config, mode="rods", tasks=parents, reserved=reserved)
        report = engine.observe([GroupResult(p.id, BOUNDARY) for p in parents], step=0)
        return engine, report

    free, _ = first_round([])
    made = [e for e in free.buffer if e.synthesized]
    assert len(made) >= 4
    # the same round again, now with those tasks reserved as if they were the test split
    engine, report = first_round([e.task for e in made])
    again = [e for e in engine.buffer if e.synthesized]
    assert not {e.key for e in again} & {e.key for e in made}
    assert report["synthesized"]["rejected"].get("duplicate", 0) >= 1


def test_retired_tasks_keep_their_dedupe_keys(retail_train):
    parent = retail_train[0]
    engine = DataEngine(
        small(mastered_k=1, admit_per_step=8), mode="rods", tasks=[parent, *retail_train[1:4]]
    )
    engine.observe([GroupResult(parent.id, BOUNDARY)], step=0)
    (child,) = [e for e in engine.buffer if e.synthesized]
    engine.observe([GroupResult(child.task.id, BOUNDARY)], step=1)  # confirmed
    engine.observe([GroupResult(child.task.id, MASTERED)], step=2)  # retired
    assert child.task.id not in engine.buffer.entries
    with pytest.raises(KeyError):
        engine.task(child.task.id)
    assert child.key in engine.dedupe_keys()
    restored = DataEngine(small(), mode="rods", tasks=[parent, *retail_train[1:4]])
    restored.load_state_dict(json.loads(json.dumps(engine.state_dict())))
    assert child.key in restored.dedupe_keys()


@pytest.mark.parametrize("mode", ["static", "rods"])
def test_state_round_trip_continues_exactly(retail_train, retail_test, mode):
    config = small(mastered_k=2, hard_m=2, park_steps=3, admit_per_step=2)

    def fresh():
        return DataEngine(config, mode=mode, tasks=retail_train[:12], reserved=retail_test, seed=7)

    unbroken = fresh()
    first = run(unbroken, 6)
    rest = run(unbroken, 6, start=6)
    broken = fresh()
    assert run(broken, 6) == first
    state = json.loads(json.dumps(broken.state_dict()))
    resumed = fresh()
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state
    assert run(resumed, 6, start=6) == rest
    if mode == "rods":
        assert any(r["synthesized"]["accepted"] for _, r in first + rest)


def test_bad_input_is_a_clear_error(retail_train):
    with pytest.raises(ConfigError, match="mode must be one of"):
        DataEngine(small(), mode="dapo", tasks=retail_train[:2])
    with pytest.raises(ConfigError, match="empty"):
        DataEngine(small(), mode="rods", tasks=[])
    engine = DataEngine(small(), mode="rods", tasks=retail_train[:2])
    with pytest.raises(RodsError, match="does not hold"):
        engine.observe([GroupResult("nope", BOUNDARY)], step=0)
    state = engine.state_dict()
    with pytest.raises(RodsError, match="mode"):
        DataEngine(small(), mode="static", tasks=retail_train[:2]).load_state_dict(state)


def test_the_engine_imports_no_model_code():
    import subprocess

    code = (
        "import sys, rods_agent.data; "
        "bad = [m for m in ('torch', 'transformers', 'vllm') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
