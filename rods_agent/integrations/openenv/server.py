"""A rods environment served by OpenEnv's own server classes.

:class:`RodsEnvironment` is an OpenEnv :class:`MCPEnvironment` over one rods Gymnasium
environment (``gymnasium.make(env_id, **make_kwargs)``) played as rods' episode as tools
(:class:`rods_env.tool_session.ToolSession`, the episode TRL and verifiers play too): each
WebSocket session gets its own instance (``create_app`` builds one per session), and
everything the agent does goes through the environment's public ``reset``/``step`` and
``info`` contract, exactly as with ``gymnasium.make``:

* the rods tools are the session's MCP tools, with rods' names, descriptions and argument
  schemas unchanged (``info["tools"]``), callable as ``call_tool`` actions on the WebSocket or
  as MCP ``tools/call`` on ``/mcp`` (both run ``env.step`` with one tool call);
* ``message``, ``completion`` and ``assistant`` actions cover the rest of rods' action space
  (text for the simulated user, a raw completion, a whole assistant message);
* the observation carries the step reward (the increase of progress) and ``done``;
  ``state`` carries progress, success, the turn results and the conversation.

:func:`create_rods_app` is OpenEnv's app (``HTTPEnvServer``'s routes) with these classes, its
sessions expiring when idle (``sessions.py``) and every route bounded (``guard.py``, the
limits in ``limits.py``); :func:`serve` runs it with uvicorn (``rods serve ENV_ID --port N``).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import os
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
from fastmcp import FastMCP
from fastmcp.tools import Tool, ToolResult
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import EnvironmentMetadata
from pydantic import PrivateAttr, ValidationError

import rods_env
from rods_agent.integrations.openenv.guard import LOG, Guard, client_name, one_line
from rods_agent.integrations.openenv.limits import ServeLimits, uvicorn_options
from rods_agent.integrations.openenv.models import (
    ResetArgs,
    RodsAction,
    RodsObservation,
    RodsState,
)
from rods_agent.integrations.openenv.sessions import RodsHTTPEnvServer
from rods_env.errors import ConfigError
from rods_env.task import Task
from rods_env.tool_session import AGENT_STOPPED, ToolSession, message_action, tool_call_action

_STEP_LOCK = threading.Lock()
"""One episode call at a time per server process. The benchmarks' own packages are not
thread-safe (BFCL's API classes live in module globals; its math API changes mpmath's
precision process-wide), and a pure-Python step gains nothing from threads under the GIL; the
lock makes every session's episode exactly the one it would be alone."""

RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {"type": "string"}},
    "required": ["result"],
    "x-fastmcp-wrap-result": True,
}
"""A tool's MCP output: the observation text (MCP clients read it as the call's data)."""

RESET_KEYS = frozenset(ResetArgs.model_fields)
"""What ``reset`` accepts (``index`` picks a task of ``split``, OpenEnv's Task API)."""


def reset_args(**kwargs: Any) -> ResetArgs:
    """``reset``'s arguments, checked (strict types, bounded ids).

    Raises:
        ValueError: an unknown argument or a bad value, in one line naming the argument and
            what is allowed (never the value: it may be megabytes).
    """
    unknown = sorted(set(kwargs) - RESET_KEYS)
    if unknown:
        allowed = sorted(RESET_KEYS - {"seed", "episode_id"})
        raise ValueError(one_line(f"unknown reset argument(s) {unknown}; allowed: {allowed}", 300))
    try:
        return ResetArgs.model_validate(kwargs)
    except ValidationError as exc:
        error = exc.errors(include_input=False)[0]
        where = ".".join(str(part) for part in error["loc"])
        raise ValueError(f"invalid reset argument {where}: {error['msg']}") from None


def plain(value: Any) -> Any:
    """An editable JSON-able copy of the read-only data ``info`` hands out."""
    return copy.deepcopy(value)


def turn_result_dict(result: Any) -> dict[str, Any]:
    """One entry of ``info["turn_results"]`` as JSON data."""
    if hasattr(result, "to_dict"):
        return dict(result.to_dict())
    if isinstance(result, Mapping):
        return plain(dict(result))
    return {"result": str(result)}


class RodsTool(Tool):
    """A rods tool as a FastMCP tool: rods' own schema, and a call that is one ``env.step``.

    FastMCP checks nothing itself: the arguments reach the environment as sent, so a bad
    argument gets rods' error observation (which value was wrong, what is allowed).
    """

    _owner: RodsEnvironment | None = PrivateAttr(default=None)

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the call in the owning session's episode."""
        owner = self._owner
        if owner is None:  # a tool is only ever registered through an environment
            return ToolResult(content="this tool is not bound to an episode", is_error=True)
        loop = asyncio.get_running_loop()
        try:
            observation = await loop.run_in_executor(
                None, owner.step, RodsAction(tool_name=self.name, arguments=dict(arguments))
            )
        except ValueError as exc:  # no episode, or it has ended
            return ToolResult(content=str(exc), is_error=True)
        return ToolResult(
            content=observation.text,
            structured_content={"result": observation.text},
            meta={"fastmcp": {"wrap_result": True}},
        )


class RodsEnvironment(MCPEnvironment):
    """One served session of a rods environment (an OpenEnv MCP environment).

    Args:
        env_id: A rods environment id (``rods/Retail-v0``, ``rods/BFCL-MultiTurn-Base-v0``,
            ``rods/Tau2-Airline-v0``, ...).
        make_kwargs: Keyword arguments of ``gymnasium.make`` (``tasks``: a pool file,
            ``split``, ``max_steps``, ``prompt``, ...).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, make_kwargs: Mapping[str, Any] | None = None) -> None:
        self.env_id = env_id
        self.make_kwargs = dict(make_kwargs or {})
        self._episode = ToolSession(gymnasium.make(env_id, **self.make_kwargs))
        super().__init__(FastMCP(name=env_id))
        self._state = RodsState(env_id=env_id)
        self._tools_source: Any = None
        self._tools: list[dict[str, Any]] = []
        self._registered: list[str] = []

    # -- OpenEnv's Environment -------------------------------------------------------------
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        **kwargs: Any,
    ) -> RodsObservation:
        """Start an episode: a task by id, by split and index, or drawn from the pool.

        Args:
            seed: Seeds the environment's draw of a task (and nothing else).
            episode_id: The episode's id in ``state`` (a new one by default).
            **kwargs: ``task_id`` (a task of the served pool), ``split`` (``"train"`` or
                ``"test"``) and ``index`` (a position in that split's task list).

        Raises:
            ValueError: an unknown argument, or a task the pool does not hold.
        """
        args = reset_args(seed=seed, episode_id=episode_id, **kwargs)
        task_id = args.task_id
        if args.index is not None:
            try:
                task_id = self.get_task(args.split or "test", args.index)["id"]
            except IndexError as exc:
                raise ValueError(str(exc)) from None
        seed, episode_id = args.seed, args.episode_id
        with _STEP_LOCK:
            try:
                text = self._episode.reset(task_id, seed=seed, split=args.split)
            except rods_env.RodsError as exc:
                raise ValueError(one_line(str(exc), 300)) from None
            info = self._episode.info
            self._state = RodsState(
                env_id=self.env_id, episode_id=episode_id or str(uuid.uuid4()), step_count=0
            )
            self._sync(info)
            return self._observation(
                text, info, reward=None, done=False, truncated=False, tools=True, policy=True
            )

    def step(
        self,
        action: Any,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> RodsObservation:
        """Run one agent action (see :class:`RodsAction`).

        Raises:
            ValueError: before the first reset, after the episode ended, or an action that is
                not a rods action.
        """
        if not isinstance(action, RodsAction):
            action = RodsAction.model_validate(
                action.model_dump() if hasattr(action, "model_dump") else action
            )
        with _STEP_LOCK:
            if not self._episode.started:
                raise ValueError("no episode: reset first")
            if action.type == "list_tools":
                self._state.step_count += 1
                info = self._episode.info
                return self._observation(
                    "", info, reward=0.0, done=self._state.done, truncated=False, tools=True
                )
            if self._state.done:
                raise ValueError("the episode has ended: reset to start another")
            before = self._tools_source
            if action.type == "end":
                return self._end()
            text, reward, terminated, truncated, info = self._episode.step(gym_action(action))
            self._state.step_count += 1
            self._sync(info, done=bool(terminated or truncated))
            return self._observation(
                text,
                info,
                reward=float(reward),
                done=bool(terminated or truncated),
                truncated=bool(truncated),
                tools=self._tools_source is not before,
            )

    async def step_async(
        self,
        action: Any,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> RodsObservation:
        """``step`` off the event loop, so a slow step (a benchmark's final scoring) never
        holds up other sessions' messages."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(self.step, action))

    def _step_impl(
        self, action: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> RodsObservation:
        return self.step(action)

    @property
    def state(self) -> RodsState:
        """The session's episode (progress, success, turn results, conversation)."""
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        """Name, description and version shown at ``GET /metadata``."""
        return EnvironmentMetadata(
            name=self.env_id,
            description=(
                f"{self.env_id}: a rods multi-turn tool-use environment (seeded mock-API "
                "database, executable tools, a scripted user, progress per user turn and "
                "strict success as the reward)"
            ),
            version=rods_env.__version__,
            documentation_url="docs/hubs.md",
        )

    # -- OpenEnv's Task API: the served pool by split ---------------------------------------
    def list_splits(self) -> list[str]:
        """The task splits (``train``, ``test``)."""
        return ["train", "test"]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        """The tasks of ``split``: id, skill and number of user turns."""
        return [task_spec(t) for t in self._tasks(split)]

    def num_tasks(self, split: str) -> int:
        """How many tasks ``split`` holds."""
        return len(self._tasks(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        """The ``index``-th task of ``split`` (``reset(split=..., index=...)`` plays it).

        Raises:
            IndexError: ``index`` outside the split.
        """
        tasks = self._tasks(split)
        if not 0 <= index < len(tasks):
            raise IndexError(f"task index {index} outside split {split} ({len(tasks)} tasks)")
        return task_spec(tasks[index])

    def _tasks(self, split: str) -> Sequence[Task]:
        return served_tasks(self.env_id, str(self.make_kwargs.get("tasks") or "seeds"), split)

    # -- internals -------------------------------------------------------------------------
    def _end(self) -> RodsObservation:
        previous = self._state.progress
        info = self._episode.end(AGENT_STOPPED)
        self._state.step_count += 1
        self._sync(info, done=True)
        return self._observation(
            "",
            info,
            reward=self._state.progress - previous,
            done=True,
            truncated=True,
            tools=False,
        )

    def _sync(self, info: Mapping[str, Any], done: bool = False) -> None:
        state = self._state
        state.task_id = str(info.get("task_id", ""))
        state.steps = int(info.get("steps", 0))
        state.turn = int(info.get("turn", 0))
        state.n_turns = int(info.get("n_turns", 0))
        state.progress = float(info.get("progress", 0.0))
        state.success = bool(info.get("success", False))
        state.termination = info.get("termination")
        state.done = done
        state.turn_results = [turn_result_dict(r) for r in info.get("turn_results", ())]
        state.messages = plain(list(info.get("messages", ())))
        source = info.get("tools")
        if source is not self._tools_source:
            self._tools_source = source
            self._tools = plain(list(source or ()))
            self._register_tools()

    def _register_tools(self) -> None:
        """Make the MCP server's tools the environment's current ones (rods' schemas)."""
        server = self.mcp_server
        if server is None:  # closed
            return
        for name in self._registered:
            server.local_provider.remove_tool(name)
        self._registered = []
        for schema in self._tools:
            function = schema["function"]
            tool = RodsTool(
                name=function["name"],
                description=function.get("description", ""),
                parameters=function.get("parameters", {"type": "object", "properties": {}}),
                output_schema=RESULT_SCHEMA,
            )
            tool._owner = self
            server.add_tool(tool)
            self._registered.append(tool.name)

    def _observation(
        self,
        text: str,
        info: Mapping[str, Any],
        *,
        reward: float | None,
        done: bool,
        truncated: bool,
        tools: bool,
        policy: bool = False,
    ) -> RodsObservation:
        state = self._state
        return RodsObservation(
            text=text,
            tools=self._tools if tools else None,
            policy=str(info.get("policy", "")) if policy else None,
            task_id=state.task_id,
            turn=state.turn,
            n_turns=state.n_turns,
            progress=state.progress,
            success=state.success,
            termination=state.termination,
            truncated=truncated,
            reward=reward,
            done=done,
        )


def gym_action(action: RodsAction) -> str | dict[str, Any]:
    """The ``env.step`` argument of a rods action."""
    if action.type == "call_tool":
        return tool_call_action(action.tool_name, action.arguments)
    if action.type == "message":
        return message_action(action.content)
    if action.type == "completion":
        return action.content
    assert action.message is not None  # the model validator guarantees it
    return {"role": "assistant", **action.message}


def task_spec(task: Task) -> dict[str, Any]:
    """What the Task API shows of a task (its data stays on the server)."""
    return {"id": task.id, "skill": task.skill, "turns": len(task.turns), "split": task.split}


@functools.lru_cache(maxsize=32)
def served_tasks(env_id: str, pool: str, split: str) -> tuple[Task, ...]:
    """The tasks a server plays in ``split`` (the seeds or a pool file), cached."""
    from rods_agent.evaluation.evaluate import load_pool

    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; splits: train, test")
    try:
        return tuple(load_pool(env_id, pool, split))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def environment_factory(
    env_id: str, make_kwargs: Mapping[str, Any] | None = None
) -> functools.partial[RodsEnvironment]:
    """The per-session factory ``create_app`` calls (a partial of the class, so the server
    reads ``SUPPORTS_CONCURRENT_SESSIONS`` from it without building one)."""
    return functools.partial(RodsEnvironment, env_id, dict(make_kwargs or {}))


def create_rods_app(
    env_id: str,
    make_kwargs: Mapping[str, Any] | None = None,
    *,
    limits: ServeLimits | None = None,
) -> Any:
    """OpenEnv's FastAPI app for a rods environment id, every route bounded.

    The app is OpenEnv's (``HTTPEnvServer.register_routes``) on :class:`RodsHTTPEnvServer`
    (idle expiry, reclaim, HTTP sessions), behind the :class:`Guard` middleware (body,
    frame and nesting limits); a client's mistake raised as ``ValueError`` answers 400.

    Args:
        env_id: The rods environment id to serve.
        make_kwargs: ``gymnasium.make`` keyword arguments (``tasks``, ``split``, ...).
        limits: Sessions, idle timeout and sizes (``ServeLimits()``: the defaults).

    Raises:
        ConfigError: an id that is not a rods environment, or bad make arguments (the
            environment is made once here, so a mistake fails at start, not per session).
    """
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    limits = limits or ServeLimits()
    if env_id not in gymnasium.registry or not env_id.startswith("rods/"):
        known = ", ".join(rods_env.ENV_IDS + rods_env.BENCHMARK_ENV_IDS)
        raise ConfigError(f"'{env_id}' is not a rods environment id; served ids: {known}")
    gymnasium.make(env_id, **dict(make_kwargs or {})).close()
    app = FastAPI(
        title=f"rods serve {env_id}",
        description="A rods environment on OpenEnv's server (docs/hubs.md in rods).",
        version=rods_env.__version__,
    )
    server = RodsHTTPEnvServer(
        environment_factory(env_id, make_kwargs),
        RodsAction,
        RodsObservation,
        limits=limits,
        env_name=env_id.split("/", 1)[-1],
        state_cls=RodsState,
    )
    server.register_routes(app, mode=os.environ.get("OPENENV_MODE", "simulation"))

    async def client_mistake(request: Request, exc: Exception) -> JSONResponse:
        reason = one_line(str(exc))
        LOG.info(
            "%s %s %s refused (400): %s",
            client_name(dict(request.scope)),
            request.method,
            request.url.path,
            reason,
        )
        return JSONResponse({"detail": reason}, status_code=400)

    app.add_exception_handler(ValueError, client_mistake)
    app.add_middleware(Guard, limits=limits)
    app.state.rods_server = server
    return app


def serve(
    env_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    make_kwargs: Mapping[str, Any] | None = None,
    limits: ServeLimits | None = None,
    log_level: str = "warning",
) -> None:
    """Serve ``env_id`` over HTTP and WebSocket until interrupted (``rods serve``)."""
    import uvicorn

    limits = limits or ServeLimits()
    app = create_rods_app(env_id, make_kwargs, limits=limits)
    print(f"rods serve: {env_id} on http://{host}:{port} (Ctrl-C stops it)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level, **uvicorn_options(limits))
