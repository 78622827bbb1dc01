"""Every rods environment as a ``verifiers.v1`` taskset.

The taskset id is this package (``rods_agent.integrations.verifiers``; the hub package
``rods-tasks`` re-exports it). Its config picks the environment and the tasks::

    vf-validate rods_agent.integrations.verifiers --taskset.env-id rods/Airline-v0 \\
        --runtime.type subprocess
    vf-eval rods_agent.integrations.verifiers --env.taskset.env-id rods/Retail-v0 ...

* tasks: a split of the environment's own tasks, or a JSONL pool file (``pool``); each task's
  prompt is the simulated user's first message and its system prompt the domain policy;
* tools: :class:`~.toolset.RodsToolset`, the rollout's rods episode behind MCP, every tool
  with its rods name and schema plus ``send_message_to_user`` (the scripted user's replies
  drive the turns);
* rubric: the reward ``progress`` (the share of user turns passed) and the metric
  ``success`` (strict), both rods' own verdict on a replay of the rollout's tool calls;
* ``validate`` (verifiers' gold check): the oracle's episode played through these tools
  reaches success. The no-op check (an untouched rollout must not already pass) needs
  nothing more.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import verifiers.v1 as vf
from verifiers.v1.harnesses.null import NullHarness

from rods_agent.integrations.verifiers.episode import (
    Episode,
    Verdict,
    message_calls,
    oracle_calls,
    score_calls,
)
from rods_agent.integrations.verifiers.toolset import RodsToolset


class RodsTaskData(vf.TaskData):
    """One rods task: the environment, the task and where it is looked up."""

    env_id: str
    task_id: str
    pool: str | None = None
    max_steps: int = 40


class RodsTaskConfig(vf.TaskConfig):
    """Per-task knobs (``--env.taskset.task.*``)."""

    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class RodsTask(vf.Task[RodsTaskData, vf.State, RodsTaskConfig]):
    """A rods episode: its tools, and rods' verdict as reward (progress) and metric
    (success)."""

    def __init__(self, data: RodsTaskData, config: RodsTaskConfig | None = None) -> None:
        super().__init__(data, config)
        self._verdicts: dict[tuple[str, int], Verdict] = {}

    @property
    def key(self) -> str:
        """The env id and task id (durable across pools and runs)."""
        return f"{self.data.env_id}:{self.data.task_id}"

    @classmethod
    def toolsets(cls, config: RodsTaskConfig) -> list[vf.Toolset]:
        """The rollout's rods tools (one server per rollout)."""
        return [RodsToolset(config.tools)]

    def verdict(self, trace: vf.Trace) -> Verdict:
        """rods' verdict on the trace's tool calls (replayed once per trace state)."""
        messages = [m.model_dump() for m in trace.messages]
        key = (trace.id, len(messages))
        if key not in self._verdicts:
            data = self.data
            self._verdicts[key] = score_calls(
                data.env_id,
                data.task_id,
                message_calls(messages),
                tasks=data.pool,
                max_steps=data.max_steps,
            )
        return self._verdicts[key]

    @vf.reward(weight=1.0)
    async def progress(self, trace: vf.Trace) -> float:
        """The share of the user's turns the rollout passed (rods' dense reward)."""
        return self.verdict(trace).progress

    @vf.metric
    async def success(self, trace: vf.Trace) -> float:
        """1.0 when every user turn passed (rods' strict success), else 0.0."""
        return float(self.verdict(trace).success)

    async def validate(self, runtime: vf.Runtime) -> bool | None:
        """The gold check: the oracle's episode, played through this taskset's tools, passes."""
        data = self.data
        task = _task(data.env_id, data.task_id, data.pool)
        calls = oracle_calls(data.env_id, task)
        steps = max(data.max_steps, len(calls))
        return score_calls(data.env_id, task, calls, tasks=data.pool, max_steps=steps).success


class RodsTasksetConfig(vf.TasksetConfig):
    """Which rods tasks load (``--taskset.*`` / ``--env.taskset.*``)."""

    env_id: str = "rods/Retail-v0"
    """A rods environment id: a domain, a synthesized pool's domain, BFCL or τ²-bench."""
    split: Literal["train", "test", "all"] = "test"
    """Which of the tasks (the seeds', or the pool file's)."""
    pool: str | None = None
    """A JSONL task pool (``rods synth`` output) instead of the environment's own tasks."""
    max_steps: int = 40
    """Agent actions (tool calls and messages) before the environment truncates."""
    task: RodsTaskConfig = RodsTaskConfig()


class RodsTaskset(vf.Taskset[RodsTask, RodsTasksetConfig]):
    """The tasks of one rods environment (see the module docstring)."""

    def load(self) -> Iterator[RodsTask]:
        """One task per rods task: the user's first message, the domain policy."""
        from rods_agent.evaluation.evaluate import load_pool

        config = self.config
        episode = Episode(config.env_id, tasks=config.pool, max_steps=config.max_steps)
        for task in load_pool(config.env_id, config.pool or "seeds", config.split):
            prompt = episode.reset(task)
            yield RodsTask(
                RodsTaskData(
                    id=task.id,
                    name=task.id,
                    prompt=prompt,
                    system_prompt=episode.policy or None,
                    env_id=config.env_id,
                    task_id=task.id,
                    pool=config.pool,
                    max_steps=config.max_steps,
                ),
                config.task,
            )


class RodsHarness(NullHarness):
    """verifiers' tool-less chat loop (the ``null`` harness), bundled so a rods taskset runs
    the model with only rods' tools."""


def _task(env_id: str, task_id: str, pool: str | None) -> Any:
    from rods_agent.evaluation.evaluate import load_pool

    for task in load_pool(env_id, pool or "seeds", "all"):
        if task.id == task_id:
            return task
    raise KeyError(f"{env_id} has no task {task_id!r}")
