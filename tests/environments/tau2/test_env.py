"""The τ²-bench environments keep rods' environment contract (check_env, reset options, the
step/info contract, bad input as observations) and τ²-bench's conversation rules (stops,
limits, solo mode)."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import pytest

import rods_env
from environments.tau2.env import USER_RETRIES, Tau2Env
from rods_env.errors import ConfigError, RodsError
from rods_env.oracle import run_episode

IDS = ["rods/Tau2-Airline-v0", "rods/Tau2-Retail-v0", "rods/Tau2-Telecom-v0"]


def _call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture(scope="module")
def airline() -> Tau2Env:
    return gym.make("rods/Tau2-Airline-v0", split=None).unwrapped


def test_the_three_ids_are_registered_as_benchmarks():
    assert set(IDS) <= set(rods_env.BENCHMARK_ENV_IDS)
    assert not set(IDS) & set(rods_env.ENV_IDS)


def test_splits_and_tasks_are_tau2s_own():
    counts = {}
    for env_id in IDS:
        env = gym.make(env_id, split=None).unwrapped
        tasks = env.domain.seed_tasks()
        counts[env_id] = (len(env.domain.seed_tasks("train")), len(env.domain.seed_tasks("test")))
        assert len({t.id for t in tasks}) == len(tasks)
        assert {t.split for t in tasks} == {"train", "test"}
    assert counts == {IDS[0]: (30, 20), IDS[1]: (74, 40), IDS[2]: (74, 40)}


def test_reset_options_pick_task_or_split(airline):
    task = airline.domain.seed_tasks("test")[3]
    obs, info = airline.reset(options={"task": task.id})
    assert info["task_id"] == task.id and obs
    assert [m["role"] for m in info["messages"]] == ["system", "assistant", "user"]
    assert info["messages"][1]["content"] == "Hi! How can I help you today?"
    assert "<policy>" in info["policy"] and info["messages"][0]["content"] == info["policy"]
    assert {t["function"]["name"] for t in info["tools"]} >= {"book_reservation", "calculate"}
    with pytest.raises(TypeError):  # the schemas every environment shares are read-only
        info["tools"][0]["function"]["name"] = "changed"
    for seed in range(5):
        _, info = airline.reset(seed=seed, options={"split": "test"})
        assert airline.task.split == "test"
    with pytest.raises(ConfigError, match="no τ²-bench airline task 'nope'"):
        airline.reset(options={"task": "tau2-airline:nope"})
    with pytest.raises(ConfigError, match="not a task id of tau2-airline"):
        airline.reset(options={"task": "retail-0001"})


def test_the_reward_comes_once_at_the_end_and_sums_to_progress(airline):
    task = airline.domain.task("tau2-airline:3")
    obs, info = airline.reset(options={"task": task})
    agent = airline.domain.oracle_agent(task)
    rewards, done = [], False
    while not done:
        obs, reward, terminated, truncated, info = airline.step(agent.act(obs, info))
        rewards.append(reward)
        done = terminated or truncated
    assert terminated and not truncated and info["termination"] == "user_stop"
    assert rewards[-1] == 1.0 and sum(rewards) == info["progress"] == 1.0 and info["success"]
    assert info["reward_info"]["reward_basis"] == ["DB", "COMMUNICATE"]
    assert info["turn_results"] == [
        {
            "turn": 0,
            "passed": True,
            "reward": 1.0,
            "checks": {"DB": 1.0, "COMMUNICATE": 1.0},
            "failures": [],
            "message": 2,
        }
    ]
    with pytest.raises(RodsError, match="episode is over"):
        airline.step("more")


@pytest.mark.parametrize(
    ("action", "needle"),
    [
        ('<tool_call>{"name": "x", "arguments": {</tool_call>', "not valid JSON"),
        ("<tool_call>[1, 2]</tool_call>", "JSON object"),
        ({"name": "get_user_details", "arguments": {}}, "'tool_calls'"),
        ("   ", "empty"),
        ({"role": "assistant", "content": ""}, "empty"),
        ("y" * 10_000_000, "action too long"),
    ],
)
def test_bad_input_is_an_error_observation_outside_the_tau2_trajectory(airline, action, needle):
    airline.reset(seed=0)
    before = airline.trajectory
    obs, reward, term, trunc, info = airline.step(action)
    assert obs.startswith("Error") and needle in obs
    assert (reward, term, trunc) == (0.0, False, False)
    assert airline.trajectory == before
    assert info["messages"][-1]["role"] in ("system", "tool")  # a whole action, or one call


def test_tool_errors_are_tau2s_and_ten_of_them_end_the_episode_with_reward_0(airline):
    airline.reset(options={"task": "tau2-airline:0"})  # a task a silent agent passes
    obs, *_ = airline.step(_call("get_user_details", user_id="nobody"))
    assert obs == "Error: User nobody not found"
    obs, *_ = airline.step(_call("no_such_tool"))
    assert obs == "Error: Tool 'no_such_tool' not found."
    for i in range(8):
        obs, reward, term, trunc, info = airline.step(_call("get_user_details", user_id=f"x{i}"))
    assert term and not trunc and info["termination"] == "too_many_errors"
    assert info["progress"] == 0.0 and reward == 0.0 and info["tool_errors"] == 10
    (failure,) = info["turn_results"][0]["failures"]
    assert failure["rule"] == "tau2_unscored" and "too_many_errors" in failure["text"]


def test_max_steps_truncates_and_truncate_scores_zero(airline):
    env = Tau2Env("tau2-airline", split=None, max_steps=2)
    env.reset(options={"task": "tau2-airline:0"})
    env.step(_call("list_all_airports"))
    *_, term, trunc, info = env.step(_call("list_all_airports"))
    assert trunc and not term and info["termination"] == "max_steps" and info["progress"] == 0.0
    airline.reset(options={"task": "tau2-airline:0"})
    info = airline.truncate("max_tokens")
    assert info["termination"] == "max_tokens" and info["progress"] == 0.0
    assert "did not end by a stop" in info["reward_info"]["note"]


def test_tau2s_step_limit_counts_messages_like_its_orchestrator():
    env = Tau2Env("tau2-airline", split=None, tau2_max_steps=7)
    env.reset(options={"task": "tau2-airline:0"})  # the user's first message: step 1
    for _ in range(2):  # each call and its reply: 2 steps
        *_, term, _, info = env.step(_call("list_all_airports"))
        assert not term
    *_, term, _, info = env.step(_call("list_all_airports"))  # steps 6 and 7
    assert term and info["termination"] == "max_steps" and info["tau2_steps"] == 7


def test_solo_mode_starts_with_the_ticket_and_ends_with_done():
    env = gym.make("rods/Tau2-Telecom-v0", split=None, solo=True).unwrapped
    task = env.domain.seed_tasks("train")[0]
    obs, info = env.reset(options={"task": task})
    assert obs == env.tau2_task.ticket
    assert [m["role"] for m in info["messages"]] == ["system", "user"]
    assert "<ticket>" in info["policy"]
    names = {t["function"]["name"] for t in info["tools"]}
    assert {"done", "toggle_airplane_mode", "get_customer_by_phone"} <= names
    obs, _reward, term, _, info = env.step(_call("check_status_bar") + _call("done"))
    assert term and info["termination"] == "agent_stop"
    assert env.trajectory == [{"role": "assistant", "content": "###STOP###", "tool_calls": None}]
    env.reset(options={"task": task})
    *_, term, _, info = env.step("I think it is fixed.")
    assert term and info["termination"] == "agent_error" and info["progress"] == 0.0


def test_every_solo_and_user_mode_oracle_passes_and_silent_agents_pass_what_tau2_says():
    passed = {}
    for env_id, solo in [(IDS[0], False), (IDS[1], False), (IDS[2], False), (IDS[2], True)]:
        env = (
            gym.make(env_id, split=None, solo=solo).unwrapped
            if solo
            else gym.make(env_id, split=None).unwrapped
        )
        tasks = env.domain.seed_tasks()
        mode = "solo" if solo else "scripted"
        ok = sum(
            run_episode(env, env.domain.oracle_agent(t, user_mode=mode), task=t)["success"]
            for t in tasks
        )
        passed[(env_id, solo)] = (ok, len(tasks))
    assert all(ok == n for ok, n in passed.values()), passed
    silent = {d.name: len(d.silent_pass()) for d in (gym.make(i).unwrapped.domain for i in IDS)}
    assert silent == {"tau2-airline": 19, "tau2-retail": 7, "tau2-telecom": 0}


class _ToolUser:
    """A user model stand-in that works its phone before answering (telecom)."""

    def __init__(self) -> None:
        self.seen: list[list[dict]] = []

    def begin_scenario(self, task) -> None:
        self.turn = 0

    def respond(self, system, messages, tools=None):
        self.seen.append([dict(m) for m in messages])
        self.turn += 1
        if self.turn == 2:
            return _call("check_status_bar")
        if self.turn == 4:
            return "###STOP###"
        return "My phone has no service."


def test_a_user_model_gets_tau2s_prompt_and_its_tool_calls_stay_hidden_from_the_agent():
    user = _ToolUser()
    env = Tau2Env("tau2-telecom", split=None, user=user)
    obs, info = env.reset(seed=0)
    assert obs == "My phone has no service."
    assert user.seen[0] == [{"role": "user", "content": "Hi! How can I help you today?"}]
    obs, _, term, _, info = env.step("What does your status bar show?")
    assert obs == "My phone has no service." and not term
    assert [m["role"] for m in info["messages"]][-2:] == ["assistant", "user"]
    roles = [m["role"] for m in env.trajectory]
    assert roles == ["assistant", "user", "assistant", "user", "tool", "user"]
    assert env.trajectory[3]["tool_calls"][0]["requestor"] == "user"
    assert user.seen[-1][-1]["role"] == "tool"  # the user saw their tool's reply
    *_, term, _, info = env.step("Thanks.")
    assert term and info["termination"] == "user_stop"


def test_a_user_that_fails_ends_the_episode_cleanly_and_says_why():
    class Empty:
        def __init__(self):
            self.asked = 0

        def begin_scenario(self, task):
            pass

        def respond(self, system, messages, tools=None):
            self.asked += 1
            return "  " if self.asked <= USER_RETRIES + 1 else "Hello."

    empty = Empty()
    env = Tau2Env("tau2-retail", user=empty)
    obs, info = env.reset(seed=0)  # the first message never comes: over at once, no raise
    assert empty.asked == USER_RETRIES + 1  # an empty reply is asked for again, as τ²-bench
    assert info["termination"] == "user_error" and info["progress"] == 0.0
    assert "empty message" in info["user_error"] and "empty message" in obs
    assert info["benchmark_record"]["termination_reason"] == "user_error"
    with pytest.raises(RodsError, match="episode is over"):
        env.step("Hello?")

    class Raising:
        def begin_scenario(self, task):
            pass

        def respond(self, system, messages, tools=None):
            if len(messages) > 1:
                raise RuntimeError("the user's server is down")
            return "I want to return my order."

    env = Tau2Env("tau2-retail", user=Raising())
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("Sure, what is your order id?")
    assert term and not trunc and reward == 0.0 and info["termination"] == "user_error"
    assert "RuntimeError: the user's server is down" in info["user_error"]

    once = Empty()
    once.asked = USER_RETRIES  # one empty reply, then a message: a retry, not a failure
    _, info = Tau2Env("tau2-retail", user=once).reset(seed=0)
    assert info["termination"] is None and info["user_error"] is None
    with pytest.raises(ConfigError, match="needs a user that plays τ²-bench's scenarios"):
        Tau2Env("tau2-retail", user=rods_env.ScriptedUser())
    with pytest.raises(ConfigError, match="has no solo mode"):
        Tau2Env("tau2-retail", solo=True)


def test_same_task_same_transcript_and_state_in_two_processes():
    code = (
        "import json, gymnasium as gym, rods_env\n"
        "from rods_env.oracle import run_episode\n"
        "env = gym.make('rods/Tau2-Telecom-v0', split=None).unwrapped\n"
        "t = env.domain.seed_tasks()[5]\n"
        "out = run_episode(env, env.domain.oracle_agent(t), task=t)\n"
        "print(json.dumps([env.trajectory, out['reward_info'], str(env.state.fingerprint())]))\n"
    )
    outs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        for _ in range(2)
    ]
    assert all(o.returncode == 0 for o in outs), outs[0].stderr
    assert outs[0].stdout == outs[1].stdout


def test_a_failed_episode_says_which_checks_failed(airline):
    task = airline.domain.task("tau2-airline:3")  # DB and COMMUNICATE ("4")
    airline.reset(options={"task": task})
    *_, info = airline.step("I am not sure.")  # the stand-in user ends it: nothing done
    rules = [f["rule"] for f in info["turn_results"][0]["failures"]]
    assert info["progress"] == 0.0 and rules == ["tau2_communicate"]
    assert info["turn_results"][0]["failures"][0]["text"] == "not said: 4"
