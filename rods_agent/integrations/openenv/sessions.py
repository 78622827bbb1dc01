"""Sessions of a served rods environment: idle ones expire, a full server reclaims the
longest idle, and HTTP clients play an episode by session id.

:class:`RodsHTTPEnvServer` is OpenEnv's ``HTTPEnvServer`` with three changes:

* an idle timeout (OpenEnv's own ``ConcurrencyConfig.session_timeout`` and reaper) for
  sessions created over HTTP (``openenv/session/create`` on ``POST /mcp``); a WebSocket's
  session is timed by its connection instead (``guard.Connection``: no frame for the
  timeout closes it), so OpenEnv's reaper never closes an environment under a live socket;
* when every slot is taken, a new session takes the slot of the session idle the longest,
  if that one has been idle for ``reclaim_idle_s``;
* ``POST /reset``, ``POST /step`` and ``GET /state`` act on the session named by
  ``session_id`` (OpenEnv's own routes build a fresh environment per request, so a step
  over HTTP could never follow a reset).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated, Any

from fastapi import Body, FastAPI, HTTPException, Query, Request
from fastapi.routing import APIRoute
from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcResponse
from openenv.core.env_server.serialization import deserialize_action, serialize_observation
from openenv.core.env_server.types import (
    ConcurrencyConfig,
    ResetRequest,
    ResetResponse,
    StepRequest,
    StepResponse,
)
from pydantic import Field, ValidationError
from starlette.routing import BaseRoute

from rods_agent.integrations.openenv.guard import CURRENT_CONNECTION, LOG, Connection
from rods_agent.integrations.openenv.limits import MAX_ID_CHARS, ServeLimits

SESSION_HELP = (
    "create a session with openenv/session/create on POST /mcp (or play over the WebSocket "
    "/ws); sessions close after {idle:g} s without a request"
)

SESSION_METHODS = ("tools/list", "tools/call")


class SessionResetRequest(ResetRequest):
    """``POST /reset``: OpenEnv's reset arguments plus the session to reset."""

    session_id: str | None = Field(
        default=None,
        max_length=MAX_ID_CHARS,
        description="The session to reset (openenv/session/create); without it the reset "
        "only shows a fresh episode's first observation",
    )


class SessionStepRequest(StepRequest):
    """``POST /step``: OpenEnv's step request plus the session to step."""

    session_id: str = Field(
        default="", max_length=MAX_ID_CHARS, description="The session to step (required)"
    )


class RodsHTTPEnvServer(HTTPEnvServer):
    """OpenEnv's server with idle expiry, reclaim and HTTP sessions (module docstring).

    Args:
        env: The per-session environment factory.
        action_cls: The action model.
        observation_cls: The observation model.
        limits: Sessions, idle timeout and reclaim (the rest is the guard's).
        **kwargs: ``HTTPEnvServer``'s other arguments (``env_name``, ``state_cls``).
    """

    def __init__(
        self,
        env: Any,
        action_cls: Any,
        observation_cls: Any,
        *,
        limits: ServeLimits,
        **kwargs: Any,
    ) -> None:
        config = ConcurrencyConfig(
            max_concurrent_envs=limits.max_sessions, session_timeout=limits.idle_timeout_s
        )
        super().__init__(env, action_cls, observation_cls, concurrency_config=config, **kwargs)
        self.limits = limits
        self._connections: dict[str, Connection] = {}
        self._reclaiming = asyncio.Lock()

    # -- sessions ----------------------------------------------------------------------------
    async def _create_session(self) -> tuple[str, Environment]:
        try:
            session_id, env = await super()._create_session()
        except SessionCapacityError:
            session_id, env = await self._create_by_reclaiming()
        connection = CURRENT_CONNECTION.get()
        if connection is not None:
            async with self._session_lock:
                # "attached" keeps OpenEnv's reaper off it: the connection times itself
                self._session_websocket_attachments.add(session_id)
                self._connections[session_id] = connection
            connection.session_id = session_id
        return session_id, env

    async def _create_by_reclaiming(self) -> tuple[str, Environment]:
        """A session made room for by reclaiming idle ones (one reclaim at a time; a slot
        freed here and taken by a creator that did not wait is reclaimed again).

        Raises:
            SessionCapacityError: no session has been idle ``reclaim_idle_s``.
        """
        async with self._reclaiming:
            for _ in range(self.limits.max_sessions):
                try:
                    return await super()._create_session()
                except SessionCapacityError:
                    if not await self._reclaim():
                        raise
            return await super()._create_session()

    async def _destroy_session(self, session_id: str) -> None:
        self._connections.pop(session_id, None)
        await super()._destroy_session(session_id)

    def idle_seconds(self) -> dict[str, float]:
        """Each session's idle time (a session attached to a WebSocket it does not own is
        left out: its connection times it)."""
        now = time.time()
        idle = {}
        for session_id, info in list(self._session_info.items()):
            connection = self._connections.get(session_id)
            if connection is not None:
                idle[session_id] = connection.idle_s()
            elif session_id not in self._session_websocket_attachments:
                idle[session_id] = now - info.last_activity_at
        return idle

    async def _reclaim(self) -> bool:
        """Free the slot of the session idle the longest, if idle for ``reclaim_idle_s``."""
        idle = self.idle_seconds()
        if not idle:
            return False
        session_id = max(idle, key=idle.__getitem__)
        if idle[session_id] < self.limits.reclaim_idle_s:
            return False
        reason = (
            f"reclaimed: idle {idle[session_id]:.0f} s while all {self.limits.max_sessions} "
            "sessions were taken"
        )
        LOG.info("session %s %s", session_id[:8], reason)
        connection = self._connections.get(session_id)
        if connection is None:
            await self._destroy_session(session_id)
            return True
        connection.evict(reason)  # its handler ends and destroys the session
        for _ in range(500):
            if session_id not in self._sessions:
                return True
            await asyncio.sleep(0.01)
        return False

    async def session_env(self, session_id: str) -> Environment:
        """The environment of ``session_id``.

        Raises:
            HTTPException: 404 for an unknown (or expired) session, 409 for one still
                starting.
        """
        async with self._session_lock:
            env = self._sessions.get(session_id, ...)
        if env is ...:
            raise HTTPException(
                404, "unknown session_id: " + SESSION_HELP.format(idle=self.limits.idle_timeout_s)
            )
        if env is None:
            raise HTTPException(409, "the session is still starting: retry shortly")
        return env

    # -- routes ------------------------------------------------------------------------------
    def register_routes(self, app: FastAPI, mode: Any = "simulation") -> None:
        """OpenEnv's routes, with ``/reset``, ``/step`` and ``/state`` by session id."""
        super().register_routes(app, mode)
        stateful = {"/reset", "/step", "/state"}
        if not any(getattr(r, "path", None) in stateful for r in app.router.routes):
            return  # production mode: OpenEnv serves none of them
        kept: list[BaseRoute] = [
            r for r in app.router.routes if getattr(r, "path", None) not in stateful
        ]
        app.router.routes[:] = kept
        server = self

        @app.post("/reset", response_model=ResetResponse, tags=["Environment Control"])
        async def reset(
            request: Annotated[SessionResetRequest, Body(default_factory=SessionResetRequest)],
        ) -> ResetResponse:
            """Start an episode in the session ``session_id`` (without one: a fresh
            environment's first observation, which no later step can follow)."""
            kwargs = request.model_dump(exclude_unset=True, exclude={"session_id"})
            if request.session_id is None:
                env = server._env_factory()
                try:
                    observation = await server._run_sync_in_thread_pool(env.reset, **kwargs)
                finally:
                    env.close()
            else:
                env = await server.session_env(request.session_id)
                observation = await server._run_in_session_executor(
                    request.session_id, env.reset, **kwargs
                )
                server._update_session_activity(request.session_id)
            return ResetResponse(**serialize_observation(observation))

        @app.post("/step", response_model=StepResponse, tags=["Environment Control"])
        async def step(request: SessionStepRequest) -> StepResponse:
            """Run one action in the session ``session_id``."""
            if not request.session_id:
                raise HTTPException(
                    400,
                    "POST /step needs a session_id: "
                    + SESSION_HELP.format(idle=server.limits.idle_timeout_s),
                )
            env = await server.session_env(request.session_id)
            try:
                action = deserialize_action(request.action, server.action_cls)
            except ValidationError as exc:
                raise HTTPException(422, exc.errors(include_input=False)) from None
            observation = await env.step_async(action)
            server._update_session_activity(request.session_id, increment_step=True)
            return StepResponse(**serialize_observation(observation))

        @app.get("/state", response_model=server.state_cls, tags=["State Management"])
        async def state(
            session_id: Annotated[str | None, Query(max_length=MAX_ID_CHARS)] = None,
        ) -> Any:
            """The episode of the session ``session_id`` (without one: a fresh one's)."""
            if session_id is None:
                env = server._env_factory()
                try:
                    return env.state
                finally:
                    env.close()
            env = await server.session_env(session_id)
            server._update_session_activity(session_id)
            return env.state

        mcp_routes = [r for r in app.router.routes if isinstance(r, APIRoute) and r.path == "/mcp"]
        for route in mcp_routes:
            app.router.routes.remove(route)
        openenv_mcp = mcp_routes[0].endpoint

        @app.post("/mcp")
        async def mcp(request: Request) -> Any:
            """OpenEnv's MCP JSON-RPC endpoint; ``tools/list`` and ``tools/call`` need the
            ``session_id`` of a session (rods' tools are an episode's tools)."""
            try:
                payload = json.loads(await request.body())
            except ValueError:
                payload = None
            if isinstance(payload, dict) and payload.get("method") in SESSION_METHODS:
                params = payload.get("params")
                if not isinstance(params, dict) or not params.get("session_id"):
                    request_id = payload.get("id")
                    return JsonRpcResponse.error_response(
                        JsonRpcErrorCode.INVALID_PARAMS,
                        f"{payload['method']} acts on an episode: pass params.session_id "
                        "(openenv/session/create, then POST /reset with it) or use /ws",
                        request_id=request_id if isinstance(request_id, str | int) else None,
                    ).model_dump()
            return await openenv_mcp(request)
