"""Whole-token text surgery and the sentence check: properties and examples."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rods_env.synthesis.text import remove_value, states, text_problems, token_pattern

WORDS = st.sampled_from(
    ["cancel", "order", "economy", "no", "NLYW4C", "4", "#W1234567", "the", "my", "to", "a@b.com"]
)
VALUES = st.sampled_from(
    ["cancel", "order", "economy", "no", "NLYW4C", "4", "#W1234567", "a@b.com"]
)


@given(text=st.text(max_size=40), value=st.text(min_size=1, max_size=6))
def test_states_is_the_whole_token_pattern(text, value):
    assert states(text, value) == (token_pattern(value).search(text) is not None)


@settings(max_examples=200)
@given(words=st.lists(WORDS, min_size=1, max_size=12), value=VALUES)
def test_remove_value_takes_out_only_whole_tokens_of_the_value(words, value):
    text = " ".join(words) + "."
    out = remove_value(text, value, "reference")  # a label that is none of the words
    assert not states(out, value)
    # every other word of the text is still there (none was cut inside)
    for word in words:
        if word != value and not states(word, value) and word not in ("my",):
            assert word in out, (text, value, out)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Please upgrade my cabin cabin to business.", "doubled word"),
        ("My the order with the Luggage Set has not shipped.", "stacked determiners"),
        ("Charge it to my card and pay with .", "dangling"),
        ("Send it to.", "dangling"),
        ("Change it, , please.", "stray punctuation"),
        ("Ship it ( ) today.", "stray punctuation"),
        ("I moved. The new address.", "fragment"),
        ("", "empty"),
    ],
)
def test_text_problems_name_what_does_not_read(text, problem):
    assert any(p.startswith(problem) for p in text_problems(text)), text_problems(text)


@pytest.mark.parametrize(
    "text",
    [
        "Quick one. Can you cancel my order? Thanks.",
        "Please book economy seats for Chen Chen and Zara Thomas.",
        "Ship to 202 David Via, Suite 104, Peterbury, UT 11201, USA.",
        "I want the Portable Charger (capacity: 10000mAh, output: USB-A, color: white).",
        "My other reservation, VQOFU7, is fine as it is.",
        "Which one should I go with?",
        "My order has not shipped.",
    ],
)
def test_ordinary_requests_read_as_sentences(text):
    assert text_problems(text) == []


def test_token_pattern_boundaries():
    assert re.search(token_pattern("no"), "economy, no insurance")
    assert not token_pattern("no").search("economy")
    assert not token_pattern("4").search("NLYW4C")
    assert token_pattern("#W12").search("order #W12.") and not token_pattern("#W12").search("#W123")
