"""The simulated learner: what raises its success, and the ordering of the three modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rods_agent.config import load_config
from rods_agent.training.loop import train
from rods_agent.training.policy import Group, Policy
from rods_agent.training.simulated import SimulatedPolicy, turn_actions
from rods_env.errors import ConfigError
from rods_env.fileio import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
SIMULATED = ROOT / "configs" / "simulated.yaml"


@pytest.fixture(scope="module")
def retail_train(retail):
    """The retail train seeds."""
    return retail.seed_tasks("train")


@pytest.fixture
def policy():
    return SimulatedPolicy(load_config(SIMULATED))


def group(task, rewards):
    return Group(task=task, episodes=[], rewards=list(rewards))


def test_it_is_a_policy_and_says_it_is_simulated(policy, retail_tasks):
    assert isinstance(policy, Policy)
    batch = policy.rollouts(retail_tasks[:2], step=0)
    assert all(e.termination == "simulated" for g in batch.groups for e in g.episodes)
    assert batch.tokens == 0
    assert policy.evaluate(retail_tasks, step=0)["simulated"] is True
    with pytest.raises(ConfigError, match="no warm start"):
        SimulatedPolicy(load_config(SIMULATED, ["warm_start.enabled=true"]))


def test_rollouts_are_seeded_by_step_task_and_trial(policy, retail_tasks):
    a = policy.rollouts(retail_tasks, step=3)
    b = policy.rollouts(retail_tasks, step=3)
    assert [g.rewards for g in a.groups] == [g.rewards for g in b.groups]
    c = [policy.rollouts(retail_tasks, step=s) for s in range(4, 12)]
    assert any([g.rewards for g in x.groups] != [g.rewards for g in a.groups] for x in c)
    assert all(len(g.rewards) == 8 for g in a.groups)


def test_training_on_a_skill_raises_its_success_and_only_with_signal(policy, retail_train):
    task = retail_train[0]
    sibling = next(t for t in retail_train if t.skill == task.skill and t.id != task.id)
    other = next(t for t in retail_train if t.skill != task.skill)
    before = {t.id: policy.action_probability(t) for t in (task, sibling, other)}
    policy.update([group(task, [1.0] * 8)], step=0)  # all equal: no gradient
    assert policy.action_probability(task) == before[task.id]
    for step in range(5):
        policy.update([group(task, [1.0, 0.0] * 4)], step=step)
    assert policy.action_probability(task) > before[task.id]
    assert policy.action_probability(sibling) > before[sibling.id]  # same skill
    assert policy.action_probability(other) == before[other.id]


def test_zero_variance_groups_in_the_update_dilute_it(policy, retail_train):
    """The update is a mean over its groups (like the token-mean loss): static, which
    keeps zero-variance groups, learns less per step than filter, which drops them."""
    task, flat = retail_train[0], retail_train[1]
    diluted = SimulatedPolicy(load_config(SIMULATED))
    policy.update([group(task, [1.0, 0.0] * 4)], step=0)
    diluted.update([group(task, [1.0, 0.0] * 4), group(flat, [1.0] * 8)], step=0)
    start = SimulatedPolicy(load_config(SIMULATED)).action_probability(task)
    gain, half = policy.action_probability(task) - start, diluted.action_probability(task) - start
    assert 0 < half < gain


def test_more_actions_make_a_turn_harder(policy, retail_train):
    task = max(retail_train, key=lambda t: len(t.turns))
    probs = policy.turn_probabilities(task)
    p = policy.action_probability(task)
    assert probs == [p ** turn_actions(t) for t in task.turns]
    assert all(0.0 < q < 1.0 for q in probs)


def test_evaluation_changes_nothing_and_state_round_trips(
    policy, retail_train, retail_tasks, tmp_path
):
    for step in range(3):
        policy.update([group(t, [1.0, 0.0] * 4) for t in retail_train[:5]], step=step)
    policy.evaluate(retail_tasks, step=3)
    policy.save(tmp_path)
    again = SimulatedPolicy(load_config(SIMULATED))
    again.load(tmp_path)
    assert again.skill_logit == policy.skill_logit
    assert again.structure_logit == policy.structure_logit
    assert [g.rewards for g in again.rollouts(retail_train[:6], step=9).groups] == [
        g.rewards for g in policy.rollouts(retail_train[:6], step=9).groups
    ]


@pytest.mark.slow
def test_the_three_modes_in_order(tmp_path):
    """What the simulation shows over 60 steps of configs/simulated.yaml (seeds 0 and 1):
    filter and rods train only on groups with signal and learn faster than static; rods
    keeps a larger share of groups with signal than both (docs/training.md has the
    300-step picture, where rods exhausts what synthesis can make)."""
    ratio: dict[str, float] = {}
    test_progress: dict[str, float] = {}
    for mode in ("static", "filter", "rods"):
        late, final = [], []
        for seed in (0, 1):
            out = tmp_path / f"{mode}-{seed}"
            overrides = [
                f"mode={mode}",
                f"seed={seed}",
                "steps=60",
                f"out={out}",
                "log.progress=false",
                "log.tensorboard=false",
                "log.checkpoint_every=0",
                "log.eval_every=60",
            ]
            train(load_config(SIMULATED, overrides))
            rows = read_jsonl(out / "metrics.jsonl")
            assert len(rows) == 60
            for row in rows:
                with_signal = round(row["effective_group_ratio"] * row["groups"])
                assert row["kept_groups"] == (row["groups"] if mode == "static" else with_signal)
            late += [r["effective_group_ratio"] for r in rows[30:]]
            final.append(rows[-1]["eval"]["progress"])
        ratio[mode] = sum(late) / len(late)
        test_progress[mode] = sum(final) / len(final)
    assert test_progress["filter"] > test_progress["static"]
    assert test_progress["rods"] > test_progress["static"]
    assert ratio["rods"] > ratio["static"] > ratio["filter"]
