"""Reading gpt-oss's harmony completions: reasoning, reply and tool calls by channel."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rods_agent.engines.harmony import CONTROL, HarmonyTurn, parse_harmony
from rods_env.parsing import parse_action


def test_channels_are_read_into_reasoning_reply_and_calls() -> None:
    text = (
        "<|channel|>analysis<|message|>The user wants order 7.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_order_details "
        '<|constrain|>json<|message|>{"order_id": "#W7"}'
    )
    turn = parse_harmony(text)
    assert turn == HarmonyTurn(
        "The user wants order 7.", "", (("get_order_details", '{"order_id": "#W7"}'),)
    )
    action = turn.action()
    assert "The user wants" not in str(action)  # reasoning never reaches the environment
    parsed = parse_action(action)
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("get_order_details", {"order_id": "#W7"})
    ]
    assert turn.message()["thinking"] == "The user wants order 7."
    # the recipient may also come before the channel (as the template renders history)
    other = parse_harmony(' to=functions.f<|channel|>commentary json<|message|>{"a": 1}')
    assert other.calls == (("f", '{"a": 1}'),)
    final = parse_harmony("<|channel|>final<|message|>Your order is on its way.")
    assert final.action() == {"role": "assistant", "content": "Your order is on its way."}


def test_reasoning_cut_off_sends_nothing() -> None:
    turn = parse_harmony("<|channel|>analysis<|message|>I should cancel <tool_call>")
    assert turn.content == "" and not turn.calls
    assert parse_action(turn.action()).error is not None


@given(
    st.lists(
        st.sampled_from([*CONTROL, "analysis", "final", "to=functions.x", " ", "ab", "json"]),
        max_size=30,
    )
)
@settings(max_examples=300, deadline=None)
def test_any_token_soup_parses_without_error_and_leaks_no_control_token(parts: list[str]) -> None:
    turn = parse_harmony("".join(parts))
    for piece in (turn.analysis, turn.content, *(a for _, a in turn.calls)):
        assert not any(token in piece for token in CONTROL)
    turn.action(), turn.message()
