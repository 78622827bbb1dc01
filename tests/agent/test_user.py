"""LLMUser: the user simulator played by a model through any engine."""

from __future__ import annotations

import re

import gymnasium as gym

from rods_agent.engines import Completion, SamplingParams
from rods_agent.rollouts.user import STOP_MARK, LLMUser
from rods_env import OracleAgent, UserSimulator
from rods_env.oracle import run_episode


class FactsModel:
    """A stand-in user model: states every fact listed in its system prompt."""

    chat = None

    def __init__(self, say=None):
        self.prompts = []
        self.say = say

    def generate(self, requests, params):
        out = []
        for req in requests:
            system = req.messages[0]["content"]
            self.prompts.append(system)
            if self.say is not None:
                out.append(Completion(text=self.say))
                continue
            facts = re.findall(r"^- ([^:]+): (.+)$", system, flags=re.M)
            out.append(Completion(text="Yes. " + "; ".join(f"my {k} is {v}" for k, v in facts)))
        return out

    def close(self):
        pass


def _env(user):
    import rods_env

    assert rods_env.ENV_IDS
    return gym.make("rods/Retail-v0", user=user, disable_env_checker=True)


def test_llm_user_satisfies_the_protocol_and_plays_a_whole_episode(retail, retail_tasks):
    task = retail_tasks[0]
    model = FactsModel()
    user = LLMUser(model)
    assert isinstance(user, UserSimulator)
    out = run_episode(_env(user), OracleAgent(task, retail.toolkit.write_names()), task=task)
    assert out["success"] and out["progress"] == 1.0 and out["termination"] == "user_stop"
    first = model.prompts[0]
    assert task.user.name in first and task.turns[0].request in first
    assert all(v in first for v in task.user.facts.values())


def test_llm_user_stop_mark_ends_the_conversation(retail_tasks):
    task = retail_tasks[0]
    user = LLMUser(FactsModel(say=f"I am done here. {STOP_MARK}"))
    env = _env(user)
    env.reset(options={"task": task})
    _, _, terminated, _, info = env.step("Could you tell me your email?")
    assert terminated and info["termination"] == "user_stop"
    assert info["messages"][-1]["content"] == "I am done here."


def test_llm_user_falls_back_on_engine_errors_and_gives_up_after_patience(retail):
    single = next(t for t in retail.seed_tasks("test") if len(t.turns) == 1)
    multi = next(t for t in retail.seed_tasks("test") if len(t.turns) > 1)

    class Broken(FactsModel):
        def generate(self, requests, params):
            return [Completion.failed("model down")] * len(requests)

    for task in (single, multi):
        user = LLMUser(Broken(), patience=2)
        env = _env(user)
        obs, _ = env.reset(options={"task": task})
        assert obs == task.turns[0].request  # the fallback is the request itself
        for _ in range(2):
            obs, _, terminated, _, info = env.step("Hmm.")
            assert not terminated and info["turn"] == 0
            assert obs == task.turns[0].request
        obs, _, terminated, _, info = env.step("Hmm.")
        assert user.errors and all("model down" in e for e in user.errors)
        assert info["turn_results"][0]["passed"] is False  # the first turn was given up
        if task is single:
            assert terminated and info["termination"] == "user_stop" and info["progress"] == 0.0
        else:  # the user moved on to the next request (the fallback says it)
            assert not terminated and info["turn"] == 1 and obs == task.turns[1].request


class Recording:
    """Wraps an engine and keeps every completion text it returned."""

    def __init__(self, engine):
        self.engine, self.chat, self.texts, self.calls = engine, None, [], []

    def generate(self, requests, params):
        out = self.engine.generate(requests, params)
        self.calls.append(len(requests))
        self.texts += [c.text for c in out]
        return out

    def close(self):
        pass


def test_llm_user_on_the_tiny_model_speaks_the_model_words_and_the_env_keeps_score(
    retail, retail_tasks, tiny_engine
):
    task = retail_tasks[0]
    engine = Recording(tiny_engine)
    user = LLMUser(engine, sampling=SamplingParams(max_tokens=8, seed=0), patience=5)
    env = gym.make("rods/Retail-v0", user=user, disable_env_checker=True)
    out = run_episode(env, OracleAgent(task, retail.toolkit.write_names()), task=task)
    # Whatever the random model says, turns end by the environment's view of the goal: the
    # oracle solves the task and the user leaves when it is done.
    assert out["success"] and out["progress"] == 1.0 and out["termination"] == "user_stop"
    said = [m["content"] for m in out["messages"] if m["role"] == "user"]
    assert len(said) == len(engine.texts) >= 2
    for text, raw in zip(said, engine.texts, strict=True):
        assert text == (raw.strip() or task.turns[0].request)  # the model's words, or the fallback
    assert any(raw.strip() for raw in engine.texts)


def test_llm_users_of_many_episodes_are_batched_and_give_the_same_episodes(retail, retail_tasks):
    from rods_agent.engines.scripted import ScriptedEngine
    from rods_agent.rollouts.batch import EpisodeSpec, RolloutConfig, RolloutStats, run_rollouts
    from rods_agent.rollouts.user import UserBatcher

    by_id = {t.id: t for t in retail_tasks}
    writes = retail.toolkit.write_names()
    agent = ScriptedEngine(lambda info: OracleAgent(by_id[info["task_id"]], writes))
    specs = [EpisodeSpec(t, sampling_seed=i) for i, t in enumerate(retail_tasks)]
    config = RolloutConfig(batch_size=len(specs))

    one_by_one = Recording(FactsModel())
    plain = run_rollouts(agent, lambda: _env(LLMUser(one_by_one)), specs, config)
    batched_model = Recording(FactsModel())
    batcher = UserBatcher(batched_model, SamplingParams(max_tokens=96, temperature=0.7))
    stats = RolloutStats()
    batched = run_rollouts(
        agent,
        lambda: _env(LLMUser(batched_model, batcher=batcher)),
        specs,
        config,
        users=batcher,
        stats=stats,
    )
    assert [r.comparable() for r in batched] == [r.comparable() for r in plain]
    assert all(r.success for r in batched)
    n_replies = len(one_by_one.texts)
    assert set(one_by_one.calls) == {1} and sum(batched_model.calls) == n_replies
    # All episodes open together, then each round of steps needs at most one model call.
    assert batched_model.calls[0] == len(specs)
    assert len(batched_model.calls) < n_replies / 2
    assert batcher.requests == n_replies and stats.user_seconds > 0


def test_a_failing_environment_call_inside_a_batched_round_is_data(retail_tasks):
    from rods_agent.rollouts.user import UserBatcher

    batcher = UserBatcher(FactsModel(), SamplingParams())

    def boom():
        raise KeyError("broken tool")

    out = batcher.run([lambda: 1, boom, lambda: 3])
    assert [o[0] for o in out] == [1, None, 3]
    assert isinstance(out[1][1], KeyError) and out[0][1] is None


def test_llm_user_caps_its_own_replies_below_a_shared_batchers_cap(retail_tasks):
    """A batcher shared with benchmark users has a higher cap; rods' users keep theirs."""
    from rods_agent.rollouts.user import UserBatcher

    model = FactsModel()
    seen = []
    original = model.generate

    def generate(requests, params):
        seen.extend((r.max_tokens, params.max_tokens) for r in requests)
        return original(requests, params)

    model.generate = generate
    batcher = UserBatcher(model, SamplingParams(max_tokens=512, temperature=0.7))
    user = LLMUser(model, batcher=batcher)
    env = _env(user)
    env.reset(options={"task": retail_tasks[0]})
    assert seen and all(own == 96 and batch == 512 for own, batch in seen)
