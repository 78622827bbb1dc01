"""Reading as BFCL reads: names, argument names and argument text, against BFCL's own
decoder and executor on generated spellings.

Each example sends one call, spelled in some way, to BFCL's function-calling decoder
(``convert_to_function_call``) and executor (``execute_multi_turn_func_call``, as its
checker runs it), and to rods' judges: the result texts must be equal, error texts
included (the official judge's; the strict judge's too where BFCL's rewrite leaves the
arguments alone). The spellings are whitespace of every kind around the name and the
argument names, case slips, prefixes, full-width letters and typos: none is code, so
BFCL's ``eval`` can only call an API method or fail (checked before it runs).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.bfcl.apis import GoldCache, functions_of
from environments.bfcl.reading import CHECKER_MODEL, reader
from environments.bfcl.tasks import get_task
from environments.bfcl.verdicts import OFFICIAL, STRICT, Judge
from tests.environments.bfcl.official import bfcl_convert, isolated, safe_call_strings

pytestmark = pytest.mark.usefixtures("bfcl")

TASK = "multi_turn_base_15"
"""GorillaFileSystem and MathAPI: calls whose results show their arguments."""

SPACES = (
    " \t\n\r\f\v\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2005\u200a\u2028\u2029"
    "\u202f\u205f\u3000\u200b\ufeff"
)
"""Every kind of whitespace (and two zero-width look-alikes) Python's tokenizer, BFCL's
regular expression or ``str.strip`` treat differently."""


def _wide(text: str, positions: list[int]) -> str:
    return "".join(
        chr(ord(c) + 0xFEE0) if i in positions and "!" <= c <= "~" else c
        for i, c in enumerate(text)
    )


@st.composite
def spelled(draw, word: str) -> str:
    """``word`` with whitespace around it, a case slip, a prefix, full-width letters or a
    typo (or as it is)."""
    how = draw(st.sampled_from(("plain", "space", "space", "space", "case", "prefix", "wide")))
    if how == "space":
        before = draw(st.text(st.sampled_from(SPACES), max_size=3))
        after = draw(st.text(st.sampled_from(SPACES), max_size=3))
        return before + word + after
    if how == "case":
        return draw(st.sampled_from((word.upper(), word.capitalize(), word.swapcase())))
    if how == "prefix":
        return draw(st.sampled_from(("functions.", "tools.", "api."))) + word
    if how == "wide":
        positions = draw(st.lists(st.integers(0, len(word) - 1), min_size=1, max_size=2))
        return _wide(word, positions)
    return word


TEXTS = st.sampled_from(
    ("hello", "Hello (world)", "run ls() now", "a mean (x)", "add(1, 2)", "x\n(y)", "")
)

NON_FINITE = st.sampled_from((float("nan"), float("inf"), -float("inf")))
"""Numbers whose repr Python cannot read back (rods' parser refuses them in actions; the
reading still says what BFCL would)."""

CALLS = st.one_of(
    st.tuples(st.just("echo"), st.fixed_dictionaries({"content": TEXTS})),
    st.tuples(st.just("cd"), st.fixed_dictionaries({"folder": st.sampled_from(("a", "..", "b"))})),
    st.tuples(
        st.just("add"),
        st.fixed_dictionaries({"a": st.integers(-5, 5) | NON_FINITE, "b": st.integers(-5, 5)}),
    ),
    st.tuples(st.just("pwd"), st.just({})),
)


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data(), call=CALLS)
def test_rods_reads_every_spelling_as_bfcl_does(data, call):
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import (
        execute_multi_turn_func_call,
    )

    task = get_task(TASK)
    function, arguments = call
    name = data.draw(spelled(function), label="name")
    sent = {data.draw(spelled(key), label=f"key {key}"): v for key, v in arguments.items()}
    if arguments and data.draw(st.booleans(), label="a key twice"):
        key, value = next(iter(arguments.items()))
        sent.setdefault(data.draw(spelled(key), label="again"), value)
    as_json = data.draw(st.booleans(), label="arguments as a JSON string")
    decoded = bfcl_convert()([{name: json.dumps(sent) if as_json else sent}])
    safe_call_strings([[decoded]])
    entry = task.entry()
    with isolated():
        theirs, _ = execute_multi_turn_func_call(
            decoded,
            entry["initial_config"],
            entry["involved_classes"],
            CHECKER_MODEL,
            task.id,
            long_context=False,
            is_evaL_run=True,
        )
    reading = reader(task.id, task.classes).read(name, sent)
    allowed = frozenset(functions_of(task.classes))
    official = Judge(task, OFFICIAL, GoldCache()).run(reading, allowed)
    assert official.text == theirs[0], (name, sent, reading)
    if not reading.rewritten:
        assert Judge(task, STRICT, GoldCache()).run(reading, allowed).text == theirs[0]
    if reading.function is None:
        assert theirs[0].startswith("Error during execution: ")


@pytest.mark.parametrize(
    ("name", "function"),
    [
        ("cp", "cp"),
        ("cp ", "cp"),
        (" cp", "cp"),
        ("\ncp", "cp"),
        ("cp\n", "cp"),
        ("\t cp\u3000", "cp"),
        ("cp\u00a0", "cp"),
        ("\u00a0cp", None),
        ("\vcp", None),
        ("cp\u200b", None),
        ("Cp", None),
        ("functions.cp", None),
        ("c p", None),
        ("cp(source='x')#", None),  # code around the name: BFCL would run it
        ("#\ncp", None),
    ],
)
def test_names_read_as_bfcl_reads_them(name, function):
    task = get_task("multi_turn_base_0")
    assert reader(task.id, task.classes).read(name, {}).function == function


def test_argument_names_and_text_read_as_bfcl_reads_them():
    task = get_task(TASK)
    read = reader(task.id, task.classes).read
    assert dict(read("cd", {" folder\t": "a"}).arguments) == {"folder": "a"}
    assert dict(read("cd", {"ｆｏｌｄｅｒ": "a"}).arguments) == {"folder": "a"}
    assert read("cd", {"fol der": "a"}).function is None
    assert read("cd", {"folder": "a", "folder ": "b"}).function is None  # repeated
    plain = read("echo", {"content": "hello"})
    assert not plain.rewritten
    note = read("echo", {"content": "Hello (world) and ls()"})
    assert note.rewritten and note.arguments["content"] == "Hello (world) and ls()"
    instance = f"{CHECKER_MODEL}_eval_{task.id}_GorillaFileSystem_instance"
    assert note.checked["content"] == f"Hello(world) and {instance}.ls()"
    gold = reader(task.id, task.classes, gold=True).read_gold("echo(content='ls()')")
    assert gold.arguments["content"] == f"{CHECKER_MODEL}_ground_truth_eval_{task.id}" + (
        "_GorillaFileSystem_instance.ls()"
    )


def test_no_api_function_is_defined_where_bfcl_evaluates_calls():
    """The harness lets undefined names reach BFCL's eval: an API function's name, when its
    class is not involved, must be undefined there too."""
    from environments.bfcl.apis import functions
    from tests.environments.bfcl.official import _undefined_ok

    assert not set(functions()) & _undefined_ok()
