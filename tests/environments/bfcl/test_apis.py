"""The execution layer: safe dispatch, per-episode instances, bounded MathAPI, BFCL's texts."""

from __future__ import annotations

import copy
import decimal
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.bfcl import apis
from environments.bfcl.apis import (
    CLASS_NAMES,
    ERROR_PREFIX,
    GoldParseError,
    Scenario,
    call_text,
    functions,
    functions_of,
    new_world,
    parse_call,
    replay,
    result_text,
)

pytestmark = pytest.mark.usefixtures("bfcl")

FS = Scenario(
    ("GorillaFileSystem", "MathAPI"),
    json.dumps(
        {
            "GorillaFileSystem": {
                "root": {
                    "home": {
                        "type": "directory",
                        "contents": {
                            "w": {
                                "type": "directory",
                                "contents": {"a.txt": {"type": "file", "content": "hello"}},
                            }
                        },
                    }
                }
            }
        }
    ),
)


def test_the_eight_classes_document_128_distinct_functions():
    table = functions()
    assert len(table) == 128
    assert {f.owner for f in table.values()} == set(CLASS_NAMES)
    assert functions_of(["MathAPI"])[:2] == ("absolute_value", "add")
    assert functions()["sort"].params == ("file_name",)


def _bfcl_schema_converter():
    """BFCL's own doc pre-processing and OpenAI conversion, from its installed source (its
    modules import packages that --no-deps leaves out)."""
    import re

    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    from tests.environments.bfcl.official import bfcl_source

    namespace = {
        "copy": copy, "re": re, "json": json, "ModelStyle": ModelStyle,
        "GORILLA_TO_OPENAPI": GORILLA_TO_OPENAPI,
        "is_java": lambda c: False, "is_js": lambda c: False,
    }  # fmt: skip
    bfcl_source("model_handler/utils.py", {"_cast_to_openai_type", "convert_to_tool"}, namespace)
    bfcl_source(
        "utils.py",
        {"_get_language_specific_hint", "_func_doc_language_specific_pre_processing"},
        namespace,
    )

    def convert(doc):
        docs = namespace["_func_doc_language_specific_pre_processing"](
            [copy.deepcopy(dict(doc))], "multi_turn_base"
        )
        return namespace["convert_to_tool"](
            docs, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS
        )[0]

    return convert


def test_tool_schemas_are_exactly_what_bfcl_sends_in_function_calling_mode():
    convert = _bfcl_schema_converter()
    for fn in functions().values():
        assert copy.deepcopy(fn.schema) == convert(fn.doc), fn.name
    assert (
        functions()["add"].schema["function"]["parameters"]["properties"]["a"]["format"] == "float"
    )


# -- dispatch ------------------------------------------------------------------------------
HOSTILE_NAMES = [
    "__import__('pathlib').Path('pwned.txt').write_text",
    "__import__",
    "open",
    "eval",
    "exec",
    "print",
    "getattr",
    "_load_scenario",
    "__class__",
    "__init__",
    "GorillaFileSystem.ls",
    "ls; import os",
    "send_message",  # a real function of a class this scenario does not involve
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_only_allowed_functions_run_and_nothing_is_evaluated(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    world = new_world(FS)
    before = world.snapshot()
    allowed = functions_of(FS.classes)
    result = world.call(name, {"file": "pwned.txt", "mode": "w", "data": "x"}, allowed)
    assert not result.ran and result.error == "unknown_function"
    assert result.text == f"{ERROR_PREFIX}name '{name}' is not defined"
    assert world.differences(before) == {}
    assert list(tmp_path.iterdir()) == []


def test_a_function_outside_the_allowed_set_does_not_run():
    world = new_world(FS)
    assert world.call("ls", {}, {"cd"}).error == "unknown_function"
    assert world.call("ls", {}, {"ls"}).text == '{"current_directory_content": ["w"]}'


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.text(max_size=60), args=st.dictionaries(st.text(max_size=8), st.integers()))
def test_any_name_that_is_not_an_allowed_function_is_an_error_and_changes_nothing(name, args):
    world = new_world(FS)
    before = world.snapshot()
    allowed = frozenset(functions_of(FS.classes))
    result = world.call(name, args, allowed)
    if name not in allowed:
        assert result.error == "unknown_function" and not result.ran
        assert world.differences(before) == {}
    assert isinstance(result.text, str)


def test_bad_arguments_are_error_texts_as_bfcl_words_them():
    world = new_world(FS)
    allowed = functions_of(FS.classes)
    missing = world.call("cd", {}, allowed)
    assert missing.error == "exception"
    assert missing.text == (
        f"{ERROR_PREFIX}GorillaFileSystem.cd() missing 1 required positional argument: 'folder'"
    )
    extra = world.call("cd", {"folder": "w", "x": 1}, allowed)
    assert "unexpected keyword argument 'x'" in extra.text


def test_arguments_never_become_shared_state():
    """BFCL builds every call's arguments anew; post_tweet keeps its `mentions` list."""
    scenario = Scenario(
        ("TwitterAPI",), json.dumps({"TwitterAPI": {"username": "u", "password": "p"}})
    )
    world = new_world(scenario)
    allowed = functions_of(scenario.classes)
    mentions = ["@a"]
    world.call("authenticate_twitter", {"username": "u", "password": "p"}, allowed)
    world.call("post_tweet", {"content": "c", "tags": [], "mentions": mentions}, allowed)
    world.call("mention", {"tweet_id": 0, "mentioned_usernames": ["@b"]}, allowed)
    assert mentions == ["@a"]


# -- per-episode instances -----------------------------------------------------------------
def test_worlds_share_nothing():
    a, b = new_world(FS), new_world(FS)
    allowed = functions_of(FS.classes)
    a.call("cd", {"folder": "w"}, allowed)
    a.call("echo", {"content": "changed", "file_name": "a.txt"}, allowed)
    assert b.call("cd", {"folder": "w"}, allowed).ran
    assert b.call("cat", {"file_name": "a.txt"}, allowed).text == '{"file_content": "hello"}'
    assert a.differences(b.snapshot()) == {"GorillaFileSystem": ("root",)}


def _long_travel():
    from environments.bfcl.tasks import load_tasks

    task = next(t for t in load_tasks("long_context") if "TravelAPI" in t.classes)
    return task.scenario


def test_long_context_travel_bookings_touch_no_module_data_and_no_later_episode():
    """BFCL's TravelAPI adds long-context credit cards to an instance by reference to its
    module's dict: a booking there changes the balance for every later instance."""
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import long_context

    scenario = _long_travel()
    card_id = next(iter(long_context.CREDIT_CARD_EXTENSION))
    pristine = copy.deepcopy(long_context.CREDIT_CARD_EXTENSION[card_id])

    # the hazard, shown on BFCL's own loading: two instances hold the module's very dict
    cls = apis.api_class("TravelAPI")
    first, second = cls(), cls()
    for inst in (first, second):
        inst._load_scenario(
            copy.deepcopy(json.loads(scenario.config)["TravelAPI"]), long_context=True
        )
    assert first.credit_card_list[card_id] is long_context.CREDIT_CARD_EXTENSION[card_id]
    assert second.credit_card_list[card_id] is first.credit_card_list[card_id]

    balances = []
    for _ in range(2):
        world = new_world(scenario)
        travel = world.instances["TravelAPI"]
        assert travel.credit_card_list[card_id] is not long_context.CREDIT_CARD_EXTENSION[card_id]
        balances.append(travel.credit_card_list[card_id]["balance"])
        travel.credit_card_list[card_id]["balance"] -= 1000  # what a booking does
    assert balances[0] == balances[1] == pristine["balance"]
    assert long_context.CREDIT_CARD_EXTENSION[card_id] == pristine


# -- MathAPI -------------------------------------------------------------------------------
MATH = Scenario(("MathAPI",), "{}")


def _precision():
    import mpmath

    return mpmath.mp.prec, mpmath.mp.dps, decimal.getcontext().prec


@pytest.mark.parametrize(
    ("name", "args", "needle"),
    [
        (
            "logarithm",
            {"value": 10, "base": 2, "precision": 2_000_000},
            "precision must be at most",
        ),
        (
            "logarithm",
            {"value": 10, "base": 2, "precision": "99999999"},
            "precision must be at most",
        ),
        ("logarithm", {"value": 10, "base": 2, "precision": 1e300}, "precision must be at most"),
        ("square_root", {"number": 2, "precision": 10**9}, "precision must be at most"),
        ("power", {"base": 2, "exponent": 10**17}, "exponent must be at most"),
        ("round_number", {"number": 5, "decimal_places": -(10**17)}, "decimal_places must be"),
    ],
)
def test_mathapi_arguments_that_would_hang_are_refused_at_once(name, args, needle):
    world = new_world(MATH)
    before = _precision()
    t0 = time.perf_counter()
    result = world.call(name, args, functions_of(["MathAPI"]))
    assert time.perf_counter() - t0 < 1.0
    assert result.error == "refused" and not result.ran
    assert needle in json.loads(result.text)["error"]
    assert _precision() == before


@pytest.mark.parametrize("precision", [1, 4, 50, 1000])
def test_mathapi_leaves_the_process_precision_as_it_was(precision):
    import mpmath

    world = new_world(MATH)
    before = _precision()
    allowed = functions_of(["MathAPI"])
    log = world.call("logarithm", {"value": 980.0, "base": 20, "precision": precision}, allowed)
    root = world.call("square_root", {"number": 2.0, "precision": precision}, allowed)
    assert log.error is None and root.error is None
    assert _precision() == before
    # the text is printed at the asked precision, as BFCL prints it
    mpmath.mp.dps = precision
    try:
        expected = str({"result": mpmath.log(980.0) / mpmath.log(20)})
    finally:
        mpmath.mp.prec = before[0]
    assert log.text == expected


def test_result_text_is_bfcls():
    import mpmath

    assert result_text("plain") == "plain"
    assert result_text({"a": [1, "é"]}) == '{"a": [1, "\\u00e9"]}'
    assert result_text({"result": mpmath.mpf(2)}) == "{'result': mpf('2.0')}"
    assert result_text({"result": decimal.Decimal("1.5")}) == "{'result': Decimal('1.5')}"
    assert result_text([1, 2]) == "[1, 2]"
    assert result_text(None) == "None"


# -- gold strings --------------------------------------------------------------------------
def test_gold_strings_are_parsed_never_evaluated():
    call = parse_call("sort('final_report.pdf')")
    assert (call.name, call.arguments) == ("sort", {"file_name": "final_report.pdf"})
    assert parse_call("mv(source='a', destination='b')").arguments == {
        "source": "a",
        "destination": "b",
    }
    for bad in (
        "__import__('os').system('true')",
        "ls(a=open('x'))",
        "sort(*x)",
        "ls(**{'a': 1})",
        "not_a_function(1)",
        "ls",
        "ls(1, 2, 3)",
        "ls(a=[1, f()])",
    ):
        with pytest.raises(GoldParseError):
            parse_call(bad)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "file_name", "x"]),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=3,
    )
)
def test_call_text_round_trips_through_the_gold_parser(args):
    """What BFCL's checker receives for a call (its call string) means the same call."""
    assert parse_call(call_text("sort", args)).arguments == args


def test_gold_replay_keeps_results_and_state_per_checked_turn():
    calls = [[parse_call("cd(folder='w')"), parse_call("cat(file_name='a.txt')")], []]
    run = replay(FS, calls)
    assert run.turns[0].results == (
        '{"current_working_directory": "w"}',
        '{"file_content": "hello"}',
    )
    assert run.checked_turns == (0,)
    assert run.turns[1].state is None and run.errors == ()
