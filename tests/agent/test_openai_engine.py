"""The OpenAI-compatible engine against an in-process mock server (no network)."""

from __future__ import annotations

import json
import threading
import time

import httpx

from rods_agent.engines import GenerationRequest, SamplingParams
from rods_agent.engines.openai_http import OpenAIEngine

SECRET = "sk-test-0123456789abcdef"
REQ = GenerationRequest(
    [{"role": "user", "content": "hi"}], tools=[{"type": "function", "function": {"name": "f"}}]
)


def _ok(content: str = "hello") -> dict:
    return {
        "choices": [
            {"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2},
    }


def _engine(handler, **kw) -> OpenAIEngine:
    kw.setdefault("backoff", 0.001)
    return OpenAIEngine("http://mock/v1", "m", transport=httpx.MockTransport(handler), **kw)


def test_request_body_auth_header_and_parsed_answer(monkeypatch):
    monkeypatch.setenv("RODS_TEST_KEY", SECRET)
    seen = {}

    def handler(request):
        seen["auth"] = request.headers.get("authorization")
        seen["body"] = json.loads(request.content)
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
        choice = {
            "message": message,
            "finish_reason": "tool_calls",
            "logprobs": {"content": [{"token": "a", "logprob": -0.5}]},
            "token_ids": [5],
        }
        return httpx.Response(200, json={"choices": [choice], "usage": {"prompt_tokens": 7}})

    engine = _engine(
        handler, api_key_env="RODS_TEST_KEY", logprobs=True, extra_body={"return_token_ids": True}
    )
    [c] = engine.generate([REQ], SamplingParams(max_tokens=9, temperature=0.5, seed=3))
    assert seen["auth"] == f"Bearer {SECRET}"
    body = seen["body"]
    assert body["model"] == "m" and body["max_tokens"] == 9 and body["temperature"] == 0.5
    assert (
        body["tools"] == REQ.tools and body["logprobs"] is True and body["return_token_ids"] is True
    )
    assert "seed" not in body  # a fixed seed would make repeated trials identical
    assert c.error is None and c.text == ""
    assert c.tool_calls[0]["function"]["name"] == "f"
    assert c.message()["tool_calls"] == c.tool_calls
    assert c.logprobs == [-0.5] and c.token_ids == [5] and c.prompt_tokens == 7 and c.n_tokens == 1
    assert SECRET not in repr(engine)
    engine.close()


def test_retries_429_and_5xx_with_backoff_then_succeeds():
    calls = []

    def handler(request):
        calls.append(time.monotonic())
        if len(calls) == 1:
            return httpx.Response(
                429, headers={"retry-after": "0.05"}, json={"error": {"message": "slow down"}}
            )
        if len(calls) == 2:
            return httpx.Response(503, text="overloaded")
        return httpx.Response(200, json=_ok("fine"))

    engine = _engine(handler)
    [c] = engine.generate([REQ], SamplingParams())
    assert c.text == "fine" and len(calls) == 3
    assert calls[1] - calls[0] >= 0.05  # Retry-After honoured
    assert engine.stats["retries"] == 2
    engine.close()


def test_timeouts_are_retried_then_recorded_as_a_failed_completion():
    n = []

    def handler(request):
        n.append(1)
        raise httpx.ReadTimeout("slow", request=request)

    engine = _engine(handler, max_retries=2)
    [c] = engine.generate([REQ], SamplingParams())
    assert len(n) == 3
    assert c.finish_reason == "error" and "timed out" in c.error
    engine.close()


def test_client_errors_are_not_retried_and_never_carry_the_key(monkeypatch):
    monkeypatch.setenv("RODS_TEST_KEY", SECRET)
    n = []

    def handler(request):
        n.append(1)
        # A server that (badly) echoes the key in its error must not leak it into results.
        return httpx.Response(400, json={"error": {"message": f"bad request for key {SECRET}"}})

    engine = _engine(handler, api_key_env="RODS_TEST_KEY")
    [c] = engine.generate([REQ], SamplingParams())
    assert len(n) == 1
    assert "HTTP 400" in c.error and SECRET not in c.error and "[redacted]" in c.error
    engine.close()


def test_concurrency_is_bounded():
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def handler(request):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        return httpx.Response(200, json=_ok())

    engine = _engine(handler, concurrency=3)
    out = engine.generate([REQ] * 12, SamplingParams())
    assert [c.text for c in out] == ["hello"] * 12
    assert state["peak"] <= 3
    engine.close()


def test_a_non_chat_answer_is_a_failed_completion():
    engine = _engine(lambda request: httpx.Response(200, json={"unexpected": True}))
    [c] = engine.generate([REQ], SamplingParams())
    assert c.finish_reason == "error" and "not a chat completion" in c.error
    engine.close()
