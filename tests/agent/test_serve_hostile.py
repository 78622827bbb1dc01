"""``rods serve`` under load and hostile clients, on loopback (issue 44).

One wave of 16 sessions, half the oracle (each must equal its gymnasium.make run), half
hostile (bad frames, huge values, calls after the end, abrupt disconnects, oversized
messages), then every slot is free; HTTP client mistakes answer 4xx in one line; an HTTP
session plays an episode; idle sessions expire and cannot keep new clients out.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.agent.openenv_server import require_openenv, rods_server

require_openenv()

from websockets.asyncio.client import ClientConnection, connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from rods_agent.integrations.openenv import RodsEnv  # noqa: E402
from rods_env.errors import ConfigError  # noqa: E402
from tests.agent.test_openenv import as_action, first_tasks, solo_run  # noqa: E402

ENV_ID = "rods/Retail-v0"
LOAD = ("--split", "all", "--max-steps", "200", "--max-sessions", "16", "--log-level", "info")
SESSIONS = 16
DEEP = 70  # past the server's nesting limit (64)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with rods_server(ENV_ID, *LOAD, log=log) as url:
        yield url, log


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


async def ask(ws: ClientConnection, message: Any) -> dict[str, Any]:
    await ws.send(message if isinstance(message, str | bytes) else json.dumps(message))
    return dict(json.loads(await asyncio.wait_for(ws.recv(), 60)))


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


BAD_FRAMES: list[tuple[str | bytes, str]] = [
    ("[]", "got an array"),
    ("null", "got null"),
    ("123", "got a number"),
    (b"\x00\xff binary", "binary frames"),
    ("{not json", "not JSON"),
    (
        '{"type": "step", "data": {"tool_name": "t", "arguments": {"n": ' + "9" * 5000 + "}}}",
        "number too long",
    ),
    ("[" * 100_000 + "]" * 100_000, "nested deeper"),
    (
        json.dumps({"type": "step", "data": {"tool_name": "t", "arguments": nested(DEEP)}}),
        "nested deeper",
    ),
]


async def hostile(url: str, task_id: str, abrupt: bool) -> dict[str, Any]:
    """Every bad frame, huge and wrong values, a bad reset, calls after the end: each gets
    an error reply or rods' error observation and the episode goes on; then the client
    vanishes with a step pending (``abrupt``) or sends a 5 MB frame."""
    seen: dict[str, Any] = {}
    async with connect(ws_url(url), max_size=None, open_timeout=30) as ws:
        assert (await ask(ws, {"type": "reset", "data": {"task_id": task_id}}))["type"] == (
            "observation"
        )
        for frame, reason in BAD_FRAMES:
            reply = await ask(ws, frame)
            assert reply["type"] == "error" and reason in reply["data"]["message"], reply
        calls = [
            {"tool_name": "drop_database", "arguments": {}},
            {"tool_name": "find_user_id_by_email", "arguments": {"email": 123}},
            {"tool_name": "find_user_id_by_email", "arguments": {"email": "x" * (1 << 20)}},
        ]
        for call in calls:
            reply = await ask(ws, {"type": "step", "data": call})
            assert reply["type"] == "observation" and not reply["data"]["done"]
        bad_reset = await ask(ws, {"type": "reset", "data": {"index": 1.5}})
        assert "invalid reset argument index" in bad_reset["data"]["message"]
        state = await ask(ws, {"type": "state"})
        seen["steps"] = state["data"]["steps"]  # the episode went on through all of it
        assert (await ask(ws, {"type": "step", "data": {"type": "end"}}))["data"]["done"]
        after = await ask(ws, {"type": "step", "data": {"tool_name": "x", "arguments": {}}})
        assert "episode has ended" in after["data"]["message"]
        if abrupt:
            await ws.send(json.dumps({"type": "step", "data": {"type": "list_tools"}}))
            ws.transport.abort()  # no close frame, reply pending
            return seen
        try:
            await ask(ws, {"type": "step", "data": {"type": "message", "content": "x" * 5_000_000}})
        except ConnectionClosed as closed:
            seen["close"] = closed.rcvd.code if closed.rcvd else None
    return seen


async def gold(url: str, actions: list[Any], task_id: str) -> tuple[list[Any], Any]:
    seen = []
    async with RodsEnv(base_url=url) as env:
        await env.reset(task_id=task_id)
        for action in actions:
            result = await env.step(as_action(action))
            seen.append((result.observation.text, result.reward))
        return seen, await env.state()


async def fill(url: str, n: int) -> list[str]:
    """``n`` sessions at once, each a reset; the reply types."""

    async def one() -> str:
        try:
            async with connect(ws_url(url), max_size=None, open_timeout=30) as ws:
                return str((await ask(ws, {"type": "reset", "data": {}}))["type"])
        except ConnectionClosed:  # refused at capacity: the server closed first
            return "refused"

    return list(await asyncio.gather(*(one() for _ in range(n))))


def test_sixteen_sessions_half_hostile_keep_gold_parity_and_free_every_slot(served):
    url, log = served
    tasks = first_tasks(ENV_ID, SESSIONS // 2)
    solos = {t.id: solo_run(ENV_ID, t) for t in tasks}

    async def wave() -> tuple[list[Any], list[Any]]:
        golds = [gold(url, solos[t.id]["actions"], t.id) for t in tasks]
        hostiles = [hostile(url, t.id, abrupt=i % 2 == 0) for i, t in enumerate(tasks)]
        results = await asyncio.gather(*golds, *hostiles)
        return list(results[: len(golds)]), list(results[len(golds) :])

    golds, hostiles = asyncio.run(wave())
    for task, (seen, state) in zip(tasks, golds, strict=True):
        solo = solos[task.id]
        assert seen == [(o, pytest.approx(r)) for o, r in solo["steps"]], task.id
        assert (state.progress, state.success) == (solo["progress"], solo["success"])
        assert state.messages == solo["messages"]
    assert all(h["steps"] == 3 for h in hostiles)
    assert [h.get("close") for h in hostiles[1::2]] == [1009] * (SESSIONS // 4)

    deadline = time.monotonic() + 30
    while (replies := asyncio.run(fill(url, SESSIONS))) != ["observation"] * SESSIONS:
        assert time.monotonic() < deadline, replies  # each dropped socket is noticed in time
        time.sleep(0.5)
    text = log.read_text()
    assert "Traceback" not in text and "Exception in ASGI" not in text
    assert max(len(line) for line in text.splitlines()) < 600  # reasons, never payloads
    assert "frame refused: binary frames" in text


def test_http_client_mistakes_answer_4xx_in_one_line(served):
    url, log = served
    cases = [
        ({"data": b"{" + b" " * (20 << 20) + b"}"}, 413, "request body over 4194304 bytes"),
        ({"data": "[" * 100_000 + "]" * 100_000}, 400, "nested deeper than 64"),
        ({"json": {"task_id": "x" * (20 << 10)}}, 400, "at most 256 characters"),
        ({"json": {"task_id": "no-such-task"}}, 400, "unknown task id 'no-such-task'"),
        ({"json": {"index": 1.5}}, 400, "invalid reset argument index"),
        ({"json": {"split": "dev"}}, 400, "invalid reset argument split"),
    ]
    for kwargs, status, reason in cases:
        reply = requests.post(f"{url}/reset", timeout=60, **kwargs)  # type: ignore[arg-type]
        assert (reply.status_code, reason in reply.json()["detail"]) == (status, True), reply.text
        assert "\n" not in reply.json()["detail"]
    step = requests.post(f"{url}/step", json={"action": {"type": "end"}}, timeout=30)
    assert step.status_code == 400 and "needs a session_id" in step.json()["detail"]
    listed = requests.post(
        f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30
    ).json()
    assert "acts on an episode" in listed["error"]["message"]
    assert "x" * 300 not in log.read_text()  # the 20 KB id was not logged


def rpc(url: str, method: str, **params: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return dict(requests.post(f"{url}/mcp", json=body, timeout=30).json())


def test_an_http_session_plays_the_oracle_as_gymnasium_make(served):
    url, _ = served
    task = first_tasks(ENV_ID, 1)[0]
    solo = solo_run(ENV_ID, task)
    session = rpc(url, "openenv/session/create")["result"]["session_id"]
    reset = requests.post(
        f"{url}/reset", json={"session_id": session, "task_id": task.id}, timeout=30
    )
    assert reset.status_code == 200 and reset.json()["observation"]["task_id"] == task.id
    tools = rpc(url, "tools/list", session_id=session)["result"]["tools"]
    assert "find_user_id_by_email" in {t["name"] for t in tools}
    for action, (obs, reward) in zip(solo["actions"], solo["steps"], strict=True):
        body = {"session_id": session, "action": as_action(action).model_dump()}
        reply = requests.post(f"{url}/step", json=body, timeout=30).json()
        assert (reply["observation"]["text"], reply["reward"]) == (obs, pytest.approx(reward))
    state = requests.get(f"{url}/state", params={"session_id": session}, timeout=30).json()
    assert (state["progress"], state["success"]) == (solo["progress"], solo["success"])
    assert rpc(url, "openenv/session/close", session_id=session)["result"]["closed"]
    gone = requests.post(f"{url}/reset", json={"session_id": session}, timeout=30)
    assert gone.status_code == 404 and "unknown session_id" in gone.json()["detail"]


# -- idle sessions: expiry and reclaim --------------------------------------------------------
IDLE_S, RECLAIM_S, CAP = 4.0, 2.5, 4


def test_idle_sessions_expire_and_cannot_starve_new_clients(tmp_path):
    """The issue's attack (every slot taken by `openenv/session/create`, then by idle
    WebSockets) keeps a new client out only until the holders have been idle `RECLAIM_S`;
    an idle WebSocket is closed after `IDLE_S` and an idle HTTP session expires."""
    flags = ("--max-sessions", str(CAP), "--idle-timeout", str(IDLE_S))
    flags += ("--reclaim-idle", str(RECLAIM_S), "--log-level", "info")
    with rods_server(ENV_ID, "--split", "all", *flags, log=tmp_path / "serve.log") as url:
        asyncio.run(starve_and_expire(url))
    text = (tmp_path / "serve.log").read_text()
    assert "reclaimed: idle" in text and "closed: idle for 4 s" in text
    assert "Traceback" not in text


async def starve_and_expire(url: str) -> None:
    held = [rpc(url, "openenv/session/create")["result"]["session_id"] for _ in range(CAP)]
    created = time.monotonic()
    async with connect(ws_url(url), open_timeout=30) as refused:  # the server speaks first
        reply = json.loads(await asyncio.wait_for(refused.recv(), 30))
        assert reply["data"]["code"] == "CAPACITY_REACHED"  # holders idle under RECLAIM_S
    assert time.monotonic() - created < RECLAIM_S, "the machine was too slow for this check"
    await asyncio.sleep(RECLAIM_S + 0.3 - (time.monotonic() - created))
    sockets = [await connect(ws_url(url), open_timeout=30) for _ in range(CAP)]
    for ws in sockets:  # each takes the slot of an idle HTTP session
        assert (await ask(ws, {"type": "reset", "data": {}}))["type"] == "observation"
    for session in held:
        gone = requests.post(f"{url}/reset", json={"session_id": session}, timeout=30)
        assert gone.status_code == 404
    oldest, *rest = sockets
    await asyncio.sleep(RECLAIM_S + 0.3)
    async with connect(ws_url(url), open_timeout=30) as newcomer:  # idle WebSockets too
        assert (await ask(newcomer, {"type": "reset", "data": {}}))["type"] == "observation"
    with pytest.raises(ConnectionClosed) as reclaimed:
        await asyncio.wait_for(oldest.recv(), 10)
    assert reclaimed.value.rcvd is not None and reclaimed.value.rcvd.code == 1001
    assert "reclaimed" in reclaimed.value.rcvd.reason
    expiring = rpc(url, "openenv/session/create")["result"]["session_id"]
    unused_since = time.monotonic()
    for ws in rest:  # idle since their reset: closed at IDLE_S
        with pytest.raises(ConnectionClosed) as idle:
            await asyncio.wait_for(ws.recv(), IDLE_S + 10)
        assert idle.value.rcvd is not None and idle.value.rcvd.reason == f"idle for {IDLE_S:g} s"
    # OpenEnv's reaper looks every 5 s at least; any request would count as use, so look once
    await asyncio.sleep(IDLE_S + 6 - (time.monotonic() - unused_since))
    gone = requests.get(f"{url}/state", params={"session_id": expiring}, timeout=30)
    assert gone.status_code == 404, "an idle HTTP session did not expire"


# -- the limits: one source for rods serve and the hub app -----------------------------------
def test_rods_serve_and_the_hub_app_share_their_limits(monkeypatch):
    import argparse
    import importlib
    import sys

    from rods_agent.commands import serve
    from rods_agent.integrations.openenv import ServeLimits

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    assert serve.limits(parser.parse_args([ENV_ID])) == ServeLimits()
    flags = ["--max-sessions", "8", "--idle-timeout", "60", "--reclaim-idle", "5"]
    chosen = ServeLimits(max_sessions=8, idle_timeout_s=60, reclaim_idle_s=5)
    assert serve.limits(parser.parse_args([ENV_ID, *flags])) == chosen
    assert ServeLimits.from_env({}) == ServeLimits()
    environ = {"RODS_MAX_SESSIONS": "8", "RODS_IDLE_TIMEOUT_S": "60", "RODS_RECLAIM_IDLE_S": "5"}
    assert ServeLimits.from_env(environ) == chosen
    with pytest.raises(ConfigError, match="RODS_IDLE_TIMEOUT_S must be a number"):
        ServeLimits.from_env({"RODS_IDLE_TIMEOUT_S": "soon"})
    with pytest.raises(ConfigError, match="max_sessions must be a positive number"):
        ServeLimits(max_sessions=0)

    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "hubs" / "openenv"))
    sys.modules.pop("server.app", None)
    hub = importlib.import_module("server.app")
    assert hub.app.state.rods_server.limits == chosen
    sys.modules.pop("server.app", None)


def test_reset_arguments_are_strict_and_never_echo_a_value():
    from rods_agent.integrations.openenv.server import reset_args

    assert reset_args(split="test", index=3).index == 3
    for bad, where in [
        ({"index": 1.5}, "index"),
        ({"index": True}, "index"),
        ({"index": -1}, "index"),
        ({"seed": "7"}, "seed"),
        ({"split": "dev"}, "split"),
        ({"task_id": "t" * 100_000}, "task_id"),
        ({"episode_id": "e" * 100_000}, "episode_id"),
    ]:
        with pytest.raises(ValueError, match=f"invalid reset argument {where}") as refused:
            reset_args(**bad)
        assert len(str(refused.value)) < 200


def test_the_guard_reads_each_frame_once_and_names_what_is_wrong():
    from rods_agent.integrations.openenv.guard import json_problem

    assert json_problem('{"type": "state"}', 64, need_object=True) is None
    assert json_problem(json.dumps(nested(63)), 64, need_object=True) is None  # 64 levels
    assert "deeper than 64" in str(json_problem(json.dumps(nested(64)), 64, need_object=True))
    assert "deeper than 64" in str(json_problem("[" * 100_000, 64, need_object=True))
    assert "too long" in str(json_problem("[" + "1" * 5000 + "]", 64, need_object=False))
    assert json_problem(b"not json", 64, need_object=False) is None  # the route answers
    assert "got an array" in str(json_problem("[1, 2]", 64, need_object=True))


def test_the_app_itself_closes_an_oversized_message_when_uvicorn_is_not_told_the_limit():
    """The hub app run by a bare `uvicorn` (its 16 MiB frame limit): the guard still closes
    a message over the limit with 1009, and answers a bad frame without ending the episode."""
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    from rods_agent.integrations.openenv import ServeLimits
    from rods_agent.integrations.openenv.server import create_rods_app

    app = create_rods_app(ENV_ID, {"split": None}, limits=ServeLimits(max_frame_bytes=1 << 16))
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "reset", "data": {"task_id": "retail-0001"}}))
        assert ws.receive_json()["type"] == "observation"
        ws.send_bytes(b"\x00")
        assert "binary frames" in ws.receive_json()["data"]["message"]
        ws.send_text(json.dumps({"type": "state"}))
        assert ws.receive_json()["data"]["task_id"] == "retail-0001"
        ws.send_text(json.dumps({"type": "step", "data": {"content": "x" * (1 << 17)}}))
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 1009
