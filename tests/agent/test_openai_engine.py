"""The OpenAI-compatible engine (openai SDK) against an in-process mock server (no network)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import httpx2
import pytest

from rods_agent.engines import GenerationRequest, SamplingParams
from rods_agent.engines.openai_api import OpenAIEngine

SECRET = "sk-test-0123456789abcdef"
REQ = GenerationRequest(
    [{"role": "user", "content": "hi"}], tools=[{"type": "function", "function": {"name": "f"}}]
)


def _ok(content: str = "hello") -> dict:
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    }


def _engine(handler, **kw) -> OpenAIEngine:
    return OpenAIEngine("http://mock/v1", "m", transport=httpx2.MockTransport(handler), **kw)


def test_request_body_auth_header_and_parsed_answer(monkeypatch):
    monkeypatch.setenv("RODS_TEST_KEY", SECRET)
    seen = {}

    def handler(request):
        seen["auth"] = request.headers.get("authorization")
        seen["path"] = request.url.path
        seen["body"] = json.loads(request.content)
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls",
            "logprobs": {
                "content": [{"token": "a", "logprob": -0.5, "bytes": None, "top_logprobs": []}]
            },
            "token_ids": [5],
        }
        body = {**_ok(), "choices": [choice]}
        return httpx2.Response(200, json=body)

    engine = _engine(handler, api_key_env="RODS_TEST_KEY", logprobs=True, token_ids=True)
    [c] = engine.generate([REQ], SamplingParams(max_tokens=9, temperature=0.5, seed=3))
    assert seen["auth"] == f"Bearer {SECRET}" and seen["path"] == "/v1/chat/completions"
    body = seen["body"]
    assert body["model"] == "m" and body["max_tokens"] == 9 and body["temperature"] == 0.5
    assert body["tools"] == REQ.tools and body["logprobs"] is True
    assert body["return_token_ids"] is True
    assert "seed" not in body  # a fixed seed would make repeated trials identical
    assert c.error is None and c.text == ""
    assert c.tool_calls[0]["function"]["name"] == "f"
    assert c.message()["tool_calls"] == c.tool_calls
    assert c.logprobs == [-0.5] and c.token_ids == [5] and c.prompt_tokens == 7 and c.n_tokens == 1
    assert SECRET not in repr(engine)
    engine.close()


def test_no_key_sends_no_authorization_header(monkeypatch):
    monkeypatch.delenv("RODS_NO_KEY", raising=False)
    seen = []

    def handler(request):
        seen.append(request.headers.get("authorization"))
        return httpx2.Response(200, json=_ok())

    engine = _engine(handler, api_key_env="RODS_NO_KEY")
    [c] = engine.generate([REQ], SamplingParams())
    assert c.text == "hello" and seen == [None]
    engine.close()


def test_retries_429_and_5xx_then_succeeds_honouring_retry_after():
    calls = []

    def handler(request):
        calls.append(time.monotonic())
        if len(calls) == 1:
            return httpx2.Response(
                429, headers={"retry-after": "0.3"}, json={"error": {"message": "slow down"}}
            )
        if len(calls) == 2:
            return httpx2.Response(503, text="overloaded")
        return httpx2.Response(200, json=_ok("fine"))

    engine = _engine(handler, max_retries=2)
    [c] = engine.generate([REQ], SamplingParams())
    assert c.text == "fine" and len(calls) == 3
    assert calls[1] - calls[0] >= 0.3  # Retry-After honoured
    assert engine.stats == {"requests": 3, "retries": 2, "failures": 0}
    engine.close()


def test_timeouts_are_retried_then_recorded_as_a_failed_completion():
    n = []

    def handler(request):
        n.append(1)
        raise httpx2.ReadTimeout("slow", request=request)

    engine = _engine(handler, max_retries=1)
    [c] = engine.generate([REQ], SamplingParams())
    assert len(n) == 2
    assert c.finish_reason == "error" and "timed out" in c.error
    assert engine.stats["failures"] == 1
    engine.close()


def test_client_errors_are_not_retried_and_never_carry_the_key(monkeypatch):
    monkeypatch.setenv("RODS_TEST_KEY", SECRET)
    n = []

    def handler(request):
        n.append(1)
        # A server that (badly) echoes the key in its error must not leak it into results.
        return httpx2.Response(400, json={"error": {"message": f"bad request for key {SECRET}"}})

    engine = _engine(handler, api_key_env="RODS_TEST_KEY")
    [c] = engine.generate([REQ], SamplingParams())
    assert len(n) == 1
    assert "HTTP 400" in c.error and "bad request" in c.error
    assert SECRET not in c.error and "[redacted]" in c.error
    engine.close()


def test_requests_run_concurrently_up_to_the_bound():
    state = {"now": 0, "peak": 0}
    three = asyncio.Event()

    async def handler(request):
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        if state["now"] == 3:
            three.set()
        # Hold each request until three are in flight (or a generous timeout): a serial
        # engine would never get there, and a fourth would raise the peak above three.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(three.wait(), timeout=5)
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return httpx2.Response(200, json=_ok())

    engine = _engine(handler, concurrency=3)
    t0 = time.monotonic()
    out = engine.generate([REQ] * 12, SamplingParams())
    assert [c.text for c in out] == ["hello"] * 12
    assert state["peak"] == 3
    assert time.monotonic() - t0 < 5  # nobody waited for the timeout
    engine.close()


def test_a_non_chat_answer_is_a_failed_completion():
    engine = _engine(lambda request: httpx2.Response(200, json={"unexpected": True}))
    [c] = engine.generate([REQ], SamplingParams())
    assert c.finish_reason == "error" and c.error
    engine.close()


def test_token_mode_sends_token_ids_and_keeps_sampled_ids_and_logprobs(tiny_model_dir):
    seen = {}

    def handler(request):
        seen["path"] = request.url.path
        seen["body"] = json.loads(request.content)
        eot = engine.chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
        choice = {
            "index": 0,
            "text": "hi",
            "finish_reason": "stop",
            "logprobs": {"tokens": ["h", "i", "e"], "token_logprobs": [-0.1, -0.2, -0.3],
                         "top_logprobs": None, "text_offset": [0, 1, 2]},
            "token_ids": [300, 301, eot],
        }  # fmt: skip
        return httpx2.Response(
            200,
            json={"id": "c", "object": "text_completion", "created": 0, "model": "m",
                  "choices": [choice], "usage": None},
        )  # fmt: skip

    engine = _engine(handler, tokenizer=tiny_model_dir)
    prompt = engine.chat.prompt_ids(REQ.messages, REQ.tools)
    [c] = engine.generate([GenerationRequest([], prompt_token_ids=prompt)], SamplingParams())
    assert seen["path"] == "/v1/completions"
    body = seen["body"]
    assert body["prompt"] == prompt and body["return_token_ids"] is True
    assert set(body["stop_token_ids"]) == set(engine.chat.end_of_turn_ids)
    assert c.error is None and c.token_ids[:2] == [300, 301] and len(c.token_ids) == 3
    assert c.logprobs == pytest.approx([-0.1, -0.2, -0.3])
    assert c.text == engine.chat.completion_text(c.token_ids)
    engine.close()


def test_token_mode_refuses_a_server_without_token_ids(tiny_model_dir):
    def handler(request):
        choice = {"index": 0, "text": "hi", "finish_reason": "stop", "logprobs": None}
        return httpx2.Response(
            200,
            json={"id": "c", "object": "text_completion", "created": 0, "model": "m",
                  "choices": [choice]},
        )  # fmt: skip

    engine = _engine(handler, tokenizer=tiny_model_dir)
    [c] = engine.generate([REQ], SamplingParams())
    assert c.finish_reason == "error" and "token ids" in c.error
    engine.close()


# -- stop strings (issue 41: a turn ends where the call ends) -----------------------------------
def _chat_answer(content, finish="stop", **extra) -> dict:
    body = _ok(content)
    body["choices"][0].update({"finish_reason": finish, **extra})
    return body


def test_chat_mode_sends_stop_and_puts_the_dropped_stop_string_back():
    """The OpenAI API's ``stop`` drops the string: the engine puts it back, by the server's
    ``stop_reason`` (vLLM) when it says, else when the text leaves a ``<tool_call>`` open."""
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n'
    answers = [
        _chat_answer(call, stop_reason="</tool_call>"),  # vLLM says which string matched
        _chat_answer(call),  # a server that does not say: the open block tells
        _chat_answer("All done.", stop_reason=None),  # ended by itself: nothing to restore
        _chat_answer(call, finish="length"),  # cut by the cap: not a stop
        _chat_answer(call + "</tool_call>", stop_reason="</tool_call>"),  # kept by the server
    ]
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=answers[len(bodies) - 1])

    engine = _engine(handler, concurrency=1)
    params = SamplingParams(stop=("</tool_call>",))
    texts = [engine.generate([REQ], params)[0].text for _ in answers]
    assert all(b["stop"] == ["</tool_call>"] for b in bodies)
    closed = call + "</tool_call>"
    assert texts == [closed, closed, "All done.", call, closed]
    engine.close()


def test_chat_mode_sends_no_stop_unless_asked():
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=_ok())

    engine = _engine(handler)
    engine.generate([REQ], SamplingParams())
    assert "stop" not in bodies[0] and engine.call_end is None
    engine.close()
    told = _engine(handler, call_end="</tool_call>")
    assert told.call_end == "</tool_call>"
    told.close()
    from rods_agent.engines import EngineOptions, build_engine

    built = build_engine(EngineOptions(engine="openai", model="m", call_end="</tool_call>"))
    assert built.call_end == "</tool_call>"  # type: ignore[attr-defined]
    built.close()


def test_token_mode_stops_at_the_call_end_with_the_string_kept(tiny_model_dir):
    seen = {}

    def handler(request):
        seen["body"] = json.loads(request.content)
        ids = engine.chat.encode('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
        choice = {"index": 0, "text": "", "finish_reason": "stop", "token_ids": ids,
                  "logprobs": {"tokens": [""] * len(ids), "token_logprobs": [-0.1] * len(ids),
                               "top_logprobs": None, "text_offset": [0] * len(ids)}}  # fmt: skip
        return httpx2.Response(
            200,
            json={"id": "c", "object": "text_completion", "created": 0, "model": "m",
                  "choices": [choice], "usage": None},
        )  # fmt: skip

    engine = _engine(handler, tokenizer=tiny_model_dir)
    assert engine.call_end == engine.chat.call_end == "</tool_call>"
    [c] = engine.generate([REQ], SamplingParams(stop=(engine.call_end,)))
    body = seen["body"]
    assert body["stop"] == ["</tool_call>"] and body["include_stop_str_in_output"] is True
    assert c.text.endswith("</tool_call>") and c.text == engine.chat.completion_text(c.token_ids)
    engine.close()


def test_rollouts_send_the_call_end_to_a_served_model(tmp_path, retail_tasks):
    """Against the scripted chat server (a real HTTP server in its own process): the rollout
    asks a chat-mode engine told its model's call end to stop there, and no other."""
    import subprocess
    import sys
    from pathlib import Path

    import gymnasium as gym

    import rods_env
    from rods_agent.rollouts.batch import EpisodeSpec, RolloutConfig, run_rollouts

    assert rods_env.ENV_IDS
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "scripts.json").write_text("{}")  # every conversation: a text answer
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, str(root / "tests/agent/scripted_chat_server.py"),
         str(tmp_path / "scripts.json"), str(port_file)]
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}/v1"
        config = RolloutConfig(max_turns=1)
        for call_end in ("</tool_call>", None):
            engine = OpenAIEngine(url, "scripted", call_end=call_end)
            [record] = run_rollouts(
                engine,
                lambda: gym.make("rods/Retail-v0", disable_env_checker=True),
                [EpisodeSpec(retail_tasks[0])],
                config,
            )
            engine.close()
            assert record.termination != "error", record.errors
        log = Path(str(port_file) + ".requests.jsonl").read_text().splitlines()
        stops = [json.loads(line).get("stop") for line in log]
        assert stops == [["</tool_call>"], None]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
