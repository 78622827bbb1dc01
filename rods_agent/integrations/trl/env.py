"""Any rods environment id as a TRL environment: one class per id, one method per tool.

TRL's ``GRPOTrainer(environment_factory=...)`` builds one instance per rollout, calls
``reset(**row)`` with the dataset row's columns, exposes every other public method as a tool
(its JSON schema derived from the method's signature and Google docstring by
``transformers.utils.get_json_schema``), feeds each tool's return value back to the model,
ends the rollout when the model answers without a tool call, and finally asks
``get_reward()``.

The episode behind those calls is rods' episode-as-tools surface
(:class:`rods_env.tool_session.ToolSession`), the one the verifiers taskset and the OpenEnv
server play too: each tool call is one ``env.step`` (the same validation, error
observations, turn bookkeeping, user and reward as ``gymnasium.make``), the simulated user
is reached through ``send_message_to_user(message)`` (a completion without a tool call ends
the rollout and is never delivered), and ``get_reward()`` ends an episode still open as the
environment's own step limit ends it. This module adds only TRL's shapes: the class and its
methods (:mod:`.methods`), a row's task (:class:`EpisodeSource`), the reward recorded for
the data engine, and the environment arguments of a row's episode (mode ``envtuning``'s
actionable hints on training rows).

Which tools a class has: a rods domain's toolkit, each method with the toolkit method's own
signature; a benchmark's (BFCL, τ²-bench) every tool it may show
(:meth:`~rods_env.benchmark.BenchmarkDomain.tool_schemas`). TRL fixes a class's tools, while
BFCL shows each task only its API classes' tools: the class lists them all, and a tool the
episode does not show gets the benchmark's own reply to an unknown function.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rods_agent.integrations.trl.methods import SEND_MESSAGE_DOC, schema_method, toolkit_method
from rods_env.errors import ConfigError, RodsError
from rods_env.registry import AnyDomain
from rods_env.task import Task, load_tasks
from rods_env.tool_session import (
    AGENT_STOPPED,
    DEFAULT_MAX_STEPS,
    ENDED,
    SEND_MESSAGE,
    Reward,
    ToolSession,
    check_max_steps,
    check_reward,
    check_tool_names,
)
from rods_env.user import UserSimulator

__all__ = [
    "AGENT_STOPPED",
    "ENDED",
    "RESERVED_NAMES",
    "SEND_MESSAGE",
    "EpisodeSource",
    "RodsEnvironment",
    "TaskTable",
    "environment_factory",
    "resolve_domain",
]

TRL_HOOKS = frozenset({"reset", "get_reward"})
"""The methods TRL calls itself (never tools)."""
RESERVED_NAMES = TRL_HOOKS | {SEND_MESSAGE}


class EpisodeSource(Protocol):
    """Where an environment finds the task of a dataset row, and where its reward goes.

    A plain task table resolves ``row["task_id"]``; the data engine's dataset view also
    resolves rows that name a slot of a generation round (see
    :class:`rods_agent.integrations.trl.engine.EngineDataset`), records each episode's
    reward for the boundary detector, and gives a training row's episode the environment
    arguments of the run's mode.
    """

    def task_for(self, row: Mapping[str, Any]) -> Any:
        """The task a dataset row asks for (a task, or an id the environment resolves)."""
        ...

    def record(self, row: Mapping[str, Any], task: Any, reward: float) -> None:
        """Take the final reward of the episode started from ``row``."""
        ...

    def env_kwargs(self, row: Mapping[str, Any]) -> Mapping[str, Any]:
        """More environment arguments for the episode of ``row`` (e.g. ``actionable_hints``)."""
        ...


def resolve_domain(env_id: str | AnyDomain) -> AnyDomain:
    """The domain of an env id or domain name (a domain object as it is)."""
    if isinstance(env_id, str):
        from rods_env.registry import load_any_domain

        return load_any_domain(env_id)
    return env_id


class TaskTable:
    """A fixed id -> task table (an :class:`EpisodeSource` that records nothing).

    Args:
        tasks: Tasks, or a JSONL pool file.
        domain: Only tasks of this domain are kept (a pool may mix domains).
        actionable_hints: Give every episode Environment Tuning's actionable hints.
    """

    def __init__(
        self,
        tasks: Iterable[Task] | str | Path,
        domain: AnyDomain,
        *,
        actionable_hints: bool = False,
    ) -> None:
        items = load_tasks(tasks) if isinstance(tasks, (str, Path)) else list(tasks)
        self.domain = domain
        self.actionable_hints = actionable_hints
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

    def record(self, row: Mapping[str, Any], task: Any, reward: float) -> None:
        """Nothing to record: a fixed table has no boundary detector."""

    def env_kwargs(self, row: Mapping[str, Any]) -> Mapping[str, Any]:
        """``actionable_hints`` when the table was made with them."""
        return {"actionable_hints": True} if self.actionable_hints else {}


@dataclass(frozen=True)
class LocalSessions:
    """Builds an instance's episodes in this process: a :class:`ToolSession` over the
    domain's environment, for each set of environment arguments a row asks for."""

    domain: AnyDomain
    max_steps: int = DEFAULT_MAX_STEPS
    user: Callable[[], UserSimulator] | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, extra: Mapping[str, Any]) -> ToolSession:
        """A new session whose environment takes ``extra`` besides the factory's arguments."""
        user = self.user() if self.user is not None else None
        kwargs = {**self.kwargs, **extra}
        if user is not None:
            kwargs["user"] = user
        return ToolSession(self.domain, max_steps=self.max_steps, **kwargs)


class RodsEnvironment:
    """One rods episode driven by TRL's tool-calling loop (base of the generated classes).

    Use :func:`environment_factory` to get the class for an env id; TRL instantiates it with
    no arguments, once per concurrent rollout, and reuses instances through ``reset``.
    """

    domain: ClassVar[AnyDomain]
    reward_kind: ClassVar[Reward] = "progress"
    max_steps: ClassVar[int] = DEFAULT_MAX_STEPS
    source: ClassVar[EpisodeSource]
    # private: TRL would take any public function of the class for a tool
    _sessions: ClassVar[Callable[[Mapping[str, Any]], Any]]

    def __init__(self) -> None:
        self._by_kwargs: dict[tuple[tuple[str, Any], ...], Any] = {}
        self._session: Any = None
        self._row: dict[str, Any] = {}
        self._task: Any = None
        self._reward: float | None = None
        self.seconds = 0.0
        """Time spent in the env (reset, tools, user, reward) since the last reset."""

    # -- what TRL calls ----------------------------------------------------------------------
    def reset(self, task_id: str | None = None, **row: Any) -> str:
        """Start the episode of a dataset row; returns the user's first message.

        Args:
            task_id: The task to run (a row of the data engine's view names a slot instead).
            **row: The row's other columns (``prompt`` and the like are ignored).
        """
        started = time.perf_counter()
        self._row = {"task_id": task_id, **row}
        task = self.source.task_for(self._row)
        extra = dict(self.source.env_kwargs(self._row))
        key = tuple(sorted(extra.items()))
        session = self._by_kwargs.get(key)
        if session is None:
            session = self._by_kwargs[key] = type(self)._sessions(extra)
        first = session.reset(task)
        self._session, self._task, self._reward = session, task, None
        self.seconds = time.perf_counter() - started
        return first

    def send_message_to_user(self, message: str) -> str:
        # the docstring is the surface's description (set below, one source)
        return self._call_tool(SEND_MESSAGE, {"message": message})

    send_message_to_user.__doc__ = SEND_MESSAGE_DOC

    def get_reward(self) -> float:
        """The episode's reward: final progress, or 1.0/0.0 for strict success.

        An episode still open (the model stopped calling tools) is first ended as the
        environment's own step limit ends it.
        """
        started = time.perf_counter()
        if self._reward is None:
            self._reward = self.session.verdict().reward(self.reward_kind)
            self.source.record(self._row, self._task, self._reward)
        self.seconds += time.perf_counter() - started
        return self._reward

    # -- read-only views for callers ---------------------------------------------------------
    @property
    def session(self) -> Any:
        """The episode (a :class:`ToolSession`, or the served one's client session)."""
        if self._session is None:
            raise RodsError("call reset() first")
        return self._session

    @property
    def info(self) -> Mapping[str, Any]:
        """The env's last ``info`` (progress, success, turn results, messages, tools)."""
        return self.session.info

    @property
    def env(self) -> Any:
        """The underlying environment (unwrapped)."""
        return self.session.env.unwrapped

    @property
    def task(self) -> Any:
        """The episode's task."""
        return self._task

    # -- internals ---------------------------------------------------------------------------
    def _call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        session = self.session
        if session.done:
            return ENDED
        started = time.perf_counter()
        out = session.call(name, arguments)
        self.seconds += time.perf_counter() - started
        return str(out)


def environment_factory(
    env_id: str | AnyDomain,
    *,
    tasks: Iterable[Task] | str | Path | None = None,
    source: EpisodeSource | None = None,
    reward: Reward = "progress",
    max_steps: int = DEFAULT_MAX_STEPS,
    user: Callable[[], UserSimulator] | None = None,
    actionable_hints: bool = False,
) -> type[RodsEnvironment]:
    """The environment class of a rods env id, for ``GRPOTrainer(environment_factory=...)``.

    Args:
        env_id: Any rods env id (``"rods/Retail-v0"``, ``"rods/BFCL-Paper-v0"``,
            ``"rods/Tau2-Retail-v0"``...), a domain name, or a domain object.
        tasks: Where ``reset(task_id=...)`` looks tasks up: None or ``"seeds"`` for the
            domain's seed tasks (both splits), a JSONL pool, or tasks. Ignored with ``source``.
        source: An :class:`EpisodeSource` (the data engine's dataset view) that resolves rows,
            receives each episode's reward and may give a row's episode environment
            arguments (mode ``envtuning``: actionable hints on training rows).
        reward: ``"progress"`` (share of user turns passed) or ``"success"`` (strict, 0 or 1).
        max_steps: Agent actions (tool calls and messages) before the env truncates.
        user: Builds each episode environment's user simulator (default: the env's own).
        actionable_hints: Every episode gets Environment Tuning's actionable hints (a task
            table only; the data engine's view decides per row).

    Returns:
        A class whose instances TRL drives: ``reset``, ``get_reward``,
        ``send_message_to_user`` and one method per tool.

    Raises:
        ConfigError: an unknown reward kind, a bad step limit, or a tool whose name TRL or
            the tool loop reserves.
    """
    from rods_env.benchmark import BenchmarkDomain

    domain = resolve_domain(env_id)
    check_reward(reward)
    check_max_steps(max_steps)
    owner = f"{domain.title}Environment"
    if isinstance(domain, BenchmarkDomain):
        domain.require()
        methods = [schema_method(s["function"], owner) for s in domain.tool_schemas()]
    else:
        methods = [toolkit_method(spec, owner) for spec in domain.toolkit.specs().values()]
    check_tool_names((m.__name__ for m in methods), f"domain {domain.name}", TRL_HOOKS)
    if source is None:
        pool = domain.seed_tasks() if tasks is None or tasks == "seeds" else tasks
        source = TaskTable(pool, domain, actionable_hints=actionable_hints)
    elif actionable_hints:
        raise ConfigError(
            "actionable_hints goes with a task table; a source decides them per row "
            "(the data engine's view: mode envtuning)"
        )
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": f"The {domain.env_id} environment for TRL (generated from its tools).",
        "domain": domain,
        "reward_kind": reward,
        "max_steps": int(max_steps),
        "source": source,
        "_sessions": LocalSessions(domain, int(max_steps), user),
        **{m.__name__: m for m in methods},
    }
    return type(owner, (RodsEnvironment,), namespace)
