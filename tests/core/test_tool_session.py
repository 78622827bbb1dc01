"""The episode as tools (rods_env.tool_session) on every kind of environment id: an own
domain, BFCL (its multi-turn subsets and the paper's split) and τ²-bench."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import rods_env
from rods_env.benchmark import BenchmarkDomain
from rods_env.errors import ConfigError, RodsError
from rods_env.oracle import oracle_agent
from rods_env.parsing import parse_action
from rods_env.registry import load_any_domain
from rods_env.tool_session import (
    AGENT_STOPPED,
    ENDED,
    SEND_MESSAGE,
    SEND_MESSAGE_SCHEMA,
    Call,
    ToolSession,
    action_calls,
    check_tool_names,
    message_calls,
    score_calls,
    tool_call_action,
)
from tests.requires import require

KINDS = [
    "rods/Retail-v0",
    "rods/BFCL-MultiTurn-Base-v0",
    "rods/BFCL-Paper-v0",
    "rods/Tau2-Retail-v0",
]
MAX_STEPS = 200


def domain_of(env_id: str) -> Any:
    domain = load_any_domain(env_id)
    if isinstance(domain, BenchmarkDomain):
        reason = domain.missing()
        require(reason is None, f"{env_id}: {reason}", "bash scripts/setup.sh tests")
    return domain


def oracle(env_id: str, task: Any) -> Any:
    domain = domain_of(env_id)
    if isinstance(domain, BenchmarkDomain):
        return domain.oracle_agent(task)
    return oracle_agent(domain, task)


def oracle_episode(env_id: str, task: Any) -> tuple[list[Call], list[str], dict[str, Any]]:
    """The oracle's episode through gymnasium.make, one call per step (as a tool loop plays
    it): the calls, each step's observation, the final info after the agent stops."""
    env = gym.make(env_id, split=None, max_steps=MAX_STEPS)
    obs, info = env.reset(options={"task": task})
    agent = oracle(env_id, task)
    calls: list[Call] = []
    observations = [obs]
    done = False
    while not done:
        action = agent.act(obs, info)
        for call in action_calls(parse_action(action)):
            if done:
                break
            step = (
                {"role": "assistant", "content": call.arguments["message"]}
                if call.name == SEND_MESSAGE
                else tool_call_action(call.name, call.arguments)
            )
            obs, _, terminated, truncated, info = env.step(step)
            calls.append(call)
            observations.append(obs)
            done = terminated or truncated
    if info["termination"] is None:
        info = env.unwrapped.truncate(AGENT_STOPPED)
    return calls, observations, info


@pytest.mark.parametrize("env_id", KINDS)
def test_the_oracle_through_the_tools_is_the_gymnasium_episode(env_id):
    for task in domain_of(env_id).seed_tasks("test")[:3]:
        calls, observations, info = oracle_episode(env_id, task)
        session = ToolSession(env_id, max_steps=MAX_STEPS)
        seen = [session.reset(task)] + [session.call(c.name, c.arguments) for c in calls]
        assert seen == observations, task.id
        verdict = session.verdict()
        assert (verdict.progress, verdict.success) == (info["progress"], info["success"])
        assert verdict.progress == 1.0 and verdict.success, task.id
        assert score_calls(env_id, task, calls, max_steps=MAX_STEPS) == verdict


@pytest.mark.parametrize("env_id", KINDS)
def test_tools_are_the_envs_own_then_the_user_channel(env_id):
    task = domain_of(env_id).seed_tasks("test")[0]
    _, info = gym.make(env_id, split=None).reset(options={"task": task})
    session = ToolSession(env_id)
    session.reset(task.id)
    assert session.tools[:-1] == list(info["tools"])
    assert session.tools[-1] == SEND_MESSAGE_SCHEMA
    assert session.policy == info["policy"]


@pytest.mark.parametrize("env_id", KINDS)
def test_doing_nothing_earns_nothing_and_the_end_changes_nothing(env_id):
    for task in domain_of(env_id).seed_tasks("test")[:3]:
        session = ToolSession(env_id)
        session.reset(task)
        verdict = session.verdict()
        assert verdict.progress < 1.0 and not verdict.success, task.id
        assert verdict.termination == AGENT_STOPPED and verdict.reward("success") == 0.0
        assert session.call(SEND_MESSAGE, {"message": "anything else?"}) == ENDED
        assert session.call("any_tool", {}) == ENDED
        assert session.verdict() == verdict


@pytest.mark.parametrize("env_id", KINDS)
def test_an_unknown_tool_gets_the_environments_own_reply(env_id):
    task = domain_of(env_id).seed_tasks("test")[0]
    env = gym.make(env_id, split=None)
    env.reset(options={"task": task})
    expected = env.step(tool_call_action("no_such_tool", {"x": 1}))[0]
    session = ToolSession(env_id)
    session.reset(task)
    assert session.call("no_such_tool", {"x": 1}) == expected
    assert not session.done


def test_a_message_that_is_not_text_is_an_error_and_runs_nothing():
    session = ToolSession("rods/Retail-v0")
    session.reset("retail-0001")
    assert session.call(SEND_MESSAGE, {"message": 42}).startswith("Error: 'message' must be")
    assert session.say(None).startswith("Error:")
    assert session.info["steps"] == 0


def test_a_session_over_a_domain_object_or_a_made_env():
    retail = rods_env.load_domain("retail")
    by_id = ToolSession("rods/Retail-v0")
    by_domain = ToolSession(retail)
    made = ToolSession(gym.make("rods/Retail-v0", split=None))
    firsts = {s.reset("retail-0002") for s in (by_id, by_domain, made)}
    assert len(firsts) == 1
    with pytest.raises(ConfigError, match="env id or a domain"):
        ToolSession(gym.make("rods/Retail-v0"), actionable_hints=True)
    with pytest.raises(ConfigError, match="env id or a domain"):
        ToolSession(gym.make("rods/Retail-v0"), max_steps=10)
    with pytest.raises(ConfigError, match="max_steps"):
        ToolSession("rods/Retail-v0", max_steps=0)


def test_before_a_reset_the_session_says_so():
    session = ToolSession("rods/Retail-v0")
    assert not session.started
    with pytest.raises(RodsError, match="reset"):
        session.call("get_user_details", {"user_id": "x"})
    with pytest.raises(RodsError, match="reset"):
        session.verdict()


def test_a_tool_named_like_the_user_channel_or_a_hook_is_refused():
    with pytest.raises(ConfigError, match=SEND_MESSAGE):
        check_tool_names(["a", SEND_MESSAGE], "toy")
    with pytest.raises(ConfigError, match="reset"):
        check_tool_names(["reset"], "toy", reserved={"reset"})
    check_tool_names(["send_message"], "toy", reserved={"reset"})


def test_message_calls_read_a_transcript_and_skip_unreadable_arguments():
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "tool_calls": [
                {"function": {"name": "a", "arguments": '{"x": 1}'}},
                {"function": {"name": "b", "arguments": "not json"}},
                {"function": {"name": "c", "arguments": {"y": 2}}},
                {"function": {"name": "d", "arguments": ""}},
            ],
        },
        {"role": "tool", "content": "ok"},
    ]
    assert message_calls(messages) == [Call("a", {"x": 1}), Call("c", {"y": 2}), Call("d", {})]
