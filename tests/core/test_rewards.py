"""The output rules of a turn: matching, echo, evidence, competing values, spray, refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rods_env.gold import Gold, TurnGold
from rods_env.rewards import (
    REFUSAL,
    SPRAY_LIMIT,
    SeenValues,
    Speech,
    TurnResult,
    check_outputs,
    failures_of,
    mask_echo,
    mentions,
    success,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "reward-design.md"


@pytest.mark.parametrize(
    ("text", "output", "expected"),
    [
        ("The total is 100 dollars.", "10", False),
        ("The total is 10 dollars.", "10", True),
        ("The total is 10.5 dollars.", "10", False),
        ("The total is $10.00.", "10", True),
        ("Refund: 1,234.50 USD", "1234.5", True),
        ("Refund: 1234.50 USD", "1,234.50", True),
        ("Refund: $54.04.", "54.04", True),
        ("On 2024-03-05 we shipped", "3", False),
        # a code of digits only is glued like a number: not said by a date, time or range
        ("On 2024-03-05 we shipped", "03", False),
        ("On 2024-03-05 we shipped", "05", False),
        ("It left at 10:03.", "03", False),
        ("Pages 03-05.", "03", False),
        ("Version 1.03 is out.", "03", False),
        ("Locker #03 is yours.", "03", False),
        ("Your row is 03.", "03", True),
        ("Your row is 03, seat A.", "03", True),
        ("Zip code 02139 (MA)", "02139", True),
        ("Either 03 or 04.", "04|05", True),
        ("On 2024-04-05.", "04|05", False),
        ("On 2024-03-05 we shipped", "2024-03-05", True),
        ("Tracking number: 1Z9999.", "1z9999", True),
        ("Tracking number: 1Z99990.", "1Z9999", False),
        ("Order #W0012 is cancelled", "#W0012", True),
        ("Order #W00123 is cancelled", "#W0012", False),
        ("there are 3 variants", "3", True),
        ("there are 13 variants", "3", False),
        ("Your flight is DELAYED", "delayed", True),
        ("anything", "", True),
        ("Sorry, I can't do that now.", "cannot|can't|unable", True),
        ("I am unable to help.", "cannot|can't|unable", True),
        ("Done, it is cancelled.", "cannot|can't|unable", False),
        ("Your total is 100.", "10|20", False),
        ("The cancellation is not possible.", "cancel*", True),
        ("The counter is closed.", "cancel*|count", False),
        ("A refund of -10 was posted.", "-10", True),
        ("A refund of 10 was posted.", "-10", False),
        ("It costs 10 (ten) dollars.", "10", True),
        ("It costs 10.", "10", True),
        ("It costs 10.004.", "10", True),
        ("It costs 10.006.", "10", False),
    ],
)
def test_mentions(text, output, expected):
    assert mentions(text, output) is expected


def _doc_table() -> list[tuple[str, str, bool]]:
    """Rows of the matching table in docs/reward-design.md: output, agent text, verdict."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("<!-- matching-table -->")[1]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) == 3 and cells[2] in ("accepted", "rejected"):
            output, said = (re.sub(r"^`|`$", "", c).replace("\\|", "|") for c in cells[:2])
            rows.append((output, said, cells[2] == "accepted"))
        elif rows and not line.strip():
            break
    return rows


def test_the_documented_matching_table_is_what_the_reward_does():
    rows = _doc_table()
    assert len(rows) >= 20
    assert any(ok for *_, ok in rows) and any(not ok for *_, ok in rows)
    wrong = [(o, t) for o, t, ok in rows if mentions(t, o) is not ok]
    assert not wrong, wrong


# -- seen values and the spray rules ---------------------------------------------------------
def _order(order_id: str, tracking: str, amount: float) -> str:
    return json.dumps(
        {
            "order_id": order_id,
            "status": "delivered",
            "fulfilments": [{"tracking_ids": [tracking], "item_ids": ["1008292230"]}],
            "payment_history": [
                {"transaction_type": "payment", "amount": amount, "payment_method_id": "pp_1"}
            ],
        }
    )


def _seen(*outputs: tuple[str, str]) -> SeenValues:
    seen = SeenValues()
    for tool, out in outputs:
        seen.add(tool, out)
    return seen


def _check(outputs, agent, customer="", seen=None, operations=(), rivals=None):
    turn = TurnGold(
        effect={}, outputs=tuple(outputs), operations=tuple(operations), rivals=rivals or {}
    )
    return check_outputs(turn, Speech(agent=agent, customer=customer, seen=seen or SeenValues()))


TWO_ORDERS = (
    ("get_order_details", _order("#W0000001", "349201234567", 54.04)),
    ("get_order_details", _order("#W0000002", "349207654321", 99.99)),
)


def test_the_answer_in_a_normal_sentence_passes():
    said = _check(
        ["349201234567"],
        "The tracking number of order #W0000001 is 349201234567.",
        seen=_seen(*TWO_ORDERS),
    )
    assert said.ok and said.spray == 1  # the order id, a value from a tool result


def test_a_competing_value_of_the_same_field_fails():
    said = _check(
        ["349201234567"],
        "It is 349201234567 or maybe 349207654321.",
        seen=_seen(*TWO_ORDERS),
    )
    assert not said.ok and said.competing == ("349207654321",)
    amounts = _check(["54.04"], "You paid $54.04 (or was it 99.99?)", seen=_seen(*TWO_ORDERS))
    assert amounts.competing == ("99.99",)


def test_values_of_other_fields_do_not_compete():
    said = _check(
        ["349201234567"],
        "Order #W0000001 (paid 54.04, item 1008292230) ships as 349201234567.",
        seen=_seen(*TWO_ORDERS),
    )
    assert said.ok and not said.competing


def test_stating_many_values_fails_even_without_a_competitor():
    dump = json.dumps({"order_id": "#W0000001", "numbers": list(range(100, 100 + 2 * SPRAY_LIMIT))})
    seen = _seen(("get_order_details", _order("#W0000001", "349201234567", 54.04)), ("x", dump))
    values = ", ".join(str(v) for v in range(100, 100 + SPRAY_LIMIT + 1))
    said = _check(["349201234567"], f"349201234567; also {values}", seen=seen)
    assert not said.ok and said.spray == SPRAY_LIMIT + 1
    fewer = ", ".join(str(v) for v in range(100, 100 + SPRAY_LIMIT))
    assert _check(["349201234567"], f"349201234567; also {fewer}", seen=seen).ok


def test_enumerating_numbers_without_looking_anything_up_fails():
    """The bound counts every number and id stated, seen in a tool result or not."""
    guesses = " ".join(str(n) for n in range(200, 300))
    said = _check(["235"], f"The fare is one of {guesses}.")
    assert not said.ok and said.spray == 99


def test_a_word_of_a_closed_vocabulary_competes_with_the_others():
    """Listing every flight status without a look-up is not an answer."""
    statuses = {"delayed": ("available", "on time", "flying", "landed", "cancelled")}
    spray = _check(["delayed"], "It is delayed, on time or cancelled.", rivals=statuses)
    assert not spray.ok and spray.competing == ("cancelled", "on time")
    assert _check(["delayed"], "Flight RD123 is delayed.", rivals=statuses).ok


def test_a_forbidden_phrase_fails_the_turn():
    outputs = ["ABC123", "24 hours|24-hour", "!basic economy|member*"]
    seen = _seen(RESERVATION)
    right = "Reservation ABC123 cannot be cancelled: it was booked more than 24 hours ago."
    assert _check(outputs, right, seen=seen).ok
    every_rule = right + " Also it is basic economy and you are not a member."
    assert _check(outputs, every_rule, seen=seen).missing == ("!basic economy|member*",)


def test_a_calculator_result_has_no_competitors():
    seen = _seen(("calculate", "320"), ("calculate", "100"))
    assert _check(["320"], "Your cards hold 100 + 220 = 320 in total.", seen=seen).ok


def test_overlong_messages_fail():
    said = _check(["54.04"], "54.04 " + "blah " * 10_000, seen=_seen(*TWO_ORDERS))
    assert said.overlong and not said.ok


# -- echo and evidence ---------------------------------------------------------------------
REQUEST = "Hello, I want to cancel my reservation ABC123 because I'm sick and can't travel."
RESERVATION = ("get_reservation_details", json.dumps({"reservation_id": "ABC123"}))


def test_mask_echo_blanks_runs_of_copied_words():
    assert mask_echo(REQUEST, REQUEST).count("…") == len(REQUEST.split())
    mine = "Reservation ABC123 cannot be cancelled."
    assert mask_echo(mine, REQUEST) == mine
    assert "can't" not in mask_echo(f"OK. {REQUEST}", REQUEST)


def test_echoing_the_customer_is_not_saying_it():
    outputs = ["ABC123", REFUSAL]
    echo = _check(outputs, REQUEST, customer=REQUEST, seen=_seen(RESERVATION))
    assert set(echo.missing) == {"ABC123", REFUSAL}
    honest = "I'm sorry: reservation ABC123 cannot be cancelled, it was booked too long ago."
    assert _check(outputs, honest, customer=REQUEST, seen=_seen(RESERVATION)).ok


def test_a_value_the_customer_said_needs_a_tool_result_showing_it():
    honest = "Reservation ABC123 cannot be cancelled."
    assert _check(["ABC123"], honest, customer=REQUEST).missing == ("ABC123",)
    assert _check(["ABC123"], honest, customer=REQUEST, seen=_seen(RESERVATION)).ok
    # a value the customer never said needs no evidence (the reward judges what is said)
    assert _check(["XYZ789"], "It is XYZ789.", customer=REQUEST).ok


# -- refusals of withheld tools ------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "passes"),
    [
        ("I'm sorry, I cannot do that.", False),
        ("Done, the order is cancelled.", False),
        ("I can't cancel order #W0000001 right now.", True),
        ("Sorry, cancellations are not possible at the moment.", True),
        ("I'm unable to process a cancellation today.", True),
    ],
)
def test_a_withheld_turn_needs_a_refusal_that_names_the_operation(text, passes):
    assert _check([], text, operations=("cancel",)).ok is passes


# -- success -------------------------------------------------------------------------------
class _DB:
    def __init__(self, changes):
        self._changes = changes

    def changes(self):
        return self._changes


def test_success_needs_every_turn_passed_and_the_gold_final_state():
    gold = Gold(turns=(TurnGold({}, ()), TurnGold({}, ())), final={}, call_outputs=())
    passed = TurnResult(0, True, True, (), ())
    failed = TurnResult(1, False, True, (), ())
    assert success(gold, _DB({}), [passed, passed])  # type: ignore[arg-type]
    # the right final state reached with the writes in the wrong turns is not a success
    assert not success(gold, _DB({}), [passed, failed])  # type: ignore[arg-type]
    assert not success(gold, _DB({("t", "k"): 1}), [passed, passed])  # type: ignore[arg-type]


# -- the word-set shortcut of Said agrees with the pattern search -----------------------------
@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    st.text(alphabet="ab01 -_:.#/é", max_size=40),
    st.text(alphabet="ab01_-.", min_size=1, max_size=5),
)
def test_said_finds_a_token_exactly_where_the_pattern_does(text, token):
    from rods_env.rewards import Said, _has_token

    token = token.lower()
    assert Said(text).has_value(("s", token)) == _has_token(text.lower(), token)


# -- why a turn failed ---------------------------------------------------------------------
def _why(outputs, agent, **kwargs):
    said = _check(outputs, agent, **kwargs)
    return [(f.rule, f.values) for f in failures_of((), (), said)]


def test_each_output_rule_is_named_in_the_failures():
    assert _why(["54.04"], "I could not find it.") == [("output_missing", ("54.04",))]
    # an answer that only repeats the customer's request
    assert _why(["ABC123", REFUSAL], REQUEST, customer=REQUEST, seen=_seen(RESERVATION)) == [
        ("output_echoed", ("ABC123", REFUSAL))
    ]
    honest = "Reservation ABC123 cannot be cancelled."
    assert _why(["ABC123"], honest, customer=REQUEST) == [("no_evidence", ("ABC123",))]
    assert _why([], "Done, the order is cancelled.", operations=("cancel",)) == [
        ("refusal_missing", ())
    ]
    assert _why([], "I'm sorry, I cannot do that.", operations=("cancel",)) == [
        ("operation_not_named", ())
    ]
    every_rule = (
        "Reservation ABC123 cannot be cancelled: it was booked more than 24 hours ago. "
        "Also it is basic economy."
    )
    assert _why(
        ["ABC123", "24 hours|24-hour", "!basic economy|member*"],
        every_rule,
        seen=_seen(RESERVATION),
    ) == [("forbidden_said", ("basic economy|member*",))]
    assert _why(["54.04"], "You paid $54.04 (or was it 99.99?)", seen=_seen(*TWO_ORDERS)) == [
        ("competing_value", ("99.99",))
    ]
    guesses = " ".join(str(n) for n in range(200, 300))
    assert _why(["235"], f"The fare is one of {guesses}.") == [("spray", ("99 values",))]
    assert _why(["54.04"], "54.04 " + "blah " * 10_000) == [("overlong", ())]
    assert _why(["54.04"], "You paid $54.04.", seen=_seen(*TWO_ORDERS)) == []


def test_failure_text_names_the_rule_and_shortens_alternatives():
    from rods_env.rewards import RULES, Failure

    assert Failure("output_missing", ("203.31",)).text == "a required output was not said: 203.31"
    assert Failure("output_missing", (REFUSAL,)).text.endswith(
        f": cannot (or {REFUSAL.count('|')} alternatives)"
    )
    assert Failure("not_reached").to_dict() == {
        "rule": "not_reached",
        "values": [],
        "text": RULES["not_reached"],
    }


def test_the_documented_failure_rules_are_the_rewards():
    from rods_env.rewards import RULES

    text = DOC.read_text(encoding="utf-8").split("<!-- failure-rules -->", 1)[1]
    text = text.strip().split("\n\n", 1)[0]  # the table, up to the first blank line
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, flags=re.M)
    assert dict((rule, meaning.strip()) for rule, meaning in rows) == RULES
