"""Verdicts of record and strict verdicts: rods gives τ²-bench's verdict (``reward``) and
records beside it the strict one and the quirk of τ²-bench's evaluator that separates them."""

from __future__ import annotations

import json

import pytest

from environments.tau2.env import Tau2Env
from environments.tau2.scoring import QUIRKS, said_as_token
from rods_env.errors import ConfigError

RETAIL_TASK = "tau2-retail:2"  # a return; communicate_info "10"; DB and COMMUNICATE
TRANSFER_TASK = "tau2-telecom:[service_issue]airplane_mode_on|lock_sim_card_pin[PERSONA:Easy]"


def _call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture(scope="module")
def retail() -> Tau2Env:
    return Tau2Env("tau2-retail", split=None, max_steps=200)


def _gold_then(env: Tau2Env, task_id: str, final: str) -> dict:
    env.reset(options={"task": task_id})
    for action in env.tau2_task.evaluation_criteria.actions:
        *_, info = env.step(_call(action.name, **action.arguments))
    *_, info = env.step(final)
    assert info["termination"] == "user_stop"  # the stand-in user ends it
    return info


@pytest.mark.parametrize(
    ("final", "reward", "strict", "quirks"),
    [
        ("Your refund is 10 dollars.", 1.0, 1.0, []),
        ("Your refund is $10.", 1.0, 1.0, []),
        ("Your refund is 100 dollars.", 1.0, 0.0, ["communicate_substring"]),
        ("Your refund is 1.10 dollars.", 1.0, 0.0, ["communicate_substring"]),
        ("Your refund is 10.5 dollars.", 1.0, 0.0, ["communicate_substring"]),
        ("<think>It is 10.</think>Your refund is on its way.", 0.0, 0.0, ["said_in_reasoning"]),
        ("Your refund is on its way.", 0.0, 0.0, []),
    ],
)
def test_communicate_verdict_of_record_and_strict(retail, final, reward, strict, quirks):
    info = _gold_then(retail, RETAIL_TASK, final)
    got = info["reward_info"]
    assert (got["reward"], got["strict_reward"], got["quirks"]) == (reward, strict, quirks)
    assert info["progress"] == reward  # the verdict of record is τ²-bench's
    record = info["benchmark_record"]["reward_info"]
    assert record["reward"] == reward and record["info"]["strict_reward"] == strict
    assert record["info"]["quirks"] == quirks and set(quirks) <= set(QUIRKS)


def test_a_failed_call_matches_a_gold_action_in_tau2s_verdict_not_in_the_strict_one():
    env = Tau2Env("tau2-telecom", split=None, solo=True)
    env.reset(options={"task": TRANSFER_TASK})
    obs, *_ = env.step(_call("transfer_to_human_agents"))  # no summary: the call fails
    assert obs.startswith("Error")
    *_, info = env.step(_call("done"))
    got = info["reward_info"]
    assert (got["reward"], got["strict_reward"], got["quirks"]) == (1.0, 0.0, ["action_loose"])
    env.reset(options={"task": TRANSFER_TASK})
    env.step(_call("transfer_to_human_agents", summary="The SIM is locked."))
    *_, info = env.step(_call("done"))
    assert (info["reward_info"]["reward"], info["reward_info"]["strict_reward"]) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("text", "info", "said"),
    [
        ("It is 10.", "10", True),
        ("It is $10, done", "10", True),
        ("It is 1,000.", "1000", True),  # τ²-bench removes commas; so does the strict rule
        ("It is 100.", "10", False),
        ("Order #W10", "10", False),
        ("It is 10.5", "10", False),
        ("It is 10.5", "10.5", True),
        ("CODE abc", "abc", True),
    ],
)
def test_said_as_a_whole_token(text, info, said):
    assert said_as_token(text, info) is said


def test_both_verdicts_side_by_side_and_the_strict_one_on_request():
    official = Tau2Env("tau2-retail", split=None, max_steps=200)
    strict = Tau2Env("tau2-retail", split=None, max_steps=200, verdicts="strict")
    said_inside = "Your refund is 100 dollars."  # "10" only inside "100"
    a = _gold_then(official, RETAIL_TASK, said_inside)
    b = _gold_then(strict, RETAIL_TASK, said_inside)
    assert a["verdicts"] == b["verdicts"]
    assert a["verdicts"]["official"] == {"success": True, "progress": 1.0, "turns": [True]}
    assert a["verdicts"]["strict"] == {"success": False, "progress": 0.0, "turns": [False]}
    (difference,) = a["verdicts"]["differences"]
    assert difference["quirks"] == ["communicate_substring"] and "substring" in difference["why"]
    assert (a["progress"], a["success"]) == (1.0, True)  # τ²-bench's verdict by default
    assert (b["progress"], b["success"]) == (0.0, False)
    (failure,) = b["turn_results"][0]["failures"]
    assert failure["rule"] == "tau2_strict_communicate_substring"
    # the results file for τ²-bench's tools holds τ²-bench's verdict either way
    assert b["benchmark_record"]["reward_info"]["reward"] == 1.0
    agreeing = _gold_then(strict, RETAIL_TASK, "Your refund is 10 dollars.")
    assert agreeing["verdicts"]["differences"] == [] and agreeing["progress"] == 1.0
    with pytest.raises(ConfigError, match="verdicts must be"):
        Tau2Env("tau2-retail", verdicts="lenient")


def test_rods_eval_reports_both_verdicts_of_tau2(tmp_path):
    from rods_agent.engines import oracle_engine
    from rods_agent.evaluation.evaluate import evaluate, load_pool

    tasks = load_pool("tau2-retail", "seeds", "test")[:3]
    summary = evaluate(oracle_engine(tasks), tasks, out=tmp_path / "run")
    assert summary.verdicts == {
        "Tau2-Retail": {
            "official": {"pass^1": 1.0, "avg_reward": 1.0},
            "strict": {"pass^1": 1.0, "avg_reward": 1.0},  # the gold says it as a token
        }
    }
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "## Tau2-Retail: its official verdicts and the strict ones" in md
