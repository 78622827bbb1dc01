"""Checks every installed rods domain gets for free: oracle, baselines, the exploit panel,
invariants, determinism across processes. (The episode contract every id keeps, check_env
included, is tests/test_contract.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rods_env
from rods_env import TalkOnlyAgent, load_domain, run_episode
from rods_env.exploits import exploit_passes
from rods_env.oracle import oracle_agent, tool_call_text
from rods_env.registry import domain_from_env_id
from rods_env.rewards import RULES
from tests.core import fuzz

ENV_IDS = rods_env.ENV_IDS


def _domain(env_id):
    return load_domain(domain_from_env_id(env_id))


@pytest.fixture(scope="module", params=ENV_IDS)
def env_id(request):
    return request.param


@pytest.fixture(scope="module")
def env(env_id):
    return gym.make(env_id, split=None, max_steps=500).unwrapped


def test_every_domain_is_registered():
    assert {"rods/Retail-v0", "rods/Airline-v0"} <= set(ENV_IDS)


def test_make_with_module_prefix_works_in_a_fresh_process(env_id):
    code = f"import gymnasium as g; e = g.make('rods_env:{env_id}'); o, i = e.reset(seed=0); print(i['task_id'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_seed_set_has_200_tasks_with_both_splits_and_signatures(env_id):
    tasks = _domain(env_id).seed_tasks()
    assert len(tasks) >= 200
    assert len({t.id for t in tasks}) == len(tasks)
    assert {t.split for t in tasks} == {"train", "test"}
    assert all(
        t.signature is not None and t.signature.tools == tuple(c.name for c in t.gold_calls)
        for t in tasks
    )
    assert len({t.skill for t in tasks}) >= 8


def test_oracle_succeeds_on_every_seed_task(env):
    failures = []
    for task in env.domain.seed_tasks():
        out = run_episode(env, oracle_agent(env.domain, task), task=task)
        if not (out["success"] and out["progress"] == 1.0 and abs(out["return"] - 1.0) < 1e-9):
            failures.append((task.id, out["turn_results"], out["termination"]))
    assert not failures, failures[:3]


def test_talk_only_fails_every_task_whose_gold_writes(env):
    from rods_env.gold import GOLD_CACHE

    checked = 0
    for task in env.domain.seed_tasks():
        gold = GOLD_CACHE.get(env.domain, task)
        out = run_episode(env, TalkOnlyAgent(), task=task)
        for result in out["turn_results"]:  # every failed turn says which rules failed it
            rules = [f["rule"] for f in result["failures"]]
            assert bool(rules) != result["passed"] and set(rules) <= set(RULES), (task.id, result)
            assert ("effect_missing" in rules) != result["effect_ok"], (task.id, result)
        if gold.writes_anything:
            checked += 1
            assert not out["success"], task.id
        assert out["progress"] < 1.0, f"{task.id}: a do-nothing agent solves it"
    assert checked > 100


def test_extra_unrelated_write_fails_success_and_loses_that_turn(env):
    domain = env.domain
    for task in [t for t in domain.seed_tasks() if t.turns[0].calls][:60]:
        agent = oracle_agent(domain, task)
        obs, info = env.reset(options={"task": task})
        done = injected = False
        while not done:
            action = agent.act(obs, info)
            obs, _, term, trunc, info = env.step(action)
            done = term or trunc
            if not injected and not done and "<tool_call>" in action and info["turn"] == 0:
                # right after the first gold call: the user is verified, turn 0 is open
                extra = domain.unrelated_write(task, env.db)
                obs, _, term, trunc, info = env.step(tool_call_text(extra))
                assert not obs.startswith("Error"), (task.id, extra, obs)
                injected = True
                done = term or trunc
        assert injected, task.id
        assert not info["success"], task.id
        assert not info["turn_results"][0]["passed"], task.id
        assert info["turn_results"][0]["collateral"], task.id
        (collateral,) = [
            f for f in info["turn_results"][0]["failures"] if f["rule"] == "collateral_write"
        ]
        assert collateral["values"] == info["turn_results"][0]["collateral"], task.id


@pytest.mark.parametrize(
    ("action", "needle"),
    [
        ('{"name": "x", "arguments": {', "could not parse"),
        ('<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>', "Unknown tool"),
        ("<tool_call>[1, 2]</tool_call>", "JSON object"),
        ("y" * 10_000_000, "action too long"),
    ],
)
def test_bad_input_is_an_error_observation(env, action, needle):
    env.reset(seed=0)
    before = env.db.fingerprint()
    obs, reward, term, trunc, _ = env.step(action)
    assert obs.startswith("Error") and needle in obs
    assert (reward, term, trunc) == (0.0, False, False)
    assert env.db.fingerprint() == before


def test_every_tool_rejects_missing_extra_and_mistyped_arguments(env):
    env.reset(seed=0)
    before = env.db.fingerprint()
    for spec in env.domain.toolkit.specs().values():
        params = spec.schema["function"]["parameters"]
        required = params["required"]
        cases = [{"__extra__": 1}]
        if required:
            cases.append({})
            cases.append({name: {"not": "valid"} for name in required})
        for args in cases:
            obs, *_ = env.step(tool_call_text(rods_env.ToolCall(name=spec.name, arguments=args)))
            assert obs.startswith("Error"), (spec.name, args, obs)
            assert "Hint:" in obs
    assert env.db.fingerprint() == before


_TRANSCRIPT = textwrap.dedent(
    """
    import json, sys
    import gymnasium as gym
    import rods_env
    from rods_env import OracleAgent, RandomToolAgent, run_episode
    from rods_env.database import tables_digest
    env = gym.make(sys.argv[1]).unwrapped
    digest = tables_digest(env.domain.base(0, "default"))
    tiny = tables_digest(env.domain.base(0, "tiny"))
    task = env.domain.seed_tasks("test")[3]
    run_episode(env, OracleAgent(task, env.domain.toolkit.write_names()), task=task)
    oracle = (env.render_mode, env.db.fingerprint(), [m for m in env._messages])
    out = run_episode(env, RandomToolAgent(seed=5), seed=11)
    print(json.dumps({"digest": digest, "tiny": tiny, "oracle": oracle, "random": env._messages, "p": out["progress"]}))
    """
)


def test_same_seed_same_database_and_transcript_in_two_processes(env_id):
    outs = []
    for hashseed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-c", _TRANSCRIPT, env_id],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONHASHSEED": hashseed},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1]
    assert outs[0]["digest"] != outs[0]["tiny"]


# -- the exploit panel and fuzzed actions --------------------------------------------------
def test_the_exploit_panel_gets_nothing_on_any_seed_task(env_id):
    """Silent, "done", echo, blanket refusal and spray: zero turns passed, zero successes,
    on every seed task (well under a second per domain)."""
    domain = _domain(env_id)
    passed = {}
    for task in domain.seed_tasks():
        found = exploit_passes(domain, task)
        if found:
            passed[task.id] = found
    assert not passed, list(passed.items())[:5]


def _invariants(env_id):
    domain = _domain(env_id)
    return domain.invariants or (lambda db: [])


def test_fuzzed_actions_never_raise_and_keep_the_invariants(env_id):
    env = gym.make(env_id, split=None, max_steps=12).unwrapped
    names = sorted(env.domain.toolkit.names())
    check = _invariants(env_id)

    @settings(
        max_examples=120,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.lists(fuzz.actions(names), min_size=1, max_size=6), st.integers(0, 10_000))
    def run(batch, seed):
        env.reset(seed=seed)
        for action in batch:
            fuzz.step_checked(env, action)
            assert check(env.db) == []

    run()


def test_a_lone_surrogate_in_a_write_leaves_no_trace(env_id):
    """Regression: a surrogate in a write's argument failed while rendering the output,
    outside the write's rollback; the write stayed and later reads raised."""
    env = gym.make(env_id, split=None).unwrapped
    domain = env.domain
    task = next(t for t in domain.seed_tasks() if t.turns[0].calls)
    env.reset(options={"task": task})
    for call in task.turns[0].calls[:1]:  # the identity look-up
        env.step(tool_call_text(call))
    before = env.db.fingerprint()
    write = domain.unrelated_write(task, env.db)
    poisoned = {k: (v + "\ud800" if isinstance(v, str) else v) for k, v in write.arguments.items()}
    for action in (
        {"tool_calls": [{"function": {"name": write.name, "arguments": poisoned}}]},
        tool_call_text(write).replace('"}', '\\ud800"}', 1),
    ):
        obs, *_, info = env.step(action)
        assert obs.startswith("Error") and "surrogate" in obs, obs
        assert env.db.fingerprint() == before
        json.dumps(info["messages"], ensure_ascii=False).encode("utf-8")
    obs, *_ = env.step(tool_call_text(task.turns[0].calls[0]))
    assert not obs.startswith("Error")


# -- benchmark domains (rods_env.benchmark): their own environment and scorer ---------------
BENCHMARK_ENV_IDS = list(rods_env.BENCHMARK_ENV_IDS)


def _benchmark(env_id):
    from tests.requires import require

    domain = rods_env.load_any_domain(env_id)
    reason = domain.missing()
    require(reason is None, f"benchmark '{domain.name}': {reason}", "bash scripts/setup.sh tests")
    return domain


@pytest.mark.parametrize("env_id", BENCHMARK_ENV_IDS)
def test_benchmark_oracles_solve_their_tasks(env_id):
    domain = _benchmark(env_id)
    env = gym.make(env_id)
    tasks = domain.seed_tasks()
    assert tasks and all(t.domain == domain.name for t in tasks)
    assert domain.check_tasks(tasks) == []
    for task in tasks[:: max(1, len(tasks) // 10)]:
        out = run_episode(env.unwrapped, domain.oracle_agent(task), task=task)
        assert out["success"] and out["progress"] == 1.0, (task.id, out["turn_results"])


@pytest.mark.parametrize("env_id", BENCHMARK_ENV_IDS)
def test_benchmark_make_with_module_prefix_works_in_a_fresh_process(env_id):
    _benchmark(env_id)
    test_make_with_module_prefix_works_in_a_fresh_process(env_id)
