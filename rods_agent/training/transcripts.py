"""What a training run keeps of its rollouts, for ``rods view``: a bounded sample of each
step's episodes and the pool's events.

``<run>/rollouts/`` holds

- ``step-NNNNNN.jsonl``: per group, the best, the worst and one episode from the middle by
  reward (``log.rollouts_per_group``), in the record shape of ``rods eval``'s
  ``episodes.jsonl`` plus the step's view of the task: ``step``, ``zone`` (the group's
  zone), ``group`` (the group's ``rewards``, ``mean``, ``std``, ``variance``), ``reward``
  (this episode's reward for the advantage), ``kept`` (the group went into the update) and
  ``pick`` (``best``, ``worst``, ``middle``, ``q1``, ...). Messages and tool outputs are cut
  after ``log.rollouts_max_chars`` characters (with a note of how many were cut), and the
  system prompt (a domain's policy, the same in every episode) is written once, in
  ``policies.json``, its place in the messages saying so;
- ``tasks.jsonl``: each task of the transcripts, once, gold calls included (synthesized
  tasks exist nowhere else once retired);
- ``policies.json``: each domain's policy.

``<run>/pool_events.jsonl`` has one line per step in which the pool changed: the tasks
synthesized (with parent, mode, generation), admitted, confirmed at the boundary,
removed (by reason), parked and retried.

A resume drops the step files and pool events of steps from the checkpoint on (they are
written again); ``tasks.jsonl`` only grows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rods_agent.data import DataEngine
from rods_agent.data.boundary import GroupStats
from rods_agent.training.config import LogConfig
from rods_agent.training.policy import Group
from rods_agent.training.run_dir import keep_metrics_before
from rods_env.fileio import append_jsonl, iter_jsonl, write_json, write_jsonl
from rods_env.task import Task

ROLLOUTS = "rollouts"
POOL_EVENTS = "pool_events.jsonl"
TASKS = "tasks.jsonl"
POLICIES = "policies.json"
POLICY_PLACEHOLDER = "(the {domain} policy: rollouts/policies.json)"
"""What a transcript's system message says instead of the policy."""


def picks(n: int, k: int) -> list[tuple[int, str]]:
    """Which of ``n`` episodes sorted by reward (lowest first) to keep, with their labels:
    the best, the worst, the middle one, then up to ``k`` in all spread evenly by rank
    (``q1``, ``q2``, ...); sorted by rank."""
    k = min(k, n)
    chosen: dict[int, str] = {}
    for rank, label in ((n - 1, "best"), (0, "worst"), (n // 2, "middle")):
        if len(chosen) < k:
            chosen.setdefault(rank, label)
    spread = [round(i * (n - 1) / (k - 1)) for i in range(k)] if k > 1 else []
    rest = [r for r in dict.fromkeys([*spread, *range(n)]) if r not in chosen]
    for number, rank in enumerate(rest[: k - len(chosen)], start=1):
        chosen[rank] = f"q{number}"
    return sorted(chosen.items())


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters cut: log.rollouts_max_chars]"


class RolloutLog:
    """Writes a run's transcripts and pool events (see the module docstring).

    Args:
        out: The run directory.
        config: The ``log`` section (``rollouts_per_group``, ``rollouts_max_chars``).
        start: The step the run starts from (a resume drops what was written from it on).
    """

    def __init__(self, out: Path, config: LogConfig, *, start: int) -> None:
        self.folder = out / ROLLOUTS
        self.events = out / POOL_EVENTS
        self.per_group = config.rollouts_per_group
        self.max_chars = config.rollouts_max_chars
        keep_metrics_before(self.events, start)
        if self.folder.is_dir():
            for path in self.folder.glob("step-*.jsonl"):
                step = path.stem[5:]
                if step.isdigit() and int(step) >= start:
                    path.unlink()
        self.known = {str(r["id"]) for r in iter_jsonl(self.folder / TASKS) if "id" in r}
        self.policies: dict[str, str] = {}
        if (self.folder / POLICIES).exists():
            self.policies = json.loads((self.folder / POLICIES).read_text(encoding="utf-8"))

    def record(
        self, group: Group, episode: int, pick: str, step: int, zone: str, kept: bool
    ) -> dict[str, Any]:
        """One transcript line: the episode's record plus the step's view of its task."""
        e = group.episodes[episode]
        data = e.to_dict(tokens=False)
        # a benchmark's own copy of the conversation (τ²-bench's trajectory) is for `rods
        # eval`'s result files; here it would double each line past rollouts_max_chars
        data["benchmark_record"] = None
        messages = []
        for i, m in enumerate(data["messages"]):
            m = dict(m)
            content = m.get("content")
            if i == 0 and m.get("role") == "system" and isinstance(content, str):
                domain = group.task.domain
                self.policies.setdefault(domain, content)
                m["content"] = POLICY_PLACEHOLDER.format(domain=domain)
            elif isinstance(content, str):
                m["content"] = _clip(content, self.max_chars)
            messages.append(m)
        data["messages"] = messages
        stats = GroupStats.of(group.rewards)
        data.update(
            step=step,
            zone=zone,
            group={
                "rewards": list(group.rewards),
                "mean": stats.mean,
                "std": stats.std,
                "variance": stats.variance,
            },
            reward=group.rewards[episode],
            kept=kept,
            pick=pick,
        )
        return data

    def write_step(
        self, step: int, groups: Sequence[Group], kept: Sequence[Group], engine: DataEngine
    ) -> None:
        """Write the step's transcripts: ``per_group`` episodes of each group."""
        if self.per_group <= 0:
            return
        kept_ids = {id(g) for g in kept}
        rows = []
        new_tasks: list[Task] = []
        for group in groups:
            zone = engine.thresholds.zone(GroupStats.of(group.rewards))
            order = sorted(range(len(group.episodes)), key=lambda i: (group.rewards[i], i))
            for at, label in picks(len(order), self.per_group):
                rows.append(self.record(group, order[at], label, step, zone, id(group) in kept_ids))
            if group.task.id not in self.known:
                self.known.add(group.task.id)
                new_tasks.append(group.task)
        self.folder.mkdir(parents=True, exist_ok=True)
        write_jsonl(self.folder / f"step-{step:06d}.jsonl", rows)
        if new_tasks:
            append_jsonl(self.folder / TASKS, [t.model_dump(mode="json") for t in new_tasks])
        if not (self.folder / POLICIES).exists() or new_tasks:
            write_json(self.folder / POLICIES, self.policies)

    def write_events(
        self, step: int, before: Mapping[str, str], removed_before: int, engine: DataEngine
    ) -> None:
        """Write what the step changed in the pool, from the statuses ``before`` it
        (:func:`pool_statuses`) and the length of the removal log then."""
        buffer = engine.buffer
        now = {tid: e.status for tid, e in buffer.entries.items()}
        synthesized = [
            {
                "id": tid,
                "parent": e.task.provenance.parent_id,
                "mode": e.task.provenance.mode,
                "augment": e.task.provenance.augment,
                "generation": e.task.provenance.generation,
                "skill": e.task.skill,
                "variant": e.task.variant,
            }
            for tid, e in buffer.entries.items()
            if tid not in before and e.synthesized
        ]
        removed = {str(r["id"]): str(r["reason"]) for r in buffer.removed[removed_before:]}
        # a candidate made and dropped in the same step: still a synthesized task
        event = {
            "step": step,
            "synthesized": synthesized,
            "admitted": sorted(
                t for t, s in now.items() if s == "active" and before.get(t) == "waiting"
            ),
            "removed": removed,
            "parked": sorted(
                t for t, s in now.items() if s == "parked" and before.get(t) != "parked"
            ),
            "retried": sorted(
                t for t, s in now.items() if s == "active" and before.get(t) == "parked"
            ),
        }
        if any(event[k] for k in ("synthesized", "admitted", "removed", "parked", "retried")):
            append_jsonl(self.events, [event])


def pool_statuses(engine: DataEngine) -> dict[str, str]:
    """Every task's status in the engine's buffer (what :meth:`RolloutLog.write_events`
    compares a step's end with)."""
    return {tid: e.status for tid, e in engine.buffer.entries.items()}
