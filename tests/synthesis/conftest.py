from __future__ import annotations

import random

import pytest

import rods_env
from rods_env import TalkOnlyAgent, ToolEnv, run_episode
from rods_env.domain import Domain
from rods_env.errors import BenchmarkUnavailableError
from rods_env.gold import replay_gold
from rods_env.oracle import oracle_agent
from rods_env.seeds import make_task
from rods_env.task import Task
from tests.synthesis.toy_synth import SHAPED


def base_seeded_domains() -> list[str]:
    """Installed domains whose seed set is base tasks (a domain whose seeds carry
    augmentations, the BFCL API world, has its own synthesis tests in
    tests/environments/bfcl/; it also needs bfcl-eval, and a checkout without it leaves it
    out here rather than failing collection)."""
    out = []
    for name in rods_env.domain_names():
        try:
            domain = rods_env.load_domain(name)
        except BenchmarkUnavailableError:
            continue
        if domain.seed_tasks("train") and not domain.seed_augments:
            out.append(name)
    return out


def toy_seeds(per_skill: int = 3, shapes: bool = True) -> list[Task]:
    """Seed tasks of every toy skill (at each shape up to the limit when ``shapes``)."""
    tasks = []
    for skill in SHAPED.skills:
        shape_list = [dict(skill.shape)]
        if shapes:
            for axis, (lo, hi) in skill.limits.items():
                shape_list = [{**dict(skill.shape), axis: v} for v in range(lo, hi + 1)]
        for shape in shape_list:
            for i in range(per_skill):
                rng = random.Random(f"toy-seed:{skill.name}:{shape}:{i}")
                tasks.append(
                    make_task(
                        SHAPED,
                        skill,
                        rng,
                        task_id=f"toy-{skill.name}-{'-'.join(map(str, shape.values()))}-{i}",
                        shape=shape,
                        split="train",
                    )
                )
    return tasks


@pytest.fixture(scope="session")
def seeds() -> list[Task]:
    return toy_seeds()


def run_oracle(domain: Domain, task: Task, agent=None) -> dict:
    env = ToolEnv(domain, tasks=[task], split=None, max_steps=80, render_mode="ansi")
    agent = agent or oracle_agent(domain, task)
    out = run_episode(env, agent, task=task)
    out["transcript"] = env.render()
    return out


def assert_valid(domain: Domain, task: Task) -> None:
    """The oracle solves ``task``; a talk-only agent fails every turn where the gold writes."""
    out = run_oracle(domain, task)
    assert out["success"] and out["progress"] == 1.0, (task.id, task.variant, out["transcript"])
    talk = run_oracle(domain, task, TalkOnlyAgent())
    gold = replay_gold(domain, task)
    assert not talk["success"], task.id
    for i, tg in enumerate(gold.turns):
        if tg.effect:
            assert not talk["turn_results"][i]["passed"], (task.id, i)
    # critique rejects free turns, so doing nothing earns nothing at all
    assert talk["progress"] == 0.0, (task.id, talk["turn_results"])


def play(domain: Domain, task: Task, at_turn: int, actions: list[str], agent=None) -> dict:
    """The oracle plays ``task``, except that ``actions`` open turn ``at_turn``.

    Returns the final info, with ``transcript`` and ``injected`` (the observations of the
    injected actions).
    """
    env = ToolEnv(domain, tasks=[task], split=None, max_steps=80, render_mode="ansi")
    agent = agent or oracle_agent(domain, task)
    obs, info = env.reset(options={"task": task})
    term = trunc = False
    injected: list[str] = []
    pending = list(actions)
    while not (term or trunc):
        if info["turn"] == at_turn and pending:
            obs, _, term, trunc, info = env.step(pending.pop(0))
            injected.append(obs)
            continue
        obs, _, term, trunc, info = env.step(agent.act(obs, info))
    return {**info, "transcript": env.render(), "injected": injected}


def believed_task(task: Task, label: str, guess: str) -> Task:
    """What an agent that guessed ``guess`` for fact ``label`` (and never asked) would do."""
    from rods_env.synthesis.augment import guessed_calls

    calls = guessed_calls(task, label, guess)
    true = task.user.facts[label]
    facts = {k: v for k, v in task.user.facts.items() if k != label}
    return task.model_copy(
        update={
            "user": task.user.model_copy(update={"facts": facts}),
            "turns": tuple(
                t.model_copy(
                    update={"calls": c, "outputs": tuple(o.replace(true, guess) for o in t.outputs)}
                )
                for t, c in zip(task.turns, calls, strict=True)
            ),
        }
    )


class GuessingAgent:
    """Plays a task as if ``guess`` were the value of the hidden fact ``label``.

    It never asks for that fact, makes the calls with the guess, and reports only the
    outputs it can read in the tool results it got since its first guessed call (an honest
    agent that guessed: it says what the tools told it).
    """

    def __init__(self, domain: Domain, task: Task, label: str, guess: str) -> None:
        self.believed = believed_task(task, label, guess)
        self.inner = oracle_agent(domain, self.believed)
        self.guess = guess

    def act(self, observation: str, info: dict) -> str:
        from rods_env.rewards import mentions

        action = self.inner.act(observation, info)
        if "<tool_call>" in action or not action.startswith(("All done.", "I'm sorry")):
            return action
        messages = info["messages"]
        start = next(
            (
                i
                for i, m in enumerate(messages)
                if m.get("tool_calls")
                and any(self.guess in tc["function"]["arguments"] for tc in m["tool_calls"])
            ),
            len(messages),
        )
        seen = "\n".join(m["content"] for m in messages[start:] if m["role"] == "tool")
        said = [o for o in self.believed.turns[info["turn"]].outputs if mentions(seen, o)]
        return " ".join([action.split(".")[0] + ".", *said])
