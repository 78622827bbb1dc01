"""The OpenAI-compatible engine: any served model (``vllm serve``, hosted APIs), through the
``openai`` SDK.

Requests run on the SDK's async client in a background event loop, at most
``concurrency`` at a time; the SDK retries 408, 409, 429, 5xx, timeouts and connection
errors with exponential backoff and jitter, honouring ``Retry-After``. Other answers are
returned at once as a failed completion. The API key is read from an environment variable,
sent only in the ``Authorization`` header, and never appears in a log line, an error
message, a repr or a result file.

Two modes:

* **chat** (default): ``/chat/completions`` with the conversation's messages and tools.
  Token ids and log-probabilities are kept when the server returns them (``logprobs=True``;
  ``token_ids=True`` asks vLLM for ``return_token_ids``).
* **tokens** (``tokenizer=`` the model's folder): the engine renders conversations with the
  model's chat template, so the rollout keeps the whole episode as one token sequence, and
  sends token ids to ``/completions`` (vLLM accepts a prompt of token ids and returns the
  sampled ids with their log-probabilities). A served model then produces training rollouts
  with exact token accounting, as the in-process engines do.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rods_agent.engines.base import (
    Completion,
    EngineError,
    GenerationRequest,
    SamplingParams,
    request_max_tokens,
)
from rods_agent.engines.chat import ChatTemplate

if TYPE_CHECKING:
    import httpx2
    import openai

log = logging.getLogger(__name__)

T = TypeVar("T")


class OpenAIEngine:
    """Completions from an OpenAI-compatible server.

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: Model name as the server knows it.
        api_key_env: Name of the environment variable that holds the API key (the key
            itself is never passed around); a missing or empty variable means no key is sent.
        concurrency: Most requests in flight at once.
        timeout: Seconds for one HTTP request.
        max_retries: Retries after the first attempt (the SDK's policy, see above).
        logprobs: Ask the server for per-token log-probabilities.
        token_ids: Ask for the sampled token ids (vLLM's ``return_token_ids``; a hosted API
            would reject the field).
        extra_body: Extra JSON fields for every request (e.g. ``{"top_k": 20}``).
        tokenizer: The model's folder (tokenizer and chat template): switches to token mode.
        thinking: Token mode: the chat template's ``enable_thinking`` switch (None: its
            default).
        transport: An ``httpx2`` transport for the SDK's HTTP client (tests use
            ``httpx2.MockTransport``).
        call_end: Chat mode: the text that ends a tool call in the served model's output,
            where the rollout stops generation (e.g. ``"</tool_call>"`` for a Hermes-style
            model served without a tool parser). None (the default) sends no stop string:
            a hosted API's native calls have no text marker, and some reasoning models
            refuse ``stop``. Token mode reads it from the chat template.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 16,
        timeout: float = 120.0,
        max_retries: int = 5,
        logprobs: bool = False,
        token_ids: bool = False,
        extra_body: Mapping[str, object] | None = None,
        tokenizer: str | Path | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        thinking: bool | None = None,
        call_end: str | None = None,
    ) -> None:
        try:
            import httpx2
            import openai
        except ImportError:
            raise EngineError(
                "the OpenAI engine needs the openai package: pip install -c constraints/cpu.txt "
                "-e '.[openai]'"
            ) from None
        if concurrency < 1:
            raise EngineError(f"concurrency must be at least 1, got {concurrency}")
        if max_retries < 0:
            raise EngineError(f"retries must be at least 0, got {max_retries}")
        if timeout <= 0:
            raise EngineError(f"timeout must be positive, got {timeout}")
        self._openai = openai
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.concurrency = int(concurrency)
        self.logprobs = bool(logprobs)
        self.token_ids = bool(token_ids)
        self.extra_body = dict(extra_body or {})
        self.chat: ChatTemplate | None = None
        if tokenizer is not None:
            self.chat = _load_chat_template(tokenizer, thinking)
        self._call_end = call_end
        key = os.environ.get(api_key_env) or ""
        self._secret = key or None
        # Without a key the Authorization header is left out of each request (the SDK
        # insists on some key, so it gets a placeholder that is never sent).
        self._headers: dict[str, str | openai.Omit] = (
            {} if key else {"Authorization": openai.Omit()}
        )
        self.stats = {"requests": 0, "retries": 0, "failures": 0}
        self._stats_lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="rods-openai", daemon=True
        )
        self._thread.start()
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=key or "unused",
            max_retries=int(max_retries),
            timeout=float(timeout),
            http_client=openai.DefaultAsyncHttpxClient(
                transport=transport,
                limits=httpx2.Limits(max_connections=self.concurrency),
                timeout=float(timeout),
                event_hooks={"request": [self._count_attempt]},
            ),
        )
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    def __repr__(self) -> str:
        mode = "tokens" if self.chat is not None else "chat"
        return (
            f"OpenAIEngine({self.base_url!r}, model={self.model!r}, {mode} mode, "
            f"key from ${self.api_key_env})"
        )

    # -- public ----------------------------------------------------------------------------
    @property
    def call_end(self) -> str | None:
        """The text that ends a tool call (token mode: the chat template's; chat mode: the
        constructor's ``call_end``)."""
        return self.chat.call_end if self.chat is not None else self._call_end

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        """One completion per request, ``concurrency`` at a time (see the module docstring)."""
        if self._closed:
            return [Completion.failed("the engine is closed")] * len(requests)
        return self._call(self._batch(requests, params))

    def close(self) -> None:
        """Close the HTTP client and stop the event loop."""
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self._client.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    # -- internals -------------------------------------------------------------------------
    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _count_attempt(self, request: httpx2.Request) -> None:
        retry = request.headers.get("x-stainless-retry-count", "0") != "0"
        with self._stats_lock:
            self.stats["requests"] += 1
            self.stats["retries"] += int(retry)

    async def _batch(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        slots = self._slots
        return list(await asyncio.gather(*(self._one(r, params, slots) for r in requests)))

    async def _one(
        self, req: GenerationRequest, params: SamplingParams, slots: asyncio.Semaphore
    ) -> Completion:
        openai = self._openai
        try:
            async with slots:
                if self.chat is not None:
                    completion = await self._tokens(req, params)
                else:
                    completion = await self._chat(req, params)
        except openai.APITimeoutError:
            completion = Completion.failed("request timed out")
        except openai.APIConnectionError as exc:
            cause = exc.__cause__
            completion = Completion.failed(
                f"connection failed ({type(cause).__name__ if cause else 'no answer'})"
            )
        except openai.APIStatusError as exc:
            completion = Completion.failed(f"HTTP {exc.status_code}: {_error_text(exc)}")
        except openai.OpenAIError as exc:
            completion = Completion.failed(f"{type(exc).__name__}: {exc}")
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            completion = Completion.failed(f"the server's answer is not usable: {exc}")
        if completion.error is not None:
            with self._stats_lock:
                self.stats["failures"] += 1
            error = completion.error
            if self._secret:
                error = error.replace(self._secret, "[redacted]")
            completion.error = f"{self.base_url}: {error}"
        return completion

    async def _chat(self, req: GenerationRequest, params: SamplingParams) -> Completion:
        body = dict(self.extra_body)
        if self.token_ids:
            body["return_token_ids"] = True
        kwargs: dict[str, Any] = {}
        if req.tools:
            kwargs["tools"] = [dict(t) for t in req.tools]
        if self.logprobs:
            kwargs["logprobs"] = True
        if params.stop:
            kwargs["stop"] = list(params.stop)
        resp = await self._client.chat.completions.create(
            model=self.model,
            messages=[dict(m) for m in req.messages],  # type: ignore[misc]
            max_tokens=request_max_tokens(req, params),
            temperature=params.temperature,
            top_p=params.top_p,
            extra_body=body or None,
            extra_headers=self._headers or None,
            **kwargs,
        )
        if not resp.choices:
            return Completion.failed("the server's answer has no choices")
        choice = resp.choices[0]
        message = choice.message
        logprobs = (
            [float(e.logprob) for e in (choice.logprobs.content or ())] if choice.logprobs else []
        )
        extra = choice.model_extra or {}
        tool_calls = [tc.model_dump(exclude_none=True) for tc in message.tool_calls or ()]
        usage = resp.usage
        text = message.content or ""
        if params.stop and choice.finish_reason == "stop" and not tool_calls:
            stopped = extra.get("stop_reason", extra.get("matched_stop"))
            text = restore_stop(text, params.stop, stopped if isinstance(stopped, str) else None)
        return Completion(
            text=text,
            token_ids=[int(t) for t in extra.get("token_ids") or ()],
            logprobs=logprobs,
            finish_reason="length" if choice.finish_reason == "length" else "stop",
            tool_calls=tool_calls or None,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
        )

    async def _tokens(self, req: GenerationRequest, params: SamplingParams) -> Completion:
        chat = self.chat
        assert chat is not None
        ids = (
            list(req.prompt_token_ids)
            if req.prompt_token_ids is not None
            else chat.prompt_ids(req.messages, req.tools)
        )
        body: dict[str, object] = {
            "return_token_ids": True,
            **(
                {"stop": list(params.stop), "include_stop_str_in_output": True}
                if params.stop
                else {}
            ),
            "stop_token_ids": sorted(chat.end_of_turn_ids),
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
            **self.extra_body,
        }
        resp = await self._client.completions.create(
            model=self.model,
            prompt=ids,
            max_tokens=request_max_tokens(req, params),
            temperature=params.temperature,
            top_p=params.top_p,
            logprobs=0,
            extra_body=body,
            extra_headers=self._headers or None,
        )
        if not resp.choices:
            return Completion.failed("the server's answer has no choices")
        choice = resp.choices[0]
        sampled = (choice.model_extra or {}).get("token_ids")
        if sampled is None:
            return Completion.failed(
                "the server returned no token ids; token mode needs vLLM (return_token_ids)"
            )
        toks = [int(t) for t in sampled]
        lps = choice.logprobs.token_logprobs if choice.logprobs else None
        logprobs = [float(x) if x is not None else 0.0 for x in lps or ()]
        return Completion(
            text=chat.completion_text(toks),
            token_ids=toks,
            logprobs=logprobs[: len(toks)],
            finish_reason="length" if choice.finish_reason == "length" else "stop",
            prompt_tokens=len(ids),
            completion_tokens=len(toks),
        )


def restore_stop(text: str, stop: Sequence[str], stopped: str | None = None) -> str:
    """``text`` with the stop string that ended it put back (the OpenAI API's ``stop``
    drops it; the sampled tokens held it, and the environment reads ``</tool_call>``).

    Args:
        text: The returned text.
        stop: The stop strings sent.
        stopped: The stop string the server says it matched (vLLM's ``stop_reason``,
            SGLang's ``matched_stop``), None when it does not say.

    Without ``stopped``, a closing tag ``</x>`` is put back when the text opens more
    ``<x>`` than it closes (an answer that ended by itself has none open).
    """
    if stopped is not None:
        return text if stopped not in stop or text.endswith(stopped) else text + stopped
    for s in stop:
        if s.startswith("</") and s.endswith(">"):
            opening = "<" + s[2:]
            if text.count(opening) > text.count(s):
                return text + s
    return text


def _load_chat_template(path: str | Path, thinking: bool | None = None) -> ChatTemplate:
    """The chat template and end-of-turn ids of a local model folder."""
    from transformers import AutoTokenizer, GenerationConfig

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EngineError(f"cannot load the tokenizer of '{path}': {first}") from None
    try:
        eos = GenerationConfig.from_pretrained(str(path)).eos_token_id
    except OSError:
        eos = None
    stop = [eos] if isinstance(eos, int) else list(eos or [])
    return ChatTemplate(tokenizer, stop_ids=stop, thinking=thinking)


def _error_text(exc: openai.APIStatusError, limit: int = 300) -> str:
    """The server's error message, shortened."""
    body = exc.body
    if isinstance(body, Mapping):
        text = body.get("message")
        if not isinstance(text, str):
            text = json.dumps(body, default=str)
    elif isinstance(body, str):
        text = body
    else:
        text = exc.message
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
