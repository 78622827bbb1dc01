"""A scripted policy wearing the engine interface (tests, baselines, benchmarks).

Any agent with ``act(observation, info) -> str`` (such as :class:`rods_env.OracleAgent`)
drives the conversation; with a :class:`ChatTemplate` its text is tokenized like a model's
completion (stop token included, log-probabilities 0), so the rollout's token accounting runs
exactly as with a model.

With ``native=True`` (the default with a template) the agent's message is first rewritten in
the model family's own format: the agent's text is read as the environment reads it (text,
``<tool_call>`` blocks or JSON calls) and the template writes that assistant message as the
model would sample it (:meth:`ChatTemplate.write`): Qwen's ``<tool_call>`` blocks, Llama 3.1's
JSON, gpt-oss's harmony channels, a thinking Qwen3's ``<think>`` block. So an oracle's
transcripts teach a model its own format, and tests drive each template with tool calls the
way its model makes them. The agent's ``<think>`` reasoning is written as the family writes
reasoning (a Qwen3 ``<think>`` block, gpt-oss's ``analysis`` channel; families that do not
think drop it). Text that does not parse is written as the message's content.
``SamplingParams.stop`` is not applied: a script writes whole messages (the oracle's state
assumes that each of its messages runs as written).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from rods_agent.engines.base import (
    Completion,
    GenerationRequest,
    SamplingParams,
    request_max_tokens,
)
from rods_agent.engines.chat import ChatTemplate
from rods_env.parsing import parse_action, split_reasoning


class ScriptedAgent(Protocol):
    """An agent that answers each observation with the text of its next message."""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next message (text, tool calls in ``<tool_call>`` blocks)."""
        ...


class ScriptedEngine:
    """Completions from one scripted agent per conversation.

    Args:
        make_agent: Builds the agent of a new conversation from the environment's ``info``
            (it holds ``task_id``, and ``episode``: the request's key); the agent is kept
            per request ``key``.
        chat: Tokenize completions with this template (None: text only).
        native: Rewrite each message in the template's own format (see the module doc).
    """

    def __init__(
        self,
        make_agent: Callable[[Mapping[str, Any]], ScriptedAgent],
        chat: ChatTemplate | None = None,
        *,
        native: bool = True,
    ) -> None:
        self.make_agent = make_agent
        self.chat = chat
        self.native = native
        self._agents: dict[str, ScriptedAgent] = {}
        self._eot = min(chat.end_of_turn_ids) if chat is not None else None
        if chat is not None and chat.tokenizer.eos_token_id in chat.end_of_turn_ids:
            self._eot = int(chat.tokenizer.eos_token_id)

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        """The agents' next messages (see :class:`~rods_agent.engines.base.Engine`)."""
        out = []
        for req in requests:
            info = dict(req.info or {})
            key = req.key or str(info.get("task_id"))
            agent = self._agents.get(key)
            if agent is None:
                agent = self._agents[key] = self.make_agent({**info, "episode": key})
            observation = str((req.messages[-1] if req.messages else {}).get("content") or "")
            try:
                text = agent.act(observation, info)
            except Exception as exc:  # a broken script is recorded like a model error
                out.append(Completion.failed(f"scripted agent failed: {type(exc).__name__}: {exc}"))
                continue
            out.append(self._complete(text, request_max_tokens(req, params)))
        return out

    def _native(self, text: str) -> str:
        """The agent's message as the template's model writes it, stop token included."""
        assert self.chat is not None
        reasoning, visible, _ = split_reasoning(text)
        parsed = parse_action(visible)
        if parsed.error is not None or any(c.error is not None for c in parsed.calls):
            return self.chat.write({"role": "assistant", "content": text})  # as written
        message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        if reasoning:  # Qwen3 templates read reasoning_content, gpt-oss's thinking
            message["reasoning_content"] = message["thinking"] = reasoning
        if parsed.calls:
            message["tool_calls"] = [
                {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in parsed.calls
            ]
        return self.chat.write(message)

    def _complete(self, text: str, cap: int) -> Completion:
        if self.chat is None or self._eot is None:
            return Completion(text=text)
        ids = self.chat.encode(self._native(text) if self.native else text)
        if not ids or ids[-1] not in self.chat.end_of_turn_ids:
            ids.append(self._eot)
        text = self.chat.completion_text(ids)
        finish = "stop"
        if len(ids) > cap:
            ids, finish = ids[:cap], "length"
            text = self.chat.completion_text(ids)
        return Completion(text=text, token_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish)

    def end_episode(self, key: str) -> None:
        """Forget the agent of a finished conversation."""
        self._agents.pop(key, None)

    def close(self) -> None:
        """Forget every agent."""
        self._agents.clear()
