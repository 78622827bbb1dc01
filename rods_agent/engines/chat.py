"""Chat templates and token accounting for local models.

A multi-turn episode is kept as one token sequence, built incrementally:

* the first prompt is the chat template's rendering of the opening messages (system
  policy, tools, first user message) with the generation prompt;
* each completion is appended exactly as sampled (its stop token included);
* after it, :meth:`ChatTemplate.continuation_ids` appends what the template puts between
  that assistant message and the next completion: the rest of the message's closing (``"\\n"``
  after ``<|im_end|>`` in ChatML; the whole closing when the completion was cut off by the
  token cap), the observation (tool results, the user's reply, an error message) and the
  generation prompt.

The observation's tokens are taken from the template **structurally**: it renders a short
fixed conversation ending with a *marker* assistant message followed by the new messages,
and keeps what follows the marker's closing token. Nothing requires the template to render a
longer conversation as an extension of a shorter one, which real templates do not do:
Qwen3's drops an earlier turn's reasoning and its empty ``<think></think>`` block once more
messages follow; gpt-oss's renders a final answer with ``<|return|>`` when it is last and with
``<|end|>`` otherwise.

So the model sees exactly the tokens it sampled, and training scores exactly those. The
sequence equals the template's rendering of the conversation except inside earlier assistant
turns, which stay as they were sampled where the template would re-render them (the
generator saw them so). :meth:`ChatTemplate.check` measures this and the rollout records it:
``exact``, ``text`` (same text, another token split), ``history`` (differs only inside
earlier assistant turns) or ``mismatch``; nothing is silently "fixed".

Templates differ in what they accept; the adapter measures each by rendering probes once
(:class:`ChatTemplate` attributes ``renders_tools``, ``tool_role``, ``system_anywhere``,
``consecutive_roles``, ``renders_tool_calls``) and rewrites the environment's messages to fit:

* no ``tool`` role (Gemma 3): tool results become a user message of ``<tool_response>``
  blocks;
* a ``system`` message after the first is refused or silently dropped (Gemma 3, gpt-oss): the
  environment's error observation becomes a user message;
* roles must alternate (Gemma 3): consecutive user messages are merged;
* tools ignored by the template (Gemma 3): Hermes-style tool instructions go into the system
  message, and the model calls tools in ``<tool_call>`` blocks;
* tool calls not rendered from ``tool_calls``: they are written into the content as
  ``<tool_call>`` blocks.

The harmony format of gpt-oss (channels, ``<|call|>``, ``to=functions.NAME``) is read by
:mod:`rods_agent.engines.harmony`: its ``analysis`` channel is reasoning, which never reaches
the environment. ``thinking`` maps to the template's ``enable_thinking`` switch (Qwen3).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from rods_agent.engines.base import Completion, EngineError

log = logging.getLogger(__name__)

_DUMMY: tuple[dict[str, str], ...] = (
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U"},
)
_MARKER = "MARKER-7f3c-ASSISTANT"
_PROBE = "PROBE-7f3c-CONTENT"
_PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "probe_tool_xyz",
        "description": "A probe.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string", "description": "A key."}},
            "required": ["key"],
        },
    },
}
CALL_END = "</tool_call>"
"""The closing tag of a Hermes-style ``<tool_call>`` block."""
_HARMONY_STOPS = ("<|return|>", "<|call|>")
_STOPS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")
"""End-of-turn tokens recognised by name when the vocabulary has them (besides the EOS and
the model's generation-config ids); harmony templates stop on ``<|return|>``/``<|call|>``
only, since ``<|end|>`` there ends one message of a turn that goes on."""

HERMES_TOOLS_PROMPT = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    "{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
"""Tool instructions added to the system message when a model's template ignores tools."""

CHATML_TOOLS_TEMPLATE = r"""
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
    {{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' }}
    {{- 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
    {%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}
    {{- '\n</tools>\n\nFor each function call, return a json object with function name and ' }}
    {{- 'arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n' }}
    {{- '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'system' and loop.first %}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant\n' }}
        {%- if message.content %}{{- message.content }}{%- endif %}
        {%- for tc in message.tool_calls or [] %}
            {%- set fn = tc.function if tc.function is defined else tc %}
            {%- if message.content or not loop.first %}{{- '\n' }}{%- endif %}
            {{- '<tool_call>\n{"name": "' + fn.name + '", "arguments": ' }}
            {%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
""".strip()
"""A ChatML template (Qwen 2.5 style) that renders tools and ``<tool_call>`` blocks; the tiny
test model uses it."""


def _plain(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [dict(m) for m in messages]


def _tool_call_text(call: Mapping[str, Any]) -> str:
    fn = call.get("function", call)
    arguments = fn.get("arguments", {})
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    body = json.dumps({"name": fn.get("name", ""), "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


class ChatTemplate:
    """A tokenizer's chat template, with the structural token accounting described above.

    Args:
        tokenizer: A Hugging Face tokenizer with a ``chat_template``.
        end_of_turn: Extra token strings that end an assistant turn (besides the tokenizer's
            EOS and the usual end-of-turn tokens the vocabulary has).
        stop_ids: Extra token ids that end an assistant turn (e.g. the model's generation
            config EOS ids).
        thinking: The template's ``enable_thinking`` switch (Qwen3): True or False renders
            every prompt with it; None leaves the template's default.
        date: The day a template that prints today's date (``strftime_now``, gpt-oss) shows
            in every rendering; None: the day this object is made. One fixed day keeps
            renderings of one run alike across midnight (and across a resume, given the
            same date).

    Raises:
        EngineError: no chat template; a template that does not render assistant content;
            ``thinking`` set for a template without the switch.
    """

    def __init__(
        self,
        tokenizer: Any,
        end_of_turn: Sequence[str] = (),
        stop_ids: Sequence[int] = (),
        *,
        thinking: bool | None = None,
        date: datetime.date | None = None,
    ) -> None:
        self.date = date or datetime.date.today()
        """The day the template's ``strftime_now`` shows."""
        template = getattr(tokenizer, "chat_template", None)
        if isinstance(template, Mapping):
            template = template.get("default")
        if not template:
            raise EngineError(
                "the tokenizer has no chat_template; give the model folder one "
                "(rods_agent.engines.chat.CHATML_TOOLS_TEMPLATE is a ChatML template with tools)"
            )
        self.tokenizer = tokenizer
        self.template = str(template)
        self.harmony = "<|channel|>" in self.template
        """gpt-oss's harmony format (:mod:`rods_agent.engines.harmony`)."""
        if thinking is not None and "enable_thinking" not in self.template:
            raise EngineError(
                f"thinking={thinking} asks for the template's enable_thinking switch, and this "
                "chat template has none; leave thinking unset"
            )
        self.thinking = thinking
        switch = "enable_thinking" in self.template
        self.thinks = self.harmony or (
            thinking is not False if switch else "<think>" in self.template
        )
        """The model reasons before it answers (Qwen3 with thinking on, gpt-oss, a template
        that opens ``<think>``): its turns need a budget for the reasoning."""
        self._special = sorted(
            {
                t.content
                for t in getattr(tokenizer, "added_tokens_decoder", {}).values()
                if t.special
            },
            key=len,
            reverse=True,
        )
        stop: set[int] = set()
        for tok in (*(_HARMONY_STOPS if self.harmony else _STOPS), *end_of_turn):
            tid = tokenizer.convert_tokens_to_ids(tok)
            if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid >= 0:
                stop.add(tid)
        if tokenizer.eos_token_id is not None:
            stop.add(int(tokenizer.eos_token_id))
        stop.update(int(i) for i in stop_ids)
        self.end_of_turn_ids: frozenset[int] = frozenset(stop)
        self._probe()

    # -- what the template accepts (rendered once) ----------------------------------------------
    def _try(self, messages: Sequence[Mapping[str, Any]], tools: Any = None) -> str | None:
        try:
            return self._raw_render(messages, tools, False)
        except Exception:
            return None

    def _probe(self) -> None:
        tool = [_PROBE_TOOL]
        head = self._try(_DUMMY, tool)
        self.renders_tools = head is not None and "probe_tool_xyz" in head
        """The template shows the tool schemas (else they go into the system message)."""
        call = {
            "type": "function",
            "function": {"name": "probe_tool_xyz", "arguments": {"key": "v"}},
        }
        asked = {"role": "assistant", "content": "", "tool_calls": [call]}
        result = {"role": "tool", "tool_call_id": "c0", "name": "probe_tool_xyz", "content": _PROBE}
        text = self._try([*_DUMMY, asked, result], tool)
        self.tool_role = text is not None and _PROBE in text
        """The template renders ``tool`` messages (else they become user messages)."""
        text = self._try([*_DUMMY, asked])  # no tool list: the name can only come from the call
        self.renders_tool_calls = text is not None and "probe_tool_xyz" in text
        """The template renders an assistant message's ``tool_calls``."""
        said = {"role": "assistant", "content": "A"}
        text = self._try([*_DUMMY, said, {"role": "system", "content": _PROBE}])
        self.system_anywhere = text is not None and _PROBE in text
        """A ``system`` message after the first is rendered (else it becomes a user message)."""
        self.consecutive_roles = (
            self._try(
                [*_DUMMY, said, {"role": "user", "content": "1"}, {"role": "user", "content": "2"}]
            )
            is not None
        )
        """Two user messages in a row are accepted (else they are merged)."""

        marker = {"role": "assistant", "content": _MARKER}
        last = self._try([*_DUMMY, marker])
        if last is None or _MARKER not in last:
            raise EngineError("the chat template does not render assistant content as given")
        closes = {self._close_after(last, last.index(_MARKER) + len(_MARKER))[1]}
        followed = self._try([*_DUMMY, marker, {"role": "user", "content": "U2"}])
        if followed is not None and _MARKER in followed:
            closes.add(self._close_after(followed, followed.index(_MARKER) + len(_MARKER))[1])
        if self.renders_tool_calls:
            for new in ([result], []) if self.tool_role else ([],):
                text = self._try([*_DUMMY, self._marker({**asked}), *new])
                if text is not None and _MARKER in text:
                    closes.add(self._close_after(text, text.index(_MARKER) + len(_MARKER))[1])
        closes.discard("")
        self.close_texts: frozenset[str] = frozenset(closes)
        """Special tokens that close an assistant message in this template."""
        self.assistant_suffix = last.split(_MARKER, 1)[1]
        """What the template renders after the content of a last assistant message."""
        self.suffix_tokens = max(len(self.encode(self.assistant_suffix)), 1)
        """Tokens that close an assistant message: room a token budget keeps for them."""
        prompt = self._raw_render(list(_DUMMY), None, True)
        bare = self._raw_render(list(_DUMMY), None, False)
        self.generation_prompt = prompt[len(bare) :] if prompt.startswith(bare) else ""
        """The text of the generation prompt (``<|im_start|>assistant\\n`` in ChatML)."""
        self.call_end = self._call_end(asked)
        """The text that ends a tool call in this family's format, where it is not already
        an end-of-turn token: ``</tool_call>`` for families that write ``<tool_call>``
        blocks (Qwen 2.5, Qwen3 with thinking off, ChatML with tools, and every template
        that gets rods' Hermes tool instructions: SmolLM2, Gemma 3); None for gpt-oss's
        harmony (its ``<|call|>`` is a stop token already), for a model that reasons
        before it answers (a stop string cannot tell a ``</tool_call>`` drafted inside
        ``<think>`` from the reply's), and for families whose calls have no closing marker
        of their own (Llama 3.1's bare JSON, Mistral's ``[TOOL_CALLS]`` list); those end
        at the end-of-turn token as before. The rollout stops generation there (one call
        per assistant message; see docs/training.md)."""

    def _call_end(self, asked: Mapping[str, Any]) -> str | None:
        """:attr:`call_end`, read from how the template writes a tool call."""
        if self.thinks:  # harmony included
            return None
        try:
            written = self.write(asked)
        except Exception:
            return None
        return CALL_END if CALL_END in written else None

    def _close_after(self, text: str, start: int) -> tuple[int, str]:
        """The first special token at or after ``start``: (its position, its text); the end of
        ``text`` and "" when there is none."""
        best, found = len(text), ""
        for token in self._special:
            at = text.find(token, start, best + len(token))
            if 0 <= at < best or (at == best and len(token) > len(found)):
                best, found = at, token
        return best, found

    # -- rendering -------------------------------------------------------------------------
    def _raw_render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> str:
        kwargs: dict[str, Any] = {}
        if self.thinking is not None:
            kwargs["enable_thinking"] = self.thinking
        if "strftime_now" in self.template:  # shadows transformers' global of that name
            kwargs["strftime_now"] = self._strftime
        return str(
            self.tokenizer.apply_chat_template(
                _plain(messages),
                tools=list(tools) if tools else None,
                add_generation_prompt=add_generation_prompt,
                tokenize=False,
                **kwargs,
            )
        )

    def _strftime(self, fmt: str) -> str:
        return datetime.datetime.combine(self.date, datetime.time()).strftime(fmt)

    def adapt(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The messages rewritten to fit the template (see the module doc): tool results as
        user messages where there is no ``tool`` role, later system messages as user
        messages where they are not rendered, tool calls as ``<tool_call>`` text where
        ``tool_calls`` are not rendered, consecutive user messages merged where roles must
        alternate."""
        out: list[dict[str, Any]] = []
        for m in messages:
            msg = dict(m)
            role = msg.get("role")
            if role == "tool" and not self.tool_role:
                msg = {
                    "role": "user",
                    "content": f"<tool_response>\n{msg.get('content') or ''}\n</tool_response>",
                }
            elif role == "system" and out and not self.system_anywhere:
                msg = {"role": "user", "content": msg.get("content") or ""}
            elif role == "assistant" and msg.get("tool_calls") and not self.renders_tool_calls:
                blocks = [_tool_call_text(c) for c in msg["tool_calls"]]
                text = "\n".join([msg["content"], *blocks] if msg.get("content") else blocks)
                msg = {"role": "assistant", "content": text}
            elif role == "assistant" and msg.get("content") is None and not msg.get("tool_calls"):
                msg["content"] = ""
            if (
                not self.consecutive_roles
                and out
                and msg.get("role") == "user"
                and out[-1].get("role") == "user"
                and len(out) > 1  # the first user message may follow the system message
            ):
                out[-1] = {"role": "user", "content": f"{out[-1]['content']}\n{msg['content']}"}
                continue
            out.append(msg)
        return out

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = False,
    ) -> str:
        """The conversation as text, its messages adapted to the template. Tools go through
        the template, or into the system message (Hermes style) when the template ignores
        them."""
        messages = self.adapt(messages)
        if tools and not self.renders_tools:
            messages = with_tools_in_system(messages, tools)
            tools = None
        return self._raw_render(messages, tools, add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text (special tokens in the text are recognized; no BOS added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids, special tokens kept, no clean-up."""
        return str(
            self.tokenizer.decode(
                list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
        )

    def prompt_ids(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[int]:
        """Token ids of the conversation followed by the generation prompt."""
        return self.encode(self.render(messages, tools, add_generation_prompt=True))

    # -- completions -----------------------------------------------------------------------
    def completion_text(self, ids: Sequence[int]) -> str:
        """The text of sampled ids, without a final end-of-turn token."""
        if ids and ids[-1] in self.end_of_turn_ids:
            ids = ids[:-1]
        return self.decode(ids)

    def message(self, text: str) -> dict[str, Any]:
        """The assistant message a completion's text is, as the template takes it: the text
        itself as content (a Qwen3 template reads the ``<think>`` block out of it), or, in
        harmony, its reasoning, reply and tool calls in their fields."""
        if self.harmony:
            from rods_agent.engines.harmony import parse_harmony

            return parse_harmony(text).message()
        return {"role": "assistant", "content": text}

    def action(self, completion: Completion) -> str | dict[str, Any]:
        """What ``env.step`` gets for a completion: structured tool calls when the engine
        returned some; in harmony the reply and calls without the reasoning; else the raw
        text (the environment reads ``<tool_call>`` blocks and bare JSON calls, and leaves
        ``<think>`` reasoning out)."""
        if completion.tool_calls:
            return completion.message()
        if self.harmony:
            from rods_agent.engines.harmony import parse_harmony

            return parse_harmony(completion.text).action()
        return completion.text

    def write(self, message: Mapping[str, Any]) -> str:
        """The text a model of this template samples for ``message`` (an assistant message
        with content and/or ``tool_calls``), its closing stop token included: the
        template's own rendering of it after the generation prompt. Scripted agents speak
        the model's format through this (Qwen's ``<tool_call>`` blocks, Llama 3.1's JSON,
        harmony's channels, the empty ``<think>`` block of a Qwen3 that thinks)."""
        head = self._raw_render(list(_DUMMY), None, True)
        full = self._raw_render(self.adapt([*_DUMMY, message]), None, False)
        if not full.startswith(head):
            raise EngineError("the chat template renders an assistant message unlike its prompt")
        body = full[len(head) :]
        end = -1
        for close in self.close_texts:
            at = body.rfind(close)
            end = max(end, at + len(close) if at >= 0 else -1)
        return body[:end] if end > 0 else body

    def _marker(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """``message`` with its last rendered field replaced by the marker: the arguments of
        its last tool call (the tool results that follow may need the call's name), else
        its content."""
        calls = list(message.get("tool_calls") or [])
        if calls and self.renders_tool_calls:
            last = dict(calls[-1])
            fn = dict(last.get("function", last))
            fn["arguments"] = _MARKER
            last["function"] = fn
            return {"role": "assistant", "content": "", "tool_calls": [*calls[:-1], last]}
        return {"role": "assistant", "content": _MARKER}

    def _tail(
        self,
        message: Mapping[str, Any],
        new_messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        history: Sequence[Mapping[str, Any]] | None,
    ) -> tuple[str, str]:
        """(closing token, what follows it) after ``message`` when ``new_messages`` follow."""
        marker = self._marker(message)
        contexts: list[Sequence[Mapping[str, Any]]] = [_DUMMY]
        if history is not None:
            contexts.append(history)
        failure: Exception | None = None
        for context in contexts:
            try:
                text = self.render(
                    [*context, marker, *new_messages],
                    tools if context is not _DUMMY else None,
                    add_generation_prompt=bool(new_messages),
                )
            except Exception as exc:
                failure = exc
                continue
            at = text.find(_MARKER)
            if at < 0:
                continue
            end, close = self._close_after(text, at + len(_MARKER))
            return close, text[end + len(close) :]
        raise EngineError(
            "the chat template cannot render these messages after an assistant message"
            + (f": {failure}" if failure is not None else "")
        )

    def continuation_ids(
        self,
        sampled_ids: Sequence[int],
        message: Mapping[str, Any],
        new_messages: Sequence[Mapping[str, Any]] = (),
        tools: Sequence[Mapping[str, Any]] | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[int]:
        """Tokens after a completion's sampled ids, up to where the next completion starts.

        That is the rest of the assistant message's closing (nothing more after a stop token
        that closes it; the template's closing token after a completion cut by the token cap
        or stopped by a token the template does not close with), then ``new_messages`` as
        the template renders them after an assistant message, then the generation prompt
        (only when there are new messages).

        Args:
            sampled_ids: The completion's ids as sampled.
            message: The assistant message of the completion (:meth:`message`).
            new_messages: The environment's messages after it (tool results, the user's
                reply, an error message); none at the end of an episode.
            tools: The tool schemas (used only when ``history`` is needed).
            history: The conversation before ``message``, rendered instead of a short fixed
                one if the template refuses that.

        Raises:
            EngineError: the template cannot render the new messages.
        """
        close, tail = self._tail(message, new_messages, tools, history)
        last = sampled_ids[-1] if sampled_ids else None
        closed = last in self.end_of_turn_ids and self.decode([last]) in (
            self.close_texts | {close}
        )
        return self.encode(tail if closed else close + tail)

    def check(
        self,
        token_ids: Sequence[int],
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        spans: Sequence[Sequence[int]] = (),
        add_generation_prompt: bool = False,
    ) -> str:
        """Compare a kept token sequence with the template's rendering of ``messages``.

        Args:
            token_ids: The kept sequence.
            messages: The conversation as the model saw it (assistant messages by
                :meth:`message`).
            tools: The tool schemas.
            spans: ``[start, end)`` of each sampled completion in ``token_ids``.
            add_generation_prompt: The sequence ends with a generation prompt.

        Returns:
            ``"exact"`` when re-tokenizing the rendered conversation gives the same ids;
            ``"text"`` when the text agrees but the ids differ (a non-canonical split was
            sampled); ``"history"`` when everything outside the sampled completions (the
            prompt, every observation and generation prompt) is the template's, and the
            template renders earlier assistant turns otherwise than they were sampled
            (Qwen3 drops their reasoning, gpt-oss closes a final answer with ``<|end|>``);
            ``"mismatch"`` otherwise.
        """
        text = self.render(messages, tools, add_generation_prompt=add_generation_prompt)
        ours = self.decode(token_ids)
        if ours == text:
            return "exact" if self.encode(text) == list(token_ids) else "text"
        bounds = [0, *(i for span in spans for i in span), len(token_ids)]
        pieces = [
            self.decode(token_ids[a:b]) for a, b in zip(bounds[::2], bounds[1::2], strict=True)
        ]
        if not spans:
            return "mismatch"
        gp = self.generation_prompt
        fixed = [p[: len(p) - len(gp)] if gp and p.endswith(gp) else p for p in pieces[:-1]]
        last = pieces[-1]
        if not text.startswith(fixed[0]):
            return "mismatch"
        pos = len(fixed[0])
        for piece in fixed[1:]:
            at = text.find(piece, pos)
            if at < 0:
                return "mismatch"
            pos = at + len(piece)
        if not (text.endswith(last) and len(text) - len(last) >= pos):
            return "mismatch"
        return "history"


def with_tools_in_system(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Messages whose system message carries Hermes-style tool instructions."""
    block = HERMES_TOOLS_PROMPT.format(tools="\n".join(json.dumps(t) for t in tools))
    out = _plain(messages)
    if out and out[0].get("role") == "system":
        out[0] = {**out[0], "content": f"{out[0].get('content') or ''}\n\n{block}"}
    else:
        out.insert(0, {"role": "system", "content": block})
    return out
