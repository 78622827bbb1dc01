"""The engine protocol: a batch of conversations in, one completion per conversation out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from rods_env.errors import ConfigError, RodsError


class EngineError(RodsError):
    """An engine could not be built or configured (a failed generation is data, not this)."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion.

    Attributes:
        max_tokens: Most new tokens per completion.
        temperature: Softmax temperature; 0 means greedy decoding.
        top_p: Nucleus sampling mass (1.0 disables it).
        seed: Makes a local engine's sampling reproducible when the requests carry no seed
            of their own: each request draws from a stream derived from this seed, the
            engine's call count and the request's place in the batch. Remote engines do not
            send it (a fixed per-request seed would make repeated trials identical).
        stop: Stop strings: a completion ends with the token that completes the first
            occurrence of any of them, the string kept in its text and that token in its
            ids (finish reason ``stop``). The rollout sets the chat family's end of a tool
            call here (:attr:`rods_agent.engines.chat.ChatTemplate.call_end`), so a turn
            ends where the call ends. Scripted engines ignore it (they write whole messages).
    """

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise ConfigError(f"stop must be a tuple of non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", tuple(self.stop))

    def with_max_tokens(self, max_tokens: int) -> SamplingParams:
        """A copy with another ``max_tokens``."""
        return replace(self, max_tokens=max_tokens)

    def with_stop(self, *stop: str) -> SamplingParams:
        """A copy that also stops at ``stop`` (strings already there are not repeated)."""
        return replace(self, stop=tuple(dict.fromkeys((*self.stop, *stop))))


@dataclass
class GenerationRequest:
    """One conversation to continue.

    Attributes:
        messages: OpenAI-format history (system, user, assistant, tool messages).
        tools: OpenAI function schemas offered to the model (None: no tools).
        prompt_token_ids: The exact prompt as token ids. Local engines continue from these
            ids when given (the rollout keeps them, so the model sees exactly the sequence
            that training later scores); otherwise they render ``messages`` themselves.
        max_tokens: Per-request cap on new tokens (None: the sampling parameters' cap).
        key: Stable id of the conversation (e.g. the episode), for stateful policies.
        info: The environment's latest ``info`` dict; scripted policies read it, model
            engines ignore it.
        seed: Seed of this request's own random stream (local engines): the same prompt
            and seed give the same completion whatever else is in the batch. The rollout
            derives it from the episode's sampling seed and the step.
    """

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None = None
    prompt_token_ids: Sequence[int] | None = None
    max_tokens: int | None = None
    key: str | None = None
    info: Mapping[str, Any] | None = None
    seed: int | None = None


@dataclass
class Completion:
    """One completion.

    Attributes:
        text: The completion text, without the end-of-turn token.
        token_ids: The sampled token ids, exactly as sampled (the end-of-turn token
            included when the model emitted it). Empty where the engine does not know them.
        logprobs: Log-probability of each sampled token under the distribution it was drawn
            from (temperature, then top-p; 0.0 under greedy decoding), aligned with
            ``token_ids`` (see :mod:`rods_agent.engines.sampling`). Engines that cannot
            report them leave the list empty; they are never padded.
        finish_reason: ``"stop"`` (end of turn), ``"length"`` (token cap) or ``"error"``.
        tool_calls: Structured OpenAI ``tool_calls`` when the engine returns them.
        prompt_tokens: Length of the prompt in tokens, where known.
        completion_tokens: Length of the completion in tokens as the server counted it
            (``len(token_ids)`` is used when that is not given).
        error: What went wrong (``finish_reason == "error"``); never contains secrets.
    """

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"
    tool_calls: list[dict[str, Any]] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None

    @property
    def n_tokens(self) -> int:
        """Number of completion tokens (0 where unknown)."""
        if self.token_ids:
            return len(self.token_ids)
        return int(self.completion_tokens or 0)

    @classmethod
    def failed(cls, error: str) -> Completion:
        """A completion that records an engine error."""
        return cls(finish_reason="error", error=error)

    def message(self) -> dict[str, Any]:
        """The completion as an OpenAI-style assistant message."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg


@runtime_checkable
class Engine(Protocol):
    """Generates completions for a batch of conversations.

    Attributes:
        chat: The chat template and tokenizer of a local model (None for remote engines);
            the rollout uses it to keep the whole conversation as one token sequence.
    """

    chat: Any

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        """One completion per request, in order. Never raises on a failed generation:
        such a completion has ``finish_reason == "error"`` and an ``error`` message."""
        ...

    def close(self) -> None:
        """Release what the engine holds (connections, model memory)."""
        ...


def request_max_tokens(request: GenerationRequest, params: SamplingParams) -> int:
    """The token cap of one request: the smaller of its own and the sampling parameters'."""
    if request.max_tokens is None:
        return params.max_tokens
    return max(1, min(params.max_tokens, int(request.max_tokens)))


def stop_end(text: str, stop: Sequence[str]) -> int | None:
    """Where ``text`` should end for ``stop``: the end of the earliest-ending occurrence of
    any stop string, None when there is none."""
    ends = [at + len(s) for s in stop if (at := text.find(s)) >= 0]
    return min(ends) if ends else None


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts (run seed, step, task id, trial, ...), the same in every
    process and on every platform (unlike ``hash``)."""
    import hashlib

    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") >> 1
