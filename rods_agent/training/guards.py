"""Loud failure: a run that cannot learn stops with a one-line error naming the cause.

A tool-use run can fail silently in ways that look like a hard task: every episode ends in
``error`` (a chat template that cannot render a tool result), every episode is cut by the
token cap before the model says anything (a prompt longer than ``rollout.max_tokens``), or
every sequence is dropped from the loss (completions cut at ``max_new_tokens`` under
``grpo.mask_truncated``). The reward is then 0, the metrics look like a run that has not
learned yet, and a GPU-day is gone. These checks stop such a run instead:

* at the start, :func:`check_prompts_fit`: the opening prompt (system message, tools and
  first user message, as the model's chat template renders them) of every task in the
  starting pool must fit in ``rollout.max_tokens`` (and ``warm_start.max_tokens``);
* after each step, :class:`StepGuard`: a step whose episodes all ended in ``error`` stops
  the run, and so do ``grpo.max_untrained_steps`` steps in a row in which groups had
  reward variance but the update trained no token.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rods_agent.rollouts.batch import DomainRouter
from rods_agent.training.config import TrainConfig
from rods_agent.training.policy import RolloutBatch
from rods_env.errors import ConfigError, TrainingError
from rods_env.task import Task


def opening_lengths(
    chat: Any, tasks: Iterable[Task], *, prompt: str = "full"
) -> dict[str, tuple[int, str]]:
    """The longest opening prompt of each domain's tasks, in tokens of ``chat``.

    Each task's environment is reset (cheap) and its opening rendered exactly as a rollout
    renders it; openings with the same system message and tools are rendered once.

    Returns:
        domain -> (tokens, id of a task with that opening).

    Raises:
        ConfigError: the chat template cannot render an opening (one line, naming the task).
    """
    router = DomainRouter(max_steps=2, prompt=prompt)
    seen: set[tuple[str, str, str]] = set()
    longest: dict[str, tuple[int, str]] = {}
    for task in tasks:
        _, info = router.route(task).reset(seed=0, options={"task": task})
        messages = [dict(m) for m in info["messages"]]
        tools = list(info.get("tools") or []) or None
        key = (task.domain, json.dumps(messages[:1], default=str), json.dumps(tools, default=str))
        if key in seen:
            continue
        seen.add(key)
        try:
            n = len(chat.prompt_ids(messages, tools))
        except Exception as exc:  # a template error of any kind is the user's to see
            message = " ".join(str(exc).split())
            raise ConfigError(
                f"the model's chat template cannot render the opening of task {task.id} "
                f"(system, tools, first user message): {type(exc).__name__}: {message}"
            ) from None
        if n > longest.get(task.domain, (-1, ""))[0]:
            longest[task.domain] = (n, task.id)
    return longest


def check_prompts_fit(config: TrainConfig, chat: Any, tasks: Sequence[Task]) -> dict[str, int]:
    """Stop a run whose opening prompts do not fit its token caps.

    Returns:
        The longest opening of each domain, in tokens.

    Raises:
        ConfigError: an opening of ``tasks`` leaves no room for a completion within
            ``rollout.max_tokens`` (or, with a warm start, ``warm_start.max_tokens``).
    """
    lengths = opening_lengths(chat, tasks, prompt=config.rollout.prompt)
    caps = [("rollout.max_tokens", config.rollout.max_tokens)]
    if config.warm_start.enabled:
        caps.append(("warm_start.max_tokens", config.warm_start.max_tokens))
    # A completion needs one token and the tokens that close the assistant message.
    closing = 1 + int(getattr(chat, "suffix_tokens", 0))
    for domain, (n, task_id) in sorted(lengths.items()):
        for key, cap in caps:
            if n + closing > cap:
                raise ConfigError(
                    f"{key}={cap} is below the {domain} opening prompt ({n} tokens of system "
                    f"message, tools and first user message with this model's chat template, "
                    f"task {task_id}): every episode would end at the cap before the model "
                    f"says anything; raise {key} to at least "
                    f"{n + closing + config.rollout.max_new_tokens}"
                )
    return {domain: n for domain, (n, _) in lengths.items()}


class StepGuard:
    """Stops the loop when a step shows that the run cannot learn.

    Args:
        max_untrained_steps: Steps in a row with reward variance but no token trained that
            stop the run (0: never).
        trains_tokens: Whether the policy trains tokens (the simulated learner does not).
    """

    def __init__(self, max_untrained_steps: int, *, trains_tokens: bool) -> None:
        self.limit = max_untrained_steps
        self.trains_tokens = trains_tokens
        self.untrained = 0
        """Steps in a row (steps without variance not counted) that trained nothing."""

    def replay(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Count the metrics lines of steps already done (a resumed run continues the
        count the unbroken run had)."""
        for row in rows:
            self._count(row)

    def _count(self, row: Mapping[str, Any]) -> None:
        if not self.trains_tokens:
            return
        if float(row.get("loss_tokens") or 0) > 0:
            self.untrained = 0
        elif float(row.get("effective_group_ratio") or 0) > 0:
            self.untrained += 1

    def check(self, row: Mapping[str, Any], batch: RolloutBatch) -> None:
        """Raise :class:`TrainingError` when the step of ``row`` (its metrics line) and
        ``batch`` (its rollouts) show a run that cannot learn."""
        step = row.get("step")
        episodes = [e for g in batch.groups for e in g.episodes]
        if episodes and all(e.termination == "error" for e in episodes):
            first = next((e for e in episodes if e.errors), episodes[0])
            cause = " ".join((first.errors[-1] if first.errors else "no message").split())
            raise TrainingError(
                f"step {step}: every episode ({len(episodes)}) ended in error, nothing to "
                f"learn from; the first ({first.task_id}): {cause}"
            )
        self._count(row)
        if self.limit and self.untrained >= self.limit:
            raise TrainingError(
                f"no token trained for {self.untrained} steps in a row although groups had "
                f"reward variance (step {step}: {untrained_cause(row)})"
            )


def untrained_cause(row: Mapping[str, Any]) -> str:
    """Why a step's update trained no token, from its metrics line."""
    update = row.get("update") or {}
    reasons = []
    overlong = int(update.get("dropped_overlong", 0))
    if overlong:
        reasons.append(
            f"{overlong} episodes dropped by grpo.mask_truncated, each with a completion "
            "cut at rollout.max_new_tokens (raise it, or set grpo.mask_truncated=false)"
        )
    errors = int(update.get("dropped_error", 0))
    if errors:
        reasons.append(f"{errors} episodes ended in error (see 'terminations')")
    empty = int(update.get("dropped_empty", 0))
    if empty:
        reasons.append(
            f"{empty} episodes had no model token (cut at rollout.max_tokens before the "
            "first reply)"
        )
    if not update:
        reasons.append("no group was kept for the update")
    return "; ".join(reasons) or "every kept episode was dropped from the loss"
