"""Expansion without a ceiling: composed requests of one customer, on the real domains.

Every accepted expansion keeps its parent's turns word for word and adds one request of the
same customer (join: in the last turn; append: in new turns), the oracle solves it, and the
cheapest agents (talk only, do only the parent's part) do not.
"""

from __future__ import annotations

import random

import pytest

import rods_env
from rods_env import OracleAgent, ToolEnv, run_episode
from rods_env.gold import GOLD_CACHE, replay_gold
from rods_env.synthesis import synthesize
from rods_env.synthesis.compose import Conversation, composite_skill, task_customer
from rods_env.synthesis.critique import check_signature
from rods_env.task import Request, Task, encode_requests
from tests.synthesis.conftest import assert_valid

DOMAINS = ("retail", "airline")


def _expand(domain, seeds, **kw):
    return [
        o.task
        for o in synthesize(seeds, mode="expand", domains=domain, **kw)
        if o.accepted and o.task.provenance.step in ("join", "append")
    ]


@pytest.fixture(scope="module", params=DOMAINS)
def grown(request):
    """Seeds, and two generations of composed expansions of them."""
    domain = rods_env.load_domain(request.param)
    seeds = domain.seed_tasks("train")[::6]
    first = _expand(domain, seeds, per_seed=2)
    second = _expand(domain, first, per_seed=1, seed=1)
    return domain, {t.id: t for t in [*seeds, *first]}, [*first, *second]


def test_an_expansion_is_its_parent_and_one_more_request_of_the_same_customer(grown):
    domain, parents, tasks = grown
    assert {t.provenance.step for t in tasks} == {"join", "append"}
    for task in tasks:
        parent = parents[task.provenance.parent_id]
        step = task.provenance.step
        kept = len(parent.turns) - (1 if step == "join" else 0)
        assert task.turns[:kept] == parent.turns[:kept]  # word for word
        if step == "join":
            last, now = parent.turns[-1], task.turns[len(parent.turns) - 1]
            assert now.calls[: len(last.calls)] == last.calls
            assert now.outputs[: len(last.outputs)] == last.outputs
            assert len(task.turns) == len(parent.turns)
        else:
            assert len(task.turns) > len(parent.turns)
        assert task.requests()[:-1] == [
            r.model_copy(update={"shape": r.shape}) for r in parent.requests()
        ]
        assert len(task.requests()) == len(parent.requests()) + 1
        assert task.skill == f"{parent.skill}+{task.requests()[-1].skill}"
        gold = GOLD_CACHE.get(domain, task)
        assert task_customer(domain, task, gold) == task_customer(
            domain, parent, GOLD_CACHE.get(domain, parent)
        )
        check_signature(parent.signature, task.signature, "expand", step)
        # a customer fact is never changed, only added (a second value gets a new label)
        assert parent.user.facts.items() <= task.user.facts.items()


def test_every_composed_task_is_solvable_and_doing_nothing_earns_nothing(grown):
    domain, _, tasks = grown
    for task in tasks[::3]:
        assert_valid(domain, task)


def test_doing_only_the_parents_part_does_not_pass_the_new_request(grown):
    """The cheapest agent that could farm an expansion: it solves the parent (the oracle of
    the parent's calls and outputs), then claims the new request is done."""
    domain, parents, tasks = grown
    writes = domain.toolkit.write_names()
    checked = 0
    for task in tasks[::2]:
        parent = parents[task.provenance.parent_id]
        lazy = task.model_copy(
            update={
                "turns": tuple(
                    t.model_copy(
                        update={
                            "calls": parent.turns[i].calls if i < len(parent.turns) else (),
                            "outputs": parent.turns[i].outputs if i < len(parent.turns) else (),
                        }
                    )
                    for i, t in enumerate(task.turns)
                )
            }
        )
        env = ToolEnv(domain, tasks=[task], split=None, max_steps=120)
        info = run_episode(env, OracleAgent(lazy, writes), task=task)
        assert not info["success"], task.id
        assert info["progress"] < 1.0, task.id
        checked += 1
    assert checked >= 5


def test_no_difficulty_knob_ever_shrinks_and_generations_climb(grown):
    _, parents, tasks = grown
    for task in tasks:
        parent = parents.get(task.provenance.parent_id)
        if parent is None:
            continue
        old, new = parent.signature.knobs, task.signature.knobs
        assert all(new[k] >= old[k] for k in old), (old, new)
        assert sum(task.signature.requests) == sum(parent.signature.requests or (1,)) + 1
    assert max(t.signature.knobs["skills"] for t in tasks) >= 3
    assert max(t.signature.knobs["width"] for t in tasks) >= 2
    assert max(t.signature.knobs["turns"] for t in tasks) >= 3


def test_a_composed_task_resamples_for_another_customer(grown):
    domain, _, tasks = grown
    composed = [t for t in tasks if t.composed and t.variant == "base"][:8]
    out = [
        o.task
        for o in synthesize(composed, per_seed=1, mode="resample", domains=domain, attempts=5)
        if o.accepted
    ]
    assert len(out) >= len(composed) // 2
    by_id = {t.id: t for t in composed}
    for task in out:
        parent = by_id[task.provenance.parent_id]
        assert task.skill == parent.skill and task.signature == parent.signature
        assert task_customer(domain, task, replay_gold(domain, task)) != task_customer(
            domain, parent, replay_gold(domain, parent)
        )
        assert_valid(domain, task)


def test_the_recipe_round_trips_through_the_task():
    requests = [
        Request(skill="cancel_order", shape={"orders": 1, "ref": 0}, turn=0, call=0),
        Request(skill="product_info", shape={"products": 2}, turn=0, call=4),
        Request(skill="modify_items", shape={"items": 1}, turn=1, call=7),
    ]
    skill, shape = encode_requests(requests)
    assert skill == "cancel_order+product_info+modify_items"
    task = rods_env.load_domain("retail").seed_tasks()[0]
    composed = task.model_copy(update={"skill": skill, "shape": shape})
    assert composed.composed and composed.requests() == requests
    assert not task.composed and task.requests() == [Request(skill=task.skill, shape=task.shape)]


def test_a_joined_request_never_changes_what_another_request_of_the_turn_changes():
    """Two address changes in one turn would let an agent skip the first (the turn's effect
    shows only the second): such a request is not added."""
    domain = rods_env.load_domain("retail")
    seed = next(t for t in domain.seed_tasks("train") if t.skill == "modify_user_address")
    gold = GOLD_CACHE.get(domain, seed)
    customer = task_customer(domain, seed, gold)
    assert customer is not None
    tables = domain.base(seed.db_seed, seed.db_size)
    skill = domain.skill("modify_user_address")
    conv = Conversation.resume(domain, tables, customer, seed, gold)
    rng = random.Random(0)
    draft = skill.generate(conv.view.fork(), rng, {})
    assert conv.add(skill, draft, rng, join=True) == (
        "it changes a record another request of the turn changes"
    )
    assert conv.add(skill, draft, rng, join=False) is None  # its own turn: judged apart


def test_a_joined_request_never_mixes_writes_with_outputs_to_state():
    domain = rods_env.load_domain("retail")
    info = next(t for t in domain.seed_tasks("train") if t.skill == "order_info")
    gold = GOLD_CACHE.get(domain, info)
    customer = task_customer(domain, info, gold)
    conv = Conversation.resume(domain, domain.base(0, "default"), customer, info, gold)
    rng = random.Random(1)
    skill = domain.skill("modify_user_address")
    draft = skill.generate(conv.view.fork(), rng, {})
    assert conv.add(skill, draft, rng, join=True) == (
        "the turn would mix writes with outputs to state"
    )


def test_composite_skill_draws_every_request_for_one_customer():
    domain = rods_env.load_domain("airline")
    skill = composite_skill(domain, "flight_info+add_bags")
    db = domain.database(0, "default")
    _, shape = encode_requests(
        [
            Request(skill="flight_info", shape=dict(domain.skill("flight_info").shape)),
            Request(skill="add_bags", shape=dict(domain.skill("add_bags").shape), turn=1),
        ]
    )
    draft = skill.generate(db, random.Random(3), shape)
    task = Task(
        id="x",
        domain="airline",
        skill=skill.name,
        shape=dict(draft.shape or {}),
        user=draft.user,
        turns=draft.turns,
    )
    assert [r.skill for r in task.requests()] == ["flight_info", "add_bags"]
    assert len(task.turns) == 2
    assert task_customer(domain, task, replay_gold(domain, task)) is not None
