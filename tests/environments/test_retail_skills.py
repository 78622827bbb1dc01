"""Retail skills: drafts whose gold calls replay cleanly, with values the agent can obtain."""

from __future__ import annotations

import json
import random

import pytest

from environments.retail import DOMAIN
from environments.retail.schema import CANCEL_REASONS
from environments.retail.tools import RetailTools
from rods_env.domain import SkillUnavailable
from rods_env.seeds import make_task
from rods_env.tools import render_output

SHAPES = [
    (skill.name, {axis: value})
    for skill in DOMAIN.skills
    for axis, (low, high) in skill.limits.items()
    for value in range(low, high + 1)
] + [(skill.name, {}) for skill in DOMAIN.skills if not skill.limits]

IDENTITY = ("find_user_id_by_email", "find_user_id_by_name_zip")


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def replay(draft, size):
    """Run the draft's gold calls in order; return the state and each call's output text."""
    db = DOMAIN.database(0, size)
    tools = RetailTools(db)
    outputs = []
    for turn in draft.turns:
        for call in turn.calls:
            result = tools.call(call.name, call.arguments)
            assert result.ok, (call.key(), result.output)
            outputs.append(result.output)
    return db, outputs


def check_draft(skill, draft, size, shape):
    db, outputs = replay(draft, size)
    calls = [c for t in draft.turns for c in t.calls]
    facts = draft.user.facts
    # Changes the state exactly when the skill says it writes.
    assert bool(db.changes()) == skill.writes, skill.name
    # Every conversation starts by verifying the customer.
    assert calls[0].name in IDENTITY
    # Every argument value is known: said by the user, returned earlier, or a policy constant.
    for index, call in enumerate(calls):
        earlier = "\n".join(outputs[:index])
        for leaf in _leaves(call.arguments):
            text = leaf if isinstance(leaf, str) else json.dumps(leaf)
            assert (
                text in earlier or any(text in v for v in facts.values()) or leaf in CANCEL_REASONS
            ), (skill.name, call.key(), leaf)
    # Required outputs are exactly as some tool output shows them.
    for turn in draft.turns:
        for output in turn.outputs:
            assert any(output in o for o in outputs), (skill.name, output)
    # Requests make the agent ask for identity facts.
    for turn in draft.turns:
        assert turn.request.strip()
        assert draft.user.name not in turn.request
        if "email" in facts:
            assert facts["email"] not in turn.request
    # Shapes are honoured.
    if "turns" in shape:
        assert len(draft.turns) == shape["turns"]
    else:
        assert len(draft.turns) == 1
    if "items" in shape:
        write = calls[-1]
        assert len(write.arguments["item_ids"]) == shape["items"]
    if "orders" in shape:
        assert sum(c.name == "get_order_details" for c in calls) == shape["orders"]
    if "products" in shape:
        assert sum(c.name == "get_product_details" for c in calls) == shape["products"]


# the tiny database is too small for every shape (two switchable orders of one customer, say):
# tiny runs each skill's default shape, the default database runs every shape
TINY_SHAPES = [(skill.name, dict(skill.shape)) for skill in DOMAIN.skills]


@pytest.mark.parametrize(("name", "shape"), TINY_SHAPES, ids=[f"{n}-{s}" for n, s in TINY_SHAPES])
def test_drafts_replay_on_tiny(name, shape):
    skill = DOMAIN.skill(name)
    made = 0
    for seed in range(12):
        try:
            draft = skill.generate(DOMAIN.database(0, "tiny"), random.Random(seed), shape)
        except SkillUnavailable:
            continue
        check_draft(skill, draft, "tiny", shape)
        made += 1
    assert made >= 6, f"{name} {shape}: only {made} of 12 drafts on tiny"


@pytest.mark.parametrize(("name", "shape"), SHAPES, ids=[f"{n}-{s}" for n, s in SHAPES])
def test_drafts_replay_on_default(name, shape):
    skill = DOMAIN.skill(name)
    for seed in range(4):
        draft = skill.generate(DOMAIN.database(0, "default"), random.Random(seed), shape)
        check_draft(skill, draft, "default", shape)


def test_skills_are_deterministic_and_varied():
    for skill in DOMAIN.skills:
        first = skill.generate(DOMAIN.database(0, "default"), random.Random(5), skill.shape)
        again = skill.generate(DOMAIN.database(0, "default"), random.Random(5), skill.shape)
        assert first == again
        openings = {
            " ".join(
                skill.generate(DOMAIN.database(0, "default"), random.Random(s), skill.shape)
                .turns[0]
                .request.split(" ")[:3]
            )
            for s in range(12)
        }
        assert len(openings) >= 3, (skill.name, openings)


def test_skill_set():
    names = {s.name for s in DOMAIN.skills}
    assert len(names) >= 8
    assert {
        "cancel_order",
        "modify_items",
        "modify_address",
        "modify_payment",
        "return_items",
        "exchange_items",
        "order_info",
        "multi_turn",
    } <= names
    for skill in DOMAIN.skills:
        for axis, (low, high) in skill.limits.items():
            assert low <= skill.shape[axis] <= high
    info = [s for s in DOMAIN.skills if not s.writes]
    assert info and all(s.name.endswith("_info") for s in info)


def test_multi_turn_has_a_write_and_distinct_requests():
    skill = DOMAIN.skill("multi_turn")
    writes = RetailTools.write_names()
    for seed in range(10):
        draft = skill.generate(DOMAIN.database(0, "default"), random.Random(seed), {"turns": 3})
        assert any(c.name in writes for t in draft.turns for c in t.calls)
        assert len({t.request for t in draft.turns}) == 3
        assert draft.turns[1].calls[0].name not in IDENTITY


def test_unrelated_write_is_valid_and_outside_the_task():
    for skill in DOMAIN.skills:
        rng = random.Random(f"unrelated:{skill.name}")
        task = make_task(DOMAIN, skill, rng, task_id=f"t-{skill.name}", db_size="tiny")
        db = DOMAIN.database(0, "tiny")
        tools = RetailTools(db)
        for call in task.gold_calls:
            assert tools.call(call.name, call.arguments).ok
        gold = db.checkpoint()
        touched = set(db.changes())
        extra = DOMAIN.unrelated_write(task, db)
        result = tools.call(extra.name, extra.arguments)
        assert result.ok, (skill.name, extra, result.output)
        changed = db.changed_since(gold)
        assert changed and not changed & touched, skill.name


def test_tasks_are_solved_on_a_long_world_with_much_longer_outputs():
    """A long-context variant is the same task on a long world (same records, long
    histories): the gold changes the same records and the outputs are much longer."""
    from rods_env.gold import replay_gold
    from rods_env.synthesis.augment import output_chars

    for name in ("cancel_order", "modify_items", "order_info", "multi_turn"):
        task = DOMAIN.seed_tasks()[[t.skill for t in DOMAIN.seed_tasks()].index(name)]
        long = task.model_copy(update={"db_size": "long-8k"})
        short, big = replay_gold(DOMAIN, task), replay_gold(DOMAIN, long)
        assert [set(t.effect) for t in big.turns] == [set(t.effect) for t in short.turns]
        assert output_chars(big) > 4 * output_chars(short), name


def test_render_output_of_money_keeps_cents():
    assert render_output({"amount": 54.04}) == '{"amount":54.04}'
