"""Actionable hints in τ²-bench's environments (``actionable_hints=True``): what the agent
reads gains hints; the τ²-bench trajectory that is scored keeps the tool's own reply."""

from __future__ import annotations

import json

import gymnasium as gym

from rods_env import BENCHMARK_ENV_IDS
from rods_env.hints import HINT_HEAD


def _call(name: str, arguments: dict) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_failed_calls_get_hints_and_the_trajectory_keeps_the_reply() -> None:
    assert "rods/Tau2-Airline-v0" in BENCHMARK_ENV_IDS
    env = gym.make("rods/Tau2-Airline-v0", actionable_hints=True).unwrapped
    env.reset(seed=0)
    obs, *_, info = env.step(_call("get_reservation_details", {"reservation_id": "ZZZZZZ"}))
    assert info["tool_calls"][0]["hints"] == ["lookup"] and "get_user_details" in obs
    assert env.trajectory[-1]["content"] == obs.split("\n" + HINT_HEAD)[0]
    obs, *_, info = env.step(_call("search_direct_flight", {"origin": "JFK"}))
    assert info["tool_calls"][0]["hints"] == ["missing_argument", "missing_argument"]
    assert "'destination'" in obs and "'date'" in obs
    obs, *_, info = env.step(_call("list_all_airports", {}))
    assert HINT_HEAD not in obs and info["tool_calls"][0]["hints"] == []
