"""BFCLEnv: ToolEnv's contract, BFCL's turn flow, and its reward on the agents a policy would try."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest

import rods_env
from environments.bfcl import ENV_IDS
from environments.bfcl.agents import (
    PlanAgent,
    gold_plan,
    silent_plan,
    tool_calls_text,
)
from environments.bfcl.apis import functions
from environments.bfcl.tasks import MAX_STEPS_PER_TURN, REVEAL_MESSAGE, get_task
from rods_env.errors import ConfigError
from rods_env.oracle import run_episode
from rods_env.task import ToolCall

pytestmark = pytest.mark.usefixtures("bfcl")


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_one_id_per_category_and_one_for_all(env_id):
    """(``check_env`` runs on every id in tests/test_all_envs.py.)"""
    assert env_id in rods_env.BENCHMARK_ENV_IDS
    env = gym.make(env_id)
    category = ENV_IDS[env_id]
    assert {t.category for t in env.unwrapped.tasks} == (
        {category} if category else {"base", "miss_param", "miss_func", "long_context"}
    )


def test_reset_gives_the_first_user_turn_the_tools_and_no_system_prompt(env):
    task = get_task("multi_turn_base_0")
    obs, info = env.reset(options={"task": task.id})
    assert obs == task.turns[0][0]["content"]
    assert [m["role"] for m in info["messages"]] == ["user"]
    names = [t["function"]["name"] for t in info["tools"]]
    # BFCL's order: the involved classes in the task's order, each in its doc's order
    assert names == [n for c in task.classes for n in functions() if functions()[n].owner == c]
    assert len(names) == 18 + 14  # GorillaFileSystem + TwitterAPI
    assert (info["progress"], info["success"], info["turn"], info["n_turns"]) == (0.0, False, 0, 4)
    with pytest.raises(TypeError):
        info["tools"].append({})  # read-only


def test_oracle_rewards_sum_to_progress_one_on_all_800_tasks(env, tasks):
    bad = []
    for task in tasks:
        out = run_episode(env, PlanAgent(gold_plan(task)), task=task)
        if not (out["success"] and out["progress"] == 1.0 and abs(out["return"] - 1.0) < 1e-9):
            bad.append(task.id)
        assert out["termination"] == "user_stop" and not out["truncated"]
    assert not bad, bad[:5]


def test_message_dict_actions_work_like_text(env):
    task = get_task("multi_turn_long_context_3")
    out = run_episode(env, PlanAgent(gold_plan(task), as_messages=True), task=task)
    assert out["success"]


def test_progress_counts_checked_turns_only(env):
    """A silent agent gets 0, not the 0.24 a passed-turns / all-turns count would hand it on
    miss_param and miss_func (their empty-gold turns are not checked)."""
    for task_id in ("multi_turn_miss_param_0", "multi_turn_miss_func_0"):
        task = get_task(task_id)
        out = run_episode(env, PlanAgent(silent_plan(task)), task=task)
        assert out["progress"] == 0.0 and not out["success"]
        results = out["turn_results"]
        assert [r["checked"] for r in results] == [bool(c) for c in task.ground_truth]
        assert all(r["passed"] and not r["failures"] for r in results if not r["checked"])
        first = results[0]
        assert [f["rule"] for f in first["failures"]] == [
            "no_call",
            "state_mismatch",
            "missing_result",
        ]
        assert out["messages"][first["message"]]["content"] == task.turns[0][0]["content"]
    # one checked turn of four done right: a quarter
    task = get_task("multi_turn_base_0")
    plan = tuple((gold_plan(task)[i] if i == 0 else ()) for i in range(len(task.turns)))
    out = run_episode(env, PlanAgent(plan), task=task)
    assert out["progress"] == 0.25 and abs(out["return"] - 0.25) < 1e-9


def test_a_checked_turn_needs_a_call_in_it_even_when_state_and_results_match(env):
    """BFCL fails a checked turn without a call; a read-only turn whose result was already
    produced earlier would otherwise pass by doing nothing."""
    task = get_task("multi_turn_base_0")
    gold = gold_plan(task)
    plan = ((gold[0][0] + gold[1][0],), (), gold[2], gold[3])  # turn 1's reads done in turn 0
    info = run_episode(env, PlanAgent(plan), task=task)
    assert info["turn_results"][1]["called"] is False
    assert info["turn_results"][1]["passed"] is False and not info["success"]


def test_miss_func_reveals_the_held_out_functions_with_bfcls_message(env):
    task = get_task("multi_turn_miss_func_0")
    assert task.revealed == {3: ("sort",)}
    obs, info = env.reset(options={"task": task})
    names = lambda info: {t["function"]["name"] for t in info["tools"]}  # noqa: E731
    assert "sort" not in names(info)
    agent = PlanAgent(gold_plan(task))
    while info["turn"] < 3:
        obs, _, _, _, info = env.step(agent.act(obs, info))
    # BFCL's sentence after the new function's schema: one token sequence renders the tool
    # list once, so a local model learns of `sort` from the message
    assert obs.endswith("\n" + REVEAL_MESSAGE)
    assert json.loads(obs.splitlines()[0]) == json.loads(json.dumps(functions()["sort"].schema))
    assert info["messages"][-1] == {"role": "user", "content": obs}
    assert "sort" in names(info)


def test_a_held_out_function_runs_before_its_reveal_only_in_bfcl_mode():
    """`multi_turn_miss_func_49`'s own gold calls `tail` before revealing it. BFCL's executor
    runs it (its checker passes the gold), so rods does too by default; `holdout="strict"`
    makes a held-out function unknown until revealed, and that gold then fails."""
    from environments.bfcl.env import BFCLEnv
    from environments.bfcl.tasks import load_tasks

    early = []
    for task in load_tasks("miss_func"):
        reveal = min(task.revealed)
        if any(c.name in task.held_out for calls in task.gold[:reveal] for c in calls):
            early.append(task.id)
    assert early == ["multi_turn_miss_func_49"]
    task = get_task(early[0])
    default = run_episode(BFCLEnv(), PlanAgent(gold_plan(task)), task=task)
    strict = run_episode(BFCLEnv(holdout="strict"), PlanAgent(gold_plan(task)), task=task)
    assert default["success"] and not strict["success"]
    assert any(
        m.get("content") == "Error during execution: name 'tail' is not defined"
        for m in strict["messages"]
    )


def _read_call(task):
    return next(c for calls in task.gold for c in calls if c.name in ("ls", "pwd", "cat"))


def test_the_21st_tool_step_of_a_turn_ends_the_conversation(env):
    task = get_task("multi_turn_base_0")
    extra = ToolCall(name="pwd", arguments={})
    plan = ((gold_plan(task)[0][0],) + ((extra,),) * MAX_STEPS_PER_TURN, *gold_plan(task)[1:])
    out = run_episode(env, PlanAgent(plan), task=task)
    assert out["truncated"] and out["termination"] == "max_steps"
    assert not out["success"] and out["steps"] == MAX_STEPS_PER_TURN + 1
    assert out["turn_results"][0]["passed"] is True  # the open turn is still checked
    assert [r["reached"] for r in out["turn_results"]] == [True, False, False, False]
    assert out["progress"] == 0.25


def test_a_conversation_cut_in_its_last_turn_keeps_bfcls_verdict(env):
    """BFCL still has a response for every turn then, and checks them all."""
    task = get_task("multi_turn_base_0")
    gold = gold_plan(task)
    extra = ToolCall(name="pwd", arguments={})
    plan = (*gold[:-1], gold[-1] + ((extra,),) * MAX_STEPS_PER_TURN)
    out = run_episode(env, PlanAgent(plan), task=task)
    assert out["truncated"] and out["termination"] == "max_steps"
    assert out["success"] and out["progress"] == 1.0


@pytest.mark.parametrize(
    ("action", "needle"),
    [
        ("", "empty action"),
        ('{"name": "ls", "arguments": {', "could not parse"),
        ("<tool_call>[1, 2]</tool_call>", "JSON object"),
        ("y" * 300_000, "action too long"),
        ({"tool_calls": "nope"}, "must be a list"),
        ("<tool_call>{}</tool_call>" * 17, "at most 16"),
    ],
    ids=["empty", "broken-json", "not-an-object", "too-long", "bad-tool-calls", "17-calls"],
)
def test_unusable_actions_are_error_observations_and_the_turn_goes_on(env, action, needle):
    obs, info = env.reset(options={"task": "multi_turn_base_0"})
    before = env.world.snapshot()
    obs, reward, term, trunc, info = env.step(action)
    assert obs.startswith("Error") and needle in obs
    assert (reward, term, trunc, info["turn"]) == (0.0, False, False, 0)
    assert env.world.differences(before) == {}
    assert env.results == []


def test_a_call_with_unreadable_arguments_is_an_error_and_not_run(env):
    env.reset(options={"task": "multi_turn_base_0"})
    action = '<tool_call>{"name": "mkdir", "arguments": "{oops"}</tool_call>'
    before = env.world.snapshot()
    obs, *_, info = env.step(action)
    assert obs.startswith('Error: "arguments" of mkdir is not valid JSON')
    assert env.world.differences(before) == {} and env.results == []
    assert info["tool_calls"] == [{"name": "mkdir", "ok": False, "error": "ParseError"}]
    env.step("ok")
    assert env.truncate()["turn_results"][0]["calls"] == []  # nothing decoded


def test_truncate_scores_the_open_turn_and_fails_the_rest(env):
    task = get_task("multi_turn_base_0")
    env.reset(options={"task": task})
    env.step(tool_calls_text(task.gold[0]))
    info = env.truncate("max_tokens")
    assert info["termination"] == "max_tokens" and not info["success"]
    assert info["turn_results"][0]["passed"] and info["progress"] == 0.25
    assert env.truncate()["termination"] == "max_tokens"  # idempotent
    with pytest.raises(rods_env.RodsError):
        env.step("more")


def test_bad_options_are_one_line_config_errors(bfcl):
    from environments.bfcl.env import BFCLEnv

    with pytest.raises(ConfigError, match="unknown BFCL category 'basic'"):
        BFCLEnv("basic")
    with pytest.raises(ConfigError, match="user simulator does not apply"):
        BFCLEnv(user=object())
    with pytest.raises(ConfigError, match="unknown BFCL task id 'nope'"):
        BFCLEnv().reset(options={"task": "nope"})
    with pytest.raises(ConfigError, match="holdout must be"):
        BFCLEnv(holdout="lenient")


def test_long_context_outputs_reach_the_agent_whole(env, tasks):
    longest, where = "", None
    for task in tasks:
        if task.category == "long_context":
            for turn in env._gold_cache.get(
                (task.id, task.config, task.ground_truth), task.scenario, task.gold
            ).turns:
                for text in turn.results:
                    if len(text) > len(longest):
                        longest, where = text, task
    assert 30_000 < len(longest) < rods_env.spaces.MAX_TEXT_CHARS
    out = run_episode(env, PlanAgent(gold_plan(where)), task=where)
    assert any(m["role"] == "tool" and m["content"] == longest for m in out["messages"])


_TRANSCRIPT = textwrap.dedent(
    """
    import json, sys
    from environments.bfcl.env import BFCLEnv
    from environments.bfcl.agents import OracleAgent, TRIVIAL
    from environments.bfcl.tasks import load_tasks
    from rods_env.oracle import run_episode
    env, out = BFCLEnv(), []
    for task in load_tasks()[::23]:
        for agent in (OracleAgent(task), TRIVIAL["random_calls"](task, 1)):
            info = run_episode(env, agent, task=task)
            out.append([info["messages"], info["turn_results"]])
    print(json.dumps(out))
    """
)


def test_transcripts_are_the_same_in_two_processes():
    outs = []
    for hashseed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-c", _TRANSCRIPT],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONHASHSEED": hashseed},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1]


def test_memory_stays_flat_over_ten_thousand_episodes(env, tasks):
    """BFCL's checker keeps every instance it makes in module globals (thousands after a
    thousand evaluations); the environment holds one episode's instances and bounded caches.
    Counted in interpreter memory blocks (``sys.getallocatedblocks``) after a collection."""
    sample = tasks[::40]  # 20 tasks, every category
    agents = [PlanAgent(silent_plan(t)) for t in sample]

    def blocks_after(n):
        for i in range(n):
            run_episode(env, agents[i % len(agents)], task=sample[i % len(sample)])
        gc.collect()
        return sys.getallocatedblocks()

    warm = blocks_after(2000)  # gold replays, templates, caches
    assert blocks_after(8000) - warm < 1000
