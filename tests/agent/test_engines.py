"""The transformers engine, the chat-template token accounting and the tool-call formats."""

from __future__ import annotations

import json

import pytest

from rods_agent.engines import Completion, GenerationRequest, SamplingParams
from rods_agent.engines.chat import ChatTemplate
from rods_agent.engines.formats import get_tool_format, register_tool_format, tool_formats
from rods_env.errors import ConfigError

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order_details",
            "description": "Get an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]
OPENING = [
    {"role": "system", "content": "You are a store agent. Follow the policy."},
    {"role": "user", "content": "Hi, where is my order #W0000001?"},
]


def _forward_logprobs(engine, prompt: list[int], completion: list[int]) -> list[float]:
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.inference_mode():
        logits = engine.model(ids).logits[0, len(prompt) - 1 : -1].float()
    lp = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)
    return lp.tolist()


def test_batched_generation_returns_consistent_ids_text_and_logprobs(tiny_engine):
    requests = [
        GenerationRequest(OPENING, TOOLS),
        GenerationRequest(
            [*OPENING[:1], {"role": "user", "content": "Cancel it please " * 5}], TOOLS
        ),
        GenerationRequest([{"role": "user", "content": "hello"}]),
    ]
    completions = tiny_engine.generate(
        requests, SamplingParams(max_tokens=12, temperature=1.0, seed=3)
    )
    assert len(completions) == 3
    for req, comp in zip(requests, completions, strict=True):
        assert comp.error is None
        assert 1 <= len(comp.token_ids) <= 12
        assert len(comp.logprobs) == len(comp.token_ids)
        assert comp.finish_reason in ("stop", "length")
        assert comp.text == tiny_engine.chat.completion_text(comp.token_ids)
        prompt = tiny_engine.chat.prompt_ids(req.messages, req.tools)
        assert comp.prompt_tokens == len(prompt)
        # Log-probabilities re-computed by a forward pass without padding match.
        assert comp.logprobs == pytest.approx(
            _forward_logprobs(tiny_engine, prompt, comp.token_ids), abs=1e-4
        )
        assert all(lp <= 0 for lp in comp.logprobs)


def test_prompt_token_ids_are_continued_exactly(tiny_engine):
    prompt = tiny_engine.chat.prompt_ids(OPENING, TOOLS)
    by_ids = tiny_engine.generate(
        [GenerationRequest([], prompt_token_ids=prompt)],
        SamplingParams(max_tokens=6, temperature=0),
    )
    by_messages = tiny_engine.generate(
        [GenerationRequest(OPENING, TOOLS)], SamplingParams(max_tokens=6, temperature=0)
    )
    assert by_ids[0].token_ids == by_messages[0].token_ids
    assert by_ids[0].logprobs == pytest.approx(by_messages[0].logprobs, abs=1e-5)


def test_seeded_sampling_is_reproducible_and_per_request_caps_hold(tiny_model_dir):
    from rods_agent.engines.hf import TransformersEngine

    a, b = TransformersEngine(tiny_model_dir), TransformersEngine(tiny_model_dir)
    reqs = [GenerationRequest(OPENING, TOOLS, max_tokens=3), GenerationRequest(OPENING, TOOLS)]
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=11)
    first, second = a.generate(reqs, params), b.generate(reqs, params)
    assert [c.token_ids for c in first] == [c.token_ids for c in second]
    assert len(first[0].token_ids) <= 3
    assert first[0].finish_reason == "length" or first[0].token_ids[-1] in a.chat.end_of_turn_ids


def test_a_prompt_longer_than_the_model_is_a_failed_completion_not_a_crash(tiny_engine):
    huge = list(range(10, 20)) * 2000  # 20,000 tokens > 16,384 positions
    out = tiny_engine.generate(
        [GenerationRequest([], prompt_token_ids=huge), GenerationRequest(OPENING)],
        SamplingParams(max_tokens=4),
    )
    assert out[0].finish_reason == "error" and "positions" in out[0].error
    assert out[1].error is None and out[1].token_ids


# -- chat template accounting ---------------------------------------------------------------
def test_incremental_tokens_equal_the_full_rendering(tiny_engine):
    chat: ChatTemplate = tiny_engine.chat
    assistant = 'Let me look. <tool_call>{"name": "get_order_details", "arguments": {"order_id": "#W0000001"}}</tool_call>'
    sampled = [*chat.encode(assistant), chat.tokenizer.convert_tokens_to_ids("<|im_end|>")]
    observation = [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "name": "get_order_details",
            "content": '{"status": "pending"}',
        },
        {
            "role": "tool",
            "tool_call_id": "c2",
            "name": "get_order_details",
            "content": "Error: no order",
        },
    ]
    ids = chat.prompt_ids(OPENING, TOOLS) + sampled + chat.close_ids(sampled)
    history = [*OPENING, {"role": "assistant", "content": assistant}]
    ids += chat.observation_ids(observation, TOOLS, history=history)
    full = chat.render([*history, *observation], TOOLS, add_generation_prompt=True)
    assert chat.decode(ids) == full
    assert ids == chat.encode(full)
    assert chat.check(ids, [*history, *observation], TOOLS, add_generation_prompt=True) == "exact"


def test_a_truncated_completion_is_closed_by_the_template_suffix(tiny_engine):
    chat = tiny_engine.chat
    sampled = chat.encode("I will")  # cut off: no end-of-turn token
    closing = chat.close_ids(sampled)
    assert chat.decode(closing) == "<|im_end|>\n"
    eot = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert chat.decode(chat.close_ids([*sampled, eot])) == "\n"


def test_non_canonical_sampled_tokens_are_reported_not_hidden(tiny_engine):
    chat = tiny_engine.chat
    text = "hello there"
    split = [i for ch in text for i in chat.encode(ch)]  # one token per character
    assert split != chat.encode(text)
    eot = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    sampled = [*split, eot]
    ids = chat.prompt_ids(OPENING) + sampled + chat.close_ids(sampled)
    history = [*OPENING, {"role": "assistant", "content": text}]
    assert chat.check(ids, history) == "text"
    assert chat.check(ids, [*OPENING, {"role": "assistant", "content": "other"}]) == "mismatch"


def test_a_template_without_tools_gets_them_in_the_system_message(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    chat = ChatTemplate(tok)
    assert not chat.renders_tools
    text = chat.render(OPENING, TOOLS, add_generation_prompt=True)
    assert "get_order_details" in text and "<tool_call>" in text
    assert text.startswith("<|im_start|>system\nYou are a store agent.")


# -- formats ----------------------------------------------------------------------------------
def test_tool_call_formats(monkeypatch):
    from rods_agent.engines import formats

    monkeypatch.setattr(formats, "_FORMATS", dict(formats._FORMATS))
    structured = Completion(
        text="",
        tool_calls=[{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    )
    assert get_tool_format("auto")(structured)["tool_calls"][0]["function"]["name"] == "f"
    assert (
        get_tool_format("auto")(Completion(text="<tool_call>{}</tool_call>"))
        == "<tool_call>{}</tool_call>"
    )
    assert get_tool_format("hermes")(structured) == ""
    mistral = get_tool_format("mistral")(
        Completion(text='ok [TOOL_CALLS] [{"name": "g", "arguments": {"a": 1}}]')
    )
    assert mistral["content"] == "ok"
    assert json.loads(mistral["tool_calls"][0]["function"]["arguments"]) == {"a": 1}
    assert get_tool_format("mistral")(Completion(text="[TOOL_CALLS] [oops")) == "[TOOL_CALLS] [oops"
    register_tool_format("upper", lambda c: c.text.upper())
    assert "upper" in tool_formats() and get_tool_format("upper")(Completion(text="a")) == "A"
    with pytest.raises(ConfigError, match="formats:"):
        get_tool_format("nope")


def test_sampling_params_reject_bad_values():
    with pytest.raises(ConfigError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ConfigError, match="top_p"):
        SamplingParams(top_p=0)


# -- building engines from typed options ---------------------------------------------------------
def test_engine_options_reject_bad_values_in_one_line():
    from rods_agent.engines import EngineOptions

    with pytest.raises(ConfigError, match="needs a model"):
        EngineOptions(engine="transformers")
    with pytest.raises(ConfigError, match="unknown engine 'gpt'; engines: openai"):
        EngineOptions(engine="gpt", model="m")
    with pytest.raises(ConfigError, match="--concurrency must be positive"):
        EngineOptions(model="m", concurrency=0)
    assert EngineOptions(engine="oracle").model_name == "oracle"


def test_model_folder_checks_name_what_is_missing(tmp_path, tiny_model_dir):
    from rods_agent.engines import EngineError, check_model_folder

    check_model_folder(str(tiny_model_dir))  # complete: no error
    check_model_folder("Qwen/Qwen2.5-0.5B-Instruct")  # a hub id is left to the loader
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "config.json").write_text("{}")
    (tmp_path / "w" / "model.safetensors").write_bytes(b"")
    with pytest.raises(EngineError, match=r"lacks a tokenizer \(tokenizer.json"):
        check_model_folder(str(tmp_path / "w"))
    with pytest.raises(EngineError, match="is a file"):
        check_model_folder(str(tmp_path / "w" / "config.json"))


def test_build_engine_loads_a_complete_folder_and_reports_a_broken_one(tmp_path, tiny_model_dir):
    import shutil

    from rods_agent.engines import EngineError, EngineOptions, build_engine

    engine = build_engine(EngineOptions(engine="transformers", model=str(tiny_model_dir)))
    [c] = engine.generate([GenerationRequest(OPENING)], SamplingParams(max_tokens=2))
    assert c.error is None and c.token_ids
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(EngineError) as info:
        build_engine(EngineOptions(engine="transformers", model=str(broken)))
    message = str(info.value)
    assert message.startswith(f"cannot load model '{broken}'") and "\n" not in message
