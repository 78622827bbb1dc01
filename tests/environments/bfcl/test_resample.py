"""Resampled variants of BFCL's train tasks: same structure, new values, BFCL's checker
passes their gold, they run from their view alone, and the guard keeps the test half out."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.requires import require

PARENTS = (
    "multi_turn_base_0",  # TwitterAPI + GorillaFileSystem
    "multi_turn_base_7",  # find by a word of a file name
    "multi_turn_miss_param_3",  # a value given in a later turn
    "multi_turn_miss_func_0",  # a function revealed later
    "multi_turn_long_context_3",  # long-context file system
)


@pytest.fixture(scope="module")
def bfcl():
    from environments.bfcl.apis import bfcl_missing

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")


@pytest.fixture(scope="module")
def parents(bfcl):
    from environments.bfcl.tasks import get_task, load_tasks

    train = load_tasks(None, "train")
    by_class: dict[str, str] = {}
    for task in train:  # one train task of every class, beside the fixed ones
        for cls in task.classes:
            by_class.setdefault(cls, task.id)
    ids = dict.fromkeys([*PARENTS, *sorted(by_class.values())])
    return [get_task(i) for i in ids]


@pytest.fixture(scope="module")
def outcomes(parents):
    from environments.bfcl.resample import BFCLResampler

    resampler = BFCLResampler(per_seed=1, seed=7, domain="bfcl")
    return {p.id: list(resampler.variants(p)) for p in parents}


def _accepted(outcomes):
    from environments.bfcl.tasks import bfcl_task, get_task

    return [
        (get_task(pid), bfcl_task(o.task), o)
        for pid, outs in outcomes.items()
        for o in outs
        if o.accepted
    ]


def test_variants_keep_the_structure_and_change_the_values(outcomes):
    from environments.bfcl.apis import replay

    accepted = _accepted(outcomes)
    assert {p.id for p, _, _ in accepted} >= set(PARENTS)
    assert len(accepted) >= len(outcomes) - 2
    for parent, variant, outcome in accepted:
        assert variant.parent == parent.id and variant.split == "train"
        assert (variant.category, variant.classes, variant.revealed) == (
            parent.category, parent.classes, parent.revealed,
        )  # fmt: skip
        assert [[c.name for c in t] for t in variant.gold] == [
            [c.name for c in t] for t in parent.gold
        ]
        # the questions change where they name a renamed value (a task that names none,
        # such as one that finds its stocks by sector, keeps its questions)
        assert variant.gold != parent.gold and variant.config != parent.config
        assert (
            not replay(variant.scenario, variant.gold).errors
            or replay(parent.scenario, parent.gold).errors
        )
        assert outcome.task.provenance.parent_id == parent.id
        assert outcome.task.provenance.origin == "synthesized"
        assert outcome.key and outcome.key.startswith("bfcl:")


def test_a_renamed_file_is_renamed_everywhere(outcomes):
    from environments.bfcl.tasks import get_task

    (out,) = [o for o in outcomes["multi_turn_base_0"] if o.accepted]
    variant = out.task.payload
    parent = get_task("multi_turn_base_0")
    assert (
        "final_report.pdf" in parent.config and "final_report.pdf" not in variant["initial_config"]
    )
    text = json.dumps(variant["question"]) + json.dumps(variant["ground_truth"])
    assert "final_report" not in text and "previous_report" not in text
    new = json.loads(variant["initial_config"])["GorillaFileSystem"]["root"]
    (workspace,) = new.values()
    names = next(iter(workspace["contents"].values()))["contents"]
    first = next(iter(names))
    assert first.endswith(".pdf") and first in variant["question"][0][0]["content"]
    assert f"mv(source={first!r}" in variant["ground_truth"][0][2]


def test_variants_pass_bfcls_own_checker(outcomes):
    """The variant's gold, played as the agent, through BFCL's own multi_turn_checker."""
    from environments.bfcl.agents import OracleAgent
    from environments.bfcl.env import BFCLEnv
    from tests.environments.bfcl.official import official_verdict

    for _, variant, _ in _accepted(outcomes)[:8]:
        env = BFCLEnv(tasks=[variant])
        agent = OracleAgent(variant)
        obs, info = env.reset(options={"task": variant})
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
            done = terminated or truncated
        assert info["success"]
        assert official_verdict(variant, info["turn_results"])["valid"], variant.id


def test_the_cheapest_agents_do_not_pass_a_variant(outcomes):
    """An agent that memorized the seed (the parent's gold replayed on the variant) fails
    every variant whose gold calls changed; an agent that does nothing passes a variant
    only where it passes the parent (BFCL's own empty-gold turns), never more."""
    from environments.bfcl.agents import PlanAgent, gold_plan, silent_plan
    from environments.bfcl.env import BFCLEnv

    def success(plan, task) -> bool:
        env = BFCLEnv(tasks=[task])
        agent = PlanAgent(plan)
        obs, info = env.reset(options={"task": task})
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
            done = terminated or truncated
        return bool(info["success"])

    changed = 0
    for parent, variant, _ in _accepted(outcomes):
        if variant.gold != parent.gold:
            changed += 1
            assert not success(gold_plan(parent), variant), (
                f"{variant.id}: the seed's answer passes"
            )
        assert success(silent_plan(variant), variant) <= success(silent_plan(parent), parent)
    assert changed  # the memorizing agent was tried on some variant


def test_a_variant_runs_from_its_view_after_a_json_round_trip(outcomes):
    from environments.bfcl import BFCL
    from environments.bfcl.env import BFCLEnv
    from rods_env.oracle import run_episode
    from rods_env.task import Task

    _, variant, outcome = _accepted(outcomes)[0]
    view = outcome.task
    again = Task.model_validate(json.loads(json.dumps(view.model_dump(mode="json"))))
    assert again == view and Task.model_validate_json(view.to_json()) == view
    assert again.split == "train" and again.payload is not None
    assert BFCL.check_tasks([again]) == []
    env = BFCLEnv()  # the 800 tasks: the variant is not among them
    result = run_episode(env, BFCL.oracle_agent(again), task=again)
    assert result["success"] and result["task_id"] == variant.id
    obs, info = env.reset(options={"task": again})
    assert info["task_id"] == variant.id and obs == variant.turns[0][0]["content"]
    pool = BFCLEnv(tasks=[again], split="train")
    assert pool.reset(seed=0)[1]["task_id"] == variant.id


def test_variants_are_deterministic_given_the_parent_and_the_seed(parents):
    from environments.bfcl.resample import BFCLResampler

    parent = parents[0]

    def draw(seed):
        resampler = BFCLResampler(per_seed=2, seed=seed, domain="bfcl")
        return [
            (o.reason, o.task.to_json() if o.task else o.detail) for o in resampler.variants(parent)
        ]

    assert draw(3) == draw(3)
    assert draw(3) != draw(4)
    resampler = BFCLResampler(per_seed=1, seed=3, domain="bfcl")
    first = [o.key for o in resampler.variants(parent) if o.accepted]
    second = [o.key for o in resampler.variants(parent) if o.accepted]
    assert first and second and first != second  # a later round draws new variants
    assert set(first) | set(second) <= resampler.seen


def test_known_keys_and_test_tasks_are_refused(parents, outcomes):
    from environments.bfcl.resample import BFCLResampler
    from environments.bfcl.tasks import get_task

    key = next(o.key for o in outcomes[parents[0].id] if o.accepted)
    again = BFCLResampler(per_seed=1, seed=7, domain="bfcl", known={key})
    reasons = [o.reason for o in again.variants(parents[0])]
    assert reasons[0] == "duplicate"
    test_task = next(t for t in [get_task(f"multi_turn_base_{i}") for i in range(10)]
                     if t.split == "test")  # fmt: skip
    (refused,) = BFCLResampler(per_seed=1).variants(test_task)
    assert refused.reason == "not_train" and not refused.accepted


def test_the_guard_rejects_a_variant_that_copies_a_test_task(bfcl, parents, monkeypatch):
    from environments.bfcl import resample
    from environments.bfcl.guard import report, violations
    from environments.bfcl.tasks import get_task, load_tasks

    test_task = load_tasks("base", "test")[0]
    copy = replace(test_task, id="multi_turn_base_0_rscopy", parent="multi_turn_base_0")
    found = violations(copy)
    assert any("gold calls and initial state are those of " + test_task.id in f for f in found)
    assert any("near duplicate (1.00)" in f for f in found)
    # a question copied alone
    parent = get_task("multi_turn_base_0")
    asked = replace(parent, turns=(test_task.turns[0], *parent.turns[1:]))
    assert any("near duplicate" in f for f in violations(asked))
    assert violations(parent) == []
    # through the resampler: a candidate that is a test task is rejected, with the reason
    monkeypatch.setattr(resample, "make_variant", lambda p, rng, vid: replace(copy, id=vid))
    monkeypatch.setattr(resample, "validate", lambda p, v: None)
    (out, *_) = resample.BFCLResampler(per_seed=1, seed=0).variants(parent)
    assert (out.accepted, out.reason) == (False, "contamination")
    numbers = report(load_tasks("base", "train"))
    assert numbers["at_or_above_threshold"] == 0 and numbers["nearest_max"] < 0.5


def test_the_domain_exposes_the_resampler(bfcl):
    from environments.bfcl import BFCL, MISS_FUNC
    from environments.bfcl.resample import BFCLResampler

    assert BFCL.synthesis is None and MISS_FUNC.synthesis is None
    synth = BFCL.synthesizer(per_seed=1, seed=0, known={"bfcl:x"})
    assert isinstance(synth, BFCLResampler) and "bfcl:x" in synth.seen
    parent = MISS_FUNC.seed_tasks("train")[0]
    outcome = next(o for o in synth.variants(parent) if o.accepted)
    assert outcome.task.domain == MISS_FUNC.name and outcome.key in synth.seen
    assert outcome.task.skill == "miss_func" and outcome.task.variant == "missing_function"
    MISS_FUNC.check_training_pool([outcome.task])
