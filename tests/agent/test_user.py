"""LLMUser: the user simulator played by a model through any engine."""

from __future__ import annotations

import re

import gymnasium as gym

from rods_agent.engines import Completion, SamplingParams
from rods_agent.user import STOP_MARK, LLMUser
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


def test_llm_user_falls_back_on_engine_errors_and_gives_up_after_patience(retail_tasks):
    task = retail_tasks[0]

    class Broken(FactsModel):
        def generate(self, requests, params):
            return [Completion.failed("model down")] * len(requests)

    user = LLMUser(Broken(), patience=2)
    env = _env(user)
    obs, _ = env.reset(options={"task": task})
    assert obs == task.turns[0].request  # the fallback is the request itself
    for _ in range(2):
        _, _, terminated, _, _ = env.step("Hmm.")
        assert not terminated
    _, _, terminated, _, info = env.step("Hmm.")
    assert user.errors and "model down" in user.errors[0]
    if len(task.turns) == 1:
        assert terminated and info["progress"] == 0.0


def test_llm_user_on_the_tiny_model_does_not_crash(retail, retail_tasks, tiny_engine):
    task = retail_tasks[0]
    user = LLMUser(tiny_engine, sampling=SamplingParams(max_tokens=8), patience=1)
    env = gym.make("rods/Retail-v0", user=user, max_steps=4, disable_env_checker=True)
    out = run_episode(env, OracleAgent(task, retail.toolkit.write_names()), task=task)
    assert out["termination"] in ("user_stop", "max_steps")
    assert all(isinstance(m.get("content"), (str, type(None))) for m in out["messages"])
