"""τ²-bench trajectories as plain data, their replay, and scoring a finished trajectory.

A trajectory is the list of messages τ²-bench's orchestrator records, as dicts in its own
schema (``tau2.data_model.message``)::

    {"role": "assistant", "content": "Hi! How can I help you today?"}
    {"role": "user", "content": "I want to cancel ...", "tool_calls": None}
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_3_0", "name": "get_user_details",
                     "arguments": {"user_id": "..."}, "requestor": "assistant"}]}
    {"role": "tool", "id": "call_3_0", "content": "{...}", "requestor": "assistant",
     "error": False}

:func:`to_tau2_messages` turns it into τ²-bench's pydantic messages (for its evaluator or
its results files). :func:`score_trajectory` scores a trajectory without running an episode,
the way τ²-bench's evaluator does: it replays the tool calls on a fresh state (checking each
reply against the recorded one) and applies :func:`environments.tau2.scoring.score`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from environments.tau2.package import tau2_module
from environments.tau2.scoring import Verdict, score
from environments.tau2.state import EpisodeState, Tau2Backend
from rods_env.errors import ConfigError

TERMINATION_REASONS: dict[str, str] = {
    "user_stop": "user_stop",
    "agent_stop": "agent_stop",
    "max_steps": "max_steps",
    "too_many_errors": "too_many_errors",
    "agent_error": "agent_error",
    "user_error": "user_error",
}
"""How an episode's termination reads as τ²-bench's ``TerminationReason``; any other end (a
caller's cap: ``max_turns``, ``max_tokens``, ``error``) is a ``max_steps`` to τ²-bench:
unscored, like every end but a stop."""


def termination_reason(termination: str | None) -> str:
    """τ²-bench's ``TerminationReason`` value for a rods termination."""
    return TERMINATION_REASONS.get(str(termination), "max_steps")


def text_message(role: str, content: str) -> dict[str, Any]:
    """An assistant or user message with text only."""
    return {"role": role, "content": content, "tool_calls": None}


def call_message(
    role: str, calls: Sequence[Mapping[str, Any]], content: str | None = None
) -> dict[str, Any]:
    """An assistant or user message with tool calls (``id``, ``name``, ``arguments``,
    ``requestor``) and optional text."""
    return {"role": role, "content": content, "tool_calls": [dict(c) for c in calls]}


def tool_message(reply: Any) -> dict[str, Any]:
    """A tool reply from τ²-bench's ``ToolMessage``."""
    return {
        "role": "tool",
        "id": reply.id,
        "content": reply.content,
        "requestor": reply.requestor,
        "error": bool(reply.error),
    }


def to_tau2_messages(trajectory: Sequence[Mapping[str, Any]]) -> list[Any]:
    """τ²-bench's message models for a trajectory (``AssistantMessage``, ``UserMessage``,
    ``ToolMessage``), numbered by ``turn_idx``."""
    message = tau2_module("tau2.data_model.message")
    classes = {
        "assistant": message.AssistantMessage,
        "user": message.UserMessage,
        "tool": message.ToolMessage,
    }
    out = []
    for i, m in enumerate(trajectory):
        data = {k: v for k, v in m.items() if v is not None or k == "content"}
        if data.get("tool_calls") is not None:
            data["tool_calls"] = [message.ToolCall(**c) for c in data["tool_calls"]]
        out.append(classes[m["role"]](**data, turn_idx=i))
    return out


def _tool_call(call: Mapping[str, Any]) -> Any:
    message = tau2_module("tau2.data_model.message")
    return message.ToolCall(
        id=call.get("id", ""),
        name=call["name"],
        arguments=call.get("arguments") or {},
        requestor=call.get("requestor", "assistant"),
    )


def _content(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def replay(
    backend: Tau2Backend,
    task: Any,
    trajectory: Sequence[Mapping[str, Any]],
    *,
    solo: bool = False,
    check_replies: bool = True,
) -> EpisodeState:
    """The state a trajectory leaves, rebuilt as τ²-bench's ``Environment.set_state`` does:
    the task's initial state, every tool call of the trajectory through ``get_response`` in
    order (each followed by its tool message), then ``sync_tools``.

    Args:
        backend: The task's domain.
        task: τ²-bench's task.
        trajectory: The messages.
        solo: Replay in solo mode (the agent's calls may reach the user's tools).
        check_replies: Refuse a trajectory whose recorded tool replies differ from the
            replay's, as τ²-bench does.

    Raises:
        ConfigError: a tool message out of place, an id mismatch, or a reply that differs.
    """
    state = backend.new_state(solo=solo)
    state.reset(task)
    pending = list(reversed(trajectory))
    while pending:
        m = pending.pop()
        if m.get("role") == "tool":
            raise ConfigError("a tool message that follows no tool call")
        if m.get("role") not in ("assistant", "user") or m.get("tool_calls") is None:
            continue
        for call in m["tool_calls"]:
            if not pending or pending[-1].get("role") != "tool":
                raise ConfigError(f"tool call {call.get('id')!r} has no tool message after it")
            recorded = pending.pop()
            if recorded.get("id") != call.get("id"):
                raise ConfigError(
                    f"tool call id {call.get('id')!r} answered by {recorded.get('id')!r}"
                )
            reply = state.get_response(_tool_call(call))
            if check_replies and _content(reply.content) != _content(recorded.get("content")):
                raise ConfigError(
                    f"tool call {call.get('name')}({call.get('arguments')}) replies "
                    f"{reply.content!r} on replay, not the recorded {recorded.get('content')!r}"
                )
    state.sync()
    return state


def score_trajectory(
    backend: Tau2Backend,
    task: Any,
    trajectory: Sequence[Mapping[str, Any]],
    termination: str,
    *,
    solo: bool = False,
    every_check: bool = False,
) -> Verdict:
    """τ²-bench's reward for a finished trajectory (what its ``evaluate_simulation`` gives),
    without running an episode: the state is rebuilt by :func:`replay`.

    Args:
        backend: The task's domain.
        task: τ²-bench's task.
        trajectory: The messages.
        termination: ``agent_stop``, ``user_stop`` or another reason (scored 0).
        solo: Whether the conversation ran in solo mode.
        every_check: Run the checks outside the task's reward basis too, as τ²-bench's
            evaluator does (see :func:`~environments.tau2.scoring.score`).
    """
    if termination not in ("agent_stop", "user_stop"):
        return score(backend, task, trajectory, termination, backend.new_state(solo=solo))
    state = replay(backend, task, trajectory, solo=solo)
    return score(backend, task, trajectory, termination, state, every_check=every_check)
