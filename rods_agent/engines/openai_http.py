"""The OpenAI-compatible HTTP engine: any served model (``vllm serve``, hosted APIs).

Requests run on a bounded pool of threads sharing one ``httpx.Client``. A request is retried
with exponential backoff (honouring ``Retry-After``) on 429, 5xx, timeouts and connection
errors; other 4xx answers are returned at once as a failed completion. The API key is read
from an environment variable, sent only in the ``Authorization`` header, and never appears in
a log line, an error message, a repr or a result file.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rods_agent.engines.base import (
    Completion,
    EngineError,
    GenerationRequest,
    SamplingParams,
    request_max_tokens,
)

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class OpenAIEngine:
    """Chat completions over HTTP.

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: Model name as the server knows it.
        api_key_env: Name of the environment variable that holds the API key (the key
            itself is never passed around); a missing variable means no key is sent.
        concurrency: Most requests in flight at once.
        timeout: Seconds for one HTTP request.
        max_retries: Retries after the first attempt (429, 5xx, timeouts, network errors).
        backoff: First backoff in seconds; doubles each retry, with jitter.
        max_backoff: Cap of one backoff.
        logprobs: Ask the server for per-token log-probabilities.
        extra_body: Extra JSON fields for every request (e.g. vLLM's
            ``{"return_token_ids": true}``, or ``{"tool_choice": "auto"}``).
        transport: An ``httpx`` transport (tests use ``httpx.MockTransport``).
    """

    chat = None  # no local tokenizer: the rollout keeps messages, not token ids

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 16,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        logprobs: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        transport: Any | None = None,
    ) -> None:
        try:
            import httpx
        except ImportError:
            raise EngineError("the OpenAI engine needs httpx: pip install 'rods[openai]'") from None
        if concurrency < 1:
            raise EngineError(f"concurrency must be at least 1, got {concurrency}")
        self._httpx = httpx
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.concurrency = int(concurrency)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.logprobs = bool(logprobs)
        self.extra_body = dict(extra_body or {})
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(api_key_env)
        self._secret = key or None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            transport=transport,
            limits=httpx.Limits(max_connections=self.concurrency),
        )
        self._pool = ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="rods-http"
        )
        self._rng = random.Random()
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failures": 0}

    def __repr__(self) -> str:
        return (
            f"OpenAIEngine({self.base_url!r}, model={self.model!r}, key from ${self.api_key_env})"
        )

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        """One completion per request, ``concurrency`` at a time (see the module docstring)."""
        return list(self._pool.map(lambda r: self._one(r, params), requests))

    def _body(self, req: GenerationRequest, params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in req.messages],
            "max_tokens": request_max_tokens(req, params),
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if req.tools:
            body["tools"] = [dict(t) for t in req.tools]
        if self.logprobs:
            body["logprobs"] = True
        body.update(self.extra_body)
        return body

    def _sleep_for(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(self.max_backoff, max(0.0, float(retry_after)))
            except ValueError:
                pass
        with self._lock:
            jitter = self._rng.uniform(0.5, 1.0)
        return min(self.max_backoff, self.backoff * (2**attempt)) * jitter

    def _one(self, req: GenerationRequest, params: SamplingParams) -> Completion:
        httpx = self._httpx
        body = self._body(req, params)
        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            retry_after = None
            with self._lock:
                self.stats["requests"] += 1
            try:
                resp = self._client.post("/chat/completions", json=body)
            except httpx.TimeoutException:
                last = "request timed out"
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__})"
            else:
                if resp.status_code == 200:
                    return self._parse(resp)
                last = f"HTTP {resp.status_code}: {_error_text(resp)}"
                if resp.status_code not in RETRY_STATUS:
                    break
                retry_after = resp.headers.get("retry-after")
            if attempt < self.max_retries:
                with self._lock:
                    self.stats["retries"] += 1
                delay = self._sleep_for(attempt, retry_after)
                log.debug("retrying after %s in %.2fs (attempt %d)", last, delay, attempt + 1)
                time.sleep(delay)
        with self._lock:
            self.stats["failures"] += 1
        if self._secret:
            last = last.replace(self._secret, "[redacted]")
        return Completion.failed(f"{self.base_url}: {last}")

    def _parse(self, resp: Any) -> Completion:
        try:
            data = resp.json()
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            return Completion.failed("the server's answer is not a chat completion")
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        tool_calls = message.get("tool_calls") or None
        logprobs: list[float] = []
        for entry in ((choice.get("logprobs") or {}).get("content")) or ():
            if isinstance(entry, Mapping) and "logprob" in entry:
                logprobs.append(float(entry["logprob"]))
        token_ids = [int(t) for t in choice.get("token_ids") or ()]
        usage = data.get("usage") or {}
        finish = choice.get("finish_reason") or "stop"
        return Completion(
            text=content,
            token_ids=token_ids,
            logprobs=logprobs,
            finish_reason="length" if finish == "length" else "stop",
            tool_calls=[dict(tc) for tc in tool_calls] if tool_calls else None,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
        )

    def close(self) -> None:
        """Close the connection pool and the threads."""
        self._pool.shutdown(wait=True)
        self._client.close()


def _error_text(resp: Any, limit: int = 300) -> str:
    """The server's error message, shortened (servers do not echo the key back)."""
    try:
        data = resp.json()
        err = data.get("error", data) if isinstance(data, dict) else data
        text = err.get("message", json.dumps(err)) if isinstance(err, dict) else str(err)
    except ValueError:
        text = resp.text
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
