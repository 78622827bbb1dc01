"""Airline skills: gold calls replay cleanly on tiny and default over many rng seeds, write
skills change the state, every gold value is traceable, and the oracle solves the tasks."""

from __future__ import annotations

import contextlib
import random
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from environments.airline import DOMAIN, skills
from environments.airline.schema import CABINS
from environments.airline.tools import AirlineTools
from rods_env import OracleAgent, TalkOnlyAgent, ToolEnv, run_episode
from rods_env.domain import SkillUnavailable
from rods_env.gold import replay_gold
from rods_env.seeds import make_task
from rods_env.tools import to_jsonable

SEEDS = range(6)
POLICY_CONSTANTS = {30, 50, 100}
SKILL_NAMES = [s.name for s in DOMAIN.skills]


def shapes(skill) -> list[dict[str, int]]:
    """The default shape and, per axis, the shape one step harder up to the limit."""
    out = [dict(skill.shape)]
    for axis, (_, high) in skill.limits.items():
        out.append({**skill.shape, axis: high})
    return out


def build(skill, size, seed, shape):
    rng = random.Random(f"test:{skill.name}:{size}:{seed}:{sorted(shape.items())}")
    return make_task(
        DOMAIN, skill, rng, task_id=f"{skill.name}-{size}-{seed}", db_size=size, shape=shape
    )


def leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v)
    else:
        yield value


def assert_traceable(task, gold) -> None:
    """Every gold argument value comes from an earlier output, a fact, the policy or the
    tool's schema (an enum constant such as ``one_way``)."""
    from rods_env.synthesis.critique import tool_constants

    facts = list(task.user.facts.values())
    constants = tool_constants(DOMAIN.toolkit)
    for i, call in enumerate(task.gold_calls):
        earlier = {v for out in gold.call_outputs[:i] for v in leaves(out)}
        numbers = {v for v in earlier if isinstance(v, int) and not isinstance(v, bool)}
        if call.name == "calculate":
            for token in re.findall(r"\d+", call.arguments["expression"]):
                n = int(token)
                assert n in numbers or n in POLICY_CONSTANTS or n <= 5, (task.id, call, n)
            continue
        for leaf in leaves(call.arguments):
            if isinstance(leaf, str):
                assert (
                    leaf in earlier
                    or any(leaf in f for f in facts)
                    or leaf in constants.get(call.name, ())
                ), (task.id, call, leaf)
            else:
                ok = leaf in numbers or leaf in POLICY_CONSTANTS or str(leaf) in facts
                assert ok, (task.id, call, leaf)


@pytest.mark.parametrize("size", ["tiny", "default"])
@pytest.mark.parametrize("name", SKILL_NAMES)
def test_skill_tasks_replay_cleanly_and_follow_the_conventions(name, size):
    skill = DOMAIN.skill(name)
    made = 0
    for shape in shapes(skill):
        for seed in SEEDS:
            try:
                task = build(skill, size, seed, shape)  # replays the gold calls
            except SkillUnavailable:
                # tiny may lack entities for the hardest shapes; the default shape always fits
                assert size == "tiny" and shape != dict(skill.shape), (name, size, shape)
                continue
            made += 1
            gold = replay_gold(DOMAIN, task)
            assert gold.writes_anything == skill.writes, task.id
            if not skill.writes:
                assert all(t.outputs for t in task.turns), task.id
            assert task.gold_calls[0].name == "get_user_details"
            uid = task.user.facts["user id"]
            assert task.gold_calls[0].arguments == {"user_id": uid}
            assert all(uid not in t.request for t in task.turns), "the agent must ask for it"
            assert all(label == label.lower() for label in task.user.facts)
            if "turns" in shape:
                assert len(task.turns) == shape["turns"]
            assert_traceable(task, gold)
            for turn, turn_gold in zip(task.turns, gold.turns, strict=True):
                for out in turn.outputs:
                    # value outputs are exact strings that a tool printed in that task; an
                    # output with alternatives is a phrase (a refusal and its rule), one
                    # with "!" a phrase that must not be said (another rule's words)
                    printed = {str(v) for o in gold.call_outputs for v in leaves(o)}
                    assert out in printed or "|" in out or out.startswith("!"), (task.id, out)
                assert turn_gold.effect or turn.outputs, (task.id, "a turn must ask something")
    assert made >= len(SEEDS)


def test_skills_are_deterministic_and_vary_with_the_rng():
    for skill in DOMAIN.skills:
        a = build(skill, "default", 0, dict(skill.shape))
        b = build(skill, "default", 0, dict(skill.shape))
        assert a == b
        requests = {build(skill, "default", s, dict(skill.shape)).turns[0].request for s in SEEDS}
        assert len(requests) > 1, skill.name


def one_step_harder(old, new, axis) -> bool:
    """What synthesis "expand" accepts: a bigger signature, one more turn exactly when the
    axis is ``turns``, every old call kept, and at most one more write and one more level."""
    if new.size <= old.size:
        return False
    if new.turns != old.turns + (1 if axis == "turns" else 0):
        return False
    if Counter(old.tools) - Counter(new.tools):
        return False
    return axis == "turns" or (new.writes - old.writes <= 1 and new.depth - old.depth <= 1)


def test_growing_any_axis_by_one_is_one_step_harder():
    for skill in DOMAIN.skills:
        for axis, (low, high) in skill.limits.items():
            for value in range(low, high):
                shape = {**skill.shape, axis: value}
                try:
                    base = build(skill, "default", 0, shape)
                except SkillUnavailable:
                    assert sum(shape.values()) == 0, (skill.name, shape)  # flight_info: no question
                    continue
                harder = build(skill, "default", 0, {**shape, axis: value + 1})
                assert one_step_harder(base.signature, harder.signature, axis), (skill.name, axis)


@pytest.mark.parametrize("name", SKILL_NAMES)
def test_a_shape_always_gives_the_same_signature(name):
    """So that synthesis "resample" (same skill and shape, new entities) keeps the structure."""
    skill = DOMAIN.skill(name)
    for shape in shapes(skill):
        keys = {build(skill, "default", seed, shape).signature.key for seed in range(8)}
        assert len(keys) == 1, (name, shape, keys)


@pytest.fixture(scope="module")
def sample():
    """A few tasks of every skill and shape on the tiny database."""
    tasks = []
    for skill in DOMAIN.skills:
        for shape in shapes(skill):
            for seed in range(2):
                with contextlib.suppress(SkillUnavailable):
                    tasks.append(build(skill, "tiny", seed, shape))
    return tasks


def test_oracle_solves_and_talk_only_fails(sample):
    env = ToolEnv(DOMAIN, tasks=sample, split=None, max_steps=80)
    writes = DOMAIN.toolkit.write_names()
    for task in sample:
        out = run_episode(env, OracleAgent(task, writes), task=task)
        assert out["success"] and out["progress"] == 1.0, (task.id, out["turn_results"])
        talk = run_episode(env, TalkOnlyAgent(), task=task)
        assert not talk["success"] and talk["progress"] == 0.0, task.id


def test_unrelated_write_is_valid_and_changes_the_final_state(sample):
    for task in sample:
        db = DOMAIN.database(task.db_seed, task.db_size)
        tools = AirlineTools(db)
        tools.on_reset()
        for call in task.gold_calls:
            assert tools.call(call.name, call.arguments).ok
        before = db.checkpoint()
        extra = DOMAIN.unrelated_write(task, db)
        assert extra not in task.gold_calls
        assert extra.name in AirlineTools.write_names()
        result = tools.call(extra.name, extra.arguments)
        assert result.ok, (task.id, extra, result.output)
        gold_keys = {key for turn in replay_gold(DOMAIN, task).turns for key in turn.effect}
        # it changes a record the task never touches, so it always shows as collateral
        assert db.changed_since(before) - gold_keys, task.id


def test_every_skill_s_task_is_solved_on_a_long_world_too():
    """A long-context variant is the same task on a long world: the oracle still solves it,
    its gold changes the same records, and its tool outputs are several times longer."""
    from rods_env.synthesis.augment import output_chars

    writes = DOMAIN.toolkit.write_names()
    for skill in DOMAIN.skills:
        task = build(skill, "default", 0, dict(skill.shape))
        long = task.model_copy(update={"db_size": "long-8k"})
        env = ToolEnv(DOMAIN, tasks=[long], split=None, max_steps=80)
        assert run_episode(env, OracleAgent(long, writes), task=long)["success"], task.id
        short, big = replay_gold(DOMAIN, task), replay_gold(DOMAIN, long)
        assert [set(t.effect) for t in big.turns] == [set(t.effect) for t in short.turns]
        assert output_chars(big) > 3 * output_chars(short), skill.name


def test_facts_are_what_a_customer_says_never_internal_ids():
    internal = re.compile(r"\b(credit_card|gift_card|certificate)_\d+\b")
    for task in DOMAIN.seed_tasks():
        for label, value in task.user.facts.items():
            assert not internal.search(value), (task.id, label, value)
            assert "_" not in value or label == "user id", (task.id, label, value)
    paying = [t for t in DOMAIN.seed_tasks() if "payment method" in t.user.facts]
    assert paying and any("ending in" in t.user.facts["payment method"] for t in paying)


@pytest.fixture(scope="module")
def world_tools():
    db = DOMAIN.database(0, "default")
    tools = AirlineTools(db)
    dates = sorted(next(iter(db.values("flights"))).dates)
    return tools, sorted(db.keys("airports")), dates


def _decision(offers, cabin, n, after):
    try:
        return to_jsonable(skills.common._cheapest(offers, cabin, n, after))
    except skills.common._Skip as skip:
        return f"skip: {skip}"


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_cheapest_decides_the_same_on_the_search_value_and_its_json(world_tools, data):
    """The booking skill refuses an itinerary before forking for the gold calls by running
    ``_cheapest`` on the search tool's own value (``CabinValues`` records); it must decide
    exactly as on the JSON the gold call returns, pick for pick and refusal for refusal."""
    tools, airports, dates = world_tools
    search = data.draw(st.sampled_from(["search_direct_flight", "search_onestop_flight"]))
    origin, destination = data.draw(st.permutations(airports))[:2]
    day = data.draw(st.sampled_from(dates))
    result = tools.call(search, {"origin": origin, "destination": destination, "date": day})
    assert result.ok
    cabin = data.draw(st.sampled_from(CABINS))
    n = data.draw(st.integers(1, 4))
    after = data.draw(st.sampled_from([None, 8 * 60, 12 * 60]))
    raw = _decision(result.value, cabin, n, after)
    assert raw == _decision(to_jsonable(result.value), cabin, n, after)


def test_cheapest_decides_the_same_on_every_direct_route(world_tools):
    tools, _, dates = world_tools
    routes = sorted({(f.origin, f.destination) for f in tools.db.values("flights")})
    picked = 0
    for origin, destination in routes:
        for day in dates[:: max(1, len(dates) // 6)]:
            value = tools.call(
                "search_direct_flight", {"origin": origin, "destination": destination, "date": day}
            ).value
            for cabin in CABINS:
                raw = _decision(value, cabin, 2, None)
                assert raw == _decision(to_jsonable(value), cabin, 2, None)
                picked += not isinstance(raw, str)
    assert picked  # not every decision a refusal
