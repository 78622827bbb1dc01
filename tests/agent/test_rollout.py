"""Batched rollouts: equivalence with one-by-one runs, token accounting, limits, errors as data."""

from __future__ import annotations

import gymnasium as gym
import pytest

from rods_agent.engines import Completion, SamplingParams
from rods_agent.engines.chat import ChatTemplate
from rods_agent.engines.scripted import ScriptedEngine
from rods_agent.rollout import (
    TERMINATIONS,
    EpisodeRecord,
    EpisodeSpec,
    RolloutConfig,
    RolloutStats,
    run_rollouts,
)
from rods_env import OracleAgent


@pytest.fixture(scope="module")
def chat(tiny_model_dir) -> ChatTemplate:
    from transformers import AutoTokenizer

    return ChatTemplate(AutoTokenizer.from_pretrained(tiny_model_dir))


def make_env(**kw):
    import rods_env

    assert "rods/Retail-v0" in rods_env.ENV_IDS
    return lambda: gym.make("rods/Retail-v0", disable_env_checker=True, **kw)


def oracle_engine(retail, tasks, chat=None) -> ScriptedEngine:
    by_id = {t.id: t for t in tasks}
    writes = retail.toolkit.write_names()
    return ScriptedEngine(lambda info: OracleAgent(by_id[info["task_id"]], writes), chat=chat)


class ScriptAgent:
    """Says the given lines in order, then repeats the last one."""

    def __init__(self, lines):
        self.lines, self.i = list(lines), 0

    def act(self, observation, info):
        line = self.lines[min(self.i, len(self.lines) - 1)]
        self.i += 1
        return line


def check_accounting(record: EpisodeRecord, chat: ChatTemplate) -> None:
    n = len(record.token_ids)
    assert n == len(record.assistant_mask) == len(record.logprobs)
    assert all(
        lp == 0.0 for lp, m in zip(record.logprobs, record.assistant_mask, strict=True) if m == 0
    )
    # Each run of mask-1 tokens is one assistant completion, end-of-turn token included.
    runs, cur = [], []
    for tok, m in zip(record.token_ids, record.assistant_mask, strict=True):
        if m:
            cur.append(tok)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    assert len(runs) == record.n_steps
    assistant = [m for m in record.messages if m["role"] == "assistant"]
    assert len(assistant) == record.n_steps
    for run in runs:
        assert run[-1] in chat.end_of_turn_ids or len(run) >= 1


def test_batched_rollouts_give_the_same_records_as_one_by_one(retail, retail_tasks, chat):
    specs = [EpisodeSpec(t, trial) for t in retail_tasks for trial in range(2)]
    # The tiny tokenizer is not frugal: the retail policy and tools take ~6,400 tokens.
    config = RolloutConfig(batch_size=5, max_tokens=40_000)
    engine = oracle_engine(retail, retail_tasks, chat)
    stats = RolloutStats()
    batched = run_rollouts(engine, make_env(), specs, config, stats=stats)
    one = RolloutConfig(batch_size=1, max_tokens=40_000)
    alone = [run_rollouts(engine, make_env(), [s], one)[0] for s in specs]
    assert [r.comparable() for r in batched] == [r.comparable() for r in alone]
    assert [(r.task_id, r.trial) for r in batched] == [(s.task.id, s.trial) for s in specs]
    for r in batched:
        assert r.success and r.progress == 1.0 and r.termination == "user_stop"
        assert sum(r.rewards) == pytest.approx(r.progress)
        assert r.token_check == "exact"
        check_accounting(r, chat)
    assert stats.episodes == len(specs) and stats.batches < sum(r.n_steps for r in batched)


def test_tiny_model_rollout_logprobs_match_a_forward_pass_over_the_whole_conversation(
    retail_tasks, tiny_engine
):
    import torch

    sampling = SamplingParams(max_tokens=8, temperature=1.0, seed=0)
    config = RolloutConfig(sampling=sampling, max_turns=3, batch_size=2, max_tokens=16_000)
    records = run_rollouts(
        tiny_engine, make_env(), [EpisodeSpec(t) for t in retail_tasks[:2]], config
    )
    for r in records:
        assert r.termination in TERMINATIONS and r.n_steps >= 1
        assert r.token_check in ("exact", "text", "mismatch")
        check_accounting(r, tiny_engine.chat)
        ids = torch.tensor([r.token_ids])
        with torch.inference_mode():
            logits = tiny_engine.model(ids).logits[0, :-1].float()
        recomputed = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
        mask = torch.tensor(r.assistant_mask[1:], dtype=torch.bool)
        kept = torch.tensor(r.logprobs[1:])
        assert mask.any()
        assert torch.allclose(recomputed[mask], kept[mask], atol=1e-3)
        # The model's garbage goes to the environment, which answers; nothing crashed.
        assert [m["role"] for m in r.messages[:2]] == ["system", "user"]


def test_turn_and_token_limits_end_episodes(retail, retail_tasks, chat):
    task = retail_tasks[0]
    config = RolloutConfig(max_turns=2, max_tokens=40_000)
    [r] = run_rollouts(oracle_engine(retail, [task], chat), make_env(), [EpisodeSpec(task)], config)
    assert r.termination == "max_turns" and r.n_steps == 2 and not r.success

    prompt = len(chat.prompt_ids(*_opening(task)))
    for extra in (1, 3, 17, 40, 90, 200):
        limit = prompt + extra
        config = RolloutConfig(max_tokens=limit)
        [r] = run_rollouts(
            oracle_engine(retail, [task], chat), make_env(), [EpisodeSpec(task)], config
        )
        assert r.termination == "max_tokens"
        assert prompt <= len(r.token_ids) <= limit  # never past the budget, closing tokens included


def _opening(task):
    env = make_env()()
    _, info = env.reset(options={"task": task})
    return info["messages"], info["tools"]


def test_env_step_limit_maps_to_max_turns(retail, retail_tasks, chat):
    task = retail_tasks[0]
    engine = oracle_engine(retail, [task], chat)
    [r] = run_rollouts(
        engine, make_env(max_steps=1), [EpisodeSpec(task)], RolloutConfig(max_tokens=40_000)
    )
    assert r.termination == "max_turns" and r.n_steps == 1


def test_unparseable_completions_are_observations_and_errors_are_data(retail_tasks, chat):
    task = retail_tasks[0]
    bad = ScriptedEngine(
        lambda info: ScriptAgent(['<tool_call>{"name": oops</tool_call>']), chat=chat
    )
    [r] = run_rollouts(
        bad, make_env(), [EpisodeSpec(task)], RolloutConfig(max_turns=3, max_tokens=40_000)
    )
    assert r.termination == "max_turns" and r.n_steps == 3 and not r.errors
    assert any("not valid JSON" in str(m.get("content")) for m in r.messages)

    class Failing:
        chat = None

        def generate(self, requests, params):
            return [Completion.failed("server exploded")] * len(requests)

        def close(self):
            pass

    [r] = run_rollouts(Failing(), make_env(), [EpisodeSpec(task)], RolloutConfig())
    assert r.termination == "error" and r.errors == ["server exploded"] and r.n_steps == 0

    class Raising(Failing):
        def generate(self, requests, params):
            raise RuntimeError("bug")

    [r] = run_rollouts(Raising(), make_env(), [EpisodeSpec(task)], RolloutConfig())
    assert r.termination == "error" and "bug" in r.errors[0]

    class BrokenEnv:
        def reset(self, seed=None, options=None):
            return "hi", {
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [],
                "progress": 0.0,
            }

        def step(self, action):
            raise KeyError("broken tool")

    text_only = ScriptedEngine(lambda info: ScriptAgent(["hello"]))
    [r] = run_rollouts(text_only, BrokenEnv, [EpisodeSpec(task)], RolloutConfig())
    assert r.termination == "error" and "broken tool" in r.errors[0] and r.n_steps == 1


def test_remote_style_engines_keep_messages_without_token_ids(retail, retail_tasks):
    engine = oracle_engine(retail, retail_tasks[:2])  # no chat template, like an HTTP engine
    records = run_rollouts(
        engine, make_env(), [EpisodeSpec(t) for t in retail_tasks[:2]], RolloutConfig()
    )
    for r in records:
        assert r.success and r.token_ids == [] and r.token_check == "skipped"
        assert r.to_dict(tokens=False).keys().isdisjoint({"token_ids", "logprobs"})
        assert EpisodeRecord.from_dict(r.to_dict()) == r
