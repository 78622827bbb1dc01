"""The episode as tools: one rods episode that an agent drives only by calling tools.

Some agent loops can only call tools: TRL's ``environment_factory`` loop, a verifiers v1
chat loop behind an MCP toolset, an OpenEnv MCP client. Each ends when the model answers
without a tool call. Seen from such a loop, every rods environment id (an own domain, a
synthesized pool, BFCL, τ²-bench) is the same episode, written here once:

* the environment's tools, with the names and schemas ``info["tools"]`` shows; a call runs
  as one ``env.step`` with that one call (the same validation, error observations, turn
  bookkeeping, user and reward as ``gymnasium.make``);
* one more tool, :data:`SEND_MESSAGE` (``send_message_to_user(message)``), the only way to
  reach the simulated user: its result is the user's reply;
* a reply without a tool call ends the loop; the episode is then ended as the
  environment's own step limit ends it (:meth:`ToolSession.end`, ``truncate`` with
  :data:`AGENT_STOPPED`), so the same point of a conversation scores the same whichever
  limit stopped it; after the end every call answers :data:`ENDED` and changes nothing;
* rods' :class:`Verdict`: progress (the share of user turns passed) and strict success.

:class:`ToolSession` is that episode over any environment id; :func:`score_calls` replays a
rollout's calls in a fresh one (a rubric that does not trust a live server);
:func:`action_calls` and :func:`message_calls` read an action or a chat transcript as calls.
The TRL, verifiers and OpenEnv integrations in ``rods_agent.integrations`` are adapters of
this module: they add their framework's shapes, never their own episode.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from rods_env.errors import ConfigError, RodsError

SEND_MESSAGE = "send_message_to_user"
"""The tool that talks to the simulated user (its result is the user's reply)."""
SEND_MESSAGE_DESCRIPTION = "Send a message to the user and return the user's reply."
MESSAGE_DESCRIPTION = (
    "What to tell or ask the user: a question, a request for confirmation, or the answer to "
    "their request."
)
SEND_MESSAGE_SCHEMA: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": SEND_MESSAGE,
        "description": SEND_MESSAGE_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {"message": {"type": "string", "description": MESSAGE_DESCRIPTION}},
            "required": ["message"],
        },
    },
}
""":data:`SEND_MESSAGE`'s OpenAI function schema (copy it before editing)."""
ENDED = "The conversation has ended; no further action is possible."
"""What a call on an ended episode returns."""
AGENT_STOPPED = "agent_stopped"
"""``info["termination"]`` of an episode the agent left open (its loop stopped calling)."""
DEFAULT_MAX_STEPS = 40
"""Agent actions (tool calls and messages) before the environment truncates."""
Reward = Literal["progress", "success"]
REWARDS: tuple[str, ...] = ("progress", "success")
"""The rewards a tool loop may train on: final progress, or strict success as 1.0/0.0."""


def check_reward(reward: str) -> Reward:
    """``reward`` if it is one of :data:`REWARDS`.

    Raises:
        ConfigError: naming the allowed kinds.
    """
    if reward not in REWARDS:
        raise ConfigError(f"reward must be 'progress' or 'success', got {reward!r}")
    return reward  # type: ignore[return-value]


def check_max_steps(max_steps: int) -> int:
    """``max_steps`` as an int if it is at least 1.

    Raises:
        ConfigError: for fewer.
    """
    if max_steps < 1:
        raise ConfigError(f"max_steps must be at least 1, got {max_steps}")
    return int(max_steps)


def check_tool_names(names: Iterable[str], owner: str, reserved: Iterable[str] = ()) -> None:
    """Refuse an environment whose tools clash with :data:`SEND_MESSAGE` or with the
    names a framework reserves (``reserved``, e.g. TRL's ``reset`` and ``get_reward``).

    Raises:
        ConfigError: naming the clashing tools.
    """
    clash = ({SEND_MESSAGE} | set(reserved)) & set(names)
    if clash:
        raise ConfigError(
            f"{owner} has tools named {sorted(clash)}, which the tool loop reserves for itself"
        )


def message_error(message: Any) -> str | None:
    """The error observation for a :data:`SEND_MESSAGE` argument that is not text (None for
    text)."""
    if isinstance(message, str):
        return None
    return f"Error: 'message' must be a string, got {type(message).__name__}."


# -- the actions a tool call stands for --------------------------------------------------------
def tool_call_action(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The ``env.step`` action of one tool call: an assistant message with that call."""
    call = {"type": "function", "function": {"name": name, "arguments": dict(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def message_action(text: str) -> dict[str, Any]:
    """The ``env.step`` action of text for the user (never read for tool calls)."""
    return {"role": "assistant", "content": text}


@dataclass(frozen=True)
class Call:
    """One tool call of a rollout.

    Attributes:
        name: The tool (:data:`SEND_MESSAGE` or one of the environment's tools).
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
        termination: Why the episode ended (:data:`AGENT_STOPPED` when the agent stopped).
    """

    progress: float
    success: bool
    steps: int
    termination: str

    def reward(self, kind: Reward = "progress") -> float:
        """The reward of kind ``kind``: progress, or success as 1.0/0.0."""
        return self.progress if kind == "progress" else float(self.success)


class Step(NamedTuple):
    """What one ``env.step`` gave (gymnasium's five values)."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: Mapping[str, Any]


def make_env(env: Any, **kwargs: Any) -> Any:
    """The environment of a session: ``gymnasium.make(env, **kwargs)`` for an id; for a
    domain object (:class:`~rods_env.domain.Domain` or
    :class:`~rods_env.benchmark.BenchmarkDomain`, registered or not) its environment as the
    registry's entry point makes it; ``env`` itself when it is already an environment.

    Raises:
        BenchmarkUnavailableError: a benchmark whose package is not installed.
    """
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.domain import Domain

    if isinstance(env, str):
        import gymnasium

        import rods_env  # noqa: F401  (registers the rods ids)

        return gymnasium.make(env, **kwargs)
    if isinstance(env, Domain):
        from rods_env.env import ToolEnv

        return ToolEnv(env, **kwargs)
    if isinstance(env, BenchmarkDomain):
        env.require()
        return env.make_env(**kwargs)
    if kwargs:
        raise ConfigError("environment arguments go with an env id or a domain, not an env")
    return env


class ToolSession:
    """One rods episode behind tool calls (see the module docstring).

    Args:
        env: A rods environment id (``rods/Retail-v0``, ``rods/BFCL-Paper-v0``,
            ``rods/Tau2-Airline-v0``, ...), a :class:`~rods_env.domain.Domain`, or an
            environment already made.
        tasks: Where a task id is looked up: a JSONL pool file or tasks (None: the
            environment's own tasks).
        max_steps: Agent actions (tool calls and messages) before the environment truncates
            (None: :data:`DEFAULT_MAX_STEPS`).
        **make_kwargs: More environment arguments (``user``, ``actionable_hints``,
            ``split``, ...); ``split`` defaults to None (a reset may name any task).

    Raises:
        ConfigError: a bad ``max_steps``, or arguments given with an environment already
            made.
    """

    def __init__(
        self,
        env: Any,
        *,
        tasks: Any = None,
        max_steps: int | None = None,
        **make_kwargs: Any,
    ) -> None:
        if isinstance(env, str) or not hasattr(env, "step"):
            steps = check_max_steps(DEFAULT_MAX_STEPS if max_steps is None else max_steps)
            make_kwargs = {"split": None, "max_steps": steps, **make_kwargs}
            if tasks is not None:
                make_kwargs["tasks"] = tasks
        elif tasks is not None or max_steps is not None:
            make_kwargs = {"tasks": tasks, "max_steps": max_steps, **make_kwargs}
        self._env = make_env(env, **make_kwargs)
        self._info: Mapping[str, Any] | None = None

    # -- the episode -----------------------------------------------------------------------
    def reset(self, task: Any = None, *, seed: int | None = None, split: str | None = None) -> str:
        """Start an episode; returns the user's first message.

        Args:
            task: A task or a task id (None: the environment draws one, of ``split``).
            seed: Seeds the environment's draw.
            split: ``"train"`` or ``"test"``: the split a draw reads.
        """
        options: dict[str, Any] = {}
        if task is not None:
            options["task"] = task
        if split is not None:
            options["split"] = split
        first, self._info = self._env.reset(seed=seed, options=options or None)
        return str(first)

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one tool call; returns what the agent sees: the tool's output, the user's
        reply (:data:`SEND_MESSAGE`), rods' error observation for a call it cannot run, or
        :data:`ENDED` once the episode is over."""
        if self.done:
            return ENDED
        if name == SEND_MESSAGE:
            return self.say(arguments.get("message"))
        return self.step(tool_call_action(name, arguments)).observation

    def say(self, message: Any) -> str:
        """Send ``message`` to the user; returns the reply (:data:`SEND_MESSAGE`)."""
        if self.done:
            return ENDED
        error = message_error(message)
        if error is not None:
            return error
        return self.step(message_action(message)).observation

    def step(self, action: Any) -> Step:
        """One ``env.step`` with any action the environment reads (a raw completion, an
        assistant message); for callers that offer more than tools (OpenEnv's actions).

        Raises:
            RodsError: before a reset, or after the episode ended.
        """
        obs, reward, terminated, truncated, info = self._env.step(action)
        self._info = info
        return Step(str(obs), float(reward), bool(terminated), bool(truncated), info)

    def end(self, reason: str = AGENT_STOPPED) -> Mapping[str, Any]:
        """End the episode now, scored as the environment's step limit scores it (nothing
        changes when it has ended already); returns the final info."""
        info = self.info
        if info["termination"] is None:
            info = self._info = self._env.unwrapped.truncate(reason)
        return info

    def verdict(self) -> Verdict:
        """rods' score, ending the episode first if the agent left it open."""
        info = self.end()
        return Verdict(
            progress=float(info["progress"]),
            success=bool(info["success"]),
            steps=int(info.get("steps", 0)),
            termination=str(info["termination"]),
        )

    # -- what callers read -------------------------------------------------------------------
    @property
    def env(self) -> Any:
        """The environment (as ``gymnasium.make`` returned it)."""
        return self._env

    @property
    def started(self) -> bool:
        """Whether an episode was started."""
        return self._info is not None

    @property
    def info(self) -> Mapping[str, Any]:
        """The environment's last ``info``.

        Raises:
            RodsError: before the first reset.
        """
        if self._info is None:
            raise RodsError("call reset() first")
        return self._info

    @property
    def done(self) -> bool:
        """Whether the episode has ended."""
        return self.info["termination"] is not None

    @property
    def env_tools(self) -> Sequence[Mapping[str, Any]]:
        """The environment's tools shown now (``info["tools"]``, read-only)."""
        return list(self.info["tools"])

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools an agent sees: the environment's (schemas unchanged), then
        :data:`SEND_MESSAGE` (editable copies)."""
        return [*copy.deepcopy(list(self.info["tools"])), copy.deepcopy(dict(SEND_MESSAGE_SCHEMA))]

    @property
    def policy(self) -> str:
        """The environment's policy (the agent's system prompt; "" when none)."""
        return str(self.info.get("policy") or "")


# -- rollouts as calls ---------------------------------------------------------------------------
def score_calls(
    env: Any,
    task: Any,
    calls: Iterable[Call],
    *,
    tasks: Any = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    **make_kwargs: Any,
) -> Verdict:
    """Replay ``calls`` in a fresh episode of ``task`` and return rods' verdict (calls after
    the end are not run)."""
    session = ToolSession(env, tasks=tasks, max_steps=max_steps, **make_kwargs)
    session.reset(task)
    for call in calls:
        if session.done:
            break
        session.call(call.name, call.arguments)
    return session.verdict()


def action_calls(parsed: Any) -> list[Call]:
    """A parsed action (:func:`rods_env.parsing.parse_action`) as tool calls: its calls, or
    its text as :data:`SEND_MESSAGE`."""
    if parsed.calls:
        return [Call(c.name, dict(c.arguments or {})) for c in parsed.calls]
    return [Call(SEND_MESSAGE, {"message": parsed.content})]


def message_calls(messages: Sequence[Mapping[str, Any]]) -> list[Call]:
    """The tool calls of a conversation's assistant messages, in order (OpenAI message dicts,
    ``arguments`` a JSON string or an object).

    A call whose arguments are not a JSON object is left out: a chat loop cannot send it
    to a tool, so it never ran.
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
