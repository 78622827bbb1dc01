"""The tools' data-flow graph (from signatures and executed gold runs), and *deepen*, which
follows it: a value the customer knew becomes one the agent finds with the tools."""

from __future__ import annotations

import json

import pytest

import rods_env
from rods_env.gold import GOLD_CACHE
from rods_env.synthesis import synthesize
from rods_env.synthesis.critique import check_signature
from rods_env.synthesis.deepen import candidates
from rods_env.synthesis.flow import derive, flow_graph, output_paths
from rods_env.synthesis.text import states
from tests.synthesis.conftest import assert_valid


def test_the_retail_graph_is_what_the_gold_runs_show():
    graph = flow_graph(rods_env.load_domain("retail"))
    assert graph.entity("get_order_details", "order_id") == "orders"
    assert graph.entity("get_user_details", "user_id") == "users"
    assert graph.entity("cancel_pending_order", "reason") is None  # a policy constant
    edges = {(e.source, e.path, e.target, e.argument): e for e in graph.edges}
    listed = edges[("get_user_details", "orders[]", "get_order_details", "order_id")]
    assert listed.entity == "orders" and listed.observed > 50
    found = edges[("find_user_id_by_email", "", "get_user_details", "user_id")]
    assert found.observed > 50  # the whole output is the user id
    assert edges[("get_order_details", "items[].product_id", "get_product_details", "product_id")]
    # typed edges come only from look-ups: a write's output feeds nothing unobserved
    writes = rods_env.load_domain("retail").toolkit.write_names()
    assert all(e.observed > 0 for e in graph.edges if e.source in writes)
    assert graph.depth() >= 4
    assert json.loads(json.dumps(graph.to_dict()))["tools"]["get_order_details"]["writes"] is False
    assert "get_user_details.orders[] -> get_order_details.order_id" in graph.format()


def test_a_domain_without_gold_runs_has_tools_and_no_edges():
    domain = rods_env.load_domain("airline")
    bare = derive(domain, tasks=[])
    assert list(bare.tools) == list(domain.toolkit.names()) and bare.edges == ()
    assert all(p.entity is None for n in bare.tools.values() for p in n.parameters)


def test_output_paths_name_fields_and_collapse_data_keys():
    value = {"orders": ["#W1", "#W2"], "methods": {"credit_card_9": {"id": "x"}}, "Desk Lamp": 1}
    assert sorted(output_paths(value)) == [
        ("*", 1),
        ("methods.*.id", "x"),
        ("orders[]", "#W1"),
        ("orders[]", "#W2"),
    ]


@pytest.fixture(scope="module")
def deepened():
    # retail requests name an order by an item it holds, and the customer's details list
    # the orders; airline requests state their reservation ids, so it has nothing to deepen
    domain = rods_env.load_domain("retail")
    seeds = domain.seed_tasks("train")
    out = [
        o.task
        for o in synthesize(seeds, per_seed=3, mode="expand", domains=domain, grow=("deepen",))
        if o.accepted
    ]
    return domain, {t.id: t for t in seeds}, out


def test_deepen_drops_a_fact_the_tools_reveal_and_the_chain_grows(deepened):
    domain, parents, tasks = deepened
    assert tasks  # some seed of each domain names a record by what it holds
    for task in tasks:
        parent = parents[task.provenance.parent_id]
        assert task.provenance.step == "deepen"
        assert task.turns == parent.turns and task.gold_calls == parent.gold_calls
        dropped = parent.user.facts.keys() - task.user.facts.keys()
        assert dropped and task.user.facts.items() <= parent.user.facts.items()
        for label in dropped:
            value = parent.user.facts[label]
            assert not any(states(t.request, value) for t in task.turns)
        assert task.signature.depth > parent.signature.depth
        check_signature(parent.signature, task.signature, "expand", "deepen")
        assert_valid(domain, task)


@pytest.mark.parametrize("name", ["retail", "airline"])
def test_deepen_tries_only_keys_found_earlier_that_no_request_states(name):
    domain = rods_env.load_domain(name)
    graph = flow_graph(domain)
    tried = 0
    for task in domain.seed_tasks("train"):
        gold = GOLD_CACHE.get(domain, task)
        for label, value in candidates(domain, task, gold):
            tried += 1
            assert not any(states(t.request, value) for t in task.turns)
            assert task.user.facts[label] == value
            tables = {p.entity for n in graph.tools.values() for p in n.parameters if p.entity}
            assert any(value in domain.base(0, "default")[t] for t in tables)
    assert tried > 0
