"""The pipeline over every installed domain's seed tasks: each accepted variant is valid.

A few seeds per skill keep it fast; every accepted variant (base and augmented) is played by
the oracle (must succeed) and by a talk-only agent (must fail every turn where gold writes).
"""

from __future__ import annotations

import re
import warnings
from collections import defaultdict

import pytest

import rods_env
from rods_env import OracleAgent, ToolEnv
from rods_env.gold import replay_gold
from rods_env.oracle import tool_call_text
from rods_env.synthesis import AUGMENTS, synthesize
from rods_env.synthesis.augment import first_usable_guess, plausible_guesses
from rods_env.synthesis.critique import check_signature
from rods_env.task import ToolCall
from tests.synthesis.conftest import GuessingAgent, assert_valid, base_seeded_domains, play

SEEDS_PER_SKILL = 2


DOMAINS = base_seeded_domains()


def _sample(domain):
    by_skill = defaultdict(list)
    for task in domain.seed_tasks("train"):
        by_skill[task.skill].append(task)
    # the smallest shapes first, so expand has room to grow
    return {
        skill: sorted(tasks, key=lambda t: sorted(t.shape.items()))[:SEEDS_PER_SKILL]
        for skill, tasks in by_skill.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["resample", "expand"])
@pytest.mark.parametrize("name", DOMAINS)
def test_accepted_variants_of_real_seeds_are_valid(name, mode):
    domain = rods_env.load_domain(name)
    by_skill = _sample(domain)
    seeds = [t for tasks in by_skill.values() for t in tasks]
    parents = {t.id: t for t in seeds}
    outcomes = list(synthesize(seeds, per_seed=1, mode=mode, augment=AUGMENTS))
    accepted = [o.task for o in outcomes if o.accepted]
    base = {t.id: t for t in accepted if t.variant == "base"}
    assert accepted
    for task in accepted:
        assert_valid(domain, task)
        if task.variant != "base":
            continue
        parent = parents[task.provenance.parent_id]
        if mode == "resample":
            assert task.signature == parent.signature
        else:
            check_signature(parent.signature, task.signature, "expand", task.provenance.step)
    for task in accepted:
        if task.variant != "base":
            assert task.provenance.parent_id in base
        if task.variant == "missing_parameter":
            _guessing_fails(domain, task, seeds)
        if task.variant == "missing_function":
            _calling_around_fails(domain, task)
    if mode == "resample":
        # A skill whose structure is not fixed by its shape (it draws, say, the look-up that
        # identifies the user at random) misses its seed's signature on most tries; flag it.
        missing = set(by_skill) - {t.skill for t in base.values()}
        if missing:
            warnings.warn(
                f"{name}: no accepted resample for {sorted(missing)} (structure not fixed "
                "by the shape?)",
                stacklevel=1,
            )
        assert len(missing) <= len(by_skill) // 2


def _guessing_fails(domain, task, others):
    """An agent that fills the hidden fact with a plausible wrong value fails."""
    t, label = next((i, t.hidden_facts[0]) for i, t in enumerate(task.turns) if t.hidden_facts)
    gold = replay_gold(domain, task)
    alternatives = {label: [o.user.facts[label] for o in others if label in o.user.facts]}
    guesses = plausible_guesses(task, gold, label, alternatives)
    guess, fails = first_usable_guess(domain, task, gold, label, t, guesses)
    assert fails
    guess = guess or guesses[0]  # every guess is rejected by the tools: still a failure
    out = play(domain, task, 0, [], agent=GuessingAgent(domain, task, label, guess))
    assert not out["success"], (task.id, label, guess, out["transcript"])
    assert not out["turn_results"][t]["passed"]


def _calling_around_fails(domain, task):
    """A write in the withheld turn fails that turn; no write and "cannot" passes it."""
    t = next(i for i, turn in enumerate(task.turns) if turn.withheld_tools)
    assert play(domain, task, t, [])["turn_results"][t]["passed"]
    env_db = domain.database(task.db_seed, task.db_size)
    write = domain.unrelated_write(task, env_db) if domain.unrelated_write else None
    if write is None:
        return
    out = play(domain, task, t, [tool_call_text(write), "Sorry, I cannot do that right now."])
    if out["injected"][0].startswith("Error"):
        return  # the write is not valid before the gold runs; nothing to show
    assert not out["turn_results"][t]["passed"] and out["turn_results"][t]["collateral"]
    assert not out["success"]


# -- competing distractors, personas, expansions along turns ---------------------------------
def _accepted(name, **kw):
    domain = rods_env.load_domain(name)
    seeds = [t for tasks in _sample(domain).values() for t in tasks]
    return domain, [o.task for o in synthesize(seeds, per_seed=1, **kw) if o.accepted]


def _writes_on(domain, task, record_id):
    """Writes on another order or reservation of the task's customer that may succeed."""
    if domain.name == "retail":
        for reason in ("no longer needed",):
            yield ToolCall(
                name="cancel_pending_order", arguments={"order_id": record_id, "reason": reason}
            )
        return
    db = domain.database(task.db_seed, task.db_size)
    res = db.get("reservations", record_id)
    user = db.get("users", task.user.facts["user id"])
    if res is None or user is None:
        return
    for pid, method in sorted(user.payment_methods.items()):
        if method.source == "credit_card":
            yield ToolCall(
                name="update_reservation_baggages",
                arguments={
                    "reservation_id": record_id,
                    "total_baggages": res.total_baggages + 1,
                    "payment_id": pid,
                },
            )


def _play_then(domain, task, extra):
    """The oracle plays the first turn's gold calls, then makes ``extra`` before it reports
    back; None when the tools reject ``extra`` (nothing changed)."""
    agent = OracleAgent(task, domain.toolkit.write_names())
    env = ToolEnv(domain, tasks=[task], split=None, max_steps=80)
    obs, info = env.reset(options={"task": task})
    done = injected = False
    while not done:
        action = agent.act(obs, info)
        if (
            not injected
            and info["turn"] == 0
            and "<tool_call>" not in action
            and (action.startswith(("All done", "I'm sorry")))
        ):
            injected = True
            obs, _, term, trunc, info = env.step(tool_call_text(extra))
            if obs.startswith("Error"):
                return None
            continue
        obs, _, term, trunc, info = env.step(action)
        done = term or trunc
    return info


@pytest.mark.parametrize("name", DOMAINS)
def test_distractors_compete_and_an_agent_that_follows_one_fails(name):
    from rods_env.synthesis.rewrite import strip_frame
    from rods_env.synthesis.text import states

    domain, tasks = _accepted(name, augment=("distractor",))
    base = {t.id: t for t in tasks if t.variant == "base"}
    variants = [t for t in tasks if t.variant == "distractor"]
    assert len(variants) >= len(base) // 2
    noun = "order" if name == "retail" else "reservation"
    followed = 0
    for task in variants:
        parent = base[task.provenance.parent_id]
        extra = " ".join(
            t.request.replace(strip_frame(p.request), "")
            for t, p in zip(task.turns, parent.turns, strict=True)
        )
        assert not any(states(extra, v) for v in task.user.facts.values())
        assert task.gold_calls == parent.gold_calls
        # another order/reservation of the customer, a request the policy forbids, or
        # another date
        ids = re.findall(r"(?:#W\d{7}|\b[A-Z0-9]{6}\b)", extra)
        dates = re.findall(r"\b(?:January|February|March|April|May|June|July) \d+\b", extra)
        assert (noun in extra and ids) or dates, extra
        used = {str(v) for c in task.gold_calls for v in c.arguments.values()}
        assert not set(ids) & used
        if not ids:
            continue
        # an agent that also acts on the other record changes what the task leaves alone
        for call in _writes_on(domain, task, ids[0]):
            out = _play_then(domain, task, call)
            if out is not None:
                followed += 1
                assert not out["turn_results"][0]["passed"] and not out["success"]
                assert out["turn_results"][0]["collateral"]
                break
    assert followed >= 1


@pytest.mark.parametrize("name", DOMAINS)
def test_the_persona_is_recorded_and_the_opener_speaks_in_it(name):
    from rods_env.synthesis.rewrite import opener_persona
    from rods_env.user import persona_name

    _, tasks = _accepted(name)
    assert tasks
    openers = 0
    for task in tasks:
        recorded = persona_name(task.user.persona)
        assert recorded is not None, task.user.persona
        voice = opener_persona(task.turns[0].request)
        if voice is not None:
            openers += 1
            assert voice == recorded, (task.user.persona, task.turns[0].request)
    assert openers >= len(tasks) // 2


@pytest.mark.parametrize("name", DOMAINS)
def test_expanding_along_turns_keeps_the_depth_of_earlier_turns(name):
    from rods_env.synthesis.critique import turn_depths

    domain = rods_env.load_domain(name)
    seeds = [t for t in domain.seed_tasks("train") if t.skill == "multi_turn"][:6]
    parents = {t.id: t for t in seeds}
    out = [o.task for o in synthesize(seeds, per_seed=2, mode="expand") if o.accepted]
    grown = [t for t in out if t.signature.turns > parents[t.provenance.parent_id].signature.turns]
    assert grown
    for task in grown:
        parent = parents[task.provenance.parent_id]
        old = turn_depths(parent.signature, [len(t.calls) for t in parent.turns])
        new = turn_depths(task.signature, [len(t.calls) for t in task.turns])
        assert all(b >= a for a, b in zip(old, new, strict=False)), (old, new)
