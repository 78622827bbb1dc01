from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rods_env.env import ToolEnv
from rods_env.parsing import (
    LENIENT_READING,
    MAX_CALLS,
    OPEN_TAG,
    TOOL_CALL_READING,
    ParsedCall,
    check_json,
    parse_action,
    parse_text,
    visible_text,
)
from tests.core.fuzz import TAGS, actions


def test_tool_call_blocks_in_order_with_text():
    a = parse_action(
        'Let me look. <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call>'
    )
    assert a.error is None and a.content == "Let me look."
    assert [(c.name, c.arguments) for c in a.calls] == [("a", {"x": 1}), ("b", {"y": 2})]


def test_bare_json_single_and_list_and_fenced():
    assert parse_action('{"name": "a", "arguments": {}}').calls[0].name == "a"
    assert [c.name for c in parse_action('[{"name": "a"}, {"name": "b"}]').calls] == ["a", "b"]
    assert parse_action('```json\n{"name": "a", "arguments": {"k": "v"}}\n```').calls[
        0
    ].arguments == {"k": "v"}


def test_openai_message_dict():
    msg = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}}
        ],
    }
    a = parse_action(msg)
    assert a.calls[0].name == "a" and a.calls[0].arguments == {"x": 1}
    assert parse_action({"role": "assistant", "content": "hello"}).content == "hello"


def test_plain_text_is_a_message():
    a = parse_action("  Hello, how can I help?  ")
    assert a.calls == () and a.error is None and a.content == "Hello, how can I help?"


def test_malformed_inputs_are_errors_not_exceptions():
    assert parse_action("").error
    assert parse_action('{"name": "a", "arguments": {').error
    bad_block = parse_action("<tool_call>{not json}</tool_call>")
    assert bad_block.calls[0].error and "not valid JSON" in bad_block.calls[0].error
    unclosed = parse_action('<tool_call>{"name": "a"}')
    assert unclosed.calls[0].error and "not closed" in unclosed.calls[0].error
    assert parse_action('<tool_call>{"arguments": {}}</tool_call>').calls[0].error
    assert parse_action('<tool_call>{"name": "a", "arguments": [1]}</tool_call>').calls[0].error
    assert parse_action(42).error
    assert parse_action({"tool_calls": "x"}).error


# -- fuzzing -------------------------------------------------------------------------------
NAMES = ["get_account", "transfer", "find_account"]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(actions(NAMES))
def test_parse_never_raises_and_returns_bounded_plain_json(action):
    parsed = parse_action(action, max_chars=200_000)
    assert isinstance(parsed.content, str)
    assert parsed.error is None or isinstance(parsed.error, str)
    assert len(parsed.calls) <= MAX_CALLS
    for call in parsed.calls:
        assert isinstance(call.name, str)
        if call.error is None:
            assert type(call.arguments) is dict
            check_json(call.arguments)  # raises if not bounded plain JSON
            json.dumps(call.arguments, ensure_ascii=False).encode("utf-8")
    json.dumps(parsed.content, ensure_ascii=False).encode("utf-8")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([*TAGS, " ", "a", '"', "\\", "9"]), max_size=200))
def test_tag_soup_never_raises(pieces):
    parsed = parse_text("".join(pieces))
    assert parsed.error is None or parsed.calls == ()


# -- the action bound holds for a message dict as for text ----------------------------------
def _as_text(message: dict) -> str:
    """The text form of a message dict: its content, then its calls as <tool_call> blocks."""
    blocks = "".join(
        "<tool_call>" + json.dumps(c["function"], separators=(",", ":")) + "</tool_call>"
        for c in message.get("tool_calls") or ()
    )
    return (message.get("content") or "") + blocks


def _numbers_call(values: list) -> dict:
    call = {"type": "function", "function": {"name": "f", "arguments": {"a": values}}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def test_numbers_in_a_message_dict_count_towards_the_action_bound():
    # 12,000 numbers of 18 digits: 228,000 characters as text, refused; as a dict too
    big = _numbers_call([10**17] * 12_000)
    assert "too long" in (parse_action(_as_text(big), 200_000).error or "")
    assert "more than 200,000 characters" in (parse_action(big, 200_000).error or "")
    flags = _numbers_call([True, None, False] * 3_000)
    assert "more than 20,000 characters" in (parse_action(flags, 20_000).error or "")
    floats = _numbers_call([0.123456789] * 3_000)
    assert parse_action(floats, 20_000).error


def _written(value) -> int:
    """Characters of a value's strings, keys, numbers and literals as JSON writes them."""
    if isinstance(value, dict):
        return sum(len(k) + _written(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_written(v) for v in value)
    return len(value) if isinstance(value, str) else len(json.dumps(value))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    st.lists(
        st.one_of(
            st.integers(-(10**17), 10**17),
            st.floats(allow_nan=False, allow_infinity=False),
            st.booleans(),
            st.none(),
            st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
        ),
        max_size=60,
    ),
    st.integers(1, 2_000),
)
def test_a_message_dict_is_bounded_by_what_it_writes(values, bound):
    message = _numbers_call(values)
    refused = parse_action(message, bound).error is not None
    assert refused == (_written(message) > bound)


# -- reading rules ---------------------------------------------------------------------------
def test_tool_call_reading_reads_only_blocks_and_tool_calls():
    rule = TOOL_CALL_READING
    for text in (
        '{"name": "Summary", "arguments": {"status": "done"}}',
        '[{"name": "a"}, {"name": "b"}]',
        '```json\n{"name": "a", "arguments": {}}\n```',
        '{"name": "a", "arguments": {',
        "{sigh} Yes, go ahead.",
    ):
        parsed = parse_action(text, rule=rule)
        assert (parsed.calls, parsed.error, parsed.content) == ((), None, text)
        assert parse_action(text).calls or parse_action(text).error  # lenient: a call or an error
    said = parse_action(
        'Let me look. <tool_call>{"name": "a", "arguments": {}}</tool_call> Done, 42.', rule=rule
    )
    assert said.content == "Let me look." and [c.name for c in said.calls] == ["a"]
    assert (
        parse_action(
            'Let me look. <tool_call>{"name": "a", "arguments": {}}</tool_call> Done, 42.'
        ).content
        == "Let me look.  Done, 42."
    )  # lenient: all the text outside the blocks
    unclosed = parse_action('<tool_call>{"name": "a", "arguments": {"x": 1}}', rule=rule)
    assert unclosed.calls == (ParsedCall("a", {"x": 1}),)  # a completion cut before the tag
    assert parse_action('<tool_call>{"name": "a", "arguments": {"x": 1}}').calls[0].error
    assert parse_action('<tool_call>{"name": "a"', rule=rule).calls[0].error
    call_dict = parse_action({"name": "a", "arguments": {}}, rule=rule)
    assert call_dict.calls == () and "'tool_calls'" in (call_dict.error or "")
    assert parse_action({"name": "a", "arguments": {}}).calls[0].name == "a"
    as_text = parse_action({"role": "assistant", "content": '{"name": "a"}'}, rule=rule)
    assert as_text.content == '{"name": "a"}' and as_text.calls == ()
    message = {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [{"function": {"name": "a", "arguments": '{"x": 2}'}}],
    }
    assert parse_action(message, rule=rule) == parse_action(message)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(actions(NAMES))
def test_tool_call_reading_makes_calls_only_of_blocks_and_tool_calls(action):
    parsed = parse_action(action, max_chars=200_000, rule=TOOL_CALL_READING)
    text = action.get("content") if isinstance(action, dict) else action
    has_calls = isinstance(action, dict) and bool(action.get("tool_calls"))
    if parsed.calls and not has_calls:
        assert isinstance(text, (str, list)) and OPEN_TAG in json.dumps(text)
    if isinstance(action, str) and OPEN_TAG not in action and not parsed.error:
        assert parsed.calls == () and parsed.content == visible_text(action)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(actions(NAMES))
def test_the_lenient_rule_is_every_own_domains_default(action):
    assert ToolEnv.reading_rule is LENIENT_READING
    lenient = parse_action(action, 200_000, LENIENT_READING)
    assert lenient == parse_action(action, 200_000)
