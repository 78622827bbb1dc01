from __future__ import annotations

import json

import pytest

from rods_env import OracleAgent, TalkOnlyAgent, ToolEnv, run_episode
from rods_env.oracle import tool_call_text
from rods_env.parsing import parse_action
from rods_env.task import ToolCall
from rods_env.tools import MAX_ERROR_CHARS, MAX_OUTPUT_CHARS, Toolkit, tool
from tests.core.toy_domain import TOY

WRITES = TOY.toolkit.write_names()


@pytest.fixture
def env(toy_tasks):
    return ToolEnv(TOY, tasks=toy_tasks, render_mode="ansi")


def test_reset_returns_first_message_and_info(env, toy_tasks):
    obs, info = env.reset(seed=0, options={"task": toy_tasks[0].id})
    assert obs == info["messages"][-1]["content"]
    assert toy_tasks[0].turns[0].request in obs
    assert info["messages"][0] == {"role": "system", "content": TOY.policy}
    assert {t["function"]["name"] for t in info["tools"]} == set(TOY.toolkit.names())
    assert info["task_id"] == toy_tasks[0].id and info["progress"] == 0.0


def test_oracle_solves_every_task_and_rewards_sum_to_progress(env, toy_tasks):
    for task in toy_tasks:
        out = run_episode(env, OracleAgent(task, WRITES), task=task)
        assert out["success"], (task.id, env.render())
        assert out["progress"] == 1.0
        assert out["return"] == pytest.approx(1.0)
        assert out["termination"] == "user_stop"


def test_multi_turn_progress_is_per_turn(env, toy_tasks):
    task = next(t for t in toy_tasks if len(t.turns) == 2)
    agent = OracleAgent(task, WRITES)
    obs, info = env.reset(options={"task": task})
    rewards = []
    done = False
    while not done:
        obs, r, term, trunc, info = env.step(agent.act(obs, info))
        rewards.append(r)
        done = term or trunc
    assert sorted(r for r in rewards if r) == [0.5, 0.5]


def test_talk_only_fails(env, toy_tasks):
    for task in toy_tasks:
        out = run_episode(env, TalkOnlyAgent(), task=task)
        assert not out["success"] and out["progress"] == 0.0


def test_extra_unrelated_write_fails_success_and_loses_the_turn(env, toy_tasks):
    for task in toy_tasks:
        agent = OracleAgent(task, WRITES)
        obs, info = env.reset(options={"task": task})
        injected = False
        done = False
        while not done:
            action = agent.act(obs, info)
            if not injected and "<tool_call>" in action:
                extra = TOY.unrelated_write(task, env.db)
                obs, _, term, trunc, info = env.step(tool_call_text(extra))
                assert not obs.startswith("Error"), obs
                injected = True
                done = term or trunc
                if done:
                    break
            obs, _, term, trunc, info = env.step(action)
            done = term or trunc
        assert not info["success"]
        assert info["turn_results"][0]["passed"] is False
        assert info["turn_results"][0]["collateral"]


@pytest.mark.parametrize(
    ("action", "needle"),
    [
        ('{"name": "get_account", "arguments": {', "could not parse"),
        ('<tool_call>{"name": "nope", "arguments": {}}</tool_call>', "Unknown tool 'nope'"),
        (
            '<tool_call>{"name": "get_account", "arguments": {}}</tool_call>',
            "'account_id' is required",
        ),
        (
            '<tool_call>{"name": "get_account", "arguments": {"account_id": "ACC0001", "z": 1}}</tool_call>',
            "not an argument",
        ),
        (
            '<tool_call>{"name": "transfer", "arguments": {"from_account": "ACC0001", "to_account": "ACC0002", "amount": "lots"}}</tool_call>',
            "'amount'",
        ),
        ("x" * 10_000_000, "action too long"),
        ("", "empty action"),
    ],
)
def test_bad_input_is_an_observation_and_changes_nothing(env, toy_tasks, action, needle):
    env.reset(options={"task": toy_tasks[0]})
    before = env.db.fingerprint()
    obs, reward, term, trunc, info = env.step(action)
    assert obs.startswith("Error") and needle in obs
    assert reward == 0.0 and not term and not trunc
    assert env.db.fingerprint() == before
    assert len(info["messages"][-2]["content"] or "") < 5000
    # the episode goes on
    obs, *_ = env.step("Could you tell me your email?")
    assert "@example.com" in obs


def test_truncation_at_max_steps(toy_tasks):
    env = ToolEnv(TOY, tasks=toy_tasks, max_steps=3)
    env.reset(options={"task": toy_tasks[0]})
    outs = [
        env.step(tool_call_text(ToolCall(name="get_account", arguments={"account_id": "ACC0001"})))
        for _ in range(3)
    ]
    assert [o[3] for o in outs] == [False, False, True]
    assert outs[-1][4]["termination"] == "max_steps" and not outs[-1][4]["success"]
    with pytest.raises(Exception, match="episode is over"):
        env.step("hello")


def test_terminal_tool_ends_episode(env, toy_tasks):
    env.reset(options={"task": toy_tasks[0]})
    _, _, term, trunc, info = env.step(
        '<tool_call>{"name": "transfer_to_human", "arguments": {"summary": "help"}}</tool_call>'
    )
    assert term and not trunc and info["termination"] == "terminal_tool"


def test_several_calls_in_one_action_run_in_order(env, toy_tasks):
    env.reset(options={"task": toy_tasks[0]})
    calls = [ToolCall(name="get_account", arguments={"account_id": f"ACC000{i}"}) for i in (1, 2)]
    obs, *_ = env.step("".join(tool_call_text(c) for c in calls))
    assert obs.index("ACC0001") < obs.index("ACC0002")


def test_openai_message_action(env, toy_tasks):
    _, info = env.reset(options={"task": toy_tasks[0]})
    msg = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {
                    "name": "get_account",
                    "arguments": json.dumps({"account_id": "ACC0001"}),
                },
            }
        ],
    }
    obs, *_, info = env.step(msg)
    assert '"ACC0001"' in obs and info["messages"][-1]["role"] == "tool"


def test_task_of_another_domain_is_refused(env, toy_tasks):
    other = toy_tasks[0].model_copy(update={"domain": "retail"})
    with pytest.raises(Exception, match="belongs to domain 'retail'"):
        env.reset(options={"task": other})
    mixed = ToolEnv(TOY, tasks=[other, *toy_tasks], split=None)
    assert other not in mixed.tasks and len(mixed.tasks) == len(toy_tasks)


def test_unknown_task_id_and_empty_pool_are_clear_errors(toy_tasks):
    env = ToolEnv(TOY, tasks=toy_tasks)
    with pytest.raises(Exception, match="unknown task id 'nope'"):
        env.reset(options={"task": "nope"})
    with pytest.raises(Exception, match="no tasks to sample"):
        ToolEnv(TOY, tasks=[]).reset()


def test_truncate_scores_like_the_step_limit():
    """A caller's own cap (truncate) and the env's max_steps give the same reward."""
    import rods_env
    from rods_env.oracle import OracleAgent
    from rods_env.registry import load_domain

    domain = load_domain("retail")
    task = domain.seed_tasks("train")[0]
    results = []
    for mode in ("truncate", "max_steps"):
        n = 4
        env = rods_env.ToolEnv(domain, max_steps=n if mode == "max_steps" else 100)
        obs, info = env.reset(options={"task": task})
        agent = OracleAgent(task, domain.toolkit.write_names())
        for _ in range(n):
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
            if terminated or truncated:
                break
        if mode == "truncate":
            info = env.truncate("max_turns")
            assert info["termination"] == "max_turns"
        results.append((info["progress"], info["success"], info["turn_results"]))
    assert results[0] == results[1]


# -- robustness: every malformed action is an observation ---------------------------------
CALL = '<tool_call>{"name": "get_account", "arguments": %s}</tool_call>'


def test_a_surrogate_in_a_write_argument_changes_nothing(env, toy_tasks):
    """Regression: the write ran, its result could not be rendered, the write stayed and
    every later read of the record raised."""
    env.reset(options={"task": toy_tasks[0]})
    before = env.db.fingerprint()
    args = '{"account_id": "ACC0001", "frozen": true, "reason": "fraud\\ud800"}'
    obs, *_ = env.step(f'<tool_call>{{"name": "set_frozen", "arguments": {args}}}</tool_call>')
    assert obs.startswith("Error") and env.db.fingerprint() == before


def test_parsing_is_linear_in_the_action():
    """18,000 unclosed tags took 24 s (quadratic); the parse is now one pass. Timing is a
    benchmark (benchmarks/test_fuzz.py); here the result is checked."""
    parsed = parse_action("<tool_call>" * 18_000)
    assert parsed.error is None and len(parsed.calls) == 1 and "not closed" in parsed.calls[0].error
    assert parse_action("<tool_call>{}</tool_call>" * 17).error  # at most 16 calls


# -- robustness: bounded observations --------------------------------------------------------
def test_a_long_id_is_not_echoed_into_a_huge_observation(env, toy_tasks):
    env.reset(options={"task": toy_tasks[0]})
    long_id = "A" * 150_000
    obs, *_, info = env.step(CALL % json.dumps({"account_id": long_id}))
    assert obs.startswith("Error") and len(obs) <= MAX_ERROR_CHARS
    assert "truncated" in obs and "more characters" in obs
    assert len(info["messages"][-1]["content"]) <= MAX_ERROR_CHARS


class Fragile(Toolkit):
    """Tools that misbehave: a huge output, a result that cannot be rendered, a bug."""

    @tool
    def dump(self) -> str:
        """Return a very long text."""
        return "z" * (MAX_OUTPUT_CHARS * 2)

    @tool(writes=True)
    def zero_then_unrenderable(self, account_id: str) -> object:
        """Set a balance to zero and return something that is not JSON.

        Args:
            account_id: The account.
        """
        acc = self.db.require("accounts", account_id)
        self.db.put("accounts", account_id, acc.model_copy(update={"balance": 0}))
        return {1, 2}

    @tool(writes=True)
    def zero_then_crash(self, account_id: str) -> str:
        """Set a balance to zero, then fail with a bug.

        Args:
            account_id: The account.
        """
        acc = self.db.require("accounts", account_id)
        self.db.put("accounts", account_id, acc.model_copy(update={"balance": 0}))
        return str(1 / 0)


def test_outputs_are_capped_and_rendering_is_inside_the_atomic_call():
    db = TOY.database(0, "tiny")
    tools = Fragile(db)
    dump = tools.call("dump")
    assert dump.ok and len(dump.output) <= MAX_OUTPUT_CHARS and "truncated" in dump.output
    before = db.fingerprint()
    for name in ("zero_then_unrenderable", "zero_then_crash"):
        result = tools.call(name, {"account_id": "ACC0001"})
        assert not result.ok and result.error == "InternalToolError", result.output
        assert "nothing was changed" in result.output
        assert db.fingerprint() == before
