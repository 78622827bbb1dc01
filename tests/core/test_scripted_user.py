"""ScriptedUser answers exactly what it is asked for, and speaks in its persona."""

from __future__ import annotations

import pytest

from rods_env import ScriptedUser, TurnView
from rods_env.rewards import mentions
from rods_env.task import Task, Turn, UserProfile
from rods_env.user import PERSONA_NAMES, PERSONAS, persona_name, persona_text

FACTS = {
    "email": "anadiaz77@example.com",
    "first name": "Ana",
    "last name": "Diaz",
    "zip code": "90210",
    "user id": "ana_diaz_1234",
    "order id": "#W1234567",
    "reservation id": "NLYW4C",
    "new address": "1 Main St, Springfield, IL 62701, USA",
    "checked bags": "4",
}


def _task(request: str = "I need help with my booking.") -> Task:
    return Task(
        id="u",
        domain="toy",
        skill="s",
        user=UserProfile(name="Ana Diaz", facts=FACTS),
        turns=(Turn(request=request),),
    )


def _view(task: Task) -> TurnView:
    return TurnView(task=task, turn=0, goal_reached=False, effect_present=False, needs_write=True)


def _told(reply: str) -> set[str]:
    return {label for label, value in FACTS.items() if mentions(reply, value)}


@pytest.mark.parametrize(
    ("question", "told"),
    [
        # the leaks: asked for an email, it also gave the order id; asked for a user
        # id, the reservation id
        ("Could you give me the email address on your order?", {"email"}),
        ("Can you give me your user id so I can look up the reservation?", {"user id"}),
        ("What is the order number?", {"order id"}),
        ("Which order would you like to cancel?", {"order id"}),
        ("Could you tell me your booking reference?", {"reservation id"}),
        ("What's your full name and zip code?", {"first name", "last name", "zip code"}),
        ("Could you please tell me your first name?", {"first name"}),
        ("What is the new address?", {"new address"}),
        ("How many checked bags do you need?", {"checked bags"}),
        ("Is there anything about your order you can share?", set()),
    ],
)
def test_the_user_answers_only_what_was_asked_for(question, told):
    task = _task()
    user = ScriptedUser()
    user.start(task)
    reply = user.reply(question, _view(task))
    assert _told(reply.text) == told, reply.text


def test_a_value_inside_another_token_does_not_count_as_told():
    # "4" (the bags) is inside the reservation code NLYW4C: the user has not said it yet
    task = _task("Please add bags to reservation NLYW4C.")
    user = ScriptedUser()
    user.start(task)
    reply = user.reply("How many checked bags in total?", _view(task))
    assert reply.text.startswith("Sure,") and "my checked bags is 4" in reply.text
    again = user.reply("How many checked bags was it?", _view(task))
    assert again.text.startswith("As I said,")


def test_personas_are_recorded_as_name_and_description():
    for name in PERSONA_NAMES:
        text = persona_text(name)
        assert text.startswith(f"{name}: ") and persona_name(text) == name
        assert PERSONAS[name].openers and PERSONAS[name].closers
    assert persona_name("In a hurry; writes short messages.") is None
    assert persona_name("chatty: something else") is None


def test_the_question_and_confirmation_patterns_read_as_without_their_guards() -> None:
    """The patterns open with a guard of their words' first letters (speed); it changes no
    verdict: under IGNORECASE the guard's class matches exactly the characters the words'
    first letters match (every code point), and texts read the same with and without it."""
    import re
    import sys

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from rods_env import user

    plain = {
        "question": re.compile(
            r"\?|\b(please (provide|share|tell|give|confirm)|tell me|share|provide|what is|"
            r"what's|which|could you|can you|may i have)\b",
            re.IGNORECASE,
        ),
        "confirm": re.compile(
            r"\b(confirm|proceed|go ahead|shall i|should i|do you want me|would you like me|"
            r"is (that|this) (correct|right|ok|okay)|ok to|okay to|are you sure)\b",
            re.IGNORECASE,
        ),
    }
    guarded = {"question": user._QUESTION, "confirm": user._CONFIRM}
    for letters in ("ptswcm", "cpgsdwioa"):
        guard = re.compile(f"[{letters}]", re.IGNORECASE)
        firsts = [re.compile(c, re.IGNORECASE) for c in letters]
        for code in range(sys.maxunicode + 1):
            c = chr(code)
            assert (guard.fullmatch(c) is None) == all(f.fullmatch(c) is None for f in firsts)

    words = st.sampled_from(
        ["Shall I", "PROCEED", "is this OK", "Could you", "ſhare", "what's", "okay to", "x", " "]
    )

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.lists(st.one_of(words, st.text(max_size=8)), max_size=12).map(" ".join))
    def same(text: str) -> None:
        for name, pattern in plain.items():
            assert (pattern.search(text) is None) == (guarded[name].search(text) is None)

    same()
