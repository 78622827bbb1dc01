"""Model engines: one protocol, local (transformers, vLLM) and remote (OpenAI-compatible)."""

from rods_agent.engines.base import (
    Completion,
    Engine,
    EngineError,
    GenerationRequest,
    SamplingParams,
)
from rods_agent.engines.chat import CHATML_TOOLS_TEMPLATE, ChatTemplate

__all__ = [
    "CHATML_TOOLS_TEMPLATE",
    "ChatTemplate",
    "Completion",
    "Engine",
    "EngineError",
    "GenerationRequest",
    "SamplingParams",
]
