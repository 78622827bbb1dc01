"""A thinking model's ``<think>`` reasoning is private: it never runs a tool, never reaches the
user, never earns reward, and is not kept in the environment's history.

The adversary here is a model that says the answer only while thinking, drafts a write inside
its reasoning, or is cut off mid-thought: each must gain nothing a visible message would not.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rods_env import OracleAgent, ToolEnv, load_domain
from rods_env.parsing import THINK_CLOSE, THINK_OPEN, parse_action, split_reasoning

NO_TAGS = st.text(max_size=60).filter(lambda s: "<think>" not in s and "</think>" not in s)


@given(NO_TAGS, NO_TAGS, NO_TAGS)
@settings(max_examples=200, deadline=None)
def test_reasoning_is_split_off_wherever_it_is(before: str, thought: str, after: str) -> None:
    assert split_reasoning(f"{before}<think>{thought}</think>{after}") == (
        thought,
        before + after,
        False,
    )
    # a block opened by the prompt: only its closing tag is in the completion
    assert split_reasoning(f"{thought}</think>{after}") == (thought, after, False)
    # cut off mid-thought: nothing after <think> is said
    assert split_reasoning(f"{before}<think>{thought}") == (thought, before, True)
    # what is parsed is what is said
    assert (
        parse_action(f"<think>{thought}</think>{after}") == parse_action(after) or not after.strip()
    )


@given(st.lists(st.sampled_from([THINK_OPEN, THINK_CLOSE, "a", "<tool_call>", " "]), max_size=40))
@settings(max_examples=300, deadline=None)
def test_any_arrangement_of_tags_splits_without_error_and_loses_no_text(parts: list[str]) -> None:
    text = "".join(parts)
    reasoning, visible, _ = split_reasoning(text)
    assert THINK_OPEN not in visible or THINK_CLOSE in text[text.find(THINK_OPEN) :]
    assert len(reasoning.replace("\n", "")) + len(visible) <= len(text)
    parse_action(text)  # never raises


@pytest.fixture(scope="module")
def retail():
    return load_domain("retail")


def _episode(retail, task, rewrite) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the oracle on ``task``, its k-th action replaced by ``rewrite(k, action)``."""
    env = ToolEnv(retail, split=None, max_steps=60)
    oracle = OracleAgent(task, retail.toolkit.write_names())
    obs, info = env.reset(options={"task": task})
    k, done = 0, False
    while not done:
        action = rewrite(k, oracle.act(obs, info))
        obs, _, terminated, truncated, info = env.step(action)
        k += 1
        done = terminated or truncated
    return info, info["messages"]


def _task_with_outputs(retail):
    return next(
        t
        for t in retail.seed_tasks()
        if len(t.turns) == 1 and t.turns[0].outputs and t.variant == "base"
    )


def test_an_answer_said_only_while_thinking_earns_nothing(retail) -> None:
    task = _task_with_outputs(retail)
    honest, _ = _episode(retail, task, lambda k, a: a)
    assert honest["progress"] == 1.0 and honest["success"]

    def think_the_answer(k: int, action: str) -> str:
        if "<tool_call>" in action or "?" in action:
            return action
        return f"<think>{action}</think>I could not find the price."

    cheat, messages = _episode(retail, task, think_the_answer)
    assert cheat["progress"] == 0.0 and not cheat["success"]
    assert not any("<think>" in str(m.get("content")) for m in messages)  # not in the history
    said = [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]
    assert "I could not find the price." in said
    assert all(task.turns[0].outputs[0] not in s for s in said if "could not find" in s)
