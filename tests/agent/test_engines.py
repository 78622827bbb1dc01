"""The transformers engine, the chat-template token accounting and the tool-call formats."""

from __future__ import annotations

import json
import math

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
    message = chat.message(chat.completion_text(sampled))
    prompt = chat.prompt_ids(OPENING, TOOLS)
    ids = prompt + sampled + chat.continuation_ids(sampled, message, observation)
    history = [*OPENING, message]
    full = chat.render([*history, *observation], TOOLS, add_generation_prompt=True)
    assert chat.decode(ids) == full
    assert ids == chat.encode(full)
    spans = [[len(prompt), len(prompt) + len(sampled)]]
    check = chat.check(
        ids, [*history, *observation], TOOLS, spans=spans, add_generation_prompt=True
    )
    assert check == "exact"


def test_a_truncated_completion_is_closed_by_the_template_suffix(tiny_engine):
    chat = tiny_engine.chat
    sampled = chat.encode("I will")  # cut off: no end-of-turn token
    message = chat.message("I will")
    closing = chat.continuation_ids(sampled, message)
    assert chat.decode(closing) == "<|im_end|>\n"
    eot = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert chat.decode(chat.continuation_ids([*sampled, eot], message)) == "\n"
    user = [{"role": "user", "content": "go on"}]
    follow = chat.decode(chat.continuation_ids(sampled, message, user))
    assert follow == "<|im_end|>\n<|im_start|>user\ngo on<|im_end|>\n<|im_start|>assistant\n"


def test_non_canonical_sampled_tokens_are_reported_not_hidden(tiny_engine):
    chat = tiny_engine.chat
    text = "hello there"
    split = [i for ch in text for i in chat.encode(ch)]  # one token per character
    assert split != chat.encode(text)
    eot = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    sampled = [*split, eot]
    prompt = chat.prompt_ids(OPENING)
    ids = prompt + sampled + chat.continuation_ids(sampled, chat.message(text))
    history = [*OPENING, {"role": "assistant", "content": text}]
    assert chat.check(ids, history) == "text"
    assert chat.check(ids, [*OPENING, {"role": "assistant", "content": "other"}]) == "mismatch"
    # the template's re-rendering of an assistant turn alone differs: "history"
    spans = [[len(prompt), len(prompt) + len(sampled)]]
    other = [*OPENING, {"role": "assistant", "content": "other"}]
    assert chat.check(ids, other, spans=spans) == "history"
    assert (
        chat.check(ids, [*OPENING[:1], {"role": "user", "content": "?"}, history[-1]], spans=spans)
        == "mismatch"
    )


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


# -- the sampling distribution --------------------------------------------------------------
def _hand_logprob(logits: list[float], token: int, temperature: float, top_p: float) -> float:
    """The log-probability of ``token`` under temperature then top-p, written out longhand."""
    scaled = [x / temperature for x in logits]
    top = max(scaled)
    weights = [math.exp(x - top) for x in scaled]
    total = sum(weights)
    probs = [w / total for w in weights]
    order = sorted(range(len(probs)), key=lambda i: probs[i])  # ascending
    kept, mass = set(range(len(probs))), 0.0
    for i in order[:-1]:  # the most likely token always stays
        mass += probs[i]
        if mass <= 1 - top_p:
            kept.discard(i)
    assert token in kept, "a token outside the nucleus was sampled"
    return math.log(probs[token] / sum(probs[i] for i in kept))


@pytest.mark.parametrize(("temperature", "top_p"), [(0.6, 1.0), (1.3, 0.85), (0.9, 0.5)])
def test_logprobs_are_those_of_the_distribution_sampled(tiny_engine, temperature, top_p):
    import torch

    request = GenerationRequest(OPENING, TOOLS, seed=5)
    [comp] = tiny_engine.generate(
        [request], SamplingParams(max_tokens=10, temperature=temperature, top_p=top_p)
    )
    prompt = tiny_engine.chat.prompt_ids(OPENING, TOOLS)
    ids = torch.tensor([prompt + comp.token_ids])
    with torch.inference_mode():
        logits = tiny_engine.model(ids).logits[0, len(prompt) - 1 : -1].double()
    hand = [
        _hand_logprob(logits[j].tolist(), tok, temperature, top_p)
        for j, tok in enumerate(comp.token_ids)
    ]
    assert comp.logprobs == pytest.approx(hand, abs=2e-4)
    raw = torch.log_softmax(logits, -1).gather(-1, torch.tensor(comp.token_ids)[:, None])
    assert comp.logprobs != pytest.approx(raw.squeeze(-1).tolist(), abs=2e-4)  # not T=1 ones


def test_greedy_completions_have_log_probability_zero_and_follow_the_argmax(tiny_engine):
    import torch

    [comp] = tiny_engine.generate(
        [GenerationRequest(OPENING, TOOLS)], SamplingParams(max_tokens=6, temperature=0)
    )
    assert comp.logprobs == [0.0] * len(comp.token_ids)
    prompt = tiny_engine.chat.prompt_ids(OPENING, TOOLS)
    with torch.inference_mode():
        logits = tiny_engine.model(torch.tensor([prompt + comp.token_ids])).logits[0]
    assert logits[len(prompt) - 1 : -1].argmax(-1).tolist() == comp.token_ids


def test_request_seeds_make_a_completion_independent_of_its_batch(tiny_engine):
    params = SamplingParams(max_tokens=8, temperature=1.0)
    alone = tiny_engine.generate([GenerationRequest(OPENING, TOOLS, seed=42)], params)[0]
    other = GenerationRequest([{"role": "user", "content": "something else " * 3}], seed=1)
    batched = tiny_engine.generate([other, GenerationRequest(OPENING, TOOLS, seed=42)], params)[1]
    assert alone.token_ids == batched.token_ids
    reseeded = tiny_engine.generate([GenerationRequest(OPENING, TOOLS, seed=43)], params)[0]
    assert reseeded.token_ids != alone.token_ids


def test_kept_keys_and_values_give_the_same_completions_and_save_prefill(tiny_model_dir):
    from rods_agent.engines.hf import TransformersEngine

    plain = TransformersEngine(tiny_model_dir)
    reusing = TransformersEngine(tiny_model_dir, reuse_kv=True)
    params = SamplingParams(max_tokens=6, temperature=1.0)
    policy = {"role": "system", "content": "You are a store agent. " + "Follow the policy. " * 80}
    first = [policy, {"role": "user", "content": "Cancel order #W0000001 please."}]
    other = [policy, {"role": "user", "content": "Where is order #W0000002?"}]

    def turn(engine, history, key, seed):
        req = GenerationRequest(history, TOOLS, key=key, seed=seed)
        return engine.generate([req], params)[0]

    for engine in (plain, reusing):
        engine.turns = []
        a1, b1 = turn(engine, first, "a", 1), turn(engine, other, "b", 2)
        longer = [*first, {"role": "assistant", "content": a1.text},
                  {"role": "user", "content": "my email is x@y.z"}]  # fmt: skip
        batch = engine.generate(
            [GenerationRequest(longer, TOOLS, key="a", seed=3),
             GenerationRequest(other, TOOLS, key="b", seed=4)], params,
        )  # fmt: skip
        engine.turns = [a1, b1, *batch]
    for x, y in zip(plain.turns, reusing.turns, strict=True):
        assert x.token_ids == y.token_ids
        assert x.logprobs == pytest.approx(y.logprobs, abs=1e-4)
    # The second turns continued from their conversations' own first turns.
    assert reusing.kv_stats["reused"] >= len(reusing.chat.prompt_ids(first, TOOLS)) + 256
    assert plain.kv_stats["reused"] == 0
    # Two openings taught the engine their common head (system prompt and tools): a third
    # conversation prefills only its own message.
    third = [first[0], {"role": "user", "content": "Hello, I need to return an item."}]
    before = dict(reusing.kv_stats)
    turn(reusing, third, "c", 6)
    new_tokens = reusing.kv_stats["prefilled"] - before["prefilled"]
    assert 0 < new_tokens < 40 and reusing.kv_stats["reused"] - before["reused"] > 256
    reusing.weights_version += 1  # new weights: nothing kept may be used
    before = dict(reusing.kv_stats)
    turn(reusing, first, "a", 1)
    assert reusing.kv_stats["reused"] == before["reused"]
    turn(reusing, other, "d", 5)
    assert reusing.kv_stats["reused"] == before["reused"]
    turn(reusing, third, "e", 7)
    assert reusing.kv_stats["reused"] > before["reused"]  # the shared opening is learnt again


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


def test_thinking_switch_reaches_every_engine_or_fails_in_one_line(tiny_model_dir, family_models):
    """``--thinking on|off``: the server's template kwargs in chat mode, the local template
    otherwise; a template without the switch is refused by name, not ignored."""
    from rods_agent.engines import EngineError, EngineOptions, build_engine

    with pytest.raises(ConfigError, match="thinking must be on or off, got 'yes'"):
        EngineOptions(model="m", thinking="yes")  # type: ignore[arg-type]
    assert EngineOptions(model="m").thinking_switch is None
    served = build_engine(
        EngineOptions(model="m", thinking="off", extra_body={"chat_template_kwargs": {"x": 1}})
    )
    try:
        body = served.extra_body  # type: ignore[attr-defined]
        assert body["chat_template_kwargs"] == {"x": 1, "enable_thinking": False}
    finally:
        served.close()
    with pytest.raises(EngineError) as info:
        build_engine(EngineOptions(engine="transformers", model=str(tiny_model_dir), thinking="on"))
    assert "enable_thinking switch" in str(info.value) and "\n" not in str(info.value)
    qwen3 = str(family_models.model("qwen3"))
    for switch, empty_think in (("off", True), ("on", False)):
        engine = build_engine(EngineOptions(engine="transformers", model=qwen3, thinking=switch))
        prompt = engine.chat.render(OPENING, add_generation_prompt=True)  # type: ignore[attr-defined]
        # Qwen3's template closes an empty reasoning block in the prompt when thinking is off
        assert prompt.endswith("<think>\n\n</think>\n\n") is empty_think


def test_a_template_that_prints_the_date_shows_one_fixed_day(family_models):
    """gpt-oss's real template calls ``strftime_now``: every rendering of one ChatTemplate
    shows the day it was given (or made on), never the wall clock's."""
    import datetime

    tokenizer = family_models.tokenizer("gptoss")
    fixed = ChatTemplate(tokenizer, date=datetime.date(2025, 3, 4))
    text = fixed.render(OPENING, add_generation_prompt=True)
    assert "Current date: 2025-03-04\n" in text
    today = ChatTemplate(tokenizer).render(OPENING)
    assert f"Current date: {datetime.date.today():%Y-%m-%d}\n" in today
    qwen3 = ChatTemplate(family_models.tokenizer("qwen3"), date=datetime.date(2025, 3, 4))
    assert "2025" not in qwen3.render(OPENING)  # a template without a date is untouched


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


def test_freed_tensor_memory_goes_back_to_the_system():
    """On glibc the mmap threshold is fixed once (a learner's RSS stops creeping up)."""
    import sys

    from rods_agent.engines.hf import return_freed_memory

    took = return_freed_memory()
    assert return_freed_memory() is took  # once per process
    if sys.platform.startswith("linux"):
        import ctypes.util

        assert took == (ctypes.util.find_library("c") is not None)


@pytest.mark.parametrize("queries", [1, 3])
@pytest.mark.parametrize("preallocated", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_decode_attention_equals_sdpa(queries, preallocated, padded):
    """The decoding attention gives sdpa's output (repeat_kv layout, masks, a cache read
    whole from its preallocated buffer with the unwritten tail masked)."""
    import types

    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import sdpa_mask

    from rods_agent.engines.decode_attention import attention

    g = torch.Generator().manual_seed(queries + 2 * preallocated + 4 * padded)
    batch, heads, kv_heads, dim, length = 3, 6, 2, 8, 11
    q = torch.randn(batch, heads, queries, dim, generator=g)
    k = torch.randn(batch, kv_heads, length, dim, generator=g)
    v = torch.randn(batch, kv_heads, length, dim, generator=g)
    if preallocated:  # the first `length` positions of a longer zeroed buffer
        kb, vb = (
            torch.zeros(batch, kv_heads, length + 5, dim),
            torch.zeros(batch, kv_heads, length + 5, dim),
        )
        kb[:, :, :length], vb[:, :, :length] = k, v
        k, v = kb[:, :, :length], vb[:, :, :length]
        assert not k.is_contiguous()
    keep = torch.ones(batch, length, dtype=torch.bool)
    if padded:
        keep[0, :4] = False  # a left-padded row
    mask = sdpa_mask(
        batch_size=batch,
        q_length=queries,
        kv_length=length,
        q_offset=length - queries,
        attention_mask=keep,
        allow_is_causal_skip=False,
    )
    module = types.SimpleNamespace(
        num_key_value_groups=heads // kv_heads, is_causal=True, training=False
    )
    want, _ = sdpa_attention_forward(module, q, k.contiguous(), v.contiguous(), mask, scaling=0.3)
    got, _ = attention(module, q, k, v, mask, scaling=0.3)
    assert got.shape == want.shape == (batch, queries, heads, dim)
    assert torch.allclose(got, want, atol=1e-5)


# -- a turn ends where the call ends (issue 41) ---------------------------------------------------
QUESTIONS = [
    "Hi, where is my order #W0000001?",
    "Cancel order #W0000002 please.",
    "What did I pay for #W0000003?",
    "Can I return the shoes of #W0000004?",
]


def _first_stop(ids: list[int], chat: ChatTemplate, stop: tuple[str, ...]) -> list[int] | None:
    """``ids`` up to the token that completes the first occurrence of a stop string (None
    when the text never holds one): the longhand rule the engines must follow."""
    from rods_agent.engines.base import stop_end

    for k in range(1, len(ids) + 1):
        if stop_end(chat.decode(ids[:k]), stop) is not None:
            return ids[:k]
    return None


def _check_cut(plain: list[Completion], stopped: list[Completion], chat, stop) -> int:
    """Each stopped completion is its plain twin cut at the first stop; the number cut."""
    cut = 0
    for p, s in zip(plain, stopped, strict=True):
        want = _first_stop(p.token_ids, chat, stop)
        if want is None:
            assert (s.token_ids, s.logprobs, s.finish_reason) == (
                p.token_ids,
                p.logprobs,
                p.finish_reason,
            )
            continue
        cut += len(want) < len(p.token_ids)
        assert s.token_ids == want and s.logprobs == p.logprobs[: len(want)]
        assert s.finish_reason == "stop" and s.text == chat.completion_text(want)
    return cut


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_stop_string_ends_the_completion_where_it_first_appears(tiny_engine, temperature):
    chat = tiny_engine.chat
    requests = [
        GenerationRequest([OPENING[0], {"role": "user", "content": q}], TOOLS, seed=40 + i)
        for i, q in enumerate(QUESTIONS)
    ]
    params = SamplingParams(max_tokens=24, temperature=temperature)
    plain = tiny_engine.generate(requests, params)
    a, b = plain[0].token_ids, plain[1].token_ids
    # stop strings from the completions themselves: whole tokens, a piece that ends inside a
    # token, two strings at once (the earlier end wins)
    stops = [
        (chat.decode(a[6:9]),),
        (chat.decode(b[3:5])[:-1] or chat.decode(b[3:5]),),
        (chat.decode(a[15:17]), chat.decode(b[8:10])),
    ]
    cut = 0
    for stop in stops:
        assert all(stop)
        cut += _check_cut(
            plain, tiny_engine.generate(requests, params.with_stop(*stop)), chat, stop
        )
    assert cut >= 3  # the test bites: completions were cut, not only left alone


def test_generation_stops_after_the_first_closing_tag_of_a_call(tiny_model_dir):
    from tests.agent.leaning import leaning_engine

    engine = leaning_engine(tiny_model_dir)
    chat = engine.chat
    assert chat.call_end == "</tool_call>"
    requests = [
        GenerationRequest([OPENING[0], {"role": "user", "content": q}], TOOLS, seed=7 + i)
        for i, q in enumerate(QUESTIONS * 2)
    ]
    params = SamplingParams(max_tokens=24, temperature=1.0)
    plain = engine.generate(requests, params)
    stopped = engine.generate(requests, params.with_stop(chat.call_end))
    # the model closes calls and goes on writing; with the stop nothing follows the first
    assert sum(p.text.count("</tool_call>") > 1 for p in plain) >= 3
    assert _check_cut(plain, stopped, chat, ("</tool_call>",)) >= 3
    for s in stopped:
        assert s.text.count("</tool_call>") <= 1
        assert "</tool_call>" not in s.text or s.text.endswith("</tool_call>")


def test_sampling_params_stop_strings():
    assert SamplingParams(stop=["</x>"]).stop == ("</x>",)  # type: ignore[arg-type]
    assert SamplingParams(stop=("a",)).with_stop("b", "a").stop == ("a", "b")
    for bad in ("</x>", ("",), (3,)):
        with pytest.raises(ConfigError, match="stop"):
            SamplingParams(stop=bad)  # type: ignore[arg-type]
