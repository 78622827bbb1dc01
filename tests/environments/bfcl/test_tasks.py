"""BFCL's tasks read from its package, BFCL's constants, and its leaderboard arithmetic."""

from __future__ import annotations

import pickle

import pytest

from environments.bfcl.agents import READ_ONLY
from environments.bfcl.apis import functions_of, new_world
from environments.bfcl.tasks import (
    CATEGORIES,
    MAX_STEPS_PER_TURN,
    REVEAL_MESSAGE,
    category_tasks,
    get_task,
    leaderboard,
    load_tasks,
)
from rods_env.errors import ConfigError

pytestmark = pytest.mark.usefixtures("bfcl")


def test_800_tasks_200_per_category_read_from_the_installed_package(tasks):
    assert len(tasks) == 800 and len({t.id for t in tasks}) == 800
    assert [len(category_tasks(c)) for c in CATEGORIES] == [200] * 4
    assert sum(len(c) for t in tasks for c in t.ground_truth) == 4625
    task = get_task("multi_turn_miss_param_0")
    assert task.ground_truth[3] == () and task.checked_turns == (0, 1, 2, 4)
    assert {t.category: t.variant for t in tasks} == {
        "base": "base",
        "miss_param": "missing_parameter",
        "miss_func": "missing_function",
        "long_context": "long_context",
    }
    with pytest.raises(ConfigError, match="unknown BFCL split 'dev'"):
        load_tasks("base", "dev")
    with pytest.raises(ConfigError, match="unknown BFCL category 'basic'"):
        load_tasks("basic")


def test_the_constants_are_bfcls_own():
    from bfcl_eval.constants.default_prompts import (
        DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
        MAXIMUM_STEP_LIMIT,
    )

    assert REVEAL_MESSAGE == DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    assert MAX_STEPS_PER_TURN == MAXIMUM_STEP_LIMIT


def test_the_entry_matches_bfcls_fields(tasks):
    import json

    from environments.bfcl.apis import data_dir

    raw = json.loads((data_dir() / "BFCL_v4_multi_turn_miss_func.json").read_text().splitlines()[7])
    entry = get_task(raw["id"]).entry()
    for key in ("id", "question", "initial_config", "involved_classes", "missed_function"):
        assert entry[key] == raw[key], key
    # key order is state order (ls lists files in it): the config keeps the file's order
    assert json.dumps(entry["initial_config"]) == json.dumps(raw["initial_config"])


def test_the_read_only_functions_never_change_state_in_any_gold_call(tasks):
    """READ_ONLY (the read-only-gold exploit's functions) is exactly the gold's functions
    whose calls never changed the public state."""
    changed, seen = set(), set()
    for task in tasks:
        world = new_world(task.scenario)
        allowed = functions_of(task.classes)
        for calls in task.gold:
            for call in calls:
                before = pickle.dumps(world.state())
                world.call(call.name, call.arguments, allowed)
                seen.add(call.name)
                if pickle.dumps(world.state()) != before:
                    changed.add(call.name)
    assert seen - changed == READ_ONLY


def test_leaderboard_is_bfcls_arithmetic(tasks):
    by_cat = {c: [t.id for t in tasks if t.category == c] for c in CATEGORIES}
    successes = {
        **{i: [k < 150] for k, i in enumerate(by_cat["base"])},  # 75%
        **{i: [k < 100] for k, i in enumerate(by_cat["miss_param"])},  # 50%
        **{i: [False] for i in by_cat["miss_func"]},  # 0%
        **{i: [True, k % 2 == 0] for k, i in enumerate(by_cat["long_context"])},  # 75% (2 trials)
        "some-other-task": [True],
    }
    scores = leaderboard(successes)
    assert list(scores) == ["overall", "base", "miss_func", "miss_param", "long_context"]
    assert scores == {
        "overall": pytest.approx((0.75 + 0.5 + 0.0 + 0.75) / 4),
        "base": 0.75,
        "miss_func": 0.0,
        "miss_param": 0.5,
        "long_context": 0.75,
    }
    partial = leaderboard({i: [True] for i in by_cat["base"][:10]})
    assert partial["overall"] is None and partial["base"] == 1.0 and partial["miss_func"] is None
