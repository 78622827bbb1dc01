"""Parsing the agent's action into a message and tool calls.

Accepted forms: text with ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks
(Hermes / Qwen style), bare JSON (one call object or a list of them, optionally in a Markdown
code fence), plain text (a message to the user), or an OpenAI-style assistant message dict
with a ``tool_calls`` field. Nothing here raises on the agent's mistakes: problems are
reported in :attr:`ParsedAction.error` or per call in :attr:`ParsedCall.error`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@dataclass(frozen=True)
class ParsedCall:
    """One tool call as the agent wrote it.

    Attributes:
        name: Tool name ("" when it could not be read).
        arguments: Arguments object, or None when they could not be read.
        error: Why the call could not be read (None when it could).
    """

    name: str
    arguments: dict[str, Any] | None
    error: str | None = None


@dataclass(frozen=True)
class ParsedAction:
    """An action split into the text for the user and the tool calls.

    Attributes:
        content: Text outside tool-call blocks.
        calls: Tool calls in order.
        error: Why the whole action is unusable (None when usable).
    """

    content: str
    calls: tuple[ParsedCall, ...] = ()
    error: str | None = None


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _call_from_obj(obj: Any) -> ParsedCall:
    if type(obj) is dict:  # the common case, decoded JSON: skip the slower ABC checks below
        name, args = obj.get("name"), obj.get("arguments")
        if type(name) is str and name and type(args) is dict and "function" not in obj:
            return ParsedCall(name, args)
    if not isinstance(obj, Mapping):
        return ParsedCall("", None, f"a tool call must be a JSON object, got {type(obj).__name__}")
    if "function" in obj and isinstance(obj["function"], Mapping):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ParsedCall("", None, 'a tool call needs a "name" string')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return ParsedCall(name, None, f'"arguments" of {name} is not valid JSON ({exc.msg})')
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        return ParsedCall(name, None, f'"arguments" of {name} must be a JSON object')
    return ParsedCall(name, dict(args))


def _parse_json_calls(text: str) -> tuple[ParsedCall, ...] | None:
    """Calls if ``text`` is bare JSON of one call or a list of calls; None if it is not JSON."""
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(obj, list) and obj:
        return tuple(_call_from_obj(o) for o in obj)
    if isinstance(obj, Mapping) and ("name" in obj or "function" in obj):
        return (_call_from_obj(obj),)
    return None


def parse_text(text: str) -> ParsedAction:
    """Parse a raw completion."""
    blocks = list(_BLOCK.finditer(text)) if "<tool_call>" in text else []
    if blocks:
        calls = []
        pieces = []
        end = 0
        for m in blocks:
            pieces.append(text[end : m.start()])
            end = m.end()
            body = m.group(1).strip()
            try:
                calls.append(_call_from_obj(json.loads(body)))
            except json.JSONDecodeError as exc:
                calls.append(
                    ParsedCall("", None, f"tool call is not valid JSON ({exc.msg}): {_short(body)}")
                )
        pieces.append(text[end:])
        content = "".join(pieces)
        if "<tool_call>" in content:
            calls.append(
                ParsedCall("", None, "a <tool_call> block is not closed with </tool_call>")
            )
            content = content.split("<tool_call>")[0]
        return ParsedAction(content.strip(), tuple(calls))
    stripped = text.strip()
    if not stripped:
        return ParsedAction("", error="empty action: write a message to the user or a tool call")
    if "<tool_call>" in stripped:
        head, _, body = stripped.partition("<tool_call>")
        return ParsedAction(
            head.strip(),
            (
                ParsedCall(
                    "", None, f"a <tool_call> block is not closed with </tool_call>: {_short(body)}"
                ),
            ),
        )
    if stripped[0] in "[{" or stripped.startswith("```"):
        json_calls = _parse_json_calls(stripped)
        if json_calls is not None:
            return ParsedAction("", json_calls)
        if stripped[0] == "{" or '"name"' in stripped:
            return ParsedAction(
                "",
                error=(
                    f"could not parse the tool call JSON: {_short(stripped)}. Write calls as "
                    '<tool_call>{"name": "...", "arguments": {...}}</tool_call>'
                ),
            )
    return ParsedAction(stripped)


def parse_message(message: Mapping[str, Any]) -> ParsedAction:
    """Parse an OpenAI-style assistant message dict (``content`` and ``tool_calls``)."""
    content = message.get("content") or ""
    if not isinstance(content, str):
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        else:
            return ParsedAction("", error="message 'content' must be a string")
    raw_calls = message.get("tool_calls")
    if raw_calls is None and "name" in message:
        return ParsedAction("", (_call_from_obj(message),))
    if raw_calls:
        if not isinstance(raw_calls, list):
            return ParsedAction(content.strip(), error="'tool_calls' must be a list")
        return ParsedAction(content.strip(), tuple(_call_from_obj(c) for c in raw_calls))
    return parse_text(content)


def parse_action(action: Any) -> ParsedAction:
    """Parse an action given as text or as an assistant message dict."""
    if isinstance(action, str):
        return parse_text(action)
    if isinstance(action, Mapping):
        return parse_message(action)
    return ParsedAction(
        "", error=f"an action must be a string or a message dict, got {type(action).__name__}"
    )
