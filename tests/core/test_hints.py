"""Actionable hints (rods_env/hints.py): each kind on a representative failure, none on a
call that works, and the keyword on rods' own environments. The adversary tests (no hint
hands over a gold value, no reward changes) are tests/test_hints_adversary.py; BFCL's own
hints are tests/environments/bfcl/test_hints.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rods_env.env import ToolEnv, make_env
from rods_env.errors import ConfigError
from rods_env.hints import (
    HINT_HEAD,
    KINDS,
    MAX_HINTS,
    Hint,
    allowed_values,
    failure_hints,
    looks_failed,
    schema_hints,
    with_hints,
)
from rods_env.registry import domain_names
from tests.core.toy_domain import TOY


def _tool(name: str, props: dict[str, Any], required: list[str], description: str = "") -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description or f"The {name} tool.",
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


SCHEMAS = [
    _tool(
        "get_account",
        {"account_id": {"type": "string", "description": "The account id, such as 'ACC0001'."}},
        ["account_id"],
    ),
    _tool(
        "transfer",
        {
            "amount": {"type": "integer", "description": "Whole dollars."},
            "currency": {"type": "string", "description": "Currency. [Enum]: USD, EUR, JPY"},
            "mode": {"type": "string", "enum": ["instant", "standard"], "description": "How."},
        },
        ["amount"],
    ),
    _tool("bank_login", {"user": {"type": "string", "description": "User name."}}, ["user"]),
    _tool("get_login_status", {}, []),
    _tool("list_orders", {}, [], "List the customer's orders."),
    _tool("get_user", {"name": {"type": "string", "description": "A name."}}, ["name"]),
]


def _kinds(hints: list[Hint]) -> list[str]:
    return [h.kind for h in hints]


def test_unknown_function_gets_the_closest_names() -> None:
    hints = schema_hints("get_acount", {}, SCHEMAS)
    assert _kinds(hints) == ["unknown_function"]
    assert "Did you mean get_account" in hints[0].text
    far = schema_hints("launch_rocket", {}, SCHEMAS)
    assert _kinds(far) == ["unknown_function"] and "exact name" in far[0].text


def test_withheld_function_is_said_unavailable() -> None:
    hints = schema_hints("refund", {"x": 1}, SCHEMAS, withheld={"refund"})
    assert _kinds(hints) == ["withheld_function"]
    assert "not available in this turn" in hints[0].text


def test_missing_argument_names_its_type_and_description() -> None:
    hints = schema_hints("get_account", {}, SCHEMAS)
    assert _kinds(hints) == ["missing_argument"]
    assert "'account_id'" in hints[0].text and "string" in hints[0].text
    assert "such as 'ACC0001'" in hints[0].text


def test_unexpected_argument_names_the_parameters() -> None:
    hints = schema_hints("get_account", {"account_id": "A", "acount": "B"}, SCHEMAS)
    assert _kinds(hints) == ["unexpected_argument"]
    assert "no parameter 'acount'" in hints[0].text and "account_id" in hints[0].text


def test_wrong_type_names_the_expected_type() -> None:
    hints = schema_hints("transfer", {"amount": "ten"}, SCHEMAS)
    assert _kinds(hints) == ["wrong_type"]
    assert "must be integer, not a string" in hints[0].text
    assert schema_hints("transfer", {"amount": True}, SCHEMAS)[0].kind == "wrong_type"
    assert schema_hints("transfer", {"amount": 10}, SCHEMAS) == []


def test_not_allowed_value_lists_the_allowed_values() -> None:
    enum = schema_hints("transfer", {"amount": 1, "mode": "fast"}, SCHEMAS)
    assert _kinds(enum) == ["not_allowed_value"] and "instant, standard" in enum[0].text
    written = schema_hints("transfer", {"amount": 1, "currency": "euro"}, SCHEMAS)
    assert _kinds(written) == ["not_allowed_value"] and "USD, EUR, JPY" in written[0].text
    assert schema_hints("transfer", {"amount": 1, "currency": "EUR"}, SCHEMAS) == []


@pytest.mark.parametrize(
    ("description", "values"),
    [
        ("The base currency. [Enum]: USD, RMB, EUR", ["USD", "RMB", "EUR"]),
        ('The option. [Enum]: ["fuel", "battery"]', ["fuel", "battery"]),
        ("No list here.", []),
        ("[Enum]: this is a whole sentence of words, not values", []),
    ],
)
def test_allowed_values_reads_bfcl_descriptions(description: str, values: list[str]) -> None:
    assert allowed_values({"type": "string", "description": description}) == values


def test_login_first_names_the_login_tool() -> None:
    text = '{"error": "User not authenticated. Please log in to place an order."}'
    hints = failure_hints("place_order", text, SCHEMAS)
    assert _kinds(hints) == ["login_first"]
    assert "bank_login" in hints[0].text and "get_login_status" not in hints[0].text


def test_lookup_names_the_tools_that_find_the_entity() -> None:
    by_name = failure_hints("get_account", "Error: Account ACC9 not found", SCHEMAS)
    assert by_name == []  # the only account tool is the one called
    hints = failure_hints("cancel", "Error: Order #W1 not found", SCHEMAS)
    assert _kinds(hints) == ["lookup"] and "list_orders" in hints[0].text
    user = failure_hints("send", "Error: User 'zed' not found.", SCHEMAS)
    assert "get_user" in user[0].text and "zed" not in user[0].text


def test_every_kind_is_documented() -> None:
    import rods_env.hints as module

    assert module.__doc__ is not None
    for kind in KINDS:
        assert kind in module.__doc__


def test_looks_failed() -> None:
    assert looks_failed("Error: no")
    assert looks_failed('{"error": "cd: x: No such file or directory"}')
    assert looks_failed('[{"error": "User not authenticated."}]')
    assert looks_failed('{"booking_status": false, "error": "Token expired"}')
    assert not looks_failed('{"current_directory_content": ["error.log"]}')
    assert not looks_failed("The error rate is low.")


def test_with_hints_keeps_the_hints_whole_within_the_limit() -> None:
    hints = [Hint("a", f"hint {i}") for i in range(MAX_HINTS + 2)]
    text = with_hints("x" * 500, hints, 200)
    assert len(text) <= 200
    assert text.count(HINT_HEAD) == MAX_HINTS and text.endswith(f"{HINT_HEAD}hint {MAX_HINTS - 1}")


# -- in an own domain's environment ------------------------------------------------------------
def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture
def toy_env(toy_tasks) -> Any:
    return ToolEnv(TOY, tasks=toy_tasks, split=None, actionable_hints=True)


def test_a_call_that_works_gets_no_hint(toy_env, toy_tasks) -> None:
    toy_env.reset(options={"task": toy_tasks[0]})
    email = toy_tasks[0].gold_calls[0].arguments.get("email", "nobody@example.com")
    obs, *_, info = toy_env.step(_call("find_account", {"email": email}))
    assert HINT_HEAD not in obs and info["tool_calls"][0]["hints"] == []


def test_a_failed_call_gets_hints_in_the_tool_message(toy_env, toy_tasks) -> None:
    toy_env.reset(options={"task": toy_tasks[0]})
    obs, *_, info = toy_env.step(_call("set_frozen", {"account_id": "ACC0001", "frozen": 1}))
    assert info["tool_calls"][0]["hints"] == ["missing_argument", "wrong_type"]
    assert "set_frozen needs 'reason'" in obs and "lost card, fraud" in obs
    assert info["messages"][-1]["content"] == obs


def test_a_withheld_tool_is_said_unavailable(toy_tasks) -> None:
    task = toy_tasks[0]
    first = task.turns[0].model_copy(update={"withheld_tools": ("transfer_to_human",)})
    task = task.model_copy(update={"turns": (first, *task.turns[1:])})
    env = ToolEnv(TOY, tasks=[task], split=None, actionable_hints=True)
    env.reset(options={"task": task})
    obs, *_, info = env.step(_call("transfer_to_human", {"summary": "help"}))
    assert info["tool_calls"][0]["hints"] == ["withheld_function"]
    assert "not available in this turn" in obs


def test_hints_are_off_by_default_and_the_keyword_is_checked(toy_tasks) -> None:
    env = ToolEnv(TOY, tasks=toy_tasks, split=None)
    assert env.actionable_hints is False
    env.reset(options={"task": toy_tasks[0]})
    obs, *_, info = env.step(_call("get_acount", {}))
    assert HINT_HEAD + "'get_acount'" not in obs and "hints" not in info["tool_calls"][0]
    with pytest.raises(ConfigError, match="actionable_hints"):
        ToolEnv(TOY, tasks=toy_tasks, split=None, actionable_hints="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", domain_names())
def test_make_env_takes_the_keyword(name: str) -> None:
    env = make_env(name, actionable_hints=True)
    assert env.actionable_hints is True
