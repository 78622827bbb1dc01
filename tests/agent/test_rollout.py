"""Batched rollouts: equivalence with one-by-one runs, token accounting, limits, errors as data."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import pytest

from rods_agent.engines import Completion, SamplingParams
from rods_agent.engines.chat import ChatTemplate
from rods_agent.engines.scripted import ScriptedEngine
from rods_agent.rollouts.batch import (
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
    """The token sequence, mask, log-probs, spans and finish reasons agree with each other."""
    n = len(record.token_ids)
    assert n == len(record.assistant_mask) == len(record.logprobs)
    assert all(
        lp == 0.0 for lp, m in zip(record.logprobs, record.assistant_mask, strict=True) if m == 0
    )
    # Each run of mask-1 tokens is one assistant completion, and its span is recorded.
    runs, start = [], None
    for i, m in enumerate([*record.assistant_mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append([start, i])
            start = None
    assert runs == record.step_spans
    assert len(runs) == record.n_steps == len(record.finish_reasons)
    assistant = [m for m in record.messages if m["role"] == "assistant"]
    assert len(assistant) == record.n_steps
    for (a, b), reason in zip(runs, record.finish_reasons, strict=True):
        run = record.token_ids[a:b]
        assert not any(t in chat.end_of_turn_ids for t in run[:-1])
        # A completion ends with its end-of-turn token or the end of its tool call exactly
        # when it stopped by itself; the closing follows the call's end, unsampled.
        ended = run[-1] in chat.end_of_turn_ids
        called = (
            not ended and chat.call_end is not None and (chat.call_end in chat.completion_text(run))
        )
        assert (ended or called) == (reason == "stop"), (run[-3:], reason)
        if called and b < n:
            assert chat.decode(record.token_ids[b : b + 1]) in chat.close_texts


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

    from rods_agent.engines.sampling import sampling_logprobs

    # Temperature and top-p != 1: the kept log-probs are those of the distribution sampled.
    sampling = SamplingParams(max_tokens=8, temperature=0.8, top_p=0.9)
    config = RolloutConfig(sampling=sampling, max_turns=3, batch_size=2, max_tokens=16_000)
    specs = [EpisodeSpec(t, sampling_seed=i) for i, t in enumerate(retail_tasks[:2])]
    records = run_rollouts(tiny_engine, make_env(), specs, config)
    for r in records:
        assert r.termination in TERMINATIONS and r.termination != "error" and r.n_steps >= 1
        check_accounting(r, tiny_engine.chat)
        # The text of the kept sequence is the conversation's rendering, except where the model
        # ended a turn with a stop token that the template does not write (<|endoftext|>).
        eot = tiny_engine.chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
        off_template = any(r.token_ids[b - 1] != eot for (_, b), f in
                           zip(r.step_spans, r.finish_reasons, strict=True) if f == "stop")  # fmt: skip
        assert (r.token_check == "mismatch") == off_template, r.token_check
        ids = torch.tensor([r.token_ids])
        with torch.inference_mode():
            logits = tiny_engine.model(ids).logits[0, :-1]
        recomputed = sampling_logprobs(logits, ids[0, 1:], temperature=0.8, top_p=0.9)
        mask = torch.tensor(r.assistant_mask[1:], dtype=torch.bool)
        kept = torch.tensor(r.logprobs[1:])
        assert mask.any()
        assert torch.allclose(recomputed[mask], kept[mask], atol=1e-4)
        # The model's garbage goes to the environment, which answers; nothing crashed.
        assert [m["role"] for m in r.messages[:2]] == ["system", "user"]


class Recording:
    """An engine that keeps every completion it returned, by episode, and the sampling
    parameters it was given."""

    def __init__(self, engine):
        self.engine, self.chat, self.params = engine, engine.chat, []
        self.returned: dict[str, list[Completion]] = {}

    def generate(self, requests, params):
        self.params.append(params)
        out = self.engine.generate(requests, params)
        for req, completion in zip(requests, out, strict=True):
            self.returned.setdefault(req.key, []).append(completion)
        return out

    def close(self):
        pass


def test_a_turn_ends_where_its_call_ends_and_trains_exactly_the_sampled_tokens(
    retail_tasks, tiny_model_dir
):
    """Issue 41. A model that closes its call and writes on (the tiny model leaning towards
    ``</tool_call>``): each completion stops at its first ``</tool_call>``, the closing
    ``<|im_end|>`` follows unsampled, and the tokens and log-probabilities kept for training
    are exactly those the engine returned, which a forward pass over the whole conversation
    (the learner's scoring) reproduces. With the stop switched off the same seeds give the
    same first completions, uncut."""
    import torch

    from rods_agent.engines.sampling import sampling_logprobs
    from tests.agent.leaning import leaning_engine

    engine = Recording(leaning_engine(tiny_model_dir))
    chat = engine.chat
    sampling = SamplingParams(max_tokens=24, temperature=1.0)
    config = RolloutConfig(sampling=sampling, max_turns=4, batch_size=4, max_tokens=16_000)
    specs = [EpisodeSpec(t, sampling_seed=30 + i) for i, t in enumerate(retail_tasks[:4])]
    records = run_rollouts(engine, make_env(prompt="brief"), specs, config)
    assert {p.stop for p in engine.params} == {("</tool_call>",)}
    called = 0
    for spec, r in zip(specs, records, strict=True):
        check_accounting(r, chat)
        assert r.token_check != "mismatch" or any(
            r.token_ids[b - 1] in chat.end_of_turn_ids
            and chat.decode(r.token_ids[b - 1 : b]) not in chat.close_texts
            for _, b in r.step_spans
        )  # only a stop token the template does not write (<|endoftext|>) is off-template
        returned = engine.returned[spec.key]
        assert [r.token_ids[a:b] for a, b in r.step_spans] == [c.token_ids for c in returned]
        assert [r.logprobs[a:b] for a, b in r.step_spans] == [c.logprobs for c in returned]
        trained = [t for t, m in zip(r.token_ids, r.assistant_mask, strict=True) if m]
        assert trained == [t for c in returned for t in c.token_ids]
        for c in returned:
            assert c.text.count("</tool_call>") <= 1
            called += c.text.endswith("</tool_call>")
        ids = torch.tensor([r.token_ids])
        with torch.inference_mode():
            logits = engine.engine.model(ids).logits[0, :-1]
        recomputed = sampling_logprobs(logits, ids[0, 1:], temperature=1.0, top_p=1.0)
        mask = torch.tensor(r.assistant_mask[1:], dtype=torch.bool)
        assert torch.allclose(recomputed[mask], torch.tensor(r.logprobs[1:])[mask], atol=1e-4)
    assert called >= 4  # the rule was exercised

    plain_engine = Recording(engine.engine)
    plain = replace(config, stop_at_call_end=False)
    run_rollouts(plain_engine, make_env(prompt="brief"), specs, plain)
    assert {p.stop for p in plain_engine.params} == {()}
    longer = 0
    for spec in specs:
        first, whole = engine.returned[spec.key][0], plain_engine.returned[spec.key][0]
        assert whole.token_ids[: len(first.token_ids)] == first.token_ids
        assert whole.logprobs[: len(first.logprobs)] == first.logprobs
        longer += len(whole.token_ids) > len(first.token_ids)
    assert longer >= 1  # without the stop a model writes on after its call


def test_seeded_episodes_reproduce_alone_and_in_any_batch(retail_tasks, tiny_engine):
    sampling = SamplingParams(max_tokens=6, temperature=1.0)
    specs = [EpisodeSpec(t, trial, sampling_seed=100 + 7 * trial) for t in retail_tasks[:2]
             for trial in range(2)]  # fmt: skip
    batched = run_rollouts(
        tiny_engine, make_env(), specs, RolloutConfig(sampling, max_turns=2, batch_size=4)
    )
    again = run_rollouts(
        tiny_engine, make_env(), specs[::-1], RolloutConfig(sampling, max_turns=2, batch_size=3)
    )[::-1]
    alone = [
        run_rollouts(tiny_engine, make_env(), [s], RolloutConfig(sampling, max_turns=2))[0]
        for s in specs
    ]
    for a, b, c in zip(batched, again, alone, strict=True):
        assert a.token_ids == b.token_ids == c.token_ids
        assert a.sampling_seed == c.sampling_seed and a.sampling_seed is not None
    # Different seeds, different samples (the two trials of a task).
    assert batched[0].token_ids != batched[1].token_ids


def test_weights_version_of_the_engine_is_recorded(retail, retail_tasks, chat):
    engine = oracle_engine(retail, retail_tasks[:1], chat)
    engine.weights_version = 7
    [r] = run_rollouts(
        engine, make_env(), [EpisodeSpec(retail_tasks[0])], RolloutConfig(max_tokens=40_000)
    )
    assert r.weights_version == 7


def test_a_missing_logprob_is_an_engine_error_not_a_zero(retail_tasks, tiny_engine):
    class DropsLogprobs:
        chat = tiny_engine.chat

        def generate(self, requests, params):
            out = tiny_engine.generate(requests, params)
            for c in out:
                c.logprobs = c.logprobs[:-1]
            return out

        def close(self):
            pass

    config = RolloutConfig(SamplingParams(max_tokens=4, seed=0), max_turns=2)
    [r] = run_rollouts(DropsLogprobs(), make_env(), [EpisodeSpec(retail_tasks[0])], config)
    assert r.termination == "error" and "log-probabilities" in r.errors[0]
    assert r.n_steps == 0 and not any(r.assistant_mask)


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


def test_env_step_limit_is_labelled_max_steps(retail, retail_tasks, chat):
    task = retail_tasks[0]
    engine = oracle_engine(retail, [task], chat)
    [r] = run_rollouts(
        engine, make_env(max_steps=1), [EpisodeSpec(task)], RolloutConfig(max_tokens=40_000)
    )
    assert r.termination == "max_steps" and r.n_steps == 1


def _outcome(r: EpisodeRecord) -> tuple:
    return (r.progress, r.success, r.rewards, r.turn_results, r.n_steps)


def test_a_turn_cap_scores_exactly_like_the_env_step_limit_at_every_point(retail, chat):
    # Multi-turn tasks, so caps fall inside a turn, at its end, and in later turns.
    tasks = [t for t in retail.seed_tasks("test") if len(t.turns) > 1][:2]
    for task in tasks:
        engine = oracle_engine(retail, [task], chat)
        full = run_rollouts(
            engine, make_env(), [EpisodeSpec(task)], RolloutConfig(max_tokens=40_000)
        )[0]
        assert full.termination == "user_stop" and full.progress == 1.0
        progress_seen = set()
        for cap in range(1, full.n_steps + 1):
            [ours] = run_rollouts(engine, make_env(), [EpisodeSpec(task)],
                                  RolloutConfig(max_turns=cap, max_tokens=40_000))  # fmt: skip
            [envs] = run_rollouts(engine, make_env(max_steps=cap), [EpisodeSpec(task)],
                                  RolloutConfig(max_tokens=40_000))  # fmt: skip
            assert _outcome(ours) == _outcome(envs), cap
            assert sum(ours.rewards) == pytest.approx(ours.progress)
            if cap < full.n_steps:
                assert (ours.termination, envs.termination) == ("max_turns", "max_steps")
            else:
                assert ours.termination == envs.termination == "user_stop"
            progress_seen.add(ours.progress)
        # The sweep crossed turn boundaries: partial progress was scored along the way.
        assert len(progress_seen) >= 3


def test_a_token_cap_scores_exactly_like_the_env_step_limit_at_the_same_point(retail, chat):
    task = next(t for t in retail.seed_tasks("test") if len(t.turns) > 1)
    engine = oracle_engine(retail, [task], chat)
    prompt = len(chat.prompt_ids(*_opening(task)))
    full = run_rollouts(engine, make_env(), [EpisodeSpec(task)], RolloutConfig(max_tokens=40_000))[
        0
    ]
    points = set()
    for cap in range(
        prompt + 20, len(full.token_ids) + 1, max(1, (len(full.token_ids) - prompt) // 12)
    ):
        [ours] = run_rollouts(
            engine, make_env(), [EpisodeSpec(task)], RolloutConfig(max_tokens=cap)
        )
        assert ours.termination in ("max_tokens", "user_stop")
        if ours.termination != "max_tokens":
            continue
        # Replay the same completions (the last one may be cut) with the env's step limit there.
        texts = [m["content"] for m in _render_assistant(ours, chat)]
        replay = ScriptedEngine(lambda info, texts=texts: ScriptAgent(texts), chat=chat)
        [envs] = run_rollouts(replay, make_env(max_steps=ours.n_steps), [EpisodeSpec(task)],
                              RolloutConfig(max_tokens=40_000))  # fmt: skip
        assert envs.termination == "max_steps"
        assert _outcome(ours) == _outcome(envs), cap
        points.add(ours.n_steps)
    assert len(points) >= 4  # caps cut at many different steps


def _render_assistant(record: EpisodeRecord, chat: ChatTemplate) -> list[dict]:
    """The assistant messages as sampled (the completion texts, from the token spans)."""
    return [{"content": chat.completion_text(record.token_ids[a:b])} for a, b in record.step_spans]


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


def test_stop_at_call_end_is_a_setting_of_rods_train_and_rods_experiment(tiny_model_dir, tmp_path):
    """``rollout.stop_at_call_end`` (default on) reaches the rollouts' config; an experiment
    passes it to its runs through ``train.rollout``."""
    from rods_agent.experiment.config import load_experiment
    from rods_agent.training.config import load_config
    from rods_agent.training.model_policy import ModelPolicy

    base = [f"model.path={tiny_model_dir}", f"out={tmp_path}", "rollout.temperature=1.0"]
    assert load_config(None, base).rollout.stop_at_call_end is True
    on = ModelPolicy(load_config(None, base), tmp_path)
    assert on.rollout_config(4).stop_at_call_end is True
    config = load_config(None, [*base, "rollout.stop_at_call_end=false"])
    off = ModelPolicy(config, tmp_path)
    assert off.rollout_config(4).stop_at_call_end is False
    experiment = load_experiment(
        Path(__file__).parents[2] / "configs" / "experiment" / "quickstart.yaml",
        ["train.rollout.stop_at_call_end=false"],
    )
    assert experiment.train.rollout.stop_at_call_end is False
