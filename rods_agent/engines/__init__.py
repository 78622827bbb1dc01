"""Model engines: one protocol, local (transformers, vLLM) and remote (OpenAI-compatible).

Every engine takes a batch of :class:`GenerationRequest` (OpenAI-format messages, tool
schemas, optionally the exact prompt token ids) and returns one :class:`Completion` per
request (text, sampled token ids, per-token log-probabilities). A failed generation is a
completion with ``finish_reason == "error"``, never an exception.
"""

from __future__ import annotations

from typing import Any

from rods_agent.engines.base import (
    Completion,
    Engine,
    EngineError,
    GenerationRequest,
    SamplingParams,
)
from rods_agent.engines.chat import CHATML_TOOLS_TEMPLATE, ChatTemplate
from rods_agent.engines.formats import get_tool_format, register_tool_format, tool_formats

ENGINES: tuple[str, ...] = ("openai", "transformers", "vllm")


def make_engine(kind: str, model: str, **options: Any) -> Engine:
    """Build an engine by name.

    Args:
        kind: ``"openai"``, ``"transformers"`` or ``"vllm"``.
        model: Model name on the server (openai) or model folder (local engines).
        **options: Keyword arguments of the engine's constructor.

    Raises:
        EngineError: for an unknown kind, naming the ones that exist.
    """
    if kind == "openai":
        from rods_agent.engines.openai_http import OpenAIEngine

        return OpenAIEngine(model=model, **options)
    if kind == "transformers":
        from rods_agent.engines.hf import TransformersEngine

        return TransformersEngine(model, **options)
    if kind == "vllm":
        from rods_agent.engines.vllm_engine import VLLMEngine

        return VLLMEngine(model, **options)
    raise EngineError(f"unknown engine '{kind}'; engines: {', '.join(ENGINES)}")


__all__ = [
    "CHATML_TOOLS_TEMPLATE",
    "ENGINES",
    "ChatTemplate",
    "Completion",
    "Engine",
    "EngineError",
    "GenerationRequest",
    "SamplingParams",
    "get_tool_format",
    "make_engine",
    "register_tool_format",
    "tool_formats",
]
