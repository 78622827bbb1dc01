"""Parsing the agent's action into a message and tool calls.

Accepted forms: text with ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks
(Hermes / Qwen style), bare JSON (one call object or a list of them, optionally in a Markdown
code fence; Llama 3.1's ``"parameters"`` for ``"arguments"`` too), plain text (a message to the
user), or an OpenAI-style assistant message dict with a ``tool_calls`` field. Nothing here
raises on the agent's mistakes: problems are reported in :attr:`ParsedAction.error` or per call
in :attr:`ParsedCall.error`.

**Reasoning is private.** A thinking model writes its reasoning between ``<think>`` and
``</think>`` (Qwen3, DeepSeek-R1 and their kin). That text is left out before anything is
parsed: a tool call drafted in it is not run, and an answer said only there is not said to the
user (so it cannot earn reward). Text before a ``</think>`` that no ``<think>`` opened is
reasoning too (a template may open the block in the prompt), and so is everything after a
``<think>`` that is never closed: reasoning cut off by the token cap is neither run nor sent.
The environment does this itself, because it also takes raw completion text from callers that
never heard of the convention; :func:`split_reasoning` is the rule.

**Reading rules.** Which forms count as calls is a setting each environment declares
(:class:`ReadingRule`, an environment's ``reading_rule``): rods' own domains read
:data:`LENIENT_READING` (every form above); a benchmark brought in as it is reads as its
harness reads, e.g. τ²-bench's environments read :data:`TOOL_CALL_READING`, where only
``<tool_call>`` blocks and a message dict's ``tool_calls`` are calls and any other text,
JSON-looking or not, is text for the user.

Parsing is linear in the length of the action (no backtracking regular expression runs over
agent text), and everything that comes out is bounded plain JSON data: string keys, no
value nested deeper than :data:`MAX_DEPTH`, no integer longer than :data:`MAX_INT_DIGITS`
digits, no non-finite float, no lone surrogate (which no encoder can write), at most
:data:`MAX_CALLS` calls per action. A dict action is measured like text: its strings, and its numbers and
``true``/``false``/``null`` as JSON writes them, count towards the same character bound, so
a message dict carries no more than the text action it stands for.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

MAX_CALLS = 16
"""Most tool calls one action may make."""

MAX_DEPTH = 16
"""Deepest nesting of containers in tool arguments (the tools need 3)."""

MAX_NODES = 20_000
"""Most JSON values (containers and scalars) in one dict action or one call's arguments."""

MAX_INT_DIGITS = 18
"""Longest integer accepted in tool arguments, in digits."""

OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_INT_BOUND = 10**MAX_INT_DIGITS


class _BadValue(Exception):
    """A value that is not bounded plain JSON data; the message says what is wrong."""


def _reject_constant(name: str) -> Any:
    raise _BadValue(f"{name} is not a number JSON allows")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


@dataclass(frozen=True)
class ReadingRule:
    """How an environment splits an action into the text for the user and the tool calls.

    Every rule reads ``<tool_call>`` blocks in text and the ``tool_calls`` of a message
    dict as calls, and leaves ``<think>`` reasoning out first (:func:`split_reasoning`).

    Attributes:
        name: A short label (shown in docs and errors).
        bare_json: Also read JSON as calls: a completion that is one call object or a list
            of them (bare, or in a Markdown code fence), and a message dict that is itself
            a call (``{"name": ..., "arguments": ...}``); text that starts with ``{`` but is
            not valid JSON is then an error. Off: such text is text.
        text_before_calls: With ``<tool_call>`` blocks, the message's text is only what
            precedes the first block (what vLLM's hermes tool parser returns as
            ``content``); off: all text outside the blocks.
        unclosed_call: A last ``<tool_call>`` block without ``</tool_call>`` is read as a
            call like a closed one (a completion may stop before the closing tag; vLLM's
            hermes parser reads it); off: it is a call that cannot be read.
    """

    name: str
    bare_json: bool = True
    text_before_calls: bool = False
    unclosed_call: bool = False


LENIENT_READING = ReadingRule("lenient")
"""rods' own domains: ``<tool_call>`` blocks, bare or fenced JSON calls, message dicts."""

TOOL_CALL_READING = ReadingRule(
    "tool calls only", bare_json=False, text_before_calls=True, unclosed_call=True
)
"""What a harness that talks to an OpenAI-compatible endpoint sees (τ²-bench): the calls
are the ``<tool_call>`` blocks the server's tool parser extracts, or a message's
``tool_calls``; the text is what precedes the first block; everything else is text."""


class ParsedCall(NamedTuple):
    """One tool call as the agent wrote it (immutable; a named tuple: made per call, it
    must be cheap to make).

    Attributes:
        name: Tool name ("" when it could not be read).
        arguments: Arguments object, or None when they could not be read.
        error: Why the call could not be read (None when it could).
    """

    name: str
    arguments: dict[str, Any] | None
    error: str | None = None


class ParsedAction(NamedTuple):
    """An action split into the text for the user and the tool calls (immutable).

    Attributes:
        content: Text outside tool-call blocks.
        calls: Tool calls in order.
        error: Why the whole action is unusable (None when usable).
    """

    content: str
    calls: tuple[ParsedCall, ...] = ()
    error: str | None = None


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text[: 4 * n].split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _surrogate_at(text: str) -> int:
    """Index of the first lone surrogate in ``text``, or -1 (the common ASCII case is O(1)
    in Python code: ``isascii`` and ``encode`` run in C)."""
    if text.isascii():
        return -1
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return int(exc.start)
    return -1


def check_json(value: Any, *, budget: int | None = None) -> int:
    """Check that ``value`` is bounded plain JSON data (see the module docstring).

    The recursion is bounded by :data:`MAX_DEPTH` (checked before descending), so a deep
    structure cannot exhaust the interpreter's stack.

    Args:
        value: Decoded JSON or a Python structure from a dict action.
        budget: Most characters its strings, numbers and literals may hold in total,
            numbers and literals counted as JSON writes them (None: no bound).

    Returns:
        The number of characters of strings, numbers and literals in ``value``.

    Raises:
        _BadValue: naming the first problem.
    """
    counts = [0, 0]  # characters, values
    _walk(value, 0, counts, budget)
    return counts[0]


def _count(chars: int, counts: list[int], budget: int | None) -> None:
    counts[0] += chars
    if budget is not None and counts[0] > budget:
        raise _BadValue(f"more than {budget:,} characters of text")


def _text(item: str, counts: list[int], budget: int | None) -> None:
    counts[0] += len(item)
    if budget is not None and counts[0] > budget:
        raise _BadValue(f"more than {budget:,} characters of text")
    if not item.isascii():
        at = _surrogate_at(item)
        if at >= 0:
            raise _BadValue(f"a string holds an invalid character (lone surrogate) at {at}")


def _walk(item: Any, depth: int, counts: list[int], budget: int | None) -> None:
    counts[1] += 1
    if counts[1] > MAX_NODES:
        raise _BadValue(f"more than {MAX_NODES:,} values")
    kind = type(item)
    if kind is str:
        _text(item, counts, budget)
    elif kind is bool or item is None:
        # written out as true, false or null: a dict action counts what its text form holds
        _count(5 if item is False else 4, counts, budget)
    elif kind is int:
        if not -_INT_BOUND < item < _INT_BOUND:
            raise _BadValue(f"an integer has more than {MAX_INT_DIGITS} digits")
        _count(len(str(item)), counts, budget)
    elif kind is float:
        if not math.isfinite(item):
            raise _BadValue(f"{item} is not a finite number")
        _count(len(repr(item)), counts, budget)
    elif isinstance(item, dict):
        if depth >= MAX_DEPTH:
            raise _BadValue(f"values nested more than {MAX_DEPTH} deep")
        for key, sub in item.items():
            if type(key) is not str:
                raise _BadValue(f"an object key is a {type(key).__name__}, not a string")
            _text(key, counts, budget)
            if type(sub) is str:  # the common leaf, checked here (the same checks)
                counts[1] += 1
                if counts[1] > MAX_NODES:
                    raise _BadValue(f"more than {MAX_NODES:,} values")
                _text(sub, counts, budget)
            else:
                _walk(sub, depth + 1, counts, budget)
    elif isinstance(item, list | tuple):
        if depth >= MAX_DEPTH:
            raise _BadValue(f"values nested more than {MAX_DEPTH} deep")
        for sub in item:
            _walk(sub, depth + 1, counts, budget)
    else:
        raise _BadValue(f"a {type(item).__name__} value is not JSON")


def _loads(text: str) -> Any:
    """``json.loads`` that reports every failure as :class:`_BadValue`.

    Besides malformed JSON it catches what ``json`` raises on hostile input: integers over
    Python's 4,300-digit limit (``ValueError``), nesting deep enough to exhaust the stack
    (``RecursionError``) and ``NaN``/``Infinity``.
    """
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise _BadValue(f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise _BadValue("not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # int too long for Python's str->int conversion limit
        raise _BadValue(f"not valid JSON ({str(exc).split(';')[0]})") from None
    check_json(value)
    return value


def _call_from_obj(obj: Any) -> ParsedCall:
    if type(obj) is dict:  # the common case, decoded JSON: skip the slower checks below
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
            args = _loads(args) if args.strip() else {}
        except _BadValue as exc:
            return ParsedCall(name, None, f'"arguments" of {_short(name)} is {exc}')
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        return ParsedCall(name, None, f'"arguments" of {_short(name)} must be a JSON object')
    return ParsedCall(name, dict(args))


def _strip_fence(text: str) -> str:
    """The body of a Markdown code fence (```json ... ```), or ``text`` when not fenced."""
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        body = text[3:-3]
        if body.startswith("json"):
            body = body[4:]
        return body.strip()
    return text


def _parse_json_calls(text: str) -> tuple[ParsedCall, ...] | None:
    """Calls if ``text`` is bare JSON of one call or a list of calls; None if it is not JSON."""
    try:
        obj = _loads(_strip_fence(text))
    except _BadValue:
        return None
    if isinstance(obj, list) and obj:
        return tuple(_call_from_obj(o) for o in obj)
    if isinstance(obj, Mapping) and ("name" in obj or "function" in obj):
        return (_call_from_obj(obj),)
    return None


def _blocks(text: str) -> tuple[list[str], list[str], str | None]:
    """Split ``text`` into the pieces outside ``<tool_call>`` blocks and the block bodies.

    One pass with ``str.find``: linear in ``len(text)`` however the tags are arranged (a
    non-greedy regular expression over 18,000 unclosed tags took 24 s). A block runs from an
    opening tag to the next closing tag; text after an opening tag that is never closed is
    returned as the unclosed remainder. The scan stops after ``MAX_CALLS + 1`` blocks.
    """
    pieces: list[str] = []
    bodies: list[str] = []
    pos = 0
    while True:
        start = text.find(OPEN_TAG, pos)
        if start < 0:
            pieces.append(text[pos:])
            return pieces, bodies, None
        pieces.append(text[pos:start])
        end = text.find(CLOSE_TAG, start + len(OPEN_TAG))
        if end < 0:
            return pieces, bodies, text[start + len(OPEN_TAG) :]
        bodies.append(text[start + len(OPEN_TAG) : end])
        pos = end + len(CLOSE_TAG)
        if len(bodies) > MAX_CALLS:  # too many already: the action is refused whole
            return pieces, bodies, None


def _body_call(body: str) -> ParsedCall:
    try:
        return _call_from_obj(_loads(body.strip()))
    except _BadValue as exc:
        return ParsedCall("", None, f"tool call is {exc}: {_short(body)}")


def split_reasoning(text: str) -> tuple[str, str, bool]:
    """Split text into the reasoning and what is said (see the module docstring).

    Linear in ``len(text)`` (one ``str.find`` pass, however the tags are arranged).

    Returns:
        ``(reasoning, visible, cut)``: the reasoning blocks joined by newlines, the text
        outside them, and whether a ``<think>`` block was never closed.
    """
    if THINK_OPEN not in text and THINK_CLOSE not in text:
        return "", text, False
    reasoning: list[str] = []
    visible: list[str] = []
    pos = 0
    first_open = text.find(THINK_OPEN)
    first_close = text.find(THINK_CLOSE)
    if first_close >= 0 and (first_open < 0 or first_close < first_open):
        reasoning.append(text[:first_close])  # the block was opened in the prompt
        pos = first_close + len(THINK_CLOSE)
    while True:
        start = text.find(THINK_OPEN, pos)
        if start < 0:
            visible.append(text[pos:])
            return "\n".join(reasoning), "".join(visible), False
        visible.append(text[pos:start])
        end = text.find(THINK_CLOSE, start + len(THINK_OPEN))
        if end < 0:
            reasoning.append(text[start + len(THINK_OPEN) :])
            return "\n".join(reasoning), "".join(visible), True
        reasoning.append(text[start + len(THINK_OPEN) : end])
        pos = end + len(THINK_CLOSE)


def strip_reasoning(text: str) -> str:
    """``text`` without its reasoning (:func:`split_reasoning`)."""
    return split_reasoning(text)[1]


def parse_text(text: str, rule: ReadingRule = LENIENT_READING) -> ParsedAction:
    """Parse a raw completion (its ``<think>`` reasoning left out first) by ``rule``."""
    at = _surrogate_at(text)
    if at >= 0:
        return ParsedAction(
            "", error=f"the action holds an invalid character (lone surrogate) at position {at}"
        )
    _, text, cut = split_reasoning(text)
    if cut and not text.strip():
        return ParsedAction(
            "",
            error=(
                "the reasoning was cut off before a reply (a <think> block without </think>): "
                "nothing was run or sent; think more briefly, then answer"
            ),
        )
    if OPEN_TAG in text:
        pieces, bodies, unclosed = _blocks(text)
        if len(bodies) + (unclosed is not None) > MAX_CALLS:
            return ParsedAction("", error=_too_many(len(bodies) + (unclosed is not None)))
        calls = [_body_call(body) for body in bodies]
        if unclosed is not None and rule.unclosed_call:
            calls.append(_body_call(unclosed))
        elif unclosed is not None:
            calls.append(
                ParsedCall(
                    "",
                    None,
                    f"a <tool_call> block is not closed with </tool_call>: {_short(unclosed)}",
                )
            )
        said = pieces[0] if rule.text_before_calls else "".join(pieces)
        return ParsedAction(said.strip(), tuple(calls))
    stripped = text.strip()
    if not stripped:
        return ParsedAction("", error="empty action: write a message to the user or a tool call")
    if rule.bare_json and (stripped[0] in "[{" or stripped.startswith("```")):
        json_calls = _parse_json_calls(stripped)
        if json_calls is not None:
            if len(json_calls) > MAX_CALLS:
                return ParsedAction("", error=_too_many(len(json_calls)))
            return ParsedAction("", json_calls)
        if stripped[0] == "{" or '"name"' in stripped:
            return ParsedAction(
                "",
                error=(
                    f"could not parse the tool call JSON: {_short(stripped)}. Write each call "
                    'as one JSON object, {"name": "...", "arguments": {...}}, alone or in a '
                    "<tool_call> block, as the tool instructions show"
                ),
            )
    return ParsedAction(stripped)


def _too_many(n: int) -> str:
    return f"{n:,} tool calls in one action; at most {MAX_CALLS} (nothing was run)"


def _content_text(content: Any) -> str | None:
    """The text of a message's ``content``: a string, or a list of parts with ``text``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text")
                if text is None:
                    continue
                if not isinstance(text, str):
                    return None
                texts.append(text)
            elif isinstance(part, str):
                texts.append(part)
            else:
                return None
        return "".join(texts)
    return None


def parse_message(
    message: Mapping[str, Any],
    max_chars: int | None = None,
    rule: ReadingRule = LENIENT_READING,
) -> ParsedAction:
    """Parse an OpenAI-style assistant message dict (``content`` and ``tool_calls``).

    Args:
        message: The message.
        max_chars: Most characters of text the whole message may hold (None: no bound).
        rule: The reading rule (a message without ``tool_calls`` has its ``content`` read
            as a text action is).
    """
    try:
        check_json(dict(message), budget=max_chars)
    except _BadValue as exc:
        return ParsedAction("", error=f"the message is not usable JSON data: {exc}")
    content = _content_text(message.get("content"))
    if content is None:
        return ParsedAction("", error="message 'content' must be a string or a list of text parts")
    raw_calls = message.get("tool_calls")
    if raw_calls is None and "name" in message:
        if rule.bare_json:
            return ParsedAction("", (_call_from_obj(message),))
        if not content.strip():
            return ParsedAction(
                "",
                error=(
                    "a message dict carries its calls in 'tool_calls' (this environment reads "
                    "<tool_call> blocks and a message's 'tool_calls' as calls; a dict with "
                    "a 'name' is not one)"
                ),
            )
    if raw_calls:
        content = strip_reasoning(content)
        if not isinstance(raw_calls, list):
            return ParsedAction(content.strip(), error="'tool_calls' must be a list")
        if len(raw_calls) > MAX_CALLS:
            return ParsedAction(content.strip(), error=_too_many(len(raw_calls)))
        return ParsedAction(content.strip(), tuple(_call_from_obj(c) for c in raw_calls))
    return parse_text(content, rule)


def parse_action(
    action: Any, max_chars: int | None = None, rule: ReadingRule = LENIENT_READING
) -> ParsedAction:
    """Parse an action given as text or as an assistant message dict.

    Args:
        action: Raw completion text or a message dict.
        max_chars: Most characters the action may hold (text length, or the characters of
            every string in a dict action); None for no bound.
        rule: Which forms count as calls (the environment's reading rule).
    """
    if isinstance(action, str):
        if max_chars is not None and len(action) > max_chars:
            return ParsedAction(
                "", error=f"action too long ({len(action):,} characters; at most {max_chars:,})"
            )
        return parse_text(action, rule)
    if isinstance(action, Mapping):
        return parse_message(action, max_chars, rule)
    return ParsedAction(
        "", error=f"an action must be a string or a message dict, got {type(action).__name__}"
    )


def visible_text(action: Any) -> str | None:
    """The text of an action as written, without its reasoning and without reading any
    call out of it: a completion's text, or a message dict's ``content`` (None when the
    action is neither, or its content is not text)."""
    if isinstance(action, Mapping):
        content = _content_text(action.get("content"))
    elif isinstance(action, str):
        content = action
    else:
        return None
    if content is None or _surrogate_at(content) >= 0:
        return None
    return strip_reasoning(content).strip()
