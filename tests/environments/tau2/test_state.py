"""Episode state over τ²-bench's shared databases: copies on access, resets in O(touched),
never changes the shared base, and compares states exactly as τ²-bench's hash does."""

from __future__ import annotations

import contextlib
import itertools
import time

import pytest

from environments.tau2.domain import domain_named
from environments.tau2.package import tau2_module
from environments.tau2.state import CowDatabase, CowTable, backend, safe_calculate


def _full_hash(db) -> str:
    return tau2_module("tau2.utils.utils").get_dict_hash(db.model_dump())


def _gold_run(state, task, actions) -> None:
    state.reset(task)
    for action in actions:
        with contextlib.suppress(Exception):
            state.make_tool_call(action.name, action.requestor, action.arguments)


def test_a_table_copies_on_access_and_resets_to_the_shared_records():
    base = {"a": [1], "b": [2]}
    table = CowTable(base)
    got = table["a"]
    got.append(99)
    table["new"] = [3]
    del table["b"]
    assert base == {"a": [1], "b": [2]}  # the shared records never change
    assert table.changed_keys() == {"a", "new", "b"}
    assert dict(table) == {"a": [1, 99], "new": [3]}
    table.reset()
    assert dict(table) == base and table.changed_keys() == set()
    assert table["a"] is not base["a"] and table["a"] == [1]


def test_scans_copy_except_in_a_read_only_tool():
    base = {"a": [1], "b": [2]}
    table = CowTable(base)
    table.reading = True
    assert [id(v) for v in table.values()] == [id(base["a"]), id(base["b"])]
    assert table.changed_keys() == set()
    table.reading = False
    for value in table.values():
        value.append(0)
    assert base == {"a": [1], "b": [2]}
    assert table.copy() == {"a": [1, 0], "b": [2, 0]}


@pytest.mark.parametrize(("name", "pairs"), [("retail", 20), ("airline", 8)])
def test_states_are_equal_exactly_when_tau2_hashes_are(name, pairs):
    b = backend(name)
    tasks = list(domain_named(name).tau2_tasks().values())[:12]
    first, second = b.new_state(), b.new_state()
    assert isinstance(first._agent_db, CowDatabase)
    cases, outcomes = 0, set()
    for one, two in itertools.islice(itertools.combinations(tasks, 2), pairs):
        acts1 = list(one.evaluation_criteria.actions or [])
        acts2 = list(two.evaluation_criteria.actions or [])
        for a, b_ in [(acts1, acts1), (acts1, acts1[:-1]), (acts1, acts1 + acts2), (acts1, acts2)]:
            _gold_run(first, one, a)
            _gold_run(second, one, b_)
            same_ours = first.fingerprint() == second.fingerprint()
            same_tau2 = _full_hash(first.env.tools.db) == _full_hash(second.env.tools.db)
            assert same_ours == same_tau2, (one.id, two.id, len(a), len(b_))
            cases += 1
            outcomes.add(same_ours)
    assert cases == 4 * pairs and outcomes == {True, False}


def test_the_shared_database_is_untouched_after_every_task_and_resets_are_cheap():
    b = backend("airline")
    before = _full_hash(b.proto.tools.db)
    state = b.new_state()
    domain = domain_named("airline")
    started = time.perf_counter()
    for task in domain.tau2_tasks().values():
        _gold_run(state, task, task.evaluation_criteria.actions or [])
    per_task = (time.perf_counter() - started) / len(domain.tau2_tasks())
    assert _full_hash(b.proto.tools.db) == before
    assert per_task < 0.2  # a whole-database copy alone takes 0.26 s here


def test_calculate_is_tau2s_without_eval():
    b = backend("retail")
    state = b.new_state()
    state.reset(next(iter(domain_named("retail").tau2_tasks().values())))
    original = type(b.proto.tools).calculate  # τ²-bench's own method (it evals)

    def outcome(call):
        try:
            return call()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"

    for expression in ("2 + 2", "(19.99 * 3) - 5", "10 / 3", "7 // 2", "1e3", "(1", "1/0"):
        expected = outcome(lambda e=expression: original(None, e))
        arguments = {"expression": expression}
        got = outcome(lambda a=arguments: state.make_tool_call("calculate", "assistant", a))
        assert got == expected, expression
    started = time.perf_counter()
    with pytest.raises(Exception, match="too costly"):
        state.make_tool_call("calculate", "assistant", {"expression": "9**9**9"})
    assert time.perf_counter() - started < 1.0
    with pytest.raises(ValueError, match="Invalid characters"):
        safe_calculate(None, "__import__('os')")
    schema = next(s for s in b.tool_schemas if s["function"]["name"] == "calculate")
    assert "mathematical expression" in schema["function"]["description"]


def test_telecom_ids_are_the_same_for_the_same_task_in_every_episode():
    b = backend("telecom")
    task = next(iter(domain_named("telecom").tau2_tasks().values()))
    customers = []
    for _ in range(2):
        state = b.new_state()
        state.reset(task)
        state.make_tool_call(
            "refuel_data",
            "assistant",
            {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 1.0},
        )
        customers.append(state.env.tools.db.model_dump()["bills"])
    assert customers[0] == customers[1]


def test_a_state_is_synced_after_a_successful_call_and_syncing_it_again_changes_nothing():
    """Scoring skips τ²-bench's ``sync_tools`` on a state whose last step was one (the end of
    a successful ``get_response``): on every telecom task's gold, after every call, a second
    sync leaves both databases as they were, and a failed call leaves the state unsynced."""
    message = tau2_module("tau2.data_model.message")
    b = backend("telecom")
    state = b.new_state()

    def dumps():
        return state.env.tools.db.model_dump(), state.env.user_tools.db.model_dump()

    checked = failed = 0
    for task in domain_named("telecom").tau2_tasks().values():
        state.reset(task)
        assert state.synced
        for i, action in enumerate(task.evaluation_criteria.actions or []):
            call = message.ToolCall(
                id=f"c{i}", name=action.name, arguments=action.arguments, requestor=action.requestor
            )
            reply = state.get_response(call)
            assert state.synced is (not reply.error), (task.id, action.name)
            if reply.error:
                failed += 1
                continue
            before = dumps()
            state.run(state.env.sync_tools, None)
            assert not state.synced and dumps() == before, (task.id, action.name)
            checked += 1
    bad = message.ToolCall(id="x", name="get_customer_by_id", arguments={}, requestor="assistant")
    assert state.get_response(bad).error and not state.synced
    assert checked > 300, (checked, failed)
