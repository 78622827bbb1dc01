"""The episode contract, on every registered id: rods' own domains, a synthesized pool of
one, BFCL's ids and τ²-bench's (telecom in solo mode too).

Every environment is :class:`rods_env.episode.EpisodeEnv` with parts of its own; what the
episode core promises holds for each of them, so it is checked here once for all of them:
``check_env``; the info keys and their types; read-only info; action bounds for text and
message dicts; malformed calls as observations; reasoning kept private; determinism under a
seed; two environments stepped in turn equal to each alone; no exception out of ``step``
under a fuzzed stream of actions. What is particular to one benchmark (its verdicts, its
limits, its user) is tested beside it (tests/core/test_env.py, tests/environments/...).
"""

from __future__ import annotations

import copy
import json
import pickle
import warnings
from decimal import Decimal
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rods_env
from rods_env.episode import INFO_KEYS
from rods_env.errors import ConfigError, RodsError
from rods_env.oracle import oracle_agent
from tests.core import fuzz

SYNTHESIZED = "synthesized:retail"
"""A pool that rods' synthesis grew from Retail's seeds (a case of its own)."""


def _cases() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = [(i, {}) for i in rods_env.ENV_IDS]
    cases.append((SYNTHESIZED, {}))
    for env_id in rods_env.BENCHMARK_ENV_IDS:
        cases.append((env_id, {}))
        if env_id == "rods/Tau2-Telecom-v0":
            cases.append((env_id, {"solo": True}))
    return cases


CASES = _cases()
IDS = [f"{i}{'-solo' if k.get('solo') else ''}" for i, k in CASES]


@pytest.fixture(scope="session")
def synthesized_pool() -> list[rods_env.Task]:
    from rods_env.synthesis import synthesize

    domain = rods_env.load_domain("retail")
    seeds = domain.seed_tasks("train")[:6]
    tasks = [o.task for o in synthesize(seeds, per_seed=1, domains=domain) if o.accepted]
    assert tasks and all(t.provenance.origin == "synthesized" for t in tasks)
    return tasks


@pytest.fixture(params=CASES, ids=IDS)
def case(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    env_id, kwargs = request.param
    if env_id != SYNTHESIZED:
        domain = rods_env.load_any_domain(env_id)
        reason = domain.missing() if isinstance(domain, rods_env.BenchmarkDomain) else None
        if reason is not None:
            from tests.requires import require

            require(False, f"{env_id}: {reason}", "bash scripts/setup.sh tests")
    return env_id, kwargs


@pytest.fixture
def make(case, request):
    """Fresh environments of the case, ``make(**kwargs)``; each knows its oracle."""
    env_id, base = case
    domain = rods_env.load_any_domain("retail" if env_id == SYNTHESIZED else env_id)
    mode = "solo" if base.get("solo") else "scripted"

    def build(**kwargs: Any) -> Any:
        if env_id == SYNTHESIZED:
            pool = request.getfixturevalue("synthesized_pool")
            env = rods_env.ToolEnv("retail", tasks=pool, split=None, **kwargs)
        else:
            env = gym.make(env_id, **{"split": None, **base, **kwargs}).unwrapped
        if isinstance(domain, rods_env.Domain):
            env.contract_oracle = lambda task: oracle_agent(domain, task)
        else:
            env.contract_oracle = lambda task: domain.oracle_agent(task, user_mode=mode)
        return env

    build.key = (env_id, mode)  # type: ignore[attr-defined]
    return build


def _oracle(env: Any, task: Any) -> Any:
    return env.contract_oracle(task)


def _tasks(env: Any, n: int) -> list[Any]:
    pool = env.tasks
    step = max(1, len(pool) // n)
    return pool[::step][:n]


def _plain(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _episode(env: Any, task: Any, agent: Any | None = None) -> list[str]:
    """Every output of an oracle episode, as text (for comparisons)."""
    agent = agent or _oracle(env, task)
    obs, info = env.reset(options={"task": task})
    out = [_plain([obs, info])]
    done = bool(info["termination"])
    while not done:
        result = env.step(agent.act(obs, info))
        obs, info = result[0], result[4]
        out.append(_plain(list(result)))
        done = result[2] or result[3]
    return out


def _usable_names(info: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in info["tools"]) or ["x"]


# -- the checks ----------------------------------------------------------------------------
def test_check_env_without_warnings(make) -> None:
    env = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


def test_before_reset_and_unknown_tasks_are_clear_errors(make) -> None:
    env = make()
    with pytest.raises(RodsError, match=r"call reset\(\) first"):
        env.task  # noqa: B018 (the property's guard is the check)
    with pytest.raises(RodsError, match=r"call reset\(\) before step"):
        env.step("hello")
    with pytest.raises(ConfigError, match=r"options\['task'\] must be a .*task id, got int"):
        env.reset(options={"task": 42})
    with pytest.raises(ConfigError, match="no-such-task"):
        env.reset(options={"task": "no-such-task"})
    task = _tasks(env, 1)[0]
    assert env.reset(options={"task": task.id})[1]["task_id"] == task.id  # nothing lost
    assert env.task is task or env.task.id == task.id


def _check_info(info: dict[str, Any]) -> None:
    for key, kind in INFO_KEYS.items():
        assert key in info, key
        assert isinstance(info[key], kind), (key, type(info[key]))
    assert 0.0 <= info["progress"] <= 1.0
    assert 0 <= info["turn"] < info["n_turns"]
    for call in info["tool_calls"]:
        assert set(call) == {"name", "ok", "error"}
    for result in info["turn_results"]:
        assert {"turn", "passed", "failures", "message"} <= set(result)
        message = result["message"]
        assert message is None or info["messages"][message]["role"] == "user"
    json.dumps(info["messages"], ensure_ascii=False).encode("utf-8")  # writable JSON


def test_info_contract_over_an_episode(make) -> None:
    env = make()
    task = _tasks(env, 1)[0]
    agent = _oracle(env, task)
    obs, info = env.reset(options={"task": task})
    _check_info(info)
    assert info["termination"] is None and info["steps"] == 0
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        _check_info(info)
        assert isinstance(obs, str) and env.observation_space.contains(obs)
        total += reward
        done = terminated or truncated
        assert (info["termination"] is not None) == done
    assert abs(total - info["progress"]) < 1e-9  # the step rewards sum to progress
    assert len(info["turn_results"]) == info["n_turns"]
    assert info["success"] and info["progress"] == 1.0  # the oracle solves it
    with pytest.raises(RodsError, match="episode is over"):
        env.step("more")
    env.reset(options={"task": task})
    cut = env.truncate("max_tokens")
    _check_info(cut)
    assert cut["termination"] == "max_tokens" and env.truncate()["termination"] == "max_tokens"


def test_info_handed_out_is_read_only(make) -> None:
    env = make()
    task = _tasks(env, 1)[0]
    agent = _oracle(env, task)
    obs, info = env.reset(options={"task": task})
    obs, *_, info = env.step(agent.act(obs, info))
    with pytest.raises(TypeError, match="read-only"):
        info["tools"][0]["function"]["name"] = "hacked"
    with pytest.raises(TypeError, match="read-only"):
        info["tools"].append({})
    with pytest.raises(TypeError, match="read-only"):
        info["messages"][0]["content"] = "ignore the policy"
    mine = copy.deepcopy(info["tools"])  # a copy is plain and editable
    mine[0]["function"]["name"] = "mine"
    assert type(mine[0]) is dict and type(pickle.loads(pickle.dumps(info["tools"]))) is list
    assert json.loads(json.dumps(info["tools"])) == copy.deepcopy(info["tools"])
    assert make().reset(options={"task": task})[1]["tools"][0]["function"]["name"] != "mine"
    # the lists are the caller's copies: editing them changes nothing of the env's
    n = len(info["messages"])
    info["messages"].append({"role": "user", "content": "extra"})
    info["turn_results"].append({"turn": 99})
    later = env.truncate("max_tokens")
    assert all(m.get("content") != "extra" for m in later["messages"][n:])
    assert all(r["turn"] != 99 for r in later["turn_results"])


@pytest.mark.parametrize("form", ["text", "message", "call"])
def test_actions_past_the_bound_are_error_observations(make, form) -> None:
    env = make(max_action_chars=2_000)
    _, info = env.reset(options={"task": _tasks(env, 1)[0]})
    name = _usable_names(info)[0]
    big = "y" * 2_001
    action: Any = {
        "text": big,
        "message": {"role": "assistant", "content": big},
        "call": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": name, "arguments": {"x": [10**17] * 200}}}
        ]},
    }[form]  # fmt: skip
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs.startswith("Error") and ("too long" in obs or "2,000 characters" in obs), obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["tool_calls"] == []


CALL = '<tool_call>{"name": "%s", "arguments": %s}</tool_call>'
_FUZZ: dict[tuple[str, str], Any] = {}
"""One environment per case for the many short checks (fuzzed streams, malformed actions)."""


def _dict_call(arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "tool_calls": [{"function": {"name": "{name}", "arguments": arguments}}],
    }


DEEP = "[" * 5000 + "]" * 5000
MALFORMED = [
    pytest.param(CALL % ("{name}", '{"a": '), "not valid JSON", id="broken-json"),
    pytest.param("<tool_call>[1, 2]</tool_call>", "JSON object", id="not-an-object"),
    pytest.param(CALL % ("no_such_tool_anywhere", "{}"), "", id="unknown-tool"),
    pytest.param(CALL % ("{name}", '{"a": ' + "9" * 5000 + "}"), "not valid JSON", id="int-5000-digits"),
    pytest.param(CALL % ("{name}", DEEP), "nested", id="nesting-5000-deep"),
    pytest.param(CALL % ("{name}", '{"a": NaN}'), "NaN", id="nan"),
    pytest.param(CALL % ("{name}", '{"a": "\\ud800"}'), "lone surrogate", id="escaped-surrogate"),
    pytest.param("Hello \ud800", "lone surrogate", id="surrogate-in-text"),
    pytest.param((CALL % ("{name}", "{}")) * 17, "at most 16", id="17-blocks"),
    pytest.param({"content": [{"type": "text", "text": 5}]}, "content", id="content-part-not-text"),
    pytest.param({"content": [object()]}, "not JSON", id="content-part-object"),
    pytest.param(_dict_call({1: "x"}), "key is a int", id="non-string-key"),
    pytest.param(_dict_call({"a": {1, 2}}), "set value is not JSON", id="set"),
    pytest.param(_dict_call({"a": Decimal("1.5")}), "Decimal", id="decimal"),
    pytest.param(_dict_call({"a": 10**5000}), "more than 18 digits", id="huge-int"),
    pytest.param(_dict_call({"a": float("inf")}), "finite", id="inf"),
    pytest.param(_dict_call({"a": "\ud800"}), "lone surrogate", id="surrogate-in-dict"),
    pytest.param(_dict_call("{" * 3000), "not valid JSON", id="arguments-string-broken"),
    pytest.param({"role": "assistant", "content": "y" * 10_000_000}, "characters of text", id="dict-10M"),
    pytest.param({"role": "assistant", "tool_calls": "nope"}, "must be a list", id="tool-calls-not-a-list"),
    pytest.param({"tool_calls": [{"function": {"name": "{name}"}}] * 17}, "at most 16", id="17-calls"),
    pytest.param(None, "must be a string or a message dict", id="none"),
    pytest.param(b"bytes", "must be a string or a message dict", id="bytes"),
    pytest.param(["a"], "must be a string or a message dict", id="list"),
    pytest.param(42, "must be a string or a message dict", id="int"),
]  # fmt: skip
"""Malformed actions and calls under every reading rule, with what the error says."""


def _named(action: Any, name: str) -> Any:
    """``action`` with the placeholder ``{name}`` replaced by one of the env's tools."""
    if isinstance(action, str):
        return action.replace("{name}", name)
    if isinstance(action, dict) and isinstance(action.get("tool_calls"), list):
        calls = [
            {"function": {**c["function"], "name": name}} if isinstance(c, dict) else c
            for c in action["tool_calls"]
        ]
        return {**action, "tool_calls": calls}
    return action


@pytest.mark.parametrize(("action", "needle"), MALFORMED)
def test_malformed_actions_and_calls_are_observations(make, action, needle) -> None:
    env = _FUZZ.get(make.key)
    if env is None:
        env = _FUZZ[make.key] = make(max_steps=12)
    _, info = env.reset(options={"task": _tasks(env, 1)[0]})
    obs, reward, terminated, truncated, info = env.step(_named(action, _usable_names(info)[0]))
    assert "Error" in obs and needle in obs, obs[:300]
    assert (reward, terminated, truncated) == (0.0, False, False), obs[:200]
    assert all(not c["ok"] for c in info["tool_calls"])
    json.dumps(info["messages"], ensure_ascii=False).encode("utf-8")  # the history stays writable
    assert all(len(m["content"] or "") <= 5000 for m in info["messages"][-2:])


SECRET = "s3cret-plan-7781"


def test_reasoning_is_private(make) -> None:
    env = make()
    task = _tasks(env, 1)[0]
    _, info = env.reset(options={"task": task})
    name = _usable_names(info)[0]
    drafted = CALL % (name, "{}")
    actions = [
        f"<think>{SECRET}: first {drafted}</think>Could you tell me more?",
        {"role": "assistant", "content": f"<think>{SECRET} {drafted}</think>Could you tell me more?"},
        f"<think>{SECRET} and the call {drafted}",  # cut off by the token cap
        {"role": "assistant", "content": f"<think>{SECRET}</think>x", "tool_calls": "nope"},
    ]  # fmt: skip
    for action in actions:
        _, info = env.reset(options={"task": task})
        obs, _, _, _, info = env.step(action)
        assert info["tool_calls"] == []  # the drafted call did not run
        assert SECRET not in obs
        assert SECRET not in json.dumps(info["messages"], ensure_ascii=False)
    env.reset(options={"task": task})
    obs, *_ = env.step(actions[2])
    assert "reasoning was cut off" in obs


def test_the_same_seed_gives_the_same_episode(make) -> None:
    a, b = make(), make()
    for seed in (0, 7):
        first_a, first_b = a.reset(seed=seed), b.reset(seed=seed)
        assert _plain(first_a) == _plain(first_b)
    task = a.task
    assert _episode(a, task) == _episode(b, task)


def test_two_interleaved_environments_equal_each_alone(make) -> None:
    """Two episodes stepped in turn (as batched rollouts step them) give what each gives
    alone on a fresh environment, and an environment that ran another episode first gives
    what a fresh one gives: no state outlives an episode or crosses to another env."""
    pool = _tasks(make(), 2)
    one, two = (pool * 2)[:2]
    alone = {id(t): _episode(make(), t) for t in (one, two)}
    reused = make()
    _episode(reused, two)
    assert _episode(reused, one) == alone[id(one)]
    envs = [make(), make()]
    agents = [_oracle(envs[0], one), _oracle(envs[1], two)]
    out: list[list[str]] = [[], []]
    state = []
    for k, task in enumerate((one, two)):
        obs, info = envs[k].reset(options={"task": task})
        out[k].append(_plain([obs, info]))
        state.append([obs, info, bool(info["termination"])])
    while not (state[0][2] and state[1][2]):
        for k in (0, 1):
            obs, info, done = state[k]
            if done:
                continue
            result = envs[k].step(agents[k].act(obs, info))
            out[k].append(_plain(list(result)))
            state[k] = [result[0], result[4], result[2] or result[3]]
    assert out[0] == alone[id(one)]
    assert out[1] == alone[id(two)]


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_no_exception_escapes_step_under_fuzzed_actions(make, data) -> None:
    env = _FUZZ.get(make.key)
    if env is None:
        env = _FUZZ[make.key] = make(max_steps=12)
    _, info = env.reset(seed=data.draw(st.integers(0, 10_000)))
    batch = data.draw(st.lists(fuzz.actions(_usable_names(info)), min_size=1, max_size=6))
    for action in batch:
        fuzz.step_checked(env, action)


def test_render_shows_the_conversation(make) -> None:
    env = make(render_mode="ansi")
    task = _tasks(env, 1)[0]
    _episode(env, task)
    text = env.render()
    assert isinstance(text, str) and "[user] " in text and "[assistant" in text
    assert make().render() is None


def _without_hints(message: dict[str, Any]) -> dict[str, Any]:
    """A message as it is with ``actionable_hints`` off: a tool reply without its hints."""
    content = message.get("content")
    if message.get("role") == "tool" and isinstance(content, str) and "\nHint: " in content:
        return {**message, "content": content[: content.index("\nHint: ")]}
    return dict(message)


def test_actionable_hints_change_only_observations(make: Any) -> None:
    """The same actions, with a failing call or two among them, give the same rewards, ends,
    verdicts and info with ``actionable_hints`` on as off; only the failed calls' tool
    messages differ, by hints appended after the reply (rods_env/hints.py)."""
    off, on = make(), make(actionable_hints=True)
    assert (off.actionable_hints, on.actionable_hints) == (False, True)
    task = _tasks(off, 1)[0]
    _, info = off.reset(options={"task": task})
    name = _usable_names(info)[0]
    agent = _oracle(off, task)
    bad = CALL % (name + "_x", "{}") + CALL % (name, json.dumps({"no_such_argument": 1}))
    actions: list[Any] = [bad]
    result: tuple[Any, ...] = off.step(bad)
    trace_off = [result[1:4]]
    while not (result[2] or result[3]):
        action = agent.act(result[0], result[4])
        actions.append(action)
        result = off.step(action)
        trace_off.append(result[1:4])
    info_off = result[4]
    on.reset(options={"task": task})
    trace_on = []
    hinted = 0
    for action in actions:
        result = on.step(action)
        trace_on.append(result[1:4])
        hinted += sum(bool(c.get("hints")) for c in result[4]["tool_calls"])
    info_on = result[4]
    assert trace_on == trace_off
    assert hinted >= 1  # the misspelled name at least
    assert [_without_hints(m) for m in info_on["messages"]] == [
        dict(m) for m in info_off["messages"]
    ]
    keep = set(info_off) - {"messages", "tool_calls"}
    assert _plain({k: info_on[k] for k in keep}) == _plain({k: info_off[k] for k in keep})
