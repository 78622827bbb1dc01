"""The Airline policy as checks over a gold run: every seed complies, each breach is caught."""

from __future__ import annotations

import random
from dataclasses import replace

from environments.airline import DOMAIN
from environments.airline.checks import POLICY_CHECKS
from rods_env.gold import Gold, replay_gold
from rods_env.seeds import make_task
from rods_env.synthesis import synthesize
from rods_env.task import Task


def _problems(task: Task, gold: Gold | None = None) -> dict[str, str]:
    gold = gold or replay_gold(DOMAIN, task)
    return {c.__name__: p for c in POLICY_CHECKS if (p := c(DOMAIN, task, gold))}


def _seed(skill: str) -> Task:
    return next(t for t in DOMAIN.seed_tasks() if t.skill == skill)


def _edit(task: Task, name: str, **arguments: object) -> Task:
    """``task`` with the arguments of its first call named ``name`` changed."""
    turns, done = [], False
    for turn in task.turns:
        calls = []
        for c in turn.calls:
            if c.name == name and not done:
                c, done = c.model_copy(update={"arguments": {**c.arguments, **arguments}}), True
            calls.append(c)
        turns.append(turn.model_copy(update={"calls": tuple(calls)}))
    assert done, name
    return task.model_copy(update={"turns": tuple(turns)})


def _drop(task: Task, gold: Gold, name: str) -> tuple[Task, Gold]:
    """``task`` without its calls named ``name``, and its gold without their outputs (what
    a run that skipped them would give; the tools may refuse to replay it)."""
    keep = [c.name != name for c in task.gold_calls]
    turns = [
        t.model_copy(update={"calls": tuple(c for c in t.calls if c.name != name)})
        for t in task.turns
    ]
    outputs = tuple(o for o, k in zip(gold.call_outputs, keep, strict=True) if k)
    return task.model_copy(update={"turns": tuple(turns)}), replace(gold, call_outputs=outputs)


def _with_outputs(gold: Gold, k: int, **fields: object) -> Gold:
    outputs = list(gold.call_outputs)
    outputs[k] = {**outputs[k], **fields}
    return replace(gold, call_outputs=tuple(outputs))


def test_the_domain_declares_its_checks_and_every_seed_complies():
    assert DOMAIN.policy_checks == POLICY_CHECKS
    for task in DOMAIN.seed_tasks():
        assert _problems(task) == {}, task.id


def test_identify_first_and_act_only_for_that_customer():
    task = _seed("cancel")
    gold = replay_gold(DOMAIN, task)
    turn = task.turns[0]
    reordered = task.model_copy(
        update={"turns": (turn.model_copy(update={"calls": turn.calls[1:] + turn.calls[:1]}),)}
    )
    assert "not get_user_details" in _problems(reordered, gold)["identify_first"]
    other = next(
        r.reservation_id
        for r in DOMAIN.base(0, "default")["reservations"].values()
        if r.user_id != task.user.facts["user id"]
    )
    stranger = _edit(task, "cancel_reservation", reservation_id=other)
    assert "not of" in _problems(stranger, gold)["identify_first"]


def test_a_change_without_looking_the_reservation_up():
    task = _seed("upgrade_cabin")
    blind, gold = _drop(task, replay_gold(DOMAIN, task), "get_reservation_details")
    assert "without looking it up" in _problems(blind, gold)["looked_up_before_change"]


def test_basic_economy_never_changes_flights_until_upgraded():
    task = _seed("change_flights")
    gold = replay_gold(DOMAIN, task)
    k = next(i for i, c in enumerate(task.gold_calls) if c.name == "get_reservation_details")
    problems = _problems(task, _with_outputs(gold, k, cabin="basic_economy"))
    assert "basic economy" in problems["basic_economy_keeps_flights"]
    # the multi-turn skill upgrades first: the cabin at the time of the change counts
    multi = next(t for t in DOMAIN.seed_tasks() if t.skill == "multi_turn")
    assert _problems(multi) == {}


def test_cancelling_without_a_policy_reason():
    task = _seed("cancel")
    gold = replay_gold(DOMAIN, task)
    k = next(i for i, c in enumerate(task.gold_calls) if c.name == "get_reservation_details")
    stale = _with_outputs(
        gold, k, created_at="2024-01-01T00:00:00", cabin="economy", insurance="no"
    )
    assert "cannot be cancelled" in _problems(task, stale)["cancellation_allowed"]


def test_compensation_by_the_rules():
    task = _seed("compensation")
    gold = replay_gold(DOMAIN, task)
    wrong = _edit(task, "send_certificate", amount=999)
    assert "compensation of 999" in _problems(wrong, gold)["compensation_by_the_rules"]
    turn = task.turns[0]
    twice = task.model_copy(
        update={"turns": (turn.model_copy(update={"calls": (*turn.calls, turn.calls[-1])}),)}
    )
    gold_twice = replace(gold, call_outputs=(*gold.call_outputs, gold.call_outputs[-1]))
    assert "twice" in _problems(twice, gold_twice)["compensation_by_the_rules"]
    blind, blind_gold = _drop(task, gold, "get_flight_status")
    assert "without checking" in _problems(blind, blind_gold)["looked_up_before_change"]


def test_certificates_do_not_pay_for_changes():
    task = _seed("upgrade_cabin")
    user = DOMAIN.base(0, "default")["users"][task.user.facts["user id"]]
    certificate = next(
        (pid for pid, m in user.payment_methods.items() if m.source == "certificate"), None
    )
    if certificate is None:  # give the check a user who has one
        task = next(
            t
            for t in DOMAIN.seed_tasks()
            if t.skill in ("upgrade_cabin", "change_flights")
            and any(
                m.source == "certificate"
                for m in DOMAIN.base(0, "default")["users"][
                    t.user.facts["user id"]
                ].payment_methods.values()
            )
        )
        user = DOMAIN.base(0, "default")["users"][task.user.facts["user id"]]
        certificate = next(p for p, m in user.payment_methods.items() if m.source == "certificate")
    name = next(c.name for c in task.gold_calls if "payment_id" in c.arguments)
    paid = _edit(task, name, payment_id=certificate)
    problems = _problems(paid, replay_gold(DOMAIN, task))
    assert "travel certificate" in problems["certificates_only_for_bookings"]


def test_synthesis_rejects_a_skill_that_breaks_the_policy():
    skill = DOMAIN.skill("compensation")

    def careless(db, rng, shape):
        draft = skill.generate(db, rng, shape)
        turn = draft.turns[0]
        calls = tuple(c for c in turn.calls if c.name != "get_flight_status")
        return replace(draft, turns=(turn.model_copy(update={"calls": calls}),))

    careless_skill = replace(skill, generate=careless)
    strict = replace(DOMAIN, skills=(careless_skill,))
    seed = make_task(strict, careless_skill, random.Random(0), task_id="c", split="train")
    out = list(synthesize([seed], domains=strict, per_seed=2, attempts=2))
    assert {o.reason for o in out} == {"policy_violation"}
    assert "without checking the flight's status" in out[0].detail
    assert any(
        o.accepted
        for o in synthesize([seed], domains=replace(strict, policy_checks=()), per_seed=2)
    )
