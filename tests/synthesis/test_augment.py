"""Augmentations: the semantics the environment and the reward enforce."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from rods_env import OracleAgent, ToolCall, ToolEnv, Turn, UserProfile
from rods_env.domain import Draft, Skill
from rods_env.gold import replay_gold
from rods_env.oracle import tool_call_text
from rods_env.seeds import make_task
from rods_env.synthesis import AUGMENTS, CANNOT, Candidate, plan, synthesize
from rods_env.synthesis.augment import (
    first_usable_guess,
    near_miss,
    plausible_guesses,
    remove_value,
    states,
)
from rods_env.synthesis.rewrite import strip_frame
from rods_env.synthesis.text import text_problems
from tests.core.toy_domain import TOY
from tests.synthesis.conftest import GuessingAgent, play, run_oracle
from tests.synthesis.toy_synth import SHAPED

WRITES = SHAPED.toolkit.write_names()


def _variants(seeds, kind, **kw):
    out = list(synthesize(seeds, domains=SHAPED, augment=(kind,), **kw))
    return [o.task for o in out if o.accepted and o.task.variant == kind], out


@pytest.fixture(scope="module")
def transfer_seeds(seeds):
    return [t for t in seeds if t.skill == "transfer"]


# -- missing parameter ---------------------------------------------------------------------
def test_missing_parameter_hides_a_needed_fact_from_the_request(transfer_seeds):
    tasks, _ = _variants(transfer_seeds, "missing_parameter", per_seed=2)
    assert len(tasks) >= len(transfer_seeds)
    for task in tasks:
        (label,) = task.turns[0].hidden_facts
        value = task.user.facts[label]
        assert value not in task.turns[0].request
        assert any(value in str(c.arguments) for c in task.gold_calls)


def test_missing_parameter_asking_succeeds_and_guessing_fails(transfer_seeds):
    tasks, _ = _variants(transfer_seeds, "missing_parameter", per_seed=2)
    for task in tasks:
        (label,) = task.turns[0].hidden_facts
        value = task.user.facts[label]
        out = run_oracle(SHAPED, task)
        assert out["success"], out["transcript"]
        # the oracle asked for the fact by name, and the user told it
        assert f"tell me your {label}" in out["transcript"]
        assert f"my {label} is {value}" in out["transcript"]

        # a plausible wrong value: another account of the same kind, which the tools accept
        gold = replay_gold(SHAPED, task)
        others = {label: [t.user.facts.get(label, value) for t in transfer_seeds]}
        guesses = plausible_guesses(task, gold, label, others)
        guess, fails = first_usable_guess(SHAPED, task, gold, label, 0, guesses)
        assert guess is not None and guess.startswith("ACC") and fails
        out = run_oracle(SHAPED, task, GuessingAgent(SHAPED, task, label, guess))
        assert f"tell me your {label}" not in out["transcript"]  # it did not ask
        assert guess in out["transcript"]
        assert not out["success"] and out["turn_results"][0]["effect_ok"] is False


def _guessable(db, rng, shape):
    """The email only feeds a look-up whose result is not used: guessing it changes nothing."""
    a, b = rng.sample(sorted(db.values("accounts"), key=lambda x: x.id), 2)
    calls = (
        ToolCall(name="find_account", arguments={"email": a.owner_email}),
        ToolCall(
            name="set_frozen", arguments={"account_id": b.id, "frozen": True, "reason": "fraud"}
        ),
    )
    user = UserProfile(name="Al", facts={"email": a.owner_email})
    turn = Turn(request=f"I'm {a.owner_email}. Freeze account {b.id} (fraud).", calls=calls)
    return Draft(user=user, turns=(turn,))


def test_missing_parameter_rejects_a_fact_that_can_be_guessed():
    skill = Skill("g", "", _guessable)
    dom = replace(SHAPED, skills=(skill,))
    seed = make_task(dom, skill, random.Random(0), task_id="g0")
    out = list(synthesize([seed], domains=dom, per_seed=2, augment=("missing_parameter",)))
    assert sum(o.accepted for o in out) == 2
    assert [o.reason for o in out if not o.accepted and o.augment] == ["guess_passes"] * 2


def test_missing_parameter_unavailable_when_no_request_states_a_fact(seeds):
    balance = [t for t in seeds if t.skill == "balance"]
    tasks, out = _variants(balance, "missing_parameter", per_seed=1)
    assert not tasks
    assert {o.reason for o in out if not o.accepted} == {"augment_unavailable"}


@pytest.mark.parametrize(
    ("text", "value", "label", "expected"),
    [
        ("Cancel order #W123 please.", "#W123", "order id", "Cancel my order please."),
        (
            "Send 20 dollars to account ACC0003.",
            "ACC0003",
            "recipient account",
            "Send 20 dollars to my recipient account.",
        ),
        (
            "Change my address to 1 Main St, Springfield?",
            "1 Main St, Springfield",
            "new address",
            "Change my address to my new address?",
        ),
        ("Fly from Dallas (DFW) to Boston.", "DFW", "origin", "Fly from Dallas to Boston."),
        ("My email is a@b.com, thanks.", "a@b.com", "email", "My email, thanks."),
        ("Use ZX9 for it.", "ZX9", "code", "Use my code for it."),
        ("Order #W1 has not shipped.", "#W1", "order id", "My order has not shipped."),
        # whole tokens only: "4" inside a code is not the value 4
        ("Economy, code NLYW4C.", "4", "bags", "Economy, code NLYW4C."),
    ],
)
def test_remove_value(text, value, label, expected):
    assert remove_value(text, value, label) == expected


def test_remove_value_works_on_whole_tokens_and_bad_results_are_flagged():
    text = "Book economy, no insurance, 4 bags, on reservation NLYW4C."
    out = remove_value(text, "no", "insurance")
    # "no" inside "economy" is untouched (raw surgery gave "ecomy insurancemy")
    assert "economy" in out and "ecomy" not in out and not states(out, "no")
    assert text_problems(out) == ["doubled word 'insurance insurance'"]
    four = remove_value(text, "4", "bags")
    assert "NLYW4C" in four and not states(four, "4")
    assert remove_value("The new address is 1 Main St.", "1 Main St", "new address") == (
        "The new address."
    )
    assert text_problems("The new address.") == ["fragment 'The new address.'"]


def test_states_and_near_miss():
    assert states("order #W12 now", "#W12") and not states("order #W123", "#W12")
    assert not states("businesses", "business")
    assert near_miss("ACC0009") == "ACC0000" and near_miss("abc") == "abd"


# -- missing function ----------------------------------------------------------------------
def test_missing_function_withholds_the_write_for_one_turn(transfer_seeds):
    tasks, _ = _variants(transfer_seeds, "missing_function", per_seed=1)
    assert len(tasks) == len(transfer_seeds)
    for task in tasks:
        blocked, again = task.turns
        assert blocked.withheld_tools == ("transfer",) and blocked.calls == ()
        assert blocked.outputs == (CANNOT,)
        assert again.withheld_tools == () and again.calls
        env = ToolEnv(SHAPED, tasks=[task], split=None)
        _, info = env.reset(options={"task": task})
        names = {t["function"]["name"] for t in info["tools"]}
        assert "transfer" not in names and "set_frozen" in names
        out = run_oracle(SHAPED, task)  # says it cannot, then does it when the tool is back
        assert out["success"] and out["turn_results"][0]["passed"], out["transcript"]


def _play(task, first_turn_actions):
    """Play ``first_turn_actions`` in the withheld turn, then the oracle for the rest."""
    env = ToolEnv(SHAPED, tasks=[task], split=None, max_steps=40, render_mode="ansi")
    obs, info = env.reset(options={"task": task})
    for action in first_turn_actions:
        obs, _, term, trunc, info = env.step(action)
        if info["turn"] != 0 or term or trunc:
            break
    oracle = OracleAgent(task, WRITES)
    while not (term or trunc):
        obs, _, term, trunc, info = env.step(oracle.act(obs, info))
    return info, env


def test_missing_function_saying_so_passes_and_calling_around_it_fails(transfer_seeds):
    tasks, _ = _variants(transfer_seeds, "missing_function", per_seed=1)
    task = tasks[0]
    call = task.turns[1].calls[1]  # the transfer
    src = call.arguments["from_account"]

    # no write, and say so: the turn passes
    info, _ = _play(task, ["I'm sorry, I cannot make transfers at the moment."])
    assert info["turn_results"][0]["passed"] and info["success"]

    # the withheld tool itself is not available in that turn and changes nothing
    refusal = "Sorry, I cannot make the transfer right now."
    info, env = _play(task, [tool_call_text(call), refusal])
    assert "'transfer' is not available in this conversation" in env.render()
    assert info["turn_results"][0]["passed"]

    # a blanket refusal that does not name the operation fails the turn
    info, _ = _play(task, ["Sorry, I cannot do that right now."] * 3)
    assert not info["turn_results"][0]["passed"] and not info["success"]

    # calling around it (another write in the withheld turn) fails the turn
    around = ToolCall(
        name="set_frozen", arguments={"account_id": src, "frozen": True, "reason": "fraud"}
    )
    info, _ = _play(task, [tool_call_text(around), refusal])
    assert not info["turn_results"][0]["passed"]
    assert info["turn_results"][0]["collateral"] and not info["success"]

    # claiming success, never saying it cannot be done, fails the turn (the user gives up)
    info, _ = _play(task, ["Done, the money is on its way."] * 5)
    assert not info["turn_results"][0]["passed"] and not info["success"]


def test_missing_function_unavailable_for_read_only_tasks(seeds):
    balance = [t for t in seeds if t.skill == "balance"]
    tasks, out = _variants(balance, "missing_function", per_seed=1)
    assert not tasks and {o.reason for o in out if not o.accepted} == {"augment_unavailable"}


# -- long context and distractors ----------------------------------------------------------
def test_long_context_is_a_controlled_pair_of_its_base(transfer_seeds):
    # the toy's long database holds the default one's accounts (and more), with records of
    # the same length: no length requirement here (the real domains' tests check it)
    tasks, out = _variants(transfer_seeds, "long_context", per_seed=1, long_ratio=1.0)
    base = {o.task.id: o.task for o in out if o.accepted and o.task.variant == "base"}
    assert len(tasks) == len(transfer_seeds)
    for task in tasks:
        parent = base[task.provenance.parent_id]
        assert task.db_size == "long" and parent.db_size == "default"
        # same requests, user, calls and outputs: only the world is larger
        assert task.turns == parent.turns and task.user == parent.user
        gold, parent_gold = replay_gold(SHAPED, task), replay_gold(SHAPED, parent)
        assert [set(t.effect) for t in gold.turns] == [set(t.effect) for t in parent_gold.turns]
        assert run_oracle(SHAPED, task)["success"]


def test_long_context_must_have_longer_tool_outputs(transfer_seeds):
    tasks, out = _variants(transfer_seeds[:2], "long_context", per_seed=1)
    assert not tasks
    reasons = [o.reason for o in out if not o.accepted]
    assert reasons and set(reasons) == {"not_longer"}
    assert "characters" in next(o.detail for o in out if not o.accepted)


def test_long_context_unavailable_without_a_long_size():
    seed = make_task(TOY, TOY.skill("transfer"), random.Random(0), task_id="t")
    out = list(synthesize([seed], domains=TOY, per_seed=1, augment=("long_context",)))
    assert [getattr(o, "reason", "ok") for o in out] == ["ok", "augment_unavailable"]


def test_distractors_compete_and_acting_on_them_fails(transfer_seeds):
    tasks, out = _variants(transfer_seeds, "distractor", per_seed=1)
    base = {o.task.id: o.task for o in out if o.accepted and o.task.variant == "base"}
    assert len(tasks) == len(transfer_seeds)
    for task in tasks:
        parent = base[task.provenance.parent_id]
        for t, p in zip(task.turns, parent.turns, strict=True):
            assert strip_frame(p.request) in t.request and len(t.request) > len(p.request)
            assert t.calls == p.calls and t.outputs == p.outputs
            assert not text_problems(t.request)
        # the second request names another account (the toy's forbidden request) and no fact
        extra = task.turns[0].request.replace(strip_frame(parent.turns[0].request), "")
        assert "out of account ACC" in extra
        assert not any(states(extra, v) for v in task.user.facts.values())
    # an agent that also does what the distractor asks moves someone else's money: it fails
    task = tasks[0]
    other = task.turns[0].request.split("out of account ")[1].split()[0]
    target = task.gold_calls[-1].arguments["to_account"]
    obey = ToolCall(
        name="transfer", arguments={"from_account": other, "to_account": target, "amount": 50}
    )
    result = play(SHAPED, task, 0, [tool_call_text(obey)])
    assert not result["turn_results"][0]["passed"] and result["turn_results"][0]["collateral"]
    assert run_oracle(SHAPED, task)["success"]


def test_distractor_filter_matches_whole_tokens(transfer_seeds):
    from rods_env.synthesis.augment import distractor

    _, out = _variants(transfer_seeds[:1], "distractor", per_seed=1)
    base = next(o for o in out if o.accepted and o.task.variant == "base")
    cand = Candidate(
        task=base.task, gold=base.gold, plan=plan(SHAPED, transfer_seeds[0], "resample")
    )
    # "no" is inside "another" and "Nora": a short value only knocks out a sentence that
    # states it as a word
    facts = {**cand.task.user.facts, "insurance": "no"}
    task = cand.task.model_copy(update={"user": cand.task.user.model_copy(update={"facts": facts})})
    sentences = [
        "My friend Nora asked for another transfer out of account ACC0039.",
        "Say no more.",
    ]
    dom = replace(SHAPED, forbidden_requests=lambda t, db, rng: sentences)
    for k in range(10):
        request = distractor(dom, replace(cand, task=task), random.Random(k)).task.turns[0].request
        assert "Nora" in request and "Say no more" not in request


def test_every_kind_keeps_the_gold_valid(seeds):
    out = list(synthesize(seeds[:6], domains=SHAPED, per_seed=1, augment=AUGMENTS, long_ratio=1))
    for o in out:
        if o.accepted:
            assert run_oracle(SHAPED, o.task)["success"]
