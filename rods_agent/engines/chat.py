"""Chat templates and token accounting for local models.

A multi-turn episode is kept as one token sequence, built incrementally:

* the first prompt is the chat template's rendering of the opening messages (system
  policy, tools, first user message) with the generation prompt;
* each completion is appended exactly as sampled (its end-of-turn token included), then the
  few tokens the template puts after an assistant message's content (``"\\n"`` after
  ``<|im_end|>`` in ChatML), or the whole end-of-message text when the completion was cut
  off by the token cap;
* each observation (tool results, the user's reply, an error message) is rendered through
  the template on its own, after a fixed dummy prefix, and the difference is appended,
  generation prompt included.

So the model sees exactly the tokens it sampled, and training scores exactly those. The
price: the sequence can differ from what the template gives when the whole conversation is
re-rendered and re-tokenized (a model may sample a non-canonical split of a word, or text
the template would re-format). :meth:`ChatTemplate.check` measures that and the rollout
records it; nothing is silently "fixed".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rods_agent.engines.base import EngineError

_DUMMY_PREFIX: tuple[dict[str, str], ...] = (
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U"},
    {"role": "assistant", "content": "A"},
)
_PROBE = "PROBE-7f3c-CONTENT"

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


class ChatTemplate:
    """A tokenizer's chat template, with the incremental token accounting described above.

    Args:
        tokenizer: A Hugging Face tokenizer with a ``chat_template``.
        end_of_turn: Extra token strings that end an assistant turn (besides the tokenizer's
            EOS and ``<|im_end|>`` where the vocabulary has it).
        stop_ids: Extra token ids that end an assistant turn (e.g. the model's generation
            config EOS ids).
    """

    def __init__(
        self, tokenizer: Any, end_of_turn: Sequence[str] = (), stop_ids: Sequence[int] = ()
    ) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise EngineError(
                "the tokenizer has no chat_template; give the model folder one "
                "(rods_agent.engines.chat.CHATML_TOOLS_TEMPLATE is a ChatML template with tools)"
            )
        self.tokenizer = tokenizer
        stop: set[int] = set()
        for tok in ("<|im_end|>", "<|eot_id|>", "<|end|>", *end_of_turn):
            tid = tokenizer.convert_tokens_to_ids(tok)
            if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid >= 0:
                stop.add(tid)
        if tokenizer.eos_token_id is not None:
            stop.add(int(tokenizer.eos_token_id))
        stop.update(int(i) for i in stop_ids)
        self.end_of_turn_ids: frozenset[int] = frozenset(stop)
        probe = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        tool = {"type": "function", "function": {"name": "probe_tool_xyz", "parameters": {}}}
        self.renders_tools = "probe_tool_xyz" in self._raw_render(probe, [tool], False)
        text = self._raw_render([*probe, {"role": "assistant", "content": _PROBE}], None, False)
        if _PROBE not in text:
            raise EngineError("the chat template does not render assistant content as given")
        self.assistant_suffix = text.split(_PROBE, 1)[1]
        self.suffix_tokens = len(self.encode(self.assistant_suffix))
        """Tokens that close an assistant message: room a token budget keeps for them."""

    # -- rendering -------------------------------------------------------------------------
    def _raw_render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> str:
        return self.tokenizer.apply_chat_template(
            _plain(messages),
            tools=list(tools) if tools else None,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
        )

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = False,
    ) -> str:
        """The conversation as text. Tools go through the template, or into the system
        message (Hermes style) when the template ignores them."""
        if tools and not self.renders_tools:
            messages = with_tools_in_system(messages, tools)
            tools = None
        return self._raw_render(messages, tools, add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text (special tokens in the text are recognized; no BOS added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids, special tokens kept, no clean-up."""
        return self.tokenizer.decode(
            list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
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

    def close_ids(self, sampled_ids: Sequence[int]) -> list[int]:
        """Tokens that close an assistant message after its sampled ids.

        After a completion that ended with its end-of-turn token this is what the template
        puts after that token (``"\\n"`` in ChatML); after one cut off by the token cap it is
        the whole end-of-message text.
        """
        suffix = self.assistant_suffix
        if sampled_ids and sampled_ids[-1] in self.end_of_turn_ids:
            eot = self.decode([sampled_ids[-1]])
            at = suffix.find(eot) if eot else -1
            # A stop token the template does not use (e.g. <|endoftext|>): close the message.
            suffix = suffix[at + len(eot) :] if at >= 0 else suffix
        return self.encode(suffix) if suffix else []

    def observation_ids(
        self,
        new_messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[int]:
        """Tokens of messages that follow an assistant message, plus the generation prompt.

        The messages are rendered after a fixed short prefix (so the cost does not grow
        with the conversation); when the template renders them differently there, the real
        ``history`` (ending with the assistant message) is used instead.

        Raises:
            EngineError: when the template's rendering of the longer conversation does not
                extend its rendering of the shorter one.
        """
        for prefix in (_DUMMY_PREFIX, history):
            if prefix is None:
                continue
            before = self.render(prefix, tools)
            after = self.render([*prefix, *new_messages], tools, add_generation_prompt=True)
            if after.startswith(before):
                return self.encode(after[len(before) :])
        raise EngineError(
            "the chat template re-renders earlier messages when new ones are added; "
            "incremental token accounting needs an append-only template"
        )

    def check(
        self,
        token_ids: Sequence[int],
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = False,
    ) -> str:
        """Compare a kept token sequence with a fresh rendering of ``messages``.

        Returns:
            ``"exact"`` when re-tokenizing the rendered conversation gives the same ids,
            ``"text"`` when the text agrees but the ids differ (a non-canonical split was
            sampled), ``"mismatch"`` when even the text differs.
        """
        text = self.render(messages, tools, add_generation_prompt=add_generation_prompt)
        if self.decode(token_ids) != text:
            return "mismatch"
        return "exact" if self.encode(text) == list(token_ids) else "text"


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
