"""The opt-in hooks a domain that mirrors another system uses (the BFCL API world does):
tools per task, a user who ends a turn on every reply, no confirmations, BFCL's stricter
turn rules, a world per task, augmented seeds and more panel agents."""

from __future__ import annotations

import random
from dataclasses import replace

from rods_env import ToolCall, TurnRules, TurnTakingUser
from rods_env.env import ToolEnv
from rods_env.exploits import exploit_passes, make_exploit, run_panel, shifted
from rods_env.oracle import OracleAgent, oracle_agent, run_episode, tool_call_text
from rods_env.seeds import build_seed_tasks, make_task
from rods_env.synthesis import synthesize
from rods_env.synthesis.execute import FRESH_WORLDS
from tests.core.toy_domain import TOY

STRICT = replace(
    TOY,
    name="toystrict",
    policy="",
    user=TurnTakingUser,
    confirm_writes=False,
    rules=TurnRules(state="full", results="turn"),
)


def _task(domain, skill="freeze_then_balance", seed=0):
    rng = random.Random(f"hooks:{skill}:{seed}")
    return make_task(domain, domain.skill(skill), rng, task_id=f"{skill}-{seed}", db_size="tiny")


def test_a_domain_without_a_policy_sends_no_system_prompt_and_the_oracle_asks_nothing():
    task = _task(STRICT)
    env = ToolEnv(STRICT, tasks=[task], split=None)
    out = run_episode(env, oracle_agent(STRICT, task), task=task)
    assert out["success"] and out["progress"] == 1.0
    assert out["messages"][0]["role"] == "user"
    assert not any("Shall I proceed" in str(m.get("content")) for m in out["messages"])
    # the confirming oracle of a rods domain ends its turn with its question here
    out = run_episode(env, OracleAgent(task, TOY.toolkit.write_names()), task=task)
    assert not out["success"]


def test_a_turn_taking_user_ends_the_turn_on_a_reply_but_answers_a_fact_question():
    task = _task(STRICT)
    user = TurnTakingUser()
    assert user.start(task) == task.turns[0].request
    env = ToolEnv(STRICT, tasks=[task], split=None)
    obs, info = env.reset(options={"task": task})
    obs, _, _, _, info = env.step("Could you tell me your email?")
    assert task.user.facts["email"] in obs and info["turn"] == 0  # answered, same turn
    obs, _, _, _, info = env.step("I have done it.")
    assert info["turn"] == 1 and obs == task.turns[1].request  # the next request, as written
    assert not info["turn_results"][0]["passed"]


def test_results_of_the_gold_must_come_in_their_own_turn():
    """A balance said from memory, without the look-up, fails (BFCL's response check);
    the second turn's work done a turn early does not count again in its own turn."""
    task = _task(STRICT)
    env = ToolEnv(STRICT, tasks=[task], split=None)
    balance = task.turns[1].outputs[0]
    env.reset(options={"task": task})
    for call in task.turns[0].calls:
        env.step(tool_call_text(call))
    env.step("Done.")
    _, _, term, _, info = env.step(f"Your balance is {balance}.")
    (failure,) = info["turn_results"][1]["failures"]
    assert failure["rule"] == "result_missing" and term
    for name, info in run_panel(STRICT, task, names=("read_only", "late", "early")).items():
        assert not any(r["passed"] for r in info["turn_results"]), name


def test_the_full_state_rule_fails_every_turn_after_a_wrong_write():
    task = _task(STRICT)
    env = ToolEnv(STRICT, tasks=[task], split=None)
    env.reset(options={"task": task})
    for call in task.turns[0].calls:
        env.step(tool_call_text(call))
    env.step(tool_call_text(STRICT.unrelated_write(task, env.db)))
    env.step("Done.")
    for call in task.turns[1].calls:
        env.step(tool_call_text(call))
    *_, info = env.step(f"It is {task.turns[1].outputs[0]}.")
    for result in info["turn_results"]:  # an earlier mistake fails the later turn too
        assert not result["passed"] and result["collateral"], result


def test_tasks_offer_only_their_tools():
    only = replace(STRICT, task_tools=lambda task: {"find_account", "get_account"})
    task = _task(only, "balance")
    env = ToolEnv(only, tasks=[task], split=None)
    _, info = env.reset(options={"task": task})
    assert {t["function"]["name"] for t in info["tools"]} == {"find_account", "get_account"}
    obs, *_ = env.step(
        tool_call_text(ToolCall(name="transfer_to_human", arguments={"summary": "x"}))
    )
    assert "not available" in obs


def test_every_task_and_variant_gets_a_world_of_its_own():
    worlds = replace(STRICT, name="toyworlds", world_per_task=True)
    seeds = build_seed_tasks(worlds, n=6)
    assert len({t.db_seed for t in seeds}) == 6 and 0 not in {t.db_seed for t in seeds}
    out = [o.task for o in synthesize(seeds, per_seed=1, domains=worlds) if o.accepted]
    assert out and all(t.db_seed >= FRESH_WORLDS for t in out)


def test_fresh_worlds_do_not_push_the_seed_tasks_worlds_out(monkeypatch):
    """A round of synthesis draws more fresh worlds than the cache keeps: the seed tasks'
    worlds (below FRESH_WORLDS) are kept apart, so the next round finds them built."""
    from rods_env import domain as domain_module

    worlds = replace(STRICT, name="toyworlds-cache", world_per_task=True)
    monkeypatch.setattr(domain_module, "WORLD_CACHE_SIZE", 4)
    seed_world = worlds.base(7, "tiny")
    fresh = [worlds.base(FRESH_WORLDS + i, "tiny") for i in range(10)]
    assert worlds.base(7, "tiny") is seed_world  # not generated again
    assert worlds.base(FRESH_WORLDS + 9, "tiny") is fresh[-1]
    assert worlds.base(FRESH_WORLDS, "tiny") is not fresh[0]  # the fresh ones are bounded


def test_a_seed_set_can_carry_augmentations():
    styled = replace(TOY, name="toystyled", seed_augments=("missing_parameter", "missing_function"))
    seeds = build_seed_tasks(styled, n=9)
    assert [t.variant for t in seeds][:3] == ["base", "missing_parameter", "missing_function"]
    assert all(t.provenance.origin == "seed" for t in seeds)


def test_wrong_turn_agents_shift_the_work_and_read_only_says_nothing():
    task = _task(TOY)
    late, early = shifted(task, 1), shifted(task, -1)
    assert late.turns[0].calls == () and late.turns[1].calls == task.turns[0].calls
    assert early.turns[0].calls == task.turns[1].calls and early.turns[1].calls == ()
    agent = make_exploit("read_only", task, TOY)
    out = run_episode(ToolEnv(TOY, tasks=[task], split=None), agent, task=task)
    assert out["messages"][-2]["content"] == "Done." and not out["success"]
    panel = replace(TOY, name="toypanel", exploits=("read_only", "late", "early"))
    assert exploit_passes(panel, _task(panel)) == []
