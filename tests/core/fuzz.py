"""Fuzzed actions for ``env.step``: hypothesis strategies (tests) and a fast generator
(benchmarks), covering every malformed kind the parser has to survive.

Kinds: tool-call text (valid names with random arguments, unknown names, broken JSON,
unclosed and nested tags, bare JSON, code fences), plain messages, message dicts (content as
text, parts or junk; ``tool_calls`` as lists of calls, junk or huge lists; arguments as JSON
strings, dicts with non-string keys, sets, ``Decimal``, huge integers, ``NaN``, lone
surrogates, deep nesting), other Python objects, and oversized values of each.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

SURROGATE = "\ud800"
TAGS = ("<tool_call>", "</tool_call>", "```", "```json", "{", "}", "[", "]", '"name"', ":")


# -- hypothesis ----------------------------------------------------------------------------
def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """JSON-like values with the hostile leaves the parser must refuse."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=10**17, max_value=10**40),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
        st.sampled_from(["#W0000001", "ABC123", SURROGATE, "x" * 300, "-10", "1e999"]),
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(st.text(max_size=8), children, max_size=3),
        ),
        max_leaves=max_leaves,
    )


def odd_values() -> st.SearchStrategy[Any]:
    """Python values that are not JSON at all (dict actions can carry them)."""
    return st.one_of(
        st.sets(st.integers(), max_size=3),
        st.builds(Decimal, st.integers()),
        st.just(10**5000),
        st.just(b"bytes"),
        st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
        st.just(object()),
    )


def call_objects(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """A tool call object: a real or made-up name, arguments of any shape."""
    return st.fixed_dictionaries(
        {
            "name": st.one_of(st.sampled_from(names), st.text(max_size=12), st.integers()),
            "arguments": st.one_of(
                st.dictionaries(st.sampled_from(["order_id", "user_id", "x"]), json_values()),
                json_values(),
                st.text(max_size=30),
            ),
        }
    )


def text_actions(names: list[str]) -> st.SearchStrategy[str]:
    """Raw completions: tool-call blocks, tag soup, bare JSON, fences and plain text."""
    block = call_objects(names).map(
        lambda c: f"<tool_call>{json.dumps(c, default=repr)}</tool_call>"
    )
    soup = st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=10)), max_size=12).map(
        "".join
    )
    return st.one_of(
        block,
        st.lists(block, min_size=2, max_size=20).map("".join),
        soup,
        call_objects(names).map(lambda c: json.dumps(c, default=repr)),
        st.text(max_size=60),
        st.sampled_from(
            [
                "[" * 5000,
                '{"name": "x", "arguments": ' + "[" * 5000 + "]" * 5000 + "}",
                '<tool_call>{"name": "x", "arguments": {"n": ' + "9" * 5000 + "}}</tool_call>",
                "<tool_call>" * 3000,
                "```" + " " * 5000 + "x",
                f"Hello {SURROGATE} there",
                '<tool_call>{"name": "think", "arguments": {"thought": "\\ud800"}}</tool_call>',
                '{"name": "think", "arguments": {"thought": NaN}}',
            ]
        ),
    )


def dict_actions(names: list[str]) -> st.SearchStrategy[dict[Any, Any]]:
    """Message dicts, well-formed and not."""
    content = st.one_of(
        st.none(),
        st.text(max_size=30),
        st.lists(st.one_of(st.fixed_dictionaries({"text": json_values()}), st.integers())),
        json_values(),
    )
    arguments = st.one_of(json_values(), st.text(max_size=30), odd_values())
    raw_call = st.one_of(
        st.fixed_dictionaries(
            {
                "function": st.fixed_dictionaries(
                    {"name": st.sampled_from(names), "arguments": arguments}
                )
            }
        ),
        st.fixed_dictionaries({"name": st.sampled_from(names), "arguments": arguments}),
        json_values(),
        odd_values(),
    )
    return st.one_of(
        st.fixed_dictionaries(
            {"role": st.just("assistant"), "content": content},
            optional={"tool_calls": st.one_of(st.lists(raw_call, max_size=4), json_values())},
        ),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), json_values(), max_size=3),
        st.fixed_dictionaries({"name": st.sampled_from(names), "arguments": arguments}),
    )


def actions(names: list[str]) -> st.SearchStrategy[Any]:
    """Every kind of action, including objects that are neither text nor dicts."""
    return st.one_of(
        text_actions(names),
        dict_actions(names),
        st.one_of(st.none(), st.integers(), st.lists(st.integers(), max_size=2), odd_values()),
    )


# -- a fast generator for benchmarks -------------------------------------------------------
def _random_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.5:
        return rng.choice(
            [
                None,
                True,
                7,
                -3,
                12.5,
                10**20,
                "x",
                "#W0000001",
                "ABC123",
                "",
                "2024-05-20",
                "a" * 50,
            ]
        )
    if roll < 0.75:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["order_id", "user_id", "k", "amount"]): _random_json(rng, depth + 1)}


def random_action(rng: random.Random, names: list[str], huge: bool = False) -> Any:
    """One fuzzed action, drawn quickly from ``rng`` (for benchmarks of 10^6 steps).

    Args:
        rng: The generator.
        names: The environment's tool names.
        huge: Also draw the rare oversized shapes (200,000-character texts, 5,000-deep
            nesting, 5,000-digit integers).
    """
    roll = rng.random()
    name = rng.choice(names) if rng.random() < 0.8 else rng.choice(["nope", "", "get_"])
    args = {"order_id": _random_json(rng)} if rng.random() < 0.5 else _random_json(rng)
    if huge and roll < 0.01:
        return rng.choice(
            [
                "<tool_call>" * 18_000,
                "[" * 5000,
                '{"name": "x", "arguments": {"n": ' + "9" * 5000 + "}}",
                "x" * 199_000,
                {"content": "y" * 300_000},
            ]
        )
    if roll < 0.45:
        body = json.dumps({"name": name, "arguments": args})
        if rng.random() < 0.2:
            body = body[: rng.randrange(len(body))]  # cut short: invalid JSON
        return f"<tool_call>{body}</tool_call>" if rng.random() < 0.9 else f"<tool_call>{body}"
    if roll < 0.6:
        return rng.choice(["Sure.", "Could you tell me your email?", "Done.", "", "   "])
    if roll < 0.75:
        return "".join(rng.choice(TAGS) for _ in range(rng.randrange(1, 12)))
    if roll < 0.9:
        weird = rng.choice([{1, 2}, Decimal("1.5"), 10**30, SURROGATE, float("nan"), {1: 2}])
        return {
            "role": "assistant",
            "content": rng.choice([None, "hi", [{"text": "a"}, {"text": 3}], 5]),
            "tool_calls": [{"function": {"name": name, "arguments": {"k": weird}}}],
        }
    return rng.choice([None, 42, ["a"], b"x", {"tool_calls": "nope"}])


def step_checked(env: Any, action: Any) -> dict[str, Any]:
    """``env.step(action)`` with the guarantees every action gets: no exception, a bounded
    text observation, no tool bug (internal error), a history that stays writable JSON.
    Resets the env when the episode ends. Returns the info."""
    from rods_env.spaces import MAX_TEXT_CHARS

    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and len(obs) <= MAX_TEXT_CHARS
    assert env.observation_space.contains(obs)
    assert 0.0 <= reward <= 1.0
    bugs = [c for c in info["tool_calls"] if c["error"] == "InternalToolError"]
    assert not bugs, (action, obs[:500])
    json.dumps(info["messages"][-3:], ensure_ascii=False).encode("utf-8")
    if terminated or truncated:
        env.reset()
    return info
