"""The ASGI guard in front of a served rods environment: every request and frame bounded.

OpenEnv's app trusts what arrives (a body of any size, a WebSocket frame of any JSON, a
client that never speaks again); :class:`Guard` is plain ASGI middleware that sees each
request and frame before the app does:

* HTTP: a body over ``max_body_bytes`` gets 413, JSON nested deeper than ``max_depth`` or
  holding a number too long to read gets 400; a one-line reason, logged without the payload.
* WebSocket: a binary frame, a frame that is not a JSON object, too deep or with a number
  too long to read gets an ``error`` reply and the session goes on; a frame over
  ``max_frame_bytes`` closes the connection (1009); a connection with no frame for
  ``idle_timeout_s`` is closed (1001) and so is one whose slot was reclaimed (1001); a client
  that leaves while its reply is pending is one log line, not a traceback.

Each WebSocket is a :class:`Connection`, published in :data:`CURRENT_CONNECTION` while its
handler runs, so the session manager (``sessions.py``) can tell which session a connection
owns, how long it has been idle, and close it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rods_agent.integrations.openenv.limits import ServeLimits

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOG = logging.getLogger("uvicorn.error.rods")
"""One line per refused request, bad frame, idle close, reclaim or early disconnect (a child
of uvicorn's logger: its level and handlers, ``rods serve --log-level info`` shows them)."""

CURRENT_CONNECTION: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "rods_connection", default=None
)
"""The WebSocket connection whose handler is running (None over HTTP)."""

JSON_KINDS = {
    list: "an array",
    type(None): "null",
    int: "a number",
    float: "a number",
    str: "a string",
    bool: "a boolean",
}
GOING_AWAY = 1001
TOO_BIG = 1009


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line, at most ``limit`` characters (a reason, never a payload)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def json_problem(raw: str | bytes, max_depth: int, *, need_object: bool) -> str | None:
    """Why ``raw`` is not an acceptable JSON message, or None.

    Args:
        raw: The frame's text or the request's body.
        max_depth: The deepest nesting allowed.
        need_object: Whether the value must be a JSON object (a WebSocket message) or only
            within the limits (an HTTP body: its route says what it must be).
    """
    try:
        value = json.loads(raw)
    except RecursionError:
        return f"JSON nested deeper than {max_depth} levels"
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg} at character {exc.pos})" if need_object else None
    except ValueError:  # int digits past sys.get_int_max_str_digits(); bad UTF-8 bytes
        return "JSON with a number too long to read (over 4300 digits) or bad UTF-8"
    if need_object and not isinstance(value, dict):
        return f"a message must be a JSON object, got {JSON_KINDS.get(type(value), 'a value')}"
    opening = (
        raw.count("[") + raw.count("{")
        if isinstance(raw, str)
        else (raw.count(b"[") + raw.count(b"{"))
    )
    if opening > max_depth and depth_exceeds(value, max_depth):
        return f"JSON nested deeper than {max_depth} levels"
    return None


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects deeper than ``limit`` (no recursion)."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def error_frame(message: str, code: str = "INVALID_JSON") -> str:
    """An OpenEnv ``error`` message (``WSErrorResponse``'s shape)."""
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


def client_name(scope: Scope) -> str:
    """``host:port`` of the client, for a log line."""
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "?"


class Guard:
    """ASGI middleware that bounds every route (see the module docstring).

    Args:
        app: The OpenEnv FastAPI app.
        limits: The limits to apply.
    """

    def __init__(self, app: ASGIApp, limits: ServeLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            connection = Connection(scope, receive, send, self.limits)
            token = CURRENT_CONNECTION.set(connection)
            try:
                await self.app(scope, connection.receive, connection.send)
            finally:
                CURRENT_CONNECTION.reset(token)
                connection.finish()
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limits.max_body_bytes
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await refuse(scope, send, 413, f"request body over {limit} bytes")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > limit:
                await refuse(scope, send, 413, f"request body over {limit} bytes")
                return
            if not message.get("more_body"):
                break
        problem = json_problem(bytes(body), self.limits.max_depth, need_object=False)
        if body and problem is not None:
            await refuse(scope, send, 400, problem)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


async def refuse(scope: Scope, send: Send, status: int, reason: str) -> None:
    """Answer ``status`` with ``{"detail": reason}`` and log one line."""
    LOG.info(
        "%s %s %s refused (%d): %s",
        client_name(scope),
        scope.get("method"),
        scope.get("path"),
        status,
        reason,
    )
    body = json.dumps({"detail": reason}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Connection:
    """One WebSocket connection as the guard sees it: its frames, its idle clock, its close.

    ``receive`` and ``send`` stand in for the server's; the session manager reads
    :meth:`idle_s` and calls :meth:`evict`.
    """

    def __init__(self, scope: Scope, receive: Receive, send: Send, limits: ServeLimits) -> None:
        self.scope = scope
        self.limits = limits
        self.session_id: str | None = None
        self._receive = receive
        self._send = send
        self._pending: asyncio.Future[Message] | None = None
        self._evicted = asyncio.Event()
        self._evicted_wait: asyncio.Future[Any] | None = None
        self._waiting_since: float | None = None
        self._close: tuple[int, str] | None = None
        self._gone = False

    def idle_s(self) -> float:
        """Seconds since the server last waited on this client with nothing to do (0 while
        a message of it is being handled)."""
        since = self._waiting_since
        return 0.0 if since is None else time.monotonic() - since

    def evict(self, reason: str) -> None:
        """Close the connection (1001, ``reason``) at its next wait for a frame (now, if it
        is idle); the server then frees its session as for any disconnect."""
        self._close = (GOING_AWAY, reason)
        self._evicted.set()

    async def receive(self) -> Message:
        """The next message for the app: a good frame, or a disconnect (real or ours)."""
        while True:
            message = await self._next()
            if message["type"] != "websocket.receive":
                return message
            problem = self._frame_problem(message)
            if problem is None:
                return message
            if self._close is not None:  # too big: the connection ends
                return {"type": "websocket.disconnect", "code": self._close[0]}
            LOG.info("%s /ws frame refused: %s", client_name(self.scope), problem)
            await self.send({"type": "websocket.send", "text": error_frame(problem)})

    async def send(self, message: Message) -> None:
        """Pass ``message`` on; our close code and reason on a close; a client already gone
        ends the connection quietly (one log line)."""
        if message["type"] == "websocket.close" and self._close is not None:
            message = {**message, "code": self._close[0], "reason": self._close[1]}
        if self._gone:
            return
        try:
            await self._send(message)
        except OSError:  # uvicorn's ClientDisconnected: the client has gone
            self._gone = True
            if message["type"] == "websocket.send":  # (a close after theirs is no news)
                LOG.info("%s /ws client left before its reply", client_name(self.scope))

    def finish(self) -> None:
        """Cancel what is still waiting (the handler has returned)."""
        for future in (self._pending, self._evicted_wait):
            if future is not None and not future.done():
                future.cancel()

    async def _next(self) -> Message:
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._receive())
        if self._evicted_wait is None:
            self._evicted_wait = asyncio.ensure_future(self._evicted.wait())
        self._waiting_since = time.monotonic()
        try:
            done, _ = await asyncio.wait(
                (self._pending, self._evicted_wait),
                timeout=self.limits.idle_timeout_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            self._waiting_since = None
        if self._pending in done:
            message, self._pending = self._pending.result(), None
            return message
        if self._close is None:
            self._close = (GOING_AWAY, f"idle for {self.limits.idle_timeout_s:g} s")
        LOG.info("%s /ws closed: %s", client_name(self.scope), self._close[1])
        self._pending.cancel()
        self._pending = None
        return {"type": "websocket.disconnect", "code": self._close[0]}

    def _frame_problem(self, message: Message) -> str | None:
        text = message.get("text")
        if text is None:
            return "binary frames are not read: send a JSON object as a text frame"
        limit = self.limits.max_frame_bytes
        if len(text) > limit or (len(text) * 4 > limit and len(text.encode()) > limit):
            self._close = (TOO_BIG, f"message over {limit} bytes")
            LOG.info("%s /ws closed: message over %d bytes", client_name(self.scope), limit)
            return self._close[1]
        return json_problem(text, self.limits.max_depth, need_object=True)
