"""The scripted stand-in user, and the gold agent, of τ²-bench environments.

τ²-bench's users are language models following its guidelines and a task's scenario: in
rods that is :class:`rods_agent.rollouts.user.LLMUser` (any engine) through the
:class:`rods_env.user.ScenarioUser` protocol. Without a model, the environment uses
:class:`ScriptedStandIn`, a deterministic stand-in that lets the environment run (tests,
``check_env``, the gold check, the exploit panel): it opens with the scenario's reason for
the call, performs the gold's user actions that the agent names (``toggle_roaming``: telecom's
phone), and ends the conversation (``###STOP###``) at the first agent message that asks
for none. **Scores with the stand-in are not τ²-bench scores**: it neither withholds nor
volunteers what the scenario says.

:class:`GoldAgent` plays a task's gold actions in order (asking the user for theirs), says
the ``communicate_info`` strings, and stops; every task passes with it (the oracle).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from environments.tau2.prompts import STOP_FUNCTION, stop_token


def _requested(text: str, name: str) -> bool:
    """Whether ``text`` names the tool ``name`` as a whole word (``toggle_data_saver_mode``
    does not name ``toggle_data``)."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def _call_text(name: str, arguments: Mapping[str, Any]) -> str:
    body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return f"<tool_call>{body}</tool_call>"


class ScriptedStandIn:
    """A deterministic stand-in for τ²-bench's user model (see the module docstring)."""

    name = "scripted stand-in"

    def __init__(self) -> None:
        self._opening = ""
        self._pending: list[Any] = []

    def begin_scenario(self, task: Any) -> None:
        """Reset for τ²-bench task ``task``."""
        instructions = task.user_scenario.instructions
        reason = getattr(instructions, "reason_for_call", None) or str(instructions)
        self._opening = " ".join(str(reason).split())
        actions = task.evaluation_criteria.actions if task.evaluation_criteria else None
        self._pending = [a for a in actions or [] if a.requestor == "user"]
        self._asked: list[Any] = []

    def respond(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> str:
        """The next message: the opening, a requested user action, or the end."""
        last = messages[-1] if messages else {}
        if last.get("role") == "user" and len(messages) == 1:
            return self._opening or "Hello."
        if last.get("role") == "user":
            text = str(last.get("content") or "")
            # the first pending action the agent names, once (a gold may repeat an action)
            first = next((a for a in self._pending if _requested(text, a.name)), None)
            self._asked = [first] if first is not None else []
            self._pending = [a for a in self._pending if a is not first]
            if not self._asked:
                return f"Thank you. {stop_token()}"
        if self._asked and tools:
            action = self._asked.pop(0)
            return _call_text(action.name, action.arguments)
        return "Done."


class GoldAgent:
    """Plays a τ²-bench task's gold actions, then says its ``communicate_info`` and stops.

    Args:
        task: τ²-bench's task.
        solo: Solo mode: the user's actions are the agent's own calls, and the episode
            ends with the ``done`` tool.
    """

    def __init__(self, task: Any, *, solo: bool = False) -> None:
        criteria = task.evaluation_criteria
        self.actions = list(criteria.actions or []) if criteria else []
        self.info = list(criteria.communicate_info or []) if criteria else []
        self.solo = solo
        self._next = 0

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """The next action."""
        if self._next < len(self.actions):
            action = self.actions[self._next]
            self._next += 1
            if action.requestor == "user" and not self.solo:
                return f"Please do this on your phone now: {action.name}."
            return _call_text(action.name, action.arguments)
        self._next += 1
        if self.solo:
            return _call_text(STOP_FUNCTION, {})
        said = " ".join(self.info)
        return f"Everything is taken care of. {said}".strip()
