"""The harmony format of gpt-oss: a completion's channels, read into reasoning, reply and calls.

A gpt-oss completion continues the generation prompt ``<|start|>assistant`` with one or more
messages, each a header (``<|channel|>analysis``, ``<|channel|>final``, or a tool call:
``<|channel|>commentary to=functions.NAME <|constrain|>json``, the recipient also allowed
before the channel) then ``<|message|>`` and a body. Messages are separated by
``<|end|><|start|>assistant``; the turn ends with ``<|call|>`` (a tool call) or ``<|return|>``
(a final answer), which the engine's stop tokens cut off.

:func:`parse_harmony` reads such text without ever raising (a random model writes anything):
the ``analysis`` channel is the model's private reasoning, a message addressed to
``functions.NAME`` is a tool call, everything else (``final``, a ``commentary`` preamble
without recipient, text without a channel) is what the user sees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

START, END, MESSAGE, CHANNEL = "<|start|>", "<|end|>", "<|message|>", "<|channel|>"
CALL, RETURN, CONSTRAIN = "<|call|>", "<|return|>", "<|constrain|>"
CONTROL = (START, END, MESSAGE, CHANNEL, CALL, RETURN, CONSTRAIN)
"""The harmony control tokens (never part of a reply, a thought or an argument)."""


@dataclass(frozen=True)
class HarmonyTurn:
    """What one gpt-oss completion said, by channel.

    Attributes:
        analysis: The reasoning (``analysis`` channel), messages joined by newlines.
        content: What the user sees (``final`` channel and preambles), joined.
        calls: Tool calls as ``(function name, argument text)``, in order.
    """

    analysis: str = ""
    content: str = ""
    calls: tuple[tuple[str, str], ...] = ()

    def action(self) -> dict[str, Any]:
        """The turn as an OpenAI assistant message for ``env.step`` (reasoning left out)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.calls:
            message["tool_calls"] = [
                {"id": f"call_{k}", "type": "function", "function": {"name": n, "arguments": a}}
                for k, (n, a) in enumerate(self.calls)
            ]
        return message

    def message(self) -> dict[str, Any]:
        """The turn as the gpt-oss chat template takes an assistant message: reasoning in
        ``thinking``, the reply in ``content``, calls with their arguments decoded where they
        are JSON (the template re-encodes them)."""
        message: dict[str, Any] = {"role": "assistant"}
        if self.calls:
            thinking = self.analysis or self.content  # the template refuses both with a call
            if thinking:
                message["thinking"] = thinking
            message["tool_calls"] = [
                {"type": "function", "function": {"name": n, "arguments": _decoded(a)}}
                for n, a in self.calls
            ]
            return message
        message["content"] = self.content
        if self.analysis:
            message["thinking"] = self.analysis
        return message


def _decoded(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


def _clean(text: str) -> str:
    for token in CONTROL:
        if token in text:
            text = text.replace(token, "")
    return text


def _field(header: str, key: str) -> str:
    """The word after ``key`` in a header (``to=functions.x`` -> ``functions.x``)."""
    at = header.find(key)
    if at < 0:
        return ""
    rest = header[at + len(key) :].lstrip()
    end = len(rest)
    for stop in (" ", "\n", "\t", "<|"):
        found = rest.find(stop)
        if 0 <= found < end:
            end = found
    return rest[:end]


def parse_harmony(text: str) -> HarmonyTurn:
    """Read a gpt-oss completion (the text after ``<|start|>assistant``, stop token cut).

    Never raises; control tokens in odd places are dropped from the pieces they land in.
    """
    analysis: list[str] = []
    content: list[str] = []
    calls: list[tuple[str, str]] = []
    for piece in text.split(START):
        header, sep, body = piece.partition(MESSAGE)
        if not sep:  # no <|message|>: nothing but a header, or plain text without a channel
            if CHANNEL in header or not header.strip():
                continue
            header, body = "", header
        for stop in (END, CALL, RETURN):
            body = body.split(stop, 1)[0]
        body = _clean(body)
        recipient = _field(header, "to=")
        channel = _field(header, CHANNEL)
        if recipient.startswith("functions.") and len(recipient) > len("functions."):
            calls.append((recipient[len("functions.") :], body))
        elif channel == "analysis":
            analysis.append(body)
        else:
            content.append(body)
    return HarmonyTurn("\n".join(analysis), "\n".join(content), tuple(calls))
