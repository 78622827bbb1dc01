"""τ²-bench's ``calculate`` without ``eval``: rods' tool replies what τ²-bench's own function
replies (the value, or the error's type and wording), on a generated corpus that includes
its extremes (powers of a million, 3,000-term chains) and leaves out only what would take
τ²-bench's ``eval`` more than about a second (``rods_env.calculator.MAX_WORK``), which rods
refuses in microseconds."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from environments.tau2.package import tau2_module
from environments.tau2.state import CALCULATOR_CHARS, safe_calculate
from rods_env.calculator import TooCostlyError

ALPHABET = "".join(sorted(CALCULATOR_CHARS))


def _outcome(fn, text: str) -> tuple[str, str]:
    try:
        return "value", fn(None, text)
    except Exception as exc:  # the type and wording are what the agent sees
        return type(exc).__name__, str(exc)


def _tau2_calculate():
    return tau2_module("tau2.domains.airline.tools").AirlineTools.calculate


def _compare(text: str) -> bool:
    """Assert that rods and τ²-bench reply alike; False (nothing compared) for integers that
    rods refuses because eval would spend seconds to hours on them."""
    ours = _outcome(safe_calculate, text)
    if ours[0] == TooCostlyError.__name__:
        return False
    with warnings.catch_warnings():  # eval's "perhaps you missed a comma?"
        warnings.simplefilter("ignore", SyntaxWarning)
        theirs = _outcome(_tau2_calculate(), text)
    assert ours == theirs, text
    return True


_BINARY = ["+", "-", "*", "/", "//", " ", "", " * ", " / "]
_CALLS = ["(", "(*", "(**", "( *", "(** "]
_ATOMS = ["()", "...", "0", "1.", ".5", "007", "0.0", "1..2"]


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> str:
    """Arithmetic in τ²-bench's alphabet, built to reach calls, stars, powers and errors."""
    shape = draw(st.integers(0, 7 if depth > 0 else 2))
    if shape == 0:
        return str(draw(st.integers(0, 10**7)))
    if shape == 1:
        return f"{draw(st.integers(0, 10**5))}.{draw(st.integers(0, 999))}"
    if shape == 2:
        return draw(st.sampled_from(_ATOMS))
    inner = expressions(depth - 1)
    if shape == 3:
        return draw(inner) + draw(st.sampled_from(_BINARY)) + draw(inner)
    if shape == 4:
        return "(" + draw(inner) + ")"
    if shape == 5:
        return draw(st.sampled_from(["-", "+", "- -"])) + draw(inner)
    if shape == 6:  # a call on a literal: juxtaposed parentheses, with * or ** inside
        return draw(inner) + draw(st.sampled_from(_CALLS)) + draw(inner) + ")"
    if draw(st.integers(0, 9)) == 0:  # a huge power of a small base: milliseconds in eval
        base = draw(st.sampled_from(["2", "10", "(-2)", "0.5", "1", "0", "(1/3)"]))
        return base + "**" + str(draw(st.sampled_from([1_000_000, 99_999, 1_100, 400, 1_234_567])))
    exponent = draw(st.integers(0, 40))
    return draw(inner) + draw(st.sampled_from(["**", " ** ", "**-"])) + str(exponent)


@st.composite
def chains(draw: st.DrawFn) -> str:
    """Long chains of operators: below the compiler's recursion limit (about 2,990 at the
    top of the stack, three fewer per frame below it) and past it."""
    terms = draw(st.one_of(st.integers(1, 2_000), st.integers(3_000, 6_000)))
    op = draw(st.sampled_from(["+", "-", "*", "/", " + ", "//", "**"]))
    atom = draw(
        st.sampled_from(["1", "0.5", "(1)", "1.5"] if op == "**" else ["1", "2", "0.5", "3"])
    )
    return op.join([atom] * terms)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(expressions())
def test_calculate_replies_as_tau2s_on_built_expressions(text: str) -> None:
    assert set(text) <= CALCULATOR_CHARS
    assume(_compare(text))


@settings(
    max_examples=2500,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much],
)
@given(st.text(alphabet=ALPHABET, min_size=1, max_size=24))
def test_calculate_replies_as_tau2s_on_any_text_of_its_alphabet(text: str) -> None:
    assume(_compare(text))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(chains())
def test_calculate_replies_as_tau2s_on_long_chains(text: str) -> None:
    assume(_compare(text))


@pytest.mark.parametrize(
    "text",
    [
        "2**1000000",  # eval's value, then τ²-bench's float(): "int too large to convert..."
        "2**1000000 - 2**1000000 + 1",
        "(2**1000000)/(2**999999)",
        "2**1000000 * 0.5",
        "(2**99999)**99",
        "+".join(["1"] * 3_000),  # the compiler's RecursionError, in its words
        "*".join(["2"] * 1_000),
        "2(3)",
        "2(**3)",  # calls inside an expression: each error worded as τ²-bench's eval words it
        "2(**8*+5)",
        "()(**())",
        "...(**1)",
        "2(*3)",
        "2(*())",
        "(1/0)(**2)",
        "2(**(1/0))",
        "2(*3)(**4)",
        "1 + 2(3)",
        "12.5 * 2",
        "1/3",
        "10 // 4",
        "(*3)",
        "1e3",
        "2 ** 1100",
    ],
)
def test_calculate_replies_as_tau2s_on_the_odd_cases(text: str) -> None:
    assert _compare(text)


def test_calculate_refuses_in_microseconds_what_hangs_tau2s() -> None:
    for text in ("9**9**9", "9 ** 99999999", "2**10000000000", "3**5000000"):
        kind, message = _outcome(safe_calculate, text)
        assert kind == "TooCostlyError" and message.startswith("The expression is too costly")
        assert "%" not in message and "Hint" not in message  # nothing τ²-bench's tool rejects
