from __future__ import annotations

import random

import pytest

from rods_env import OracleAgent, TalkOnlyAgent, ToolEnv, run_episode
from rods_env.domain import Domain
from rods_env.gold import replay_gold
from rods_env.seeds import make_task
from rods_env.task import Task
from tests.synthesis.toy_synth import SHAPED


def toy_seeds(per_skill: int = 3, shapes: bool = True) -> list[Task]:
    """Seed tasks of every toy skill (at each shape up to the limit when ``shapes``)."""
    tasks = []
    for skill in SHAPED.skills:
        shape_list = [dict(skill.shape)]
        if shapes:
            for axis, (lo, hi) in skill.limits.items():
                shape_list = [{**dict(skill.shape), axis: v} for v in range(lo, hi + 1)]
        for shape in shape_list:
            for i in range(per_skill):
                rng = random.Random(f"toy-seed:{skill.name}:{shape}:{i}")
                tasks.append(
                    make_task(
                        SHAPED,
                        skill,
                        rng,
                        task_id=f"toy-{skill.name}-{'-'.join(map(str, shape.values()))}-{i}",
                        shape=shape,
                        split="train",
                    )
                )
    return tasks


@pytest.fixture(scope="session")
def seeds() -> list[Task]:
    return toy_seeds()


def run_oracle(domain: Domain, task: Task, agent=None) -> dict:
    env = ToolEnv(domain, tasks=[task], split=None, max_steps=80, render_mode="ansi")
    agent = agent or OracleAgent(task, domain.toolkit.write_names())
    out = run_episode(env, agent, task=task)
    out["transcript"] = env.render()
    return out


def assert_valid(domain: Domain, task: Task) -> None:
    """The oracle solves ``task``; a talk-only agent fails every turn where the gold writes."""
    out = run_oracle(domain, task)
    assert out["success"] and out["progress"] == 1.0, (task.id, task.variant, out["transcript"])
    talk = run_oracle(domain, task, TalkOnlyAgent())
    gold = replay_gold(domain, task)
    assert not talk["success"], task.id
    for i, tg in enumerate(gold.turns):
        if tg.effect:
            assert not talk["turn_results"][i]["passed"], (task.id, i)
    # critique rejects free turns, so doing nothing earns nothing at all
    assert talk["progress"] == 0.0, (task.id, talk["turn_results"])
