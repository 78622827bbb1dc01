from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rods_env import ScriptedUser, TurnView
from rods_env.gold import replay_gold
from rods_env.seeds import make_task
from rods_env.signature import compute_signature, value_leaves
from tests.core.toy_domain import TOY


def _task(skill: str, i: int = 0):
    return make_task(
        TOY, TOY.skill(skill), random.Random(i), task_id=f"x-{skill}-{i}", db_size="tiny"
    )


def _view(task, *, goal=False, effect=False, needs_write=True, turn=0):
    return TurnView(
        task=task, turn=turn, goal_reached=goal, effect_present=effect, needs_write=needs_write
    )


def test_user_answers_only_the_facts_asked_for():
    task = _task("transfer")
    user = ScriptedUser()
    first = user.start(task)
    assert task.turns[0].request in first and task.user.facts["email"] not in first
    reply = user.reply("Could you tell me your email address?", _view(task))
    assert task.user.facts["email"] in reply.text and "recipient" not in reply.text
    assert not reply.advance


def test_user_confirms_pending_write_and_look_ups_but_declines_extra_writes():
    task = _task("transfer")
    user = ScriptedUser()
    user.start(task)
    assert user.reply("I will transfer it. Shall I proceed?", _view(task)).kind == "confirm"
    # the write is done but the turn is not over: another action is declined
    assert user.reply("Shall I proceed?", _view(task, effect=True)).kind == "decline"
    # a read-only turn: permission to look something up is granted
    look = user.reply("Shall I look it up?", _view(task, needs_write=False))
    assert look.kind == "confirm"
    # a turn whose tool is withheld: no workaround
    withheld = task.model_copy(
        update={
            "turns": (
                task.turns[0].model_copy(update={"withheld_tools": ("transfer",), "calls": ()}),
            )
        }
    )
    user.start(withheld)
    assert (
        user.reply("Shall I try another way?", _view(withheld, needs_write=False)).kind == "decline"
    )


def test_user_advances_when_goal_reached_and_stops_after_last_turn():
    task = _task("freeze_then_balance")
    user = ScriptedUser()
    user.start(task)
    r1 = user.reply("Done, your account is frozen.", _view(task, goal=True, effect=True))
    assert r1.advance and not r1.stop and task.turns[1].request in r1.text
    r2 = user.reply("Your balance is 10.", _view(task, goal=True, effect=True, turn=1))
    assert r2.advance and r2.stop


def test_user_nudges_then_abandons():
    task = _task("transfer")
    user = ScriptedUser(patience=2)
    user.start(task)
    kinds = [user.reply("Okay.", _view(task)).kind for _ in range(3)]
    assert kinds == ["nudge", "nudge", "abandon"]


def test_user_is_deterministic_per_task():
    task = _task("transfer")
    a, b = ScriptedUser(), ScriptedUser()
    assert a.start(task) == b.start(task)
    assert a.reply("ok", _view(task)).text == b.reply("ok", _view(task)).text


def test_signature_traces_value_flow_not_user_facts():
    task = _task("transfer")
    sig = compute_signature(task, replay_gold(TOY, task), TOY.toolkit.write_names())
    # find_account returns the payer's id, which transfer uses; the recipient id is a user fact
    assert sig.tools == ("find_account", "transfer")
    assert sig.edges == ((0, 1),)
    assert (sig.depth, sig.writes, sig.turns) == (2, 1, 1)
    assert sig.key == "t1|w1|d2|find_account+transfer|0>1"


def test_signature_is_shared_by_tasks_of_the_same_structure():
    keys = {_task("freeze_then_balance", i).signature.key for i in range(5)}
    assert len(keys) == 1
    assert _task("freeze_then_balance").signature.edges == ((0, 1), (0, 2))


def _walk_leaves(value: object) -> set[str]:
    """The definition of value_leaves, as a plain walk: string values of 3+ characters
    (never object keys) and numbers of magnitude >= 10, anywhere in the value."""
    if isinstance(value, dict):
        return {leaf for v in value.values() for leaf in _walk_leaves(v)}
    if isinstance(value, (list, tuple)):
        return {leaf for v in value for leaf in _walk_leaves(v)}
    if isinstance(value, bool) or value is None:
        return set()
    if isinstance(value, (int, float)):
        return {repr(value)} if abs(value) >= 10 else set()
    assert isinstance(value, str)
    return {value} if len(value) >= 3 else set()


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(['a"b:c', '"x": 12', "\\n12", "12, 345", "#W0012", "10.50", "é-ü 99"])
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=6) | st.sampled_from(["123", "abc: 4"]), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@given(_JSON)
def test_value_leaves_match_a_plain_walk_of_the_value(value):
    assert value_leaves(value) == _walk_leaves(value)


@pytest.mark.parametrize("name", ["retail", "airline"])
def test_gold_outputs_and_their_leaves_are_those_of_the_returned_values(name):
    """Gold replays dump each returned record once per process and remember its leaves;
    both must be exactly what a fresh dump gives, for every gold call of the seed tasks."""
    import rods_env
    from rods_env.leaves import _leaves_of, record_json
    from rods_env.tools import to_jsonable

    domain = rods_env.load_domain(name)
    checked = 0
    for task in domain.seed_tasks()[::4]:
        tools = domain.tools(domain.database(task.db_seed, task.db_size))
        tools.on_reset()
        for call in task.gold_calls:
            result = tools.call(call.name, call.arguments, render=False)
            assert result.ok
            for _ in range(2):  # the second time from what is remembered
                out = record_json(result.value)
                assert out == to_jsonable(result.value)
                fresh = frozenset(_leaves_of(out)) if isinstance(out, (dict, list)) else None
                assert fresh is None or value_leaves(out) == fresh
            checked += 1
    assert checked > 100


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.text(alphabet="ab01 -.:#$,\n", max_size=15), max_size=4),
    st.text(alphabet="ab01-.:#$,", min_size=1, max_size=6),
)
def test_a_value_is_stated_by_the_facts_one_a_line_when_one_fact_states_it(facts, leaf):
    """compute_signature checks a leaf against all facts joined by line breaks: the same
    verdict as checking each fact (values with | or a leading ! are checked fact by fact)."""
    from rods_env.rewards import Said

    facts = [f.replace("\n", " ") for f in facts]
    if leaf.startswith("!") or "|" in leaf:
        return
    assert Said("\n".join(facts)).has(leaf) == any(Said(f).has(leaf) for f in facts)
