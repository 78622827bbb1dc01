"""TRL's ``environment_factory`` over a served rods environment (the OpenEnv client).

``openenv_environment_factory(url)`` returns a class for
``GRPOTrainer(environment_factory=...)``: rods' own TRL environment
(:class:`rods_agent.integrations.trl.env.RodsEnvironment`: ``reset(**row)``,
``send_message_to_user``, ``get_reward``, one method per tool built from the tool's JSON
schema as the server lists it) whose episode is a WebSocket session of the server
(:class:`ServedSession`) instead of an environment in this process. The tool loop is the
same: a call on an ended episode answers ``ENDED``, and ``get_reward()`` ends an episode
still open exactly as the environment's own step limit would (an ``end`` action).

Several environments in one run: pass TRL a dict of these classes keyed by the dataset's
``environment`` column (``{"retail": openenv_environment_factory(url_a), "airline": ...}``);
TRL routes each row to its class and does not pass the column to ``reset``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rods_agent.integrations.openenv.client import RodsEnv
from rods_agent.integrations.trl.env import TRL_HOOKS, RodsEnvironment
from rods_agent.integrations.trl.methods import schema_method
from rods_env.tool_session import (
    AGENT_STOPPED,
    ENDED,
    SEND_MESSAGE,
    Reward,
    Verdict,
    check_reward,
    check_tool_names,
    message_error,
)


class ServedSession:
    """A served episode with :class:`~rods_env.tool_session.ToolSession`'s tool-loop
    methods (``reset``, ``call``, ``verdict``, ``done``), over one client session.

    Args:
        base_url: The server (``rods serve ENV_ID --port N``).
    """

    def __init__(self, base_url: str) -> None:
        self.client = RodsEnv(base_url=base_url)
        self._done = False

    def reset(self, task: str | None = None) -> str:
        """Start ``task`` (None: the server draws one); returns the user's first message."""
        result = self.client.reset(task_id=task)
        self._done = bool(result.done)
        return str(result.observation.text)

    @property
    def done(self) -> bool:
        """Whether the served episode has ended."""
        return self._done

    @property
    def info(self) -> Mapping[str, Any]:
        """The server's state of the episode (progress, success, turn results, messages)."""
        return self.client.state().model_dump()

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one tool call on the server (:data:`SEND_MESSAGE` as a ``message`` action)."""
        if self._done:
            return ENDED
        if name == SEND_MESSAGE:
            message = arguments.get("message")
            if not isinstance(message, str):
                return str(message_error(message))
            result = self.client.send_message(message)
        else:
            result = self.client.call_tool(name, **arguments)
        self._done = bool(result.done)
        return str(result.observation.text)

    def verdict(self) -> Verdict:
        """The server's verdict, after ending an episode still open (an ``end`` action)."""
        if not self._done:
            self.client.end()
            self._done = True
        state = self.client.state()
        return Verdict(
            progress=float(state.progress),
            success=bool(state.success),
            steps=int(state.steps),
            termination=str(state.termination or AGENT_STOPPED),
        )


class ServedTasks:
    """Rows name served tasks by id (the server resolves them; none: it draws one)."""

    def task_for(self, row: Mapping[str, Any]) -> str | None:
        """The row's ``task_id`` column."""
        task_id = row.get("task_id")
        return str(task_id) if task_id else None

    def record(self, row: Mapping[str, Any], task: Any, reward: float) -> None:
        """Nothing to record."""

    def env_kwargs(self, row: Mapping[str, Any]) -> Mapping[str, Any]:
        """None: the server made its environment."""
        return {}


def _served(base_url: str, extra: Mapping[str, Any]) -> ServedSession:
    return ServedSession(base_url)


class RodsOpenEnvEnvironment(RodsEnvironment):
    """One TRL rollout slot on a served rods environment (base of the generated classes)."""

    base_url: ClassVar[str]

    @property
    def client(self) -> RodsEnv:
        """The OpenEnv client of this slot's session."""
        return self.session.client


def openenv_environment_factory(
    base_url: str,
    *,
    reward: Reward = "progress",
    probe_tasks: Iterable[str | None] = (None,),
) -> type[RodsOpenEnvEnvironment]:
    """The TRL environment class of the rods environment served at ``base_url``.

    Args:
        base_url: The server (``rods serve ENV_ID --port N``), e.g. ``http://127.0.0.1:8000``.
        reward: ``"progress"`` (share of user turns passed) or ``"success"`` (strict).
        probe_tasks: Tasks reset once to read their tools; the class gets every tool seen
            (an environment whose tools vary by task, such as BFCL's, needs its dataset's
            task ids here). A tool absent from an episode gets rods' unknown-tool reply.

    Raises:
        ConfigError: an unknown reward kind, or a served tool named like a method TRL reserves.
    """
    check_reward(reward)
    functions: dict[str, Mapping[str, Any]] = {}
    with RodsEnv(base_url=base_url) as probe:
        env_id = str(probe.state().env_id)
        for task in probe_tasks:
            observation = probe.reset(task_id=task).observation
            for tool in observation.tools or ():
                functions.setdefault(tool["function"]["name"], tool["function"])
    check_tool_names(functions, env_id, TRL_HOOKS)
    title = env_id.split("/", 1)[-1].rsplit("-v", 1)[0].replace("-", "")
    owner = f"{title}OpenEnvEnvironment"
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": f"{env_id} served at {base_url}, for TRL (one method per tool).",
        "base_url": base_url,
        "reward_kind": reward,
        "source": ServedTasks(),
        "_sessions": functools.partial(_served, base_url),
    }
    for name, function in sorted(functions.items()):
        namespace[name] = schema_method(function, owner)
    return type(owner, (RodsOpenEnvEnvironment,), namespace)
