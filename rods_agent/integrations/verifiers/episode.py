"""One rods episode as verifiers' tool-calling loop plays it, and its score.

This module needs no verifiers: it is the rods half of the taskset (:mod:`.taskset`), shared
by the live tool server and the rubric so the two cannot disagree.

The verifiers agent is a chat loop whose only way to act is a tool call. So, as in rods' TRL
environment, the simulated user is reached through one more tool, ``send_message_to_user``,
which returns the user's reply; every other tool is the environment's own, run through
``env.step`` with one call, exactly as ``gymnasium.make`` runs it (the same validation,
error observations, turn bookkeeping and reward). A reply without a tool call ends the
rollout; the episode is then ended as the environment's step limit ends it
(``ToolEnv.truncate``), so the same point of a conversation gets the same score whichever
limit stopped it.

The rubric does not trust the live server: :func:`score_calls` replays the rollout's tool
calls, in order, in a fresh environment and reads rods' own verdict (progress: the share of
user turns passed; success: all of them). Environments are deterministic given the task, so
the replay is the episode the agent played.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import gymnasium

from rods_env.task import Task

SEND_MESSAGE = "send_message_to_user"
"""The tool that talks to the simulated user (its reply is the tool's result)."""
ENDED = "The conversation has ended; no further action is possible."
AGENT_STOPPED = "agent_stopped"
"""``info["termination"]`` of an episode the agent left open (as rods' TRL environment)."""

SEND_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SEND_MESSAGE,
        "description": "Send a message to the user and return the user's reply.",
        "parameters": {
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "description": "What to tell or ask the user: a question, a request for "
                    "confirmation, or the answer to their request.",
                }
            },
            "required": ["message"],
        },
    },
}


@dataclass(frozen=True)
class Call:
    """One tool call of a rollout.

    Attributes:
        name: The tool (``send_message_to_user`` or one of the environment's tools).
        arguments: Its arguments object.
    """

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    """rods' score of an episode.

    Attributes:
        progress: The share of user turns passed (rods' dense reward).
        success: Every user turn passed (rods' strict success).
        steps: Agent actions the environment counted.
        termination: Why the episode ended (``agent_stopped`` when the agent stopped).
    """

    progress: float
    success: bool
    steps: int
    termination: str


class Episode:
    """One rods episode behind tool calls (see the module docstring).

    Args:
        env_id: A rods environment id (``rods/Retail-v0``, ``rods/Tau2-Airline-v0``, ...).
        tasks: Where the task is looked up: a JSONL pool file, or None for the env's own tasks.
        max_steps: Agent actions (tool calls and messages) before the environment truncates.
    """

    def __init__(self, env_id: str, tasks: str | None = None, max_steps: int = 40) -> None:
        make: dict[str, Any] = {"split": None, "max_steps": int(max_steps)}
        if tasks is not None:
            make["tasks"] = tasks
        self.env_id = env_id
        self._env = gymnasium.make(env_id, **make)
        self._info: Mapping[str, Any] | None = None

    def reset(self, task: str | Task) -> str:
        """Start the episode of ``task`` (an id or a task); returns the user's first message."""
        first, self._info = self._env.reset(options={"task": task})
        return str(first)

    @property
    def info(self) -> Mapping[str, Any]:
        """The environment's last ``info``."""
        if self._info is None:
            raise RuntimeError("reset the episode first")
        return self._info

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools an agent sees: the environment's (schemas unchanged), then
        ``send_message_to_user``."""
        return [*copy.deepcopy(list(self.info["tools"])), copy.deepcopy(SEND_MESSAGE_SCHEMA)]

    @property
    def policy(self) -> str:
        """The environment's policy (the agent's system prompt)."""
        return str(self.info.get("policy") or "")

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one tool call; returns what the agent sees (the tool's output, the user's
        reply, or rods' error observation for a call it cannot run)."""
        if self.info["termination"] is not None:
            return ENDED
        if name == SEND_MESSAGE:
            message = arguments.get("message")
            if not isinstance(message, str):
                return f"Error: 'message' must be a string, got {type(message).__name__}."
            action: dict[str, Any] = {"role": "assistant", "content": message}
        else:
            call = {"type": "function", "function": {"name": name, "arguments": dict(arguments)}}
            action = {"role": "assistant", "content": None, "tool_calls": [call]}
        obs, _, _, _, self._info = self._env.step(action)
        return str(obs)

    def verdict(self) -> Verdict:
        """rods' score, ending the episode first if the agent left it open."""
        info = self.info
        if info["termination"] is None:
            info = self._info = cast(Any, self._env.unwrapped).truncate(AGENT_STOPPED)
        return Verdict(
            progress=float(info["progress"]),
            success=bool(info["success"]),
            steps=int(info.get("steps", 0)),
            termination=str(info["termination"]),
        )


def score_calls(
    env_id: str,
    task: str | Task,
    calls: Iterable[Call],
    tasks: str | None = None,
    max_steps: int = 40,
) -> Verdict:
    """Replay ``calls`` in a fresh episode of ``task`` and return rods' verdict."""
    episode = Episode(env_id, tasks, max_steps)
    episode.reset(task)
    for call in calls:
        if episode.info["termination"] is not None:
            break
        episode.call(call.name, call.arguments)
    return episode.verdict()


def message_calls(messages: Sequence[Mapping[str, Any]]) -> list[Call]:
    """The tool calls of a conversation's assistant messages, in order (OpenAI message dicts,
    ``arguments`` a JSON string or an object).

    A call whose arguments are not a JSON object is left out: the agent's chat loop cannot
    send it to a tool server, so it never ran.
    """
    calls = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function", call)
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments.strip() else {}
                except json.JSONDecodeError:
                    continue
            if isinstance(arguments, dict):
                calls.append(Call(str(function.get("name", "")), arguments))
    return calls


def oracle_calls(env_id: str, task: Task, max_steps: int = 200) -> list[Call]:
    """The oracle's episode of ``task`` as tool calls: each call of its actions, and its text
    for the user as ``send_message_to_user``."""
    from rods_agent.engines import oracle_agents
    from rods_env.parsing import parse_action

    env = gymnasium.make(env_id, split=None, max_steps=max_steps)
    obs, info = env.reset(options={"task": task})
    agent = oracle_agents([task])(info)
    calls, done = [], False
    while not done:
        action = agent.act(obs, info)
        parsed = parse_action(action)
        if parsed.calls:
            calls += [Call(c.name, dict(c.arguments or {})) for c in parsed.calls]
        else:
            calls.append(Call(SEND_MESSAGE, {"message": parsed.content}))
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    return calls
