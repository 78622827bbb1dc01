"""The brief prompt (``ToolEnv(prompt="brief")``): a short policy and the task's own tools.

Only what the agent is shown changes; the task, the user and the reward do not. A small
model's context (SmolLM2: 8,192 positions, attention the larger part of a CPU's work at
4-5k tokens) is why it exists (docs/learning/protocol.md, *Why retail with the brief prompt*).
"""

from __future__ import annotations

import pytest

import rods_env
from rods_env import OracleAgent, ToolEnv, run_episode
from rods_env.errors import ConfigError
from rods_env.exploits import EXPLOITS, run_panel

DOMAINS = ("retail", "airline")


def _tasks(name: str, n: int) -> list[rods_env.Task]:
    """``n`` seed tasks spread over the domain's skills and variants."""
    tasks = rods_env.load_domain(name).seed_tasks()
    return tasks[:: max(1, len(tasks) // n)][:n]


@pytest.mark.parametrize("name", DOMAINS)
def test_brief_shows_the_brief_policy_and_only_the_tasks_tools(name: str) -> None:
    domain = rods_env.load_domain(name)
    env = ToolEnv(domain, split=None, prompt="brief")
    full = ToolEnv(domain, split=None)
    for task in _tasks(name, 12):
        _, info = env.reset(options={"task": task})
        _, full_info = full.reset(options={"task": task})
        assert info["policy"] == domain.brief_policy != full_info["policy"]
        assert info["messages"][0]["content"] == domain.brief_policy
        shown = {s["function"]["name"] for s in info["tools"]}
        gold = {c.name for turn in task.turns for c in turn.calls}
        withheld_now = set(task.turns[0].withheld_tools)
        assert gold - withheld_now <= shown
        assert shown <= (gold | set(domain.brief_tools)) - withheld_now
        assert len(shown) < len(full_info["tools"])
        # the first user message is the same
        assert info["messages"][-1] == full_info["messages"][-1]


@pytest.mark.parametrize("name", DOMAINS)
def test_the_oracle_scores_the_same_on_both_prompts(name: str) -> None:
    domain = rods_env.load_domain(name)
    for task in _tasks(name, 10):
        infos = [
            run_episode(
                ToolEnv(domain, tasks=[task], split=None, prompt=p),
                OracleAgent(task, domain.toolkit.write_names()),
                task=task,
            )
            for p in ("full", "brief")
        ]
        assert infos[0]["progress"] == infos[1]["progress"] == 1.0
        assert infos[0]["success"] and infos[1]["success"]


@pytest.mark.parametrize("name", DOMAINS)
def test_the_exploit_panel_fails_on_the_brief_prompt(name: str) -> None:
    """Fewer tools offered can only take moves away from the panel's agents: each still
    passes no turn (the spray agent's writes outside the task's tools are refused)."""
    domain = rods_env.load_domain(name)
    for task in _tasks(name, 6):
        for agent, info in run_panel(domain, task, names=EXPLOITS, prompt="brief").items():
            assert info["progress"] == 0.0, (task.id, agent)
            assert not info["success"], (task.id, agent)


def test_a_bad_prompt_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="prompt must be one of full, brief"):
        ToolEnv("retail", prompt="short")


def test_a_domain_without_a_brief_policy_refuses_brief() -> None:
    import dataclasses

    domain = dataclasses.replace(rods_env.load_domain("retail"), brief_policy=None)
    with pytest.raises(ConfigError, match="has no brief prompt"):
        ToolEnv(domain, prompt="brief")
