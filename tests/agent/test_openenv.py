"""rods environments served by OpenEnv: parity with gymnasium.make, isolation under 32
interleaved sessions, bad input over the wire, and OpenEnv's own validators."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import rods_env
from tests.agent.openenv_server import ROOT, require_openenv, rods_server

require_openenv()

from rods_agent.engines import oracle_agents  # noqa: E402
from rods_agent.integrations.openenv import RodsAction, RodsEnv  # noqa: E402
from rods_agent.integrations.openenv.server import RodsEnvironment  # noqa: E402
from rods_env.registry import load_any_domain  # noqa: E402

MAKE = {"split": None, "max_steps": 200}
SERVE = ("--split", "all", "--max-steps", "200", "--max-sessions", "40")
OPENENV_CLI = str(Path(sys.executable).parent / "openenv")


def solo_run(env_id: str, task: Any) -> dict[str, Any]:
    """The oracle's episode through gymnasium.make: its actions, each step's observation and
    reward, and the final info."""
    env = gym.make(env_id, **MAKE)
    obs, info = env.reset(options={"task": task.id})
    agent = oracle_agents([task])(info)
    actions, steps, done = [], [], False
    while not done:
        action = agent.act(obs, info)
        actions.append(copy.deepcopy(action))
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((obs, reward))
        done = terminated or truncated
    return {
        "first": obs if not steps else None,
        "actions": actions,
        "steps": steps,
        "progress": info["progress"],
        "success": info["success"],
        "turn_results": [r.to_dict() if hasattr(r, "to_dict") else r for r in info["turn_results"]],
        "messages": copy.deepcopy(list(info["messages"])),
    }


def as_action(action: Any) -> RodsAction:
    if isinstance(action, str):
        return RodsAction(type="completion", content=action)
    return RodsAction(type="assistant", message=dict(action))


def first_tasks(env_id: str, n: int) -> list[Any]:
    return list(load_any_domain(env_id).seed_tasks())[:n]


def installed_ids() -> list[str]:
    ids = []
    for env_id in rods_env.ENV_IDS + rods_env.BENCHMARK_ENV_IDS:
        domain = load_any_domain(env_id)
        if getattr(domain, "missing", lambda: None)() is None:
            ids.append(env_id)
    return ids


@pytest.mark.parametrize("env_id", installed_ids())
def test_every_env_id_plays_the_oracle_exactly_as_gymnasium_make(env_id):
    """The served environment class, driven with the oracle's own actions, gives each step's
    observation and reward and the final verdicts that gymnasium.make gives."""
    for task in first_tasks(env_id, 2):
        solo = solo_run(env_id, task)
        served = RodsEnvironment(env_id, MAKE)
        first = served.reset(task_id=task.id)
        assert first.tools and first.policy is not None and first.reward is None
        for action, (obs, reward) in zip(solo["actions"], solo["steps"], strict=True):
            out = served.step(as_action(action))
            assert (out.text, out.reward) == (obs, pytest.approx(reward)), (env_id, task.id)
        assert out.done
        state = served.state
        assert (state.progress, state.success) == (solo["progress"], solo["success"])
        assert state.turn_results == solo["turn_results"]
        assert state.messages == solo["messages"]
        assert state.step_count == len(solo["actions"])


def test_served_tools_are_rods_tools_with_their_schemas_unchanged():
    env = gym.make("rods/Airline-v0", **MAKE)
    _, info = env.reset(seed=3)
    served = RodsEnvironment("rods/Airline-v0", MAKE)
    out = served.reset(seed=3)
    assert out.tools == copy.deepcopy(list(info["tools"]))
    listed = served.step(RodsAction(type="list_tools"))
    assert listed.tools == out.tools and listed.reward == 0.0 and not listed.done


def test_reset_and_step_refuse_what_they_cannot_do():
    served = RodsEnvironment("rods/Retail-v0", MAKE)
    with pytest.raises(ValueError, match="reset first"):
        served.step(RodsAction(type="message", content="hi"))
    with pytest.raises(ValueError, match=r"unknown reset argument\(s\) \['taskid'\]"):
        served.reset(taskid="retail-0001")
    with pytest.raises(ValueError, match="no-such-task"):
        served.reset(task_id="no-such-task")
    with pytest.raises(ValueError, match="call_tool action needs a tool_name"):
        RodsAction(type="call_tool")
    served.reset(task_id="retail-0001")
    served.step(RodsAction(type="end"))
    with pytest.raises(ValueError, match="episode has ended"):
        served.step(RodsAction(type="message", content="hi"))


def test_the_task_api_lists_the_served_pool_and_reset_plays_a_task_by_index():
    served = RodsEnvironment("rods/Retail-v0", MAKE)
    tests = load_any_domain("rods/Retail-v0").seed_tasks("test")
    assert served.num_tasks("test") == len(tests)
    assert served.get_task("test", 3)["id"] == tests[3].id
    assert served.reset(split="test", index=3).task_id == tests[3].id
    with pytest.raises(IndexError):
        served.get_task("test", len(tests))


# -- over the wire ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def retail_url():
    with rods_server("rods/Retail-v0", *SERVE) as url:
        yield url


def test_openenv_validate_passes_against_the_running_server(retail_url):
    out = subprocess.run(
        [OPENENV_CLI, "validate", "--url", retail_url, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["passed"], report
    assert report["mode"] == "simulation"
    assert {c["id"] for c in report["criteria"]} >= {
        "health_endpoint",
        "metadata_endpoint",
        "schema_endpoint",
        "mcp_endpoint",
        "mode_endpoint_consistency",
    }


def test_openenv_validate_static_passes_on_the_hub_package():
    out = subprocess.run(
        [OPENENV_CLI, "validate", str(ROOT / "hubs" / "openenv"), "--level", "static", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["verdict"] == "pass"
    assert [r["status"] for r in report["results"]] == ["pass"]


def test_mcp_clients_see_rods_tools_and_calls_run_in_their_session(retail_url):
    from openenv.core.mcp_client import MCPToolClient

    env = gym.make("rods/Retail-v0", **MAKE)
    _, info = env.reset(options={"task": "retail-0001"})
    expected = {t["function"]["name"]: t["function"] for t in copy.deepcopy(list(info["tools"]))}

    async def main() -> tuple[list[Any], Any, Any]:
        async with MCPToolClient(base_url=retail_url) as client:
            await client.reset(task_id="retail-0001")
            tools = await client.list_tools()
            reply = await client.call_tool("find_user_id_by_email", email="nobody@example.com")
            return tools, reply, await client.state()

    tools, reply, state = asyncio.run(main())
    assert {t.name: (t.description, t.input_schema) for t in tools} == {
        name: (f["description"], f["parameters"]) for name, f in expected.items()
    }
    assert "No user with email 'nobody@example.com'" in reply
    assert state.step_count == 1  # the call ran in the session's own episode


def test_32_interleaved_sessions_give_the_verdicts_they_give_alone(retail_url):
    """16 tasks twice each, 32 sessions at once, every step interleaved with the others: each
    session's observations, rewards, turn results and conversation equal its solo run."""
    tasks = first_tasks("rods/Retail-v0", 16)
    solos = {t.id: solo_run("rods/Retail-v0", t) for t in tasks}

    async def session(task_id: str) -> tuple[list[Any], Any]:
        seen = []
        async with RodsEnv(base_url=retail_url) as env:
            await env.reset(task_id=task_id)
            for action in solos[task_id]["actions"]:
                await asyncio.sleep(0)
                result = await env.step(as_action(action))
                seen.append((result.observation.text, result.reward))
            return seen, await env.state()

    async def main() -> list[tuple[list[Any], Any]]:
        return await asyncio.gather(*(session(t.id) for t in tasks + tasks))

    results = asyncio.run(main())
    assert len(results) == 32
    for task, (seen, state) in zip(tasks + tasks, results, strict=True):
        solo = solos[task.id]
        assert seen == [(o, pytest.approx(r)) for o, r in solo["steps"]], task.id
        assert (state.progress, state.success) == (solo["progress"], solo["success"])
        assert state.turn_results == solo["turn_results"]
        assert state.messages == solo["messages"]
    assert all(state.success for _, state in results)


def _ws(url: str) -> Any:
    from websockets.sync.client import connect

    return connect(
        url.replace("http://", "ws://") + "/ws", max_size=None, open_timeout=10, legacy=True
    )


def _ask(ws: Any, message: Any) -> dict[str, Any]:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.recv(timeout=30))


def test_bad_input_gets_an_error_reply_and_the_session_goes_on(retail_url):
    with _ws(retail_url) as ws:
        bad_json = _ask(ws, "{not json")
        assert bad_json["type"] == "error" and bad_json["data"]["code"] == "INVALID_JSON"
        before_reset = _ask(ws, {"type": "step", "data": {"type": "message", "content": "hi"}})
        assert before_reset["type"] == "error" and "reset first" in before_reset["data"]["message"]
        unknown_type = _ask(ws, {"type": "drop_tables"})
        assert unknown_type["data"]["code"] == "UNKNOWN_TYPE"
        typo = _ask(ws, {"type": "reset", "data": {"taskid": "retail-0001"}})
        assert typo["type"] == "error" and "taskid" in typo["data"]["message"]
        reset = _ask(ws, {"type": "reset", "data": {"task_id": "retail-0001"}})
        assert reset["type"] == "observation"
        invalid = _ask(ws, {"type": "step", "data": {"type": "call_tool", "arguments": {}}})
        assert invalid["type"] == "error" and invalid["data"]["code"] == "VALIDATION_ERROR"
        unknown_tool = _ask(
            ws, {"type": "step", "data": {"tool_name": "drop_database", "arguments": {}}}
        )
        assert unknown_tool["type"] == "observation"
        assert "drop_database" in unknown_tool["data"]["observation"]["text"]
        garbage = _ask(
            ws, {"type": "step", "data": {"type": "completion", "content": "{" * 50_000}}
        )
        assert garbage["type"] == "observation" and not garbage["data"]["done"]
        state = _ask(ws, {"type": "state"})
        assert state["data"]["steps"] == 2 and state["data"]["task_id"] == "retail-0001"


def test_a_huge_message_closes_only_its_own_connection(retail_url):
    from websockets.exceptions import ConnectionClosed

    with _ws(retail_url) as ws:
        _ask(ws, {"type": "reset", "data": {}})
        with pytest.raises(ConnectionClosed) as closed:
            _ask(ws, {"type": "step", "data": {"type": "message", "content": "x" * (8 << 20)}})
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    with _ws(retail_url) as ws:
        assert _ask(ws, {"type": "reset", "data": {}})["type"] == "observation"


def test_clients_that_vanish_mid_episode_leave_no_session_behind(retail_url):
    """40 sessions (the server's cap) drop their sockets mid-episode without a close frame;
    40 new sessions then all get a slot."""
    for _ in range(2):
        sockets = [_ws(retail_url) for _ in range(40)]
        for ws in sockets:
            assert _ask(ws, {"type": "reset", "data": {}})["type"] == "observation"
            ws.send(json.dumps({"type": "step", "data": {"type": "message", "content": "hello"}}))
        for ws in sockets:
            ws.socket.close()  # no close frame: the client just vanishes
        deadline = time.monotonic() + 20
        while True:  # the server notices each dropped socket on its own schedule
            probe = _ws(retail_url)
            reply = _ask(probe, {"type": "reset", "data": {}})
            probe.close()
            if reply["type"] == "observation" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    replies = []
    sockets = [_ws(retail_url) for _ in range(40)]
    for ws in sockets:
        replies.append(_ask(ws, {"type": "reset", "data": {}})["type"])
        ws.close()
    assert replies == ["observation"] * 40


def test_trl_runs_a_grpo_step_through_the_openenv_client(tmp_path):
    """TRL's GRPOTrainer, a dict of environment factories routed by the dataset's
    `environment` column, each a served rods environment reached through the client: one
    optimizer step on CPU, every rollout scored by the server's own progress (get_reward)."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import add_response_schema

    from rods_agent.integrations.openenv import openenv_environment_factory
    from rods_agent.integrations.trl import build_tiny_trl_model

    model = build_tiny_trl_model(tmp_path / "tiny")
    tokenizer = add_response_schema(AutoTokenizer.from_pretrained(model))
    with (
        rods_server("rods/Retail-v0", *SERVE) as retail,
        rods_server("rods/Airline-v0", *SERVE) as airline,
    ):
        factories = {
            "retail": openenv_environment_factory(retail),
            "airline": openenv_environment_factory(airline),
        }
        rows = [("retail", "retail-0001"), ("airline", "airline-0001")] * 2
        dataset = Dataset.from_dict(
            {
                "prompt": [[{"role": "user", "content": ""}]] * len(rows),
                "environment": [env for env, _ in rows],
                "task_id": [task for _, task in rows],
            }
        )
        args = GRPOConfig(
            output_dir=str(tmp_path / "out"),
            max_steps=1,
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=16,
            max_tool_calling_iterations=2,
            shuffle_dataset=False,
            use_cpu=True,
            report_to="none",
            logging_steps=1,
            save_strategy="no",
            seed=0,
        )
        trainer = GRPOTrainer(
            model=str(model),
            processing_class=tokenizer,
            args=args,
            train_dataset=dataset,
            environment_factory=factories,
        )
        trainer.train()
        played = [env for pool in trainer._environment_pool.values() for env in pool]
        scored = [env for env in played if env._reward is not None]
        assert {type(env).__name__ for env in scored} == {
            "RetailOpenEnvEnvironment",
            "AirlineOpenEnvEnvironment",
        }
        for env in scored:
            state = env.client.state()
            assert state.done and env._reward == state.progress
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert any("RetailOpenEnvEnvironment" in key for key in logged), logged
    assert any("AirlineOpenEnvEnvironment" in key for key in logged), logged
