"""One rods episode as verifiers' tool-calling loop plays it, and its score.

This module needs no verifiers: it is the rods half of the taskset (:mod:`.taskset`), shared
by the live tool server and the rubric so the two cannot disagree. The episode itself is
rods' episode-as-tools surface (:mod:`rods_env.tool_session`: the environment's tools, the
user behind ``send_message_to_user``, an open episode ended as the step limit ends it), the
same one TRL and OpenEnv play; this module adds only the oracle's episode as calls, for
verifiers' gold check.

The rubric does not trust the live server: :func:`score_calls` replays the rollout's tool
calls, in order, in a fresh environment and reads rods' own verdict (progress: the share of
user turns passed; success: all of them). Environments are deterministic given the task, so
the replay is the episode the agent played.
"""

from __future__ import annotations

import gymnasium

from rods_env.task import Task
from rods_env.tool_session import (
    AGENT_STOPPED,
    ENDED,
    SEND_MESSAGE,
    SEND_MESSAGE_SCHEMA,
    Call,
    Verdict,
    action_calls,
    message_calls,
    score_calls,
)
from rods_env.tool_session import ToolSession as Episode

__all__ = [
    "AGENT_STOPPED",
    "ENDED",
    "SEND_MESSAGE",
    "SEND_MESSAGE_SCHEMA",
    "Call",
    "Episode",
    "Verdict",
    "message_calls",
    "oracle_calls",
    "score_calls",
]


def oracle_calls(env_id: str, task: Task, max_steps: int = 200) -> list[Call]:
    """The oracle's episode of ``task`` as tool calls: each call of its actions, and its text
    for the user as ``send_message_to_user``."""
    from rods_agent.engines import oracle_agents
    from rods_env.parsing import parse_action

    env = gymnasium.make(env_id, split=None, max_steps=max_steps)
    obs, info = env.reset(options={"task": task})
    agent = oracle_agents([task])(info)
    calls, done = [], False
    while not done:
        action = agent.act(obs, info)
        calls += action_calls(parse_action(action))
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    return calls
