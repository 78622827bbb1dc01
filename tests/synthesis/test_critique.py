"""Critique: each rejection reason, triggered by a skill with that defect."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rods_env import Draft, SkillUnavailable, ToolCall, Turn, UserProfile
from rods_env.domain import Skill
from rods_env.gold import replay_gold
from rods_env.synthesis import check_one_step, free_turns, synthesize, underivable_arguments
from rods_env.synthesis.plan import Reject
from rods_env.task import Signature
from tests.synthesis.toy_synth import SHAPED


def _accounts(db, rng, k):
    return rng.sample(sorted(db.values("accounts"), key=lambda a: a.id), k)


def _transfer_draft(db, rng, *, amount=None, say_amount=True, extra=()):
    a, b = _accounts(db, rng, 2)
    amount = amount if amount is not None else rng.randrange(10, 90)
    request = f"Send {amount} dollars to {b.id}." if say_amount else f"Send money to {b.id}."
    calls = (
        ToolCall(name="find_account", arguments={"email": a.owner_email}),
        ToolCall(
            name="transfer", arguments={"from_account": a.id, "to_account": b.id, "amount": amount}
        ),
        *extra,
    )
    user = UserProfile(name="Sam", facts={"email": a.owner_email, "recipient account": b.id})
    return Draft(user=user, turns=(Turn(request=request, calls=calls),))


def _outcomes(fn, *, writes=True, seed_fn=None, **kw):
    """Synthesize from one valid seed with a domain whose skill of that name is ``fn``."""
    good = Skill(
        "s", "", seed_fn or (lambda db, rng, shape: _transfer_draft(db, rng)), writes=writes
    )
    from rods_env.seeds import make_task

    seed = make_task(replace(SHAPED, skills=(good,)), good, random.Random(0), task_id="seed")
    dom = replace(SHAPED, skills=(Skill("s", "", fn, writes=writes),))
    kw.setdefault("per_seed", 1)
    kw.setdefault("attempts", 1)
    return list(synthesize([seed], domains=dom, **kw))


def _reasons(outcomes):
    return [o.reason if not o.accepted else "accepted" for o in outcomes]


def test_a_valid_skill_is_accepted():
    assert _reasons(_outcomes(lambda db, rng, shape: _transfer_draft(db, rng))) == ["accepted"]


def test_unknown_skill():
    from rods_env.seeds import make_task

    seed = make_task(SHAPED, SHAPED.skill("balance"), random.Random(0), task_id="x")
    seed = seed.model_copy(update={"skill": "gone"})
    out = list(synthesize([seed], domains=SHAPED, per_seed=3))
    assert _reasons(out) == ["unknown_skill"]


def test_skill_unavailable():
    def none_fit(db, rng, shape):
        raise SkillUnavailable("no account is frozen")

    out = _outcomes(none_fit, attempts=2)
    assert _reasons(out) == ["skill_unavailable"] * 2
    assert "no account is frozen" in out[0].detail


def test_execution_error_from_a_failing_gold_call():
    out = _outcomes(lambda db, rng, shape: _transfer_draft(db, rng, amount=10**6))
    assert _reasons(out) == ["execution_error"]
    assert "below" in out[0].detail  # the tool's own message


def test_execution_error_from_a_skill_bug():
    def buggy(db, rng, shape):
        return {}["missing"]

    out = _outcomes(buggy)
    assert _reasons(out) == ["execution_error"] and "KeyError" in out[0].detail


def test_no_state_change():
    def unfreeze_unfrozen(db, rng, shape):
        (a,) = _accounts(db, rng, 1)
        calls = (
            ToolCall(name="find_account", arguments={"email": a.owner_email}),
            ToolCall(
                name="set_frozen",
                arguments={"account_id": a.id, "frozen": False, "reason": "fraud"},
            ),
        )
        user = UserProfile(name="Al", facts={"email": a.owner_email})
        return Draft(user=user, turns=(Turn(request="Unfreeze my account (fraud).", calls=calls),))

    assert _reasons(_outcomes(unfreeze_unfrozen, seed_fn=unfreeze_unfrozen_seed)) == [
        "no_state_change"
    ]


def unfreeze_unfrozen_seed(db, rng, shape):
    (a,) = _accounts(db, rng, 1)
    calls = (
        ToolCall(name="find_account", arguments={"email": a.owner_email}),
        ToolCall(
            name="set_frozen", arguments={"account_id": a.id, "frozen": True, "reason": "fraud"}
        ),
    )
    user = UserProfile(name="Al", facts={"email": a.owner_email})
    return Draft(user=user, turns=(Turn(request="Freeze my account (fraud).", calls=calls),))


def test_do_nothing_passes():
    def silent_lookup(db, rng, shape):
        (a,) = _accounts(db, rng, 1)
        calls = (ToolCall(name="find_account", arguments={"email": a.owner_email}),)
        user = UserProfile(name="Al", facts={"email": a.owner_email})
        return Draft(user=user, turns=(Turn(request="Do you have my account?", calls=calls),))

    out = _outcomes(silent_lookup, writes=False, seed_fn=silent_lookup)
    assert _reasons(out) == ["do_nothing_passes"]
    gold = replay_gold(SHAPED, _seed_of(silent_lookup))
    assert free_turns(gold) == [0]


def _seed_of(fn):
    from rods_env.seeds import make_task

    skill = Skill("s", "", fn, writes=False)
    return make_task(replace(SHAPED, skills=(skill,)), skill, random.Random(0), task_id="q")


def test_signature_mismatch_on_other_tools_and_on_other_value_flow():
    extra = (ToolCall(name="get_account", arguments={"account_id": "ACC0001"}),)
    out = _outcomes(lambda db, rng, shape: _transfer_draft(db, rng, extra=extra))
    assert _reasons(out) == ["signature_mismatch"] and "tools" in out[0].detail

    def from_request(db, rng, shape):  # same tools, but the account id is not looked up
        a, b = _accounts(db, rng, 2)
        draft = _transfer_draft(db, random.Random(rng.random()))
        calls = (
            ToolCall(name="find_account", arguments={"email": a.owner_email}),
            ToolCall(
                name="transfer", arguments={"from_account": a.id, "to_account": b.id, "amount": 20}
            ),
        )
        facts = {"email": a.owner_email, "account": a.id, "recipient account": b.id}
        turn = Turn(request=f"Move 20 dollars from {a.id} to {b.id}.", calls=calls)
        return replace(draft, user=UserProfile(name="x", facts=facts), turns=(turn,))

    out = _outcomes(from_request)
    assert _reasons(out) == ["signature_mismatch"] and "!=" in out[0].detail


def test_underivable_argument():
    out = _outcomes(lambda db, rng, shape: _transfer_draft(db, rng, say_amount=False))
    assert _reasons(out) == ["underivable_argument"]
    assert "transfer.amount=" in out[0].detail


def test_policy_violation_from_a_domain_check():
    def no_big_transfers(domain, task, gold):
        big = [c for c in task.gold_calls if c.arguments.get("amount", 0) > 15]
        return f"transfer over 15 without approval: {big[0].key()}" if big else None

    out = _outcomes(
        lambda db, rng, shape: _transfer_draft(db, rng, amount=40),
        policy_checks=(no_big_transfers,),
    )
    assert _reasons(out) == ["policy_violation"] and "over 15" in out[0].detail


def test_derivable_sources():
    seed = _seed_of(lambda db, rng, shape: _transfer_draft(db, rng, amount=40))
    gold = replay_gold(SHAPED, seed)
    assert underivable_arguments(SHAPED, seed, gold) == []  # email: fact; id: output; 40: request
    t = seed.turns[0]
    hidden_amount = t.model_copy(update={"request": "Send some money."})
    task = seed.model_copy(update={"turns": (hidden_amount,)})
    assert underivable_arguments(SHAPED, task, gold) == ["transfer.amount=40"]
    small = t.calls[1].model_copy(update={"arguments": {**t.calls[1].arguments, "amount": 7}})
    task = seed.model_copy(
        update={"turns": (hidden_amount.model_copy(update={"calls": (t.calls[0], small)}),)}
    )
    assert underivable_arguments(SHAPED, task, replay_gold(SHAPED, task)) == []
    enum = ToolCall(
        name="set_frozen", arguments={"account_id": "ACC0001", "frozen": True, "reason": "fraud"}
    )
    task = seed.model_copy(update={"turns": (t.model_copy(update={"calls": (*t.calls, enum)}),)})
    assert underivable_arguments(SHAPED, task, replay_gold(SHAPED, task)) == [
        "set_frozen.account_id='ACC0001'"
    ]


@pytest.mark.parametrize(
    ("old", "new", "axis", "ok"),
    [
        (("a", "w"), ("a", "w", "w"), "items", True),
        (("a", "w"), ("a", "b", "w"), "items", True),
        (("a", "w"), ("a", "w"), "items", False),  # not larger
        (("a", "w"), ("b", "w", "w"), "items", False),  # lost a call
    ],
)
def test_one_step(old, new, axis, ok):
    def sig(tools, turns=1):
        return Signature(tools=tools, edges=(), depth=1, writes=tools.count("w"), turns=turns)

    if ok:
        check_one_step(sig(old), sig(new), axis)
    else:
        with pytest.raises(Reject) as exc:
            check_one_step(sig(old), sig(new), axis)
        assert exc.value.reason == "signature_mismatch"


def test_one_step_turns_axis():
    def sig(tools, turns, writes=1):
        return Signature(tools=tools, edges=(), depth=1, writes=writes, turns=turns)

    check_one_step(sig(("a", "w"), 1), sig(("a", "w", "b"), 2), "turns")
    with pytest.raises(Reject):
        check_one_step(sig(("a", "w"), 1), sig(("a", "w", "b"), 3), "turns")
    with pytest.raises(Reject):  # a non-turn axis may not add a turn
        check_one_step(sig(("a", "w"), 1), sig(("a", "w", "b"), 2), "items")
    with pytest.raises(Reject):  # two more writes is more than one step
        check_one_step(sig(("a", "w"), 1), sig(("a", "w", "w", "w"), 1, 3), "items")


def test_the_domain_s_own_policy_checks_are_applied():
    def no_big_transfers(domain, task, gold):
        big = [c for c in task.gold_calls if c.arguments.get("amount", 0) > 15]
        return f"transfer over 15 without approval: {big[0].key()}" if big else None

    good = Skill("s", "", lambda db, rng, shape: _transfer_draft(db, rng, amount=12))
    bad = Skill("s", "", lambda db, rng, shape: _transfer_draft(db, rng, amount=40))
    from rods_env.seeds import make_task

    seed = make_task(replace(SHAPED, skills=(good,)), good, random.Random(0), task_id="seed")
    strict = replace(SHAPED, skills=(bad,), policy_checks=(no_big_transfers,))
    out = list(synthesize([seed], domains=strict, per_seed=1, attempts=1))
    assert _reasons(out) == ["policy_violation"] and "over 15" in out[0].detail
    lenient = replace(strict, policy_checks=())
    assert _reasons(list(synthesize([seed], domains=lenient, per_seed=1, attempts=1))) == [
        "accepted"
    ]


@pytest.mark.parametrize(
    ("request_text", "problem"),
    [
        ("Send 40 dollars to to {b}.", "doubled word"),
        ("Send 40 dollars to the the account {b}.", "doubled word"),
        ("My the account needs 40 dollars sent to {b}.", "stacked determiners"),
        ("Send 40 dollars to {b} with .", "dangling"),
    ],
)
def test_bad_text(request_text, problem):
    def draft(db, rng, shape):
        d = _transfer_draft(db, rng, amount=40)
        b = d.turns[0].calls[1].arguments["to_account"]
        turn = d.turns[0].model_copy(update={"request": request_text.format(b=b)})
        return replace(d, turns=(turn,))

    out = _outcomes(draft, rewrite=False)
    assert _reasons(out) == ["bad_text"] and problem in out[0].detail


def test_turn_depths_and_an_expansion_that_lowers_one():
    from rods_env.synthesis.critique import check_turn_depths, turn_depths

    # turn 0: a -> b -> c (depth 3); turn 1: d, fed by c (depth 4)
    deep = Signature(
        tools=("a", "b", "c", "d"), edges=((0, 1), (1, 2), (2, 3)), depth=4, writes=1, turns=2
    )
    assert turn_depths(deep, [3, 1]) == [3, 4]
    shallow = Signature(
        tools=("a", "b", "c", "d", "e"), edges=((0, 1), (2, 3)), depth=2, writes=2, turns=3
    )
    assert turn_depths(shallow, [3, 1, 1]) == [2, 2, 1]

    def task_with(sig, counts):
        calls = iter(ToolCall(name=n) for n in sig.tools)
        turns = tuple(Turn(request="r", calls=tuple(next(calls) for _ in range(n))) for n in counts)
        return seed_like.model_copy(update={"turns": turns, "signature": sig})

    seed_like = _seed_of(lambda db, rng, shape: _transfer_draft(db, rng))
    parent = task_with(deep, [3, 1])
    with pytest.raises(Reject) as exc:
        check_turn_depths(parent, deep, task_with(shallow, [3, 1, 1]))
    assert exc.value.reason == "signature_mismatch" and "turn 0 has depth 2, 3" in exc.value.detail
    kept = Signature(
        tools=("a", "b", "c", "d", "e"),
        edges=((0, 1), (1, 2), (2, 3), (3, 4)),
        depth=5,
        writes=2,
        turns=3,
    )
    check_turn_depths(parent, deep, task_with(kept, [3, 1, 1]))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(alphabet='0123456789.,-e $x"{}:', max_size=40), st.integers(0, 3))
def test_the_numbers_of_a_text_are_remembered_exactly(text, repeat):
    """The critique remembers the numbers found in a text (an output read by every task
    that reads it): the same set as searching the text, the first time and later."""
    from rods_env.synthesis.critique import _numbers_in, _numbers_of

    for _ in range(repeat + 1):
        assert _numbers_of(text) == _numbers_in(text)
    long = text + " " * 40000  # too long to remember: searched each time
    assert _numbers_of(long) == _numbers_in(long)
