"""rods environments as a verifiers v1 taskset: the episode behind its tools (here), verifiers'
own ``vf-validate`` on every env id and a ``vf-eval`` run end to end (in .venv-verifiers, where
verifiers lives: scripts/setup.sh verifiers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rods_env
from rods_agent.integrations.verifiers.episode import (
    SEND_MESSAGE,
    Call,
    Episode,
    message_calls,
    oracle_calls,
    score_calls,
)
from rods_env.registry import load_any_domain
from tests.requires import require

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("RODS_VERIFIERS_VENV", ROOT / ".venv-verifiers"))
WHEELS = VENV / "chat-program-wheels"


def installed_ids() -> list[str]:
    ids = []
    for env_id in rods_env.ENV_IDS + rods_env.BENCHMARK_ENV_IDS:
        if getattr(load_any_domain(env_id), "missing", lambda: None)() is None:
            ids.append(env_id)
    return ids


def test_tasks(env_id: str, n: int) -> list[Any]:
    return list(load_any_domain(env_id).seed_tasks("test"))[:n]


test_tasks.__test__ = False  # type: ignore[attr-defined]


# -- the rods half: no verifiers needed --------------------------------------------------------
@pytest.mark.parametrize("env_id", installed_ids())
def test_the_oracle_through_the_taskset_tools_passes_and_doing_nothing_does_not(env_id):
    for task in test_tasks(env_id, 3):
        verdict = score_calls(env_id, task, oracle_calls(env_id, task), max_steps=200)
        assert (verdict.progress, verdict.success) == (1.0, True), task.id
        idle = score_calls(env_id, task, [])
        assert idle.progress < 1.0 and not idle.success and idle.termination == "agent_stopped"


def test_the_tools_are_the_envs_own_plus_send_message_to_user():
    env = gym.make("rods/Airline-v0", split=None)
    _, info = env.reset(options={"task": "airline-0001"})
    episode = Episode("rods/Airline-v0")
    first = episode.reset("airline-0001")
    assert first == env.reset(options={"task": "airline-0001"})[0]
    assert episode.tools[:-1] == list(info["tools"])
    assert episode.tools[-1]["function"]["name"] == SEND_MESSAGE
    assert episode.policy == info["policy"]


def test_a_cut_off_episode_scores_what_gymnasium_gives_at_the_same_point():
    """Half of the oracle's calls: the verdict is rods' own on those actions, truncated."""
    env_id = "rods/Retail-v0"
    for task in test_tasks(env_id, 4):
        calls = oracle_calls(env_id, task)[: len(oracle_calls(env_id, task)) // 2]
        env = gym.make(env_id, split=None, max_steps=40)
        _, info = env.reset(options={"task": task})
        for call in calls:
            if call.name == SEND_MESSAGE:
                action: Any = {"role": "assistant", "content": call.arguments["message"]}
            else:
                function = {"name": call.name, "arguments": call.arguments}
                action = {
                    "role": "assistant",
                    "tool_calls": [{"type": "function", "function": function}],
                }
            *_, info = env.step(action)
        info = env.unwrapped.truncate("agent_stopped")
        verdict = score_calls(env_id, task, calls)
        assert (verdict.progress, verdict.success) == (info["progress"], info["success"])
        assert verdict.progress < 1.0


def test_cheap_agents_do_not_pass():
    """Claiming success to the user, or a write call with made-up arguments, earns nothing."""
    env_id = "rods/Retail-v0"
    for task in test_tasks(env_id, 3):
        claim = [
            Call(SEND_MESSAGE, {"message": "Done! Everything you asked for is taken care of."})
        ]
        assert score_calls(env_id, task, claim).progress < 1.0
        guess = [
            Call("cancel_pending_order", {"order_id": "#W0000000", "reason": "no longer needed"})
        ]
        assert not score_calls(env_id, task, guess).success


def test_a_call_on_a_closed_episode_changes_nothing():
    env_id = "rods/Retail-v0"
    task = test_tasks(env_id, 1)[0]
    calls = oracle_calls(env_id, task)
    extra = [
        *calls,
        Call("cancel_pending_order", {"order_id": "#W0000000", "reason": "ordered by mistake"}),
    ]
    assert score_calls(env_id, task, extra) == score_calls(env_id, task, calls)
    episode = Episode(env_id)
    episode.reset(task)
    for call in calls:
        episode.call(call.name, call.arguments)
    assert episode.call(SEND_MESSAGE, {"message": "anything else?"}).startswith(
        "The conversation has ended"
    )


names = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)
arguments = st.dictionaries(
    names, st.one_of(st.integers(), st.text(max_size=8), st.booleans()), max_size=3
)


@given(st.lists(st.tuples(names, arguments, st.booleans()), max_size=6))
def test_message_calls_reads_the_calls_the_chat_loop_could_send(items):
    """Arguments as a JSON string or an object are read; a string that is not a JSON object
    never reached a tool, so it is left out; other roles are ignored."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    expected = []
    for name, args, as_string in items:
        sent: Any = json.dumps(args) if as_string else args
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "name": name, "arguments": sent}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": "c", "content": "ok"})
        expected.append(Call(name, args))
    messages.append(
        {"role": "assistant", "tool_calls": [{"function": {"name": "x", "arguments": "{broken"}}]}
    )
    messages.append(
        {"role": "assistant", "tool_calls": [{"function": {"name": "x", "arguments": "[1, 2]"}}]}
    )
    assert message_calls(messages) == expected


# -- verifiers' own tools, in .venv-verifiers -------------------------------------------------
def require_verifiers() -> Path:
    python = VENV / "bin" / "python"
    ok = (
        python.exists()
        and subprocess.run([python, "-c", "import verifiers.v1"], capture_output=True).returncode
        == 0
    )
    require(
        ok and WHEELS.is_dir(),
        f"verifiers is not installed in {VENV}",
        "bash scripts/setup.sh verifiers",
    )
    return VENV / "bin"


def verifiers_env(tmp: Path) -> dict[str, str]:
    """The rods checkout and the hub package on the path; verifiers' caches and uv offline,
    resolving the chat program from the wheels the setup script downloaded."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "hubs" / "verifiers")]),
        "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "OMP_NUM_THREADS": "1",
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(WHEELS),
        "UV_CACHE_DIR": str(tmp / "uv-cache"),
        "PRIME_DISABLE_VERSION_CHECK": "1",
        "SCRIPTED_MODEL_KEY": "unused",
    }


# one id per kind of environment (BFCL's category ids and tau2's domains share their code);
# RODS_VERIFIERS_ALL=1 validates every installed id (12/12 passed: docs/hubs.md)
VALIDATED = {
    "rods/BFCL-API-v0", "rods/Airline-v0", "rods/Retail-v0", "rods/BFCL-MultiTurn-Base-v0",
    "rods/BFCL-MultiTurn-MissFunc-v0", "rods/Tau2-Airline-v0", "rods/Tau2-Telecom-v0",
}  # fmt: skip


def validated_ids() -> list[str]:
    ids = installed_ids()
    return (
        ids if os.environ.get("RODS_VERIFIERS_ALL") == "1" else [i for i in ids if i in VALIDATED]
    )


@pytest.mark.parametrize("env_id", validated_ids())
def test_vf_validate_passes_on_every_env_id(env_id, tmp_path):
    """verifiers' model-free check, in the subprocess runtime: each task sets up, the gold
    (the oracle through the taskset's tools) passes and an untouched rollout does not."""
    bin_dir = require_verifiers()
    out = subprocess.run(
        [bin_dir / "vf-validate", "rods-tasks", "--taskset.env-id", env_id, "--runtime.type", "subprocess",
         "-n", "6", "-o", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=600, env=verifiers_env(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (summary,) = (tmp_path / "out").glob("*/summary.json")
    report = json.loads(summary.read_text())
    assert report["total"] == 6 and report["outcomes"]["valid"] == 6, report
    assert report["checks"]["gold"]["valid"] == report["checks"]["noop"]["valid"] == 6, report


def test_vf_validate_plays_a_pool_file(tmp_path):
    """Tasks from a JSONL pool (what ``rods synth`` writes) instead of the seeds."""
    from rods_env.task import dump_tasks

    bin_dir = require_verifiers()
    pool = tmp_path / "pool.jsonl"
    dump_tasks(list(load_any_domain("rods/Airline-v0").seed_tasks("train"))[:4], pool)
    out = subprocess.run(
        [bin_dir / "vf-validate", "rods-tasks", "--taskset.env-id", "rods/Airline-v0", "--taskset.pool", str(pool),
         "--taskset.split", "all", "--runtime.type", "subprocess", "-o", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=600, env=verifiers_env(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (summary,) = (tmp_path / "out").glob("*/summary.json")
    report = json.loads(summary.read_text())
    assert report["total"] == 4 and report["outcomes"]["valid"] == 4, report
    (results,) = (tmp_path / "out").glob("*/results.jsonl")
    names = sorted(json.loads(line)["name"] for line in results.read_text().splitlines())
    assert names == sorted(
        t.id for t in list(load_any_domain("rods/Airline-v0").seed_tasks("train"))[:4]
    )


@pytest.fixture
def scripted_model(tmp_path):
    """The scripted chat server (tests/agent/scripted_chat_server.py) for three retail test
    tasks: the oracle's whole episode, the first half of one that earns partial credit, and
    nothing."""
    env_id = "rods/Retail-v0"
    pool = test_tasks(env_id, 40)
    halves = {t.id: oracle_calls(env_id, t)[: len(oracle_calls(env_id, t)) // 2] for t in pool}
    partial = next(t for t in pool if 0.0 < score_calls(env_id, t, halves[t.id]).progress < 1.0)
    tasks = [pool[0], partial, pool[1]]
    plans = [oracle_calls(env_id, pool[0]), halves[partial.id], []]
    scripts = {
        Episode(env_id).reset(t): [[c.name, c.arguments] for c in plan]
        for t, plan in zip(tasks, plans, strict=True)
    }
    (tmp_path / "scripts.json").write_text(json.dumps(scripts))
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "agent" / "scripted_chat_server.py"), str(tmp_path / "scripts.json"), str(port_file)]
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, (
                "the scripted server did not start"
            )
            time.sleep(0.1)
        yield (
            f"http://127.0.0.1:{port_file.read_text()}/v1",
            dict(zip([t.id for t in tasks], plans, strict=True)),
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_vf_eval_runs_the_taskset_end_to_end_and_scores_as_rods(scripted_model, tmp_path):
    """``vf-eval`` with verifiers' chat loop against a scripted OpenAI-compatible model: every
    call reaches the rollout's own rods episode through the MCP toolset, the scripted user
    answers through send_message_to_user, and each rollout's reward and success are rods'
    verdict on the same calls played through gymnasium."""
    bin_dir = require_verifiers()
    url, plans = scripted_model
    out = subprocess.run(
        [bin_dir / "vf-eval", "rods-tasks", "--env.taskset.env-id", "rods/Retail-v0", "--model", "scripted",
         "--client.base-url", url, "--client.api-key-var", "SCRIPTED_MODEL_KEY", "-r", "1",
         "--select.include.ids", *plans,
         "--env.agent.runtime.type", "subprocess", "--push", "False", "-o", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=900, env=verifiers_env(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (path,) = (tmp_path / "out").glob("*/traces.jsonl")
    traces = [t for line in path.read_text().splitlines() for t in json.loads(line)["traces"]]
    assert sorted(t["task"]["data"]["task_id"] for t in traces) == sorted(plans)
    progress = []
    for trace in traces:
        task_id = trace["task"]["data"]["task_id"]
        assert trace["ok"] and not trace["errors"], trace["errors"]
        messages = [node["message"] for node in trace["nodes"]]
        calls = message_calls(messages)
        assert calls == plans[task_id]  # the model's calls, as the trace recorded them
        rods = score_calls("rods/Retail-v0", task_id, calls)
        assert trace["rewards"]["progress"]["score"] == rods.progress, task_id
        assert trace["metrics"]["success"] == float(rods.success), task_id
        # each tool result is what the env returned for that call in the rods episode
        episode = Episode("rods/Retail-v0")
        episode.reset(task_id)
        results = [m["content"] for m in messages if m["role"] == "tool"]
        assert results == [episode.call(c.name, c.arguments) for c in calls], task_id
        progress.append(rods.progress)
    assert (
        sorted(progress)[0] == 0.0
        and sorted(progress)[-1] == 1.0
        and 0.0 < sorted(progress)[1] < 1.0
    )
