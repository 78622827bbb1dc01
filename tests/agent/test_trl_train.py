"""TRL's side of the seam, and examples/trl_grpo.py run for real (one and two processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from rods_env import OracleAgent, load_domain
from rods_env.parsing import parse_action

pytest.importorskip("trl")
from trl.chat_template_utils import (
    add_response_schema,
    is_chat_template_prefix_preserving,
    parse_response,
    supports_tool_calling,
)

from rods_agent.integrations.trl import build_tiny_trl_model, environment_factory

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trl_grpo.py"


@pytest.fixture(scope="module")
def tiny_trl_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_trl_model(tmp_path_factory.mktemp("tiny-trl"))


@pytest.fixture(scope="module")
def tokenizer(tiny_trl_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_trl_model)
    return add_response_schema(tok)


def test_trl_accepts_the_tiny_model_template(tokenizer):
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)


@pytest.mark.parametrize("env_id", ["rods/Retail-v0", "rods/Airline-v0"])
def test_oracle_completions_parsed_by_trl_drive_the_env_to_the_gym_reward(env_id, tokenizer):
    """Each oracle action rendered as the model would write it, parsed by TRL, called as TRL calls
    tools: the episode ends with the reward gymnasium.make gives the same actions."""
    env_class = environment_factory(env_id, max_steps=200)
    trl_env = env_class()
    tools = [getattr(trl_env, name) for name in sorted(env_class.domain.toolkit.names())]
    tools.append(trl_env.send_message_to_user)
    by_name = {t.__name__: t for t in tools}
    seen_skills = set()
    for task in load_domain(env_id).seed_tasks():
        if task.skill in seen_skills:
            continue
        seen_skills.add(task.skill)
        gym_env = gym.make(env_id, split=None, max_steps=200).unwrapped
        agent = OracleAgent(task, gym_env.domain.toolkit.write_names())
        obs, info = gym_env.reset(options={"task": task})
        first = trl_env.reset(task_id=task.id, prompt=[])
        assert first == obs
        prompt = [{"role": "system", "content": "policy"}, {"role": "user", "content": first}]
        done = False
        while not done:
            action = agent.act(obs, info)
            parsed = parse_action(action)
            if parsed.calls:
                text = "".join(
                    "<tool_call>\n"
                    + json.dumps({"name": c.name, "arguments": c.arguments})
                    + "\n</tool_call>"
                    for c in parsed.calls
                )
            else:
                text = (
                    "<tool_call>\n"
                    + json.dumps({"name": "send_message_to_user", "arguments": {"message": action}})
                    + "\n</tool_call>"
                )
            prefix = tokenizer.apply_chat_template(
                prompt, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
            )
            ids = tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
            message = parse_response(tokenizer, ids, prefix=prefix, tools=tools)
            assert len(message["tool_calls"]) == 1, text
            function = message["tool_calls"][0]["function"]
            trl_obs = by_name[function["name"]](**function["arguments"])
            obs, _, terminated, truncated, info = gym_env.step(action)
            assert trl_obs == obs, (task.id, action)
            done = terminated or truncated
        assert trl_env.get_reward() == info["progress"] == 1.0


def _run(cmd: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


SMALL = [
    "--max-steps",
    "2",
    "--tasks-per-step",
    "1",
    "--num-generations",
    "2",
    "--max-completion-length",
    "16",
    "--max-tool-calls",
    "2",
]


@pytest.mark.slow
def test_one_process_trains_with_the_data_engine_and_resumes_where_it_stopped(
    tiny_trl_model, tmp_path
):
    from rods_agent.data import DataEngine, GroupResult
    from rods_agent.training.config import DataConfig

    out = tmp_path / "run"
    example = [sys.executable, str(EXAMPLE), "--mode", "filter", "--model", str(tiny_trl_model)]
    example += ["--output-dir", str(out), "--save-steps", "1", *SMALL]
    # one step and a checkpoint, then a second run that resumes from it for one more step
    first = [*example]
    first[first.index("--max-steps") + 1] = "1"
    _run(first, out)
    _run([*example, "--resume"], out)

    timing = json.loads((out / "timing.json").read_text())
    assert (timing["steps"], timing["steps_this_run"], timing["processes"]) == (2, 1, 1)
    lines = [json.loads(x) for x in (out / "rods_metrics.jsonl").read_text().splitlines()]
    assert [x["round"] for x in lines] == [0, 1]
    assert all(x["groups"] == 1 and x["completions"] == 2 for x in lines)
    # filter mode: every group the engine did not keep is out of the loss
    assert timing["dropped_completions"] == 2 * (lines[1]["groups"] - lines[1]["kept_groups"])

    # the resumed run continued the checkpointed engine: replaying its logged round from the
    # checkpoint's state gives its final state
    domain = load_domain("retail")
    engine = DataEngine(
        DataConfig(),
        mode="filter",
        tasks=domain.seed_tasks("train"),
        reserved=domain.seed_tasks("test"),
        seed=0,
    )
    saved = json.loads((out / "checkpoint-1" / "rods_data_engine.json").read_text())
    assert saved["observed_through"] == 0
    engine.load_state_dict(saved["engine"])
    rewards = lines[1]["group_rewards"]
    assert [t.id for t in engine.sample(1, step=1)] == list(rewards)
    engine.observe([GroupResult(t, tuple(r)) for t, r in rewards.items()], step=1)
    final = json.loads((out / "rods_data_engine.json").read_text())
    assert final == {"engine": engine.state_dict(), "observed_through": 1}


@pytest.mark.slow
def test_two_processes_share_each_group_and_keep_one_engine_state(tiny_trl_model, tmp_path):
    out = tmp_path / "run2"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(EXAMPLE),
    ]
    # one task per step: its two rollouts run on different processes
    small = [*SMALL]
    small[small.index("--tasks-per-step") + 1] = "1"
    _run(
        [*cmd, "--mode", "rods", "--model", str(tiny_trl_model), "--output-dir", str(out), *small],
        out,
    )
    timings = [
        json.loads((out / name).read_text()) for name in ("timing.json", "timing.rank1.json")
    ]
    assert [t["rank"] for t in timings] == [0, 1]
    assert all(t["processes"] == 2 and t["steps"] == 2 for t in timings)
    lines = [json.loads(x) for x in (out / "rods_metrics.jsonl").read_text().splitlines()]
    assert [(x["round"], x["groups"], x["completions"]) for x in lines] == [(0, 1, 2), (1, 1, 2)]
    rank0 = json.loads((out / "rods_data_engine.json").read_text())
    rank1 = json.loads((out / "rods_data_engine.rank1.json").read_text())
    assert rank0 == rank1
    assert rank0["observed_through"] == 1


def _example_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_rejects_bad_overrides_and_batches_in_one_line(tmp_path):
    example = _example_module()
    out = ["--output-dir", str(tmp_path)]
    with pytest.raises(SystemExit, match=r"only data\.KEY=VALUE overrides"):
        example.main([*out, "grpo.lr=1"])
    with pytest.raises(SystemExit, match=r"data\.capacit: unknown key"):
        example.main([*out, "data.capacit=3"])
    with pytest.raises(SystemExit, match="do not split into 1 processes x 4 accumulation steps"):
        example.main([*out, "--tasks-per-step", "1", "--gradient-accumulation-steps", "4"])
    assert not any(tmp_path.iterdir())


# -- the real families on TRL's path ----------------------------------------------------------
@pytest.mark.parametrize("family", ["qwen3", "qwen2_5", "llama3_1", "gptoss"])
def test_each_familys_tool_calls_are_parsed_by_trl_and_reach_the_gym_reward(family):
    """The oracle writes each action in the family's own format (Qwen's <tool_call> blocks,
    Llama 3.1's JSON, gpt-oss's harmony call), with the family's official template as TRL
    stores it; TRL parses every call, and the episode ends with reward 1.0."""
    from transformers import AutoTokenizer

    from rods_agent.engines.chat import ChatTemplate
    from rods_agent.integrations.trl.model import trl_template_problem
    from tests.agent.conftest import require_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(require_tokenizer(family))
    assert trl_template_problem(tokenizer) is None
    add_response_schema(tokenizer)
    chat = ChatTemplate(tokenizer)
    env_class = environment_factory("rods/Retail-v0", max_steps=200)
    trl_env = env_class()
    tools = [getattr(trl_env, name) for name in sorted(env_class.domain.toolkit.names())]
    tools.append(trl_env.send_message_to_user)
    by_name = {t.__name__: t for t in tools}
    seen, calls = set(), 0
    for task in load_domain("retail").seed_tasks():
        if task.skill in seen or len(seen) == 3:
            continue
        seen.add(task.skill)
        gym_env = gym.make("rods/Retail-v0", split=None, max_steps=200).unwrapped
        agent = OracleAgent(task, gym_env.domain.toolkit.write_names())
        obs, info = gym_env.reset(options={"task": task})
        first = trl_env.reset(task_id=task.id, prompt=[])
        prompt = [{"role": "system", "content": "policy"}, {"role": "user", "content": first}]
        done = False
        while not done:
            action = agent.act(obs, info)
            parsed = parse_action(action)
            name, arguments = (
                (parsed.calls[0].name, parsed.calls[0].arguments)
                if parsed.calls
                else ("send_message_to_user", {"message": action})
            )
            call = {"type": "function", "function": {"name": name, "arguments": arguments}}
            text = chat.write({"role": "assistant", "content": "", "tool_calls": [call]})
            prefix = tokenizer.apply_chat_template(
                prompt, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
            )
            message = parse_response(tokenizer, chat.encode(text), prefix=prefix, tools=tools)
            assert len(message["tool_calls"]) == 1, text
            function = message["tool_calls"][0]["function"]
            assert function["name"] == name
            trl_obs = by_name[function["name"]](**function["arguments"])
            calls += 1
            obs, _, terminated, truncated, info = gym_env.step(action)
            assert trl_obs == obs, (task.id, action)
            done = terminated or truncated
        assert trl_env.get_reward() == info["progress"] == 1.0
    assert calls > 10


@pytest.mark.slow
def test_the_example_takes_a_chat_template_trl_recognizes_and_refuses_one_it_cannot_use(
    tiny_model_dir, tmp_path
):
    """The tiny model's own ChatML template is not one TRL recognizes: the example says so in
    one line; with --chat-template qwen2_5 (TRL's copy) it trains. Gemma 3's template cannot
    render tool calls: a one-line error too."""
    from rods_agent.integrations.trl.model import load_chat_template, trl_template_problem

    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    base = [sys.executable, str(EXAMPLE), "--model", str(tiny_model_dir), *SMALL]
    refused = subprocess.run(
        [*base, "--output-dir", str(tmp_path / "a")], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1].startswith("trl_grpo.py: error:")
    assert "--chat-template" in refused.stderr
    small = [*SMALL]
    small[small.index("--max-steps") + 1] = "1"
    _run([sys.executable, str(EXAMPLE), "--model", str(tiny_model_dir), *small,
          "--chat-template", "qwen2_5", "--output-dir", str(tmp_path / "b")], tmp_path)  # fmt: skip
    assert json.loads((tmp_path / "b" / "timing.json").read_text())["steps"] == 1

    from transformers import AutoTokenizer

    gemma = AutoTokenizer.from_pretrained(tiny_model_dir)
    gemma.chat_template = load_chat_template("gemma3")
    assert "cannot render a tool-calling conversation" in str(trl_template_problem(gemma))
    with pytest.raises(Exception, match="not a template TRL ships"):
        load_chat_template("no-such-template")
