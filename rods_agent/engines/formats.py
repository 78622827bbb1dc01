"""Tool-call formats: how a completion becomes the action given to ``env.step``.

The environment itself reads ``<tool_call>{json}</tool_call>`` blocks (Hermes / Qwen style),
bare JSON calls and OpenAI-style assistant messages with a ``tool_calls`` field. A format
here turns an engine's :class:`~rods_agent.engines.base.Completion` into one of those:

* ``auto`` (default): the structured ``tool_calls`` of the completion when the engine
  returned some (an OpenAI-compatible server with a tool parser), else the raw text, whose
  ``<tool_call>`` blocks the environment parses;
* ``hermes``: always the raw text;
* ``openai``: always an assistant message dict (content plus any ``tool_calls``);
* ``mistral``: ``[TOOL_CALLS] [{"name": ..., "arguments": ...}]`` text turned into a message.

Other model families plug in with :func:`register_tool_format`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rods_agent.engines.base import Completion
from rods_env.errors import ConfigError

ToolCallFormat = Callable[[Completion], "str | dict[str, Any]"]
"""A function from a completion to an action for ``env.step``."""


def auto_format(completion: Completion) -> str | dict[str, Any]:
    """Structured tool calls when present, else the raw text."""
    return completion.message() if completion.tool_calls else completion.text


def hermes_format(completion: Completion) -> str | dict[str, Any]:
    """The raw text: the environment parses its ``<tool_call>`` blocks."""
    return completion.text


def openai_format(completion: Completion) -> str | dict[str, Any]:
    """An OpenAI assistant message (the environment parses content without tool calls)."""
    return completion.message()


def mistral_format(completion: Completion) -> str | dict[str, Any]:
    """``[TOOL_CALLS]`` followed by a JSON list of calls; anything else stays text.

    A list that is not valid JSON is passed on as text, so the environment answers with a
    parse error that the model can read.
    """
    text = completion.text
    head, marker, tail = text.partition("[TOOL_CALLS]")
    if not marker:
        return auto_format(completion)
    try:
        calls = json.loads(tail.strip())
    except json.JSONDecodeError:
        return text
    if isinstance(calls, dict):
        calls = [calls]
    if not isinstance(calls, list):
        return text
    tool_calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {
                "name": c.get("name", "") if isinstance(c, dict) else "",
                "arguments": json.dumps(c.get("arguments", {}) if isinstance(c, dict) else {}),
            },
        }
        for i, c in enumerate(calls)
    ]
    return {"role": "assistant", "content": head.strip(), "tool_calls": tool_calls}


_FORMATS: dict[str, ToolCallFormat] = {
    "auto": auto_format,
    "hermes": hermes_format,
    "openai": openai_format,
    "mistral": mistral_format,
}


def register_tool_format(name: str, fn: ToolCallFormat) -> None:
    """Make ``fn`` available as tool-call format ``name``."""
    _FORMATS[name] = fn


def tool_formats() -> list[str]:
    """Names of the registered formats."""
    return sorted(_FORMATS)


def get_tool_format(name: str) -> ToolCallFormat:
    """The format called ``name``.

    Raises:
        ConfigError: naming the formats that exist.
    """
    try:
        return _FORMATS[name]
    except KeyError:
        raise ConfigError(
            f"unknown tool-call format '{name}'; formats: {', '.join(tool_formats())}"
        ) from None
