"""What ``rods view`` reads: evaluation folders, training runs and episode files.

Every source becomes a :class:`Source`: its episodes (the records of ``rods eval``'s
``episodes.jsonl`` or of ``rods train``'s ``rollouts/step-NNNNNN.jsonl``, one shape), the
tasks they ran (gold calls included) and what describes the run (summary numbers, plots,
the pool's story). Nothing here draws or writes; :mod:`rods_agent.view.page` does.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rods_env.errors import ConfigError
from rods_env.fileio import iter_jsonl, read_jsonl
from rods_env.task import Task, load_tasks

ROLLOUTS = "rollouts"
"""Folder of a training run that holds its transcripts (``step-NNNNNN.jsonl``)."""

ROLLOUT_TASKS = "tasks.jsonl"
"""The tasks of a run's transcripts, each written once (in ``rollouts/``)."""

POOL_EVENTS = "pool_events.jsonl"
"""A training run's pool events per step: tasks synthesized, admitted, retired, parked."""

_PLACEHOLDER = re.compile(r"\(the (\S+) policy: rollouts/policies\.json\)")
"""What a training transcript's system message says instead of the policy
(:data:`rods_agent.training.transcripts.POLICY_PLACEHOLDER`)."""


@dataclass
class Source:
    """One evaluation folder, training run or episode file, as ``rods view`` shows it.

    Attributes:
        name: A short label (the folder's name, made unique among the sources).
        kind: ``eval``, ``train`` or ``episodes`` (a bare JSONL file of episode records).
        path: Where it was read.
        episodes: The episode records, in file order (training: by step).
        tasks: The tasks the episodes ran, by id (may miss some: see ``notes``).
        summary: What describes the run (``summary.json`` of an eval; a training run's
            configuration and last metrics).
        metrics: A training run's ``metrics.jsonl`` rows.
        pool_events: A training run's ``pool_events.jsonl`` rows.
        notes: What could not be read, in words the page shows.
    """

    name: str
    kind: Literal["eval", "train", "episodes"]
    path: Path
    episodes: list[dict[str, Any]] = field(default_factory=list)
    tasks: dict[str, Task] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    pool_events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load_source(path: str | Path) -> Source:
    """Read one evaluation folder (``episodes.jsonl``), training run (``metrics.jsonl``) or
    JSONL file of episode records.

    Raises:
        ConfigError: when ``path`` is none of these, in one line.
    """
    path = Path(path)
    if path.is_file():
        return _episodes_file(path)
    if not path.is_dir():
        raise ConfigError(f"{path}: no such file or folder")
    if (path / "metrics.jsonl").exists():
        return _training_run(path)
    if (path / "episodes.jsonl").exists():
        return _eval_folder(path)
    raise ConfigError(
        f"{path}: neither an evaluation folder (episodes.jsonl) nor a training run (metrics.jsonl)"
    )


def load_sources(paths: Sequence[str | Path]) -> list[Source]:
    """Read every path (:func:`load_source`); names are made unique (``run``, ``run-2``)."""
    if not paths:
        raise ConfigError("give at least one evaluation folder, training run or episodes file")
    sources = [load_source(p) for p in paths]
    seen: dict[str, int] = {}
    for source in sources:
        n = seen[source.name] = seen.get(source.name, 0) + 1
        if n > 1:
            source.name = f"{source.name}-{n}"
    return sources


# -- evaluation folders ----------------------------------------------------------------------
def _eval_folder(path: Path) -> Source:
    source = Source(path.name or str(path), "eval", path)
    source.episodes = list(_episode_rows(path / "episodes.jsonl"))
    source.summary = _json_object(path / "summary.json", source.notes)
    config = _json_object(path / "config.json", source.notes)
    source.summary.setdefault("config", config)
    own = path / "tasks.jsonl"
    if own.exists():
        source.tasks = _tasks_from(own, source.notes)
    else:
        source.tasks = _pool_tasks(config, source.notes)
    if not source.tasks:
        source.tasks = _tasks_from_results(path / "results.jsonl")
    _note_missing_tasks(source)
    return source


def _pool_tasks(config: Mapping[str, Any], notes: list[str]) -> dict[str, Task]:
    """The tasks of an eval folder without ``tasks.jsonl`` (written before rods kept it):
    the pool its ``config.json`` names, when it can still be found."""
    from rods_env.registry import load_domain

    pool, env = config.get("pool"), config.get("env")
    if not isinstance(pool, str) or not isinstance(env, str):
        return {}
    if pool == "seeds":
        try:
            return {t.id: t for t in load_domain(env).seed_tasks()}
        except (ConfigError, LookupError) as exc:
            notes.append(f"the seed tasks of {env} are not installed here ({exc})")
            return {}
    return _tasks_from(Path(pool), notes)


def _tasks_from_results(path: Path) -> dict[str, Task]:
    """Placeholder tasks from ``results.jsonl`` (skill, variant, depth; no gold calls)."""
    from rods_env.task import Turn, UserProfile

    tasks = {}
    for row in iter_jsonl(path):
        tid = row.get("task_id")
        if not isinstance(tid, str):
            continue
        try:
            tasks[tid] = Task(
                id=tid,
                domain=str(row.get("domain", "?")),
                skill=str(row.get("skill", "?")),
                variant=row.get("variant", "base"),
                user=UserProfile(name="?"),
                turns=(Turn(request="(the task file is gone: no gold calls)"),),
            )
        except ValueError:
            continue
    return tasks


# -- training runs ---------------------------------------------------------------------------
def _training_run(path: Path) -> Source:
    source = Source(path.name or str(path), "train", path)
    source.metrics = sorted(
        (r for r in iter_jsonl(path / "metrics.jsonl") if isinstance(r.get("step"), int)),
        key=lambda r: r["step"],
    )
    source.pool_events = read_jsonl(path / POOL_EVENTS)
    folder = path / ROLLOUTS
    files = sorted(folder.glob("step-*.jsonl")) if folder.is_dir() else []
    for file in files:
        source.episodes.extend(_episode_rows(file))
    if not files:
        source.notes.append(
            f"{path} keeps no transcripts (no {ROLLOUTS}/step-*.jsonl: a run from before "
            "rods kept them, or log.rollouts_per_group=0)"
        )
    config = _run_config(path, source.notes)
    source.summary = {"config": config}
    if (folder / ROLLOUT_TASKS).exists():
        source.tasks = _tasks_from(folder / ROLLOUT_TASKS, source.notes)
    policies = _json_object(folder / "policies.json", source.notes)
    for record in source.episodes:  # the policy, written once, back in its place
        first = record["messages"][0] if record["messages"] else None
        if isinstance(first, dict) and first.get("role") == "system":
            found = _PLACEHOLDER.fullmatch(str(first.get("content")))
            if found and isinstance(policies.get(found.group(1)), str):
                record["messages"][0] = {**first, "content": policies[found.group(1)]}
    _note_missing_tasks(source)
    return source


def _run_config(path: Path, notes: list[str]) -> dict[str, Any]:
    saved = path / "config.yaml"
    if not saved.exists():
        return {}
    try:
        import yaml

        loaded = yaml.safe_load(saved.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # yaml's errors are ValueErrors
        notes.append(f"{saved} is unreadable ({str(exc).splitlines()[0]})")
        return {}
    return loaded if isinstance(loaded, dict) else {}


# -- episode files ---------------------------------------------------------------------------
def _episodes_file(path: Path) -> Source:
    if path.suffix != ".jsonl":
        raise ConfigError(f"{path}: not a JSONL file of episodes (episodes.jsonl, step-*.jsonl)")
    source = Source(path.stem, "episodes", path)
    source.episodes = list(_episode_rows(path))
    if not source.episodes:
        raise ConfigError(f"{path}: no episode records (lines with task_id and messages)")
    for candidate in (path.parent / "tasks.jsonl", path.parent / ROLLOUT_TASKS):
        if candidate.exists() and candidate != path:
            source.tasks = _tasks_from(candidate, source.notes)
            break
    _note_missing_tasks(source)
    return source


def _episode_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The episode records of a JSONL file (lines with a task id and messages)."""
    for row in iter_jsonl(path):
        if isinstance(row.get("task_id"), str) and isinstance(row.get("messages"), list):
            yield row


# -- helpers ---------------------------------------------------------------------------------
def _json_object(path: Path, notes: list[str]) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        notes.append(f"{path} is unreadable ({exc})")
        return {}
    return value if isinstance(value, dict) else {}


def _tasks_from(path: Path, notes: list[str]) -> dict[str, Task]:
    if not path.is_file():
        notes.append(f"the task pool {path} is not here: no gold calls shown")
        return {}
    try:
        return {t.id: t for t in load_tasks(path)}
    except (ConfigError, ValueError, OSError) as exc:
        notes.append(f"{path}: unreadable task pool ({' '.join(str(exc).split())[:200]})")
        return {}


def _note_missing_tasks(source: Source) -> None:
    missing = {e["task_id"] for e in source.episodes} - set(source.tasks)
    if missing:
        first = sorted(missing)[0]
        source.notes.append(
            f"{len(missing)} tasks of its episodes are unknown here (first: {first}): their "
            "gold calls, skill and variant are not shown"
        )


def task_variance(episodes: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Each task's population variance of progress over its episodes (an eval's trials)."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for e in episodes:
        by_task[str(e["task_id"])].append(float(e.get("progress") or 0.0))
    out = {}
    for tid, values in by_task.items():
        mean = sum(values) / len(values)
        out[tid] = sum((v - mean) ** 2 for v in values) / len(values)
    return out
