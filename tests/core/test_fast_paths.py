"""The episode's exact fast paths agree with what they replace, on random inputs: record
equality with pydantic's, the scripted user's cached seeded state with a fresh
``random.Random(seed)``, its question test with the question pattern."""

from __future__ import annotations

import random
from functools import cached_property

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from environments.retail.schema import Address, GiftCard, Name, PayPal
from rods_env import user as user_module
from rods_env.database import Record

TEXT = st.text(alphabet="ab?", max_size=2)  # small: equal pairs are common


class _Shown(Record):
    """A record with a cached property: its ``__dict__`` holds a key that is not a field."""

    first: str

    @cached_property
    def shout(self) -> str:
        return self.first.upper()


RECORDS = st.one_of(
    st.builds(Name, first_name=TEXT, last_name=TEXT),
    st.builds(GiftCard, id=TEXT, balance=st.sampled_from([0.0, 1.5, -0.0])),
    st.builds(PayPal, id=TEXT),
    st.builds(Address, address1=TEXT, address2=TEXT, city=TEXT, state=TEXT, country=TEXT, zip=TEXT),
    st.builds(_Shown, first=TEXT),
)


@settings(max_examples=400, deadline=None)
@given(a=RECORDS, b=RECORDS, touch=st.booleans())
def test_record_equality_is_pydantics(a, b, touch):
    if touch and isinstance(a, _Shown):  # fill the cached property's slot in one of them
        _ = a.shout
    assert (a == b) == BaseModel.__eq__(a, b)
    assert (b == a) == BaseModel.__eq__(b, a)
    assert (a == object()) is False


@settings(max_examples=200, deadline=None)
@given(seeds=st.lists(st.text(max_size=12), min_size=1, max_size=6))
def test_a_cached_seeded_state_gives_a_fresh_generators_stream(seeds):
    rng = random.Random()
    for seed in seeds * 2:  # the second pass reads the cache
        rng.setstate(user_module._seeded_state(seed))
        fresh = random.Random(seed)
        assert [rng.random() for _ in range(5)] == [fresh.random() for _ in range(5)]
        assert rng.gauss(0, 1) == fresh.gauss(0, 1)
        assert rng.choice("abcdefg") == fresh.choice("abcdefg")


def test_the_seeded_cache_is_bounded_and_survives_eviction(monkeypatch):
    monkeypatch.setattr(user_module, "_SEEDED_SIZE", 3)
    monkeypatch.setattr(user_module, "_SEEDED", type(user_module._SEEDED)())
    for i in range(10):
        user_module._seeded_state(f"s{i}")
    assert len(user_module._SEEDED) == 3
    rng = random.Random()
    rng.setstate(user_module._seeded_state("s0"))  # evicted: computed again
    assert rng.random() == random.Random("s0").random()


PIECES = [*"?abcmpstw .'", "please provide ", "could you ", "What's ", "tell me"]


@settings(max_examples=400, deadline=None)
@given(message=st.lists(st.sampled_from(PIECES), max_size=12).map("".join))
def test_the_question_test_is_the_question_pattern(message):
    assert user_module._is_question(message) == (user_module._QUESTION.search(message) is not None)
