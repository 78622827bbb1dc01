"""The Retail policy as checks over a gold run: every seed complies, each breach is caught."""

from __future__ import annotations

import random
from dataclasses import replace

from environments.retail import DOMAIN
from environments.retail.checks import POLICY_CHECKS
from rods_env.gold import Gold, replay_gold
from rods_env.seeds import make_task
from rods_env.synthesis import synthesize
from rods_env.task import Task, ToolCall


def _problems(task: Task, gold: Gold | None = None) -> dict[str, str]:
    gold = gold or replay_gold(DOMAIN, task)
    out = {}
    for check in POLICY_CHECKS:
        problem = check(DOMAIN, task, gold)
        if problem:
            out[check.__name__] = problem
    return out


def _with_calls(task: Task, calls: list[ToolCall]) -> Task:
    turn = task.turns[0].model_copy(update={"calls": tuple(calls)})
    return task.model_copy(update={"turns": (turn, *task.turns[1:])})


def _seed(skill: str) -> Task:
    return next(t for t in DOMAIN.seed_tasks() if t.skill == skill and len(t.turns) == 1)


def test_the_domain_declares_its_checks_and_every_seed_complies():
    assert DOMAIN.policy_checks == POLICY_CHECKS
    for task in DOMAIN.seed_tasks():
        assert _problems(task) == {}, task.id


def test_a_write_without_looking_the_order_up_first():
    task = _seed("cancel_order")
    calls = [c for c in task.gold_calls if c.name != "get_order_details"]
    broken = _with_calls(task, calls)
    assert "without looking the order up" in _problems(broken)["status_checked_first"]


def test_no_verification_first():
    task = _seed("cancel_order")
    calls = [c for c in task.gold_calls if not c.name.startswith("find_user")]
    gold = replay_gold(DOMAIN, task)
    broken = _with_calls(task, calls)
    # the tools refuse such a run; the check states the rule over the calls themselves
    fake = replace(gold, call_outputs=gold.call_outputs[1:])
    assert "not with the customer's verification" in _problems(broken, fake)["verify_first"]


def test_another_customer_s_order():
    task = _seed("cancel_order")
    gold = replay_gold(DOMAIN, task)
    mine = task.gold_calls[0]
    other = next(
        o.order_id
        for o in DOMAIN.base(0, "default")["orders"].values()
        if o.user_id != gold.call_outputs[0]
    )
    calls = [
        c.model_copy(update={"arguments": {**c.arguments, "order_id": other}})
        if "order_id" in c.arguments
        else c
        for c in task.gold_calls
    ]
    assert calls[0] == mine
    assert "not of" in _problems(_with_calls(task, calls), gold)["one_customer"]


def test_an_action_the_status_does_not_allow_and_a_reason_outside_the_policy():
    task = _seed("cancel_order")
    gold = replay_gold(DOMAIN, task)
    k = next(i for i, c in enumerate(task.gold_calls) if c.name == "get_order_details")
    outputs = list(gold.call_outputs)
    outputs[k] = {**outputs[k], "status": "delivered"}
    assert (
        "whose status is 'delivered'"
        in _problems(task, replace(gold, call_outputs=tuple(outputs)))["status_checked_first"]
    )
    cancel = next(c for c in task.gold_calls if c.name == "cancel_pending_order")
    calls = [
        c.model_copy(update={"arguments": {**c.arguments, "reason": "found it cheaper"}})
        if c is cancel
        else c
        for c in task.gold_calls
    ]
    assert "not in the policy" in _problems(_with_calls(task, calls), gold)["cancel_reason_allowed"]


def test_swapping_an_item_for_another_product():
    task = _seed("modify_items")
    gold = replay_gold(DOMAIN, task)
    swap = next(c for c in task.gold_calls if c.name == "modify_pending_order_items")
    foreign = next(
        v.item_id
        for p in DOMAIN.base(0, "default")["products"].values()
        for v in p.variants
        if v.item_id not in swap.arguments["new_item_ids"]
        and p.variant(swap.arguments["new_item_ids"][0]) is None
    )
    calls = [
        c.model_copy(update={"arguments": {**c.arguments, "new_item_ids": [foreign]}})
        if c is swap
        else c
        for c in task.gold_calls
    ]
    assert (
        "not a variant of the same product"
        in _problems(_with_calls(task, calls), gold)["same_product_swaps"]
    )


def test_synthesis_rejects_a_skill_that_breaks_the_policy():
    """A skill that writes without looking the order up is rejected as a policy violation."""
    skill = DOMAIN.skill("cancel_order")

    def careless(db, rng, shape):
        draft = skill.generate(db, rng, shape)
        turn = draft.turns[0]
        calls = tuple(c for c in turn.calls if c.name != "get_order_details")
        return replace(draft, turns=(turn.model_copy(update={"calls": calls}),))

    careless_skill = replace(skill, generate=careless)
    strict = replace(DOMAIN, skills=(careless_skill,))
    seed = make_task(strict, careless_skill, random.Random(0), task_id="c", split="train")
    out = list(synthesize([seed], domains=strict, per_seed=2, attempts=2))
    assert [o.reason for o in out] == ["policy_violation"] * 4
    assert "without looking the order up" in out[0].detail
    lenient = replace(strict, policy_checks=())
    assert any(o.accepted for o in synthesize([seed], domains=lenient, per_seed=2))
