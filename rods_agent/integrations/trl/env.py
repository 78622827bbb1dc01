"""A rods domain as a TRL environment: one class per env id, one method per domain tool.

TRL's ``GRPOTrainer(environment_factory=...)`` builds one instance per rollout, calls
``reset(**row)`` with the dataset row's columns, exposes every other public method as a tool
(its JSON schema derived from the method's signature and Google docstring by
``transformers.utils.get_json_schema``), feeds each tool's return value back to the model,
ends the rollout when the model answers without a tool call, and finally asks
``get_reward()``.

:func:`environment_factory` generates that class from the domain's toolkit, so no tool is
restated by hand: each tool method carries the toolkit method's own signature, type hints and
description, and runs the call through a :class:`~rods_env.env.ToolEnv`. Everything the agent
does therefore goes through ``ToolEnv.step``, exactly as with ``gymnasium.make``: the same
validation, error observations, turn bookkeeping, simulated user and reward.

Two things differ from the Gymnasium loop because TRL's loop ends when the model stops
calling tools:

* the simulated customer is reached through one more tool, ``send_message_to_user(message)``,
  which returns the customer's reply (a completion without a tool call ends the episode and
  is not delivered to the customer);
* ``get_reward()`` ends an episode that is still open with :meth:`ToolEnv.truncate`, which
  scores it exactly as the env's own ``max_steps`` cut does.
"""

from __future__ import annotations

import inspect
import time
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from rods_env.domain import Domain
from rods_env.env import ToolEnv
from rods_env.errors import ConfigError, RodsError
from rods_env.task import Task, load_tasks
from rods_env.tools import ToolSpec
from rods_env.user import UserSimulator

Reward = Literal["progress", "success"]
SEND_MESSAGE = "send_message_to_user"
RESERVED_NAMES = frozenset({"reset", "get_reward", SEND_MESSAGE})
ENDED = "The conversation has ended; no further action is possible."
AGENT_STOPPED = "agent_stopped"
"""The termination label of an episode that TRL's loop left open (``info["termination"]``)."""


class EpisodeSource(Protocol):
    """Where an environment finds the task of a dataset row, and where its reward goes.

    A plain task table resolves ``row["task_id"]``; the data engine's dataset view also
    resolves rows that name a slot of a generation round (see
    :class:`rods_agent.integrations.trl.data.EngineDataset`) and records each episode's reward
    for the boundary detector.
    """

    def task_for(self, row: Mapping[str, Any]) -> Task:
        """The task a dataset row asks for."""
        ...

    def record(self, row: Mapping[str, Any], task: Task, reward: float) -> None:
        """Take the final reward of the episode started from ``row``."""
        ...


class TaskTable:
    """A fixed id -> task table (an :class:`EpisodeSource` that records nothing).

    Args:
        tasks: Tasks, or a JSONL pool file.
        domain: Only tasks of this domain are kept (a pool may mix domains).
    """

    def __init__(self, tasks: Iterable[Task] | str | Path, domain: Domain) -> None:
        items = load_tasks(tasks) if isinstance(tasks, (str, Path)) else list(tasks)
        self.domain = domain
        self._by_id = {t.id: t for t in items if t.domain == domain.name}

    def __len__(self) -> int:
        return len(self._by_id)

    def task_for(self, row: Mapping[str, Any]) -> Task:
        """The task named by ``row["task_id"]``.

        Raises:
            ConfigError: when the row names no task or a task not in the table.
        """
        task_id = row.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise ConfigError(
                f"a dataset row for a {self.domain.name} environment needs a 'task_id' "
                f"column (got the columns {sorted(row)})"
            )
        try:
            return self._by_id[task_id]
        except KeyError:
            raise ConfigError(
                f"unknown task id '{task_id}' for domain {self.domain.name} "
                f"({len(self._by_id)} tasks known)"
            ) from None

    def record(self, row: Mapping[str, Any], task: Task, reward: float) -> None:
        """Nothing to record: a fixed table has no boundary detector."""


@dataclass(frozen=True)
class _UserFactory:
    build: Callable[[], UserSimulator]


class RodsEnvironment:
    """One rods episode driven by TRL's tool-calling loop (base of the generated classes).

    Use :func:`environment_factory` to get the class for a domain; TRL instantiates it with
    no arguments, once per concurrent rollout, and reuses instances through ``reset``.
    """

    domain: ClassVar[Domain]
    reward_kind: ClassVar[Reward] = "progress"
    max_steps: ClassVar[int] = 40
    source: ClassVar[EpisodeSource]
    # private: TRL would take any public function of the class for a tool
    _user: ClassVar[_UserFactory | None] = None

    def __init__(self) -> None:
        user = self._user.build() if self._user is not None else None
        self._env = ToolEnv(self.domain, tasks=[], split=None, max_steps=self.max_steps, user=user)
        self._row: dict[str, Any] = {}
        self._info: dict[str, Any] | None = None
        self._reward: float | None = None
        self.seconds = 0.0
        """Time spent in the env (reset, tools, user, reward) since the last reset."""

    # -- what TRL calls ----------------------------------------------------------------------
    def reset(self, task_id: str | None = None, **row: Any) -> str:
        """Start the episode of a dataset row; returns the customer's first message.

        Args:
            task_id: The task to run (a row of the data engine's view names a slot instead).
            **row: The row's other columns (``prompt`` and the like are ignored).
        """
        started = time.perf_counter()
        self._row = {"task_id": task_id, **row}
        task = self.source.task_for(self._row)
        first, self._info = self._env.reset(options={"task": task})
        self._reward = None
        self.seconds = time.perf_counter() - started
        return first

    def send_message_to_user(self, message: str) -> str:
        """Send a message to the customer and return the customer's reply.

        Args:
            message: What to tell or ask the customer: a question, a request for confirmation, or the answer to their request.
        """
        if not isinstance(message, str):
            return f"Error: 'message' must be a string, got {type(message).__name__}."
        return self._step({"role": "assistant", "content": message})

    def get_reward(self) -> float:
        """The episode's reward: final progress, or 1.0/0.0 for strict success.

        An episode still open (the model stopped calling tools) is first ended with
        :meth:`ToolEnv.truncate`, scored as the env's own step limit scores it.
        """
        started = time.perf_counter()
        info = self.info
        if info["termination"] is None:
            info = self._info = self._env.truncate(AGENT_STOPPED)
        reward = (
            float(info["progress"]) if self.reward_kind == "progress" else float(info["success"])
        )
        if self._reward is None:
            self._reward = reward
            self.source.record(self._row, self._env.task, reward)
        self.seconds += time.perf_counter() - started
        return reward

    # -- read-only views for callers ---------------------------------------------------------
    @property
    def info(self) -> dict[str, Any]:
        """The env's last ``info`` (progress, success, turn results, messages, tools)."""
        if self._info is None:
            raise RodsError("call reset() first")
        return self._info

    @property
    def env(self) -> ToolEnv:
        """The underlying Gymnasium environment."""
        return self._env

    # -- internals ---------------------------------------------------------------------------
    def _step(self, action: dict[str, Any]) -> str:
        if self.info["termination"] is not None:
            return ENDED
        started = time.perf_counter()
        obs, _, _, _, self._info = self._env.step(action)
        self.seconds += time.perf_counter() - started
        return obs

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        call = {"type": "function", "function": {"name": name, "arguments": arguments}}
        return self._step({"role": "assistant", "content": None, "tool_calls": [call]})


def tool_docstring(spec: ToolSpec) -> str:
    """A Google docstring carrying the tool's schema description and argument descriptions."""
    properties = spec.schema["function"]["parameters"]["properties"]
    lines = [spec.schema["function"]["description"]]
    if properties:
        lines += ["", "Args:"]
        lines += [f"    {name}: {prop['description']}" for name, prop in properties.items()]
    return "\n".join(lines) + "\n"


def tool_method(spec: ToolSpec) -> Callable[..., str]:
    """A method that runs tool ``spec`` through the env, with the tool's own signature.

    The signature (names, defaults, type hints) is the toolkit method's; the docstring holds
    the schema's descriptions, so ``transformers.utils.get_json_schema`` derives the schema
    the env shows in ``info["tools"]`` (as far as that function can express it: see
    docs/scale-out.md).
    """
    name = spec.name

    def call_tool(self: RodsEnvironment, **arguments: Any) -> str:
        return self._call_tool(name, arguments)

    hints = typing.get_type_hints(spec.method)
    hints.pop("return", None)
    signature = inspect.signature(spec.method)
    call_tool.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[
            p.replace(annotation=hints.get(p.name, inspect.Parameter.empty))
            for p in signature.parameters.values()
        ],
        return_annotation=inspect.Signature.empty,
    )
    call_tool.__annotations__ = hints
    call_tool.__name__ = name
    call_tool.__qualname__ = f"RodsEnvironment.{name}"
    call_tool.__doc__ = tool_docstring(spec)
    return call_tool


def environment_factory(
    env_id: str | Domain,
    *,
    tasks: Iterable[Task] | str | Path | None = None,
    source: EpisodeSource | None = None,
    reward: Reward = "progress",
    max_steps: int = 40,
    user: Callable[[], UserSimulator] | None = None,
) -> type[RodsEnvironment]:
    """The environment class of a rods env id, for ``GRPOTrainer(environment_factory=...)``.

    Args:
        env_id: A rods env id (``"rods/Retail-v0"``), a domain name, or a :class:`Domain`.
        tasks: Where ``reset(task_id=...)`` looks tasks up: None or ``"seeds"`` for the
            domain's seed tasks (both splits), a JSONL pool, or tasks. Ignored with ``source``.
        source: An :class:`EpisodeSource` (the data engine's dataset view) that resolves rows
            and receives each episode's reward.
        reward: ``"progress"`` (share of user turns passed) or ``"success"`` (strict, 0 or 1).
        max_steps: Agent actions (tool calls and messages) before the env truncates.
        user: Builds each instance's user simulator (default: the scripted user).

    Returns:
        A class whose instances TRL drives: ``reset``, ``get_reward``,
        ``send_message_to_user`` and one method per domain tool.

    Raises:
        ConfigError: an unknown reward kind, or a domain tool whose name TRL reserves.
    """
    if isinstance(env_id, Domain):
        domain = env_id
    else:
        from rods_env.registry import load_domain

        domain = load_domain(env_id)
    if reward not in ("progress", "success"):
        raise ConfigError(f"reward must be 'progress' or 'success', got {reward!r}")
    if max_steps < 1:
        raise ConfigError(f"max_steps must be at least 1, got {max_steps}")
    clash = RESERVED_NAMES & set(domain.toolkit.names())
    if clash:
        raise ConfigError(
            f"domain {domain.name} has tools named {sorted(clash)}, which the TRL environment "
            "reserves for itself"
        )
    if source is None:
        pool = domain.seed_tasks() if tasks is None or tasks == "seeds" else tasks
        source = TaskTable(pool, domain)
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": f"The {domain.env_id} environment for TRL (generated from its toolkit).",
        "domain": domain,
        "reward_kind": reward,
        "max_steps": int(max_steps),
        "source": source,
        "_user": _UserFactory(user) if user is not None else None,
    }
    for spec in domain.toolkit.specs().values():
        namespace[spec.name] = tool_method(spec)
    return type(f"{domain.title}Environment", (RodsEnvironment,), namespace)
