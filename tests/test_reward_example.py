"""The worked example of docs/reward-design.md, on a real two-turn Retail task."""

from __future__ import annotations

import gymnasium as gym
import pytest

import rods_env  # noqa: F401 - registers the ids
from rods_env import OracleAgent, TalkOnlyAgent, run_episode
from rods_env.gold import GOLD_CACHE
from rods_env.oracle import tool_call_text


@pytest.fixture(scope="module")
def setup():
    env = gym.make("rods/Retail-v0", split=None).unwrapped
    writes = env.domain.toolkit.write_names()
    task = next(
        t
        for t in env.domain.seed_tasks()
        if len(t.turns) == 2
        and any(c.name in writes for c in t.turns[0].calls)
        and t.turns[1].outputs
        and not any(c.name in writes for c in t.turns[1].calls)
    )
    return env, task, writes


class CollateralAgent(OracleAgent):
    """The oracle, plus one write the task did not ask for, right after its first call."""

    def __init__(self, task, writes, env):
        super().__init__(task, writes)
        self.env, self.extra_done, self.pending = env, False, False

    def act(self, observation, info):
        if self.pending:
            self.pending, self.extra_done = False, True
            return tool_call_text(self.env.domain.unrelated_write(self.task, self.env.db))
        action = super().act(observation, info)
        if "<tool_call>" in action and not self.extra_done:
            self.pending = True
        return action


class OffByOneDigitAgent(OracleAgent):
    """The oracle, but it drops the last character of every required output it reports."""

    def act(self, observation, info):
        action = super().act(observation, info)
        for out in self.task.turns[info["turn"]].outputs:
            action = action.replace(out, out[:-1])
        return action


def test_worked_example_table(setup):
    env, task, writes = setup
    rows, rules, texts = {}, {}, {}
    for name, agent in {
        "oracle": OracleAgent(task, writes),
        "collateral": CollateralAgent(task, writes, env),
        "wrong output": OffByOneDigitAgent(task, writes),
        "talk only": TalkOnlyAgent(),
    }.items():
        out = run_episode(env, agent, task=task)
        rows[name] = (
            [r["passed"] for r in out["turn_results"]],
            out["progress"],
            out["success"],
            out["return"],
        )
        rules[name] = [[f["rule"] for f in r["failures"]] for r in out["turn_results"]]
        texts[name] = [[f["text"] for f in r["failures"]] for r in out["turn_results"]]
    assert rows["oracle"] == ([True, True], 1.0, True, 1.0)
    assert rows["collateral"][:3] == ([False, True], 0.5, False)
    assert rows["wrong output"][:3] == ([True, False], 0.5, False)
    assert rows["talk only"][:3] == ([False, False], 0.0, False)
    assert all(r[3] == pytest.approx(r[1]) for r in rows.values())  # rewards sum to progress
    # each failed turn says which rule failed it, as the reward computed it
    (user_record,) = {f"{t}/{k}" for t, k in GOLD_CACHE.get(env.domain, task).turns[0].effect}
    assert rules["oracle"] == [[], []]
    assert rules["collateral"] == [["collateral_write"], []]
    assert texts["collateral"][0][0].startswith(
        "a record the turn's gold leaves alone was changed: "
    )
    assert rules["wrong output"] == [[], ["output_missing"]]
    assert texts["wrong output"][1] == [
        f"a required output was not said: {', '.join(task.turns[1].outputs)}"
    ]
    assert rules["talk only"] == [["effect_missing"], ["output_missing"]]
    assert texts["talk only"][0][0].startswith(
        f"the turn's gold effect is not in the database: {user_record} "
    )
    assert "(gold " in texts["talk only"][0][0]  # the field that differs, with both values


def test_a_turn_the_conversation_never_reached_says_so(setup):
    _, task, _ = setup
    short = gym.make("rods/Retail-v0", split=None, max_steps=1).unwrapped
    out = run_episode(short, TalkOnlyAgent(), task=task)
    assert out["termination"] == "max_steps"
    first, second = out["turn_results"]
    assert first["message"] == 1 and second["message"] is None  # 0 is the policy
    assert [f["rule"] for f in first["failures"]] == ["effect_missing"]
    assert second["failures"] == [
        {"rule": "not_reached", "values": [], "text": "the conversation ended before this turn"}
    ]


def test_each_turn_result_points_at_the_message_that_opened_it(setup):
    env, task, writes = setup
    out = run_episode(env, OracleAgent(task, writes), task=task)
    messages = env.unwrapped._messages
    starts = [r["message"] for r in out["turn_results"]]
    assert starts[0] == 1 and starts[0] < starts[1] < len(messages)
    for start, turn in zip(starts, task.turns, strict=True):
        assert messages[start]["role"] == "user"
        assert turn.request.lower() in messages[start]["content"].lower()
