from __future__ import annotations

import pytest

from tests.core.toy_domain import TOY, BankTools


@pytest.fixture
def tools():
    return BankTools(TOY.database(0, "tiny"))


def test_schema_from_signature_and_docstring():
    schema = {s["function"]["name"]: s["function"] for s in BankTools.schemas()}
    fz = schema["set_frozen"]
    assert fz["description"] == "Freeze or unfreeze an account."
    props = fz["parameters"]["properties"]
    assert props["frozen"]["type"] == "boolean"
    assert props["reason"]["enum"] == ["lost card", "fraud"]
    assert props["account_id"]["description"] == "The account id."
    assert fz["parameters"]["required"] == ["account_id", "frozen", "reason"]
    assert BankTools.write_names() == {"transfer", "set_frozen"}


def test_read_call_returns_json(tools):
    r = tools.call("get_account", {"account_id": "ACC0001"})
    assert r.ok and '"id":"ACC0001"' in r.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({}, "'account_id' is required"),
        ({"account_id": "ACC0001", "x": 1}, "'x' is not an argument"),
        ({"account_id": ["a"]}, "'account_id' = ['a']"),
    ],
)
def test_bad_arguments_are_observations(tools, args, needle):
    r = tools.call("get_account", args)
    assert not r.ok and needle in r.output and "takes: account_id (string)" in r.output


def test_unknown_tool_suggests(tools):
    r = tools.call("get_acount", {})
    assert (
        not r.ok
        and "Unknown tool 'get_acount'" in r.output
        and "Did you mean 'get_account'" in r.output
    )


def test_withheld_tool_is_not_available_and_suggests_no_other_tool(tools):
    r = tools.call(
        "transfer",
        {"from_account": "ACC0001", "to_account": "ACC0002", "amount": 1},
        available={"get_account", "transfer_all"},
    )
    assert not r.ok and "not available in this conversation" in r.output
    # never "did you mean <another write tool>": that is the workaround the policy forbids
    assert "Did you mean" not in r.output and "transfer_all" not in r.output


def test_failing_write_leaves_state_unchanged(tools):
    before = tools.db.fingerprint()
    # transfer debits before checking the balance: the rollback must undo the debit
    r = tools.call(
        "transfer", {"from_account": "ACC0001", "to_account": "ACC0002", "amount": 10**9}
    )
    assert not r.ok and "Hint: Offer a smaller amount." in r.output
    assert tools.db.fingerprint() == before


def test_successful_write_changes_state(tools):
    before = tools.db.fingerprint()
    r = tools.call("transfer", {"from_account": "ACC0001", "to_account": "ACC0002", "amount": 5})
    assert r.ok and r.writes
    assert tools.db.fingerprint() != before


def test_enum_violation(tools):
    r = tools.call("set_frozen", {"account_id": "ACC0001", "frozen": True, "reason": "bored"})
    assert not r.ok and "'lost card' | 'fraud'" in r.output


def test_non_object_arguments(tools):
    r = tools.call("get_account", ["ACC0001"])  # type: ignore[arg-type]
    assert not r.ok and "must be a JSON object" in r.output


def test_tool_without_docstring_is_rejected():
    from rods_env import Toolkit, tool

    with pytest.raises(TypeError, match="needs a docstring"):

        class Bad(Toolkit):
            @tool
            def f(self, x: int) -> int:
                return x
