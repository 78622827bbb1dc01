"""Datasets of rods tasks for TRL: fixed splits of a pool, and the data engine's live view.

A row names a task; the environment's ``reset(task_id=..., **row)`` starts it and returns
the user's first message, which TRL appends to the row's (empty) last user message. The
row's prompt holds the policy as the system message, as the environment shows it (any rods
id: an own domain, BFCL, τ²-bench).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rods_env.errors import ConfigError
from rods_env.registry import AnyDomain
from rods_env.task import Task, load_tasks

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict


def _domain(env_id: str | AnyDomain) -> AnyDomain:
    from rods_agent.integrations.trl.env import resolve_domain

    return resolve_domain(env_id)


def policy_prompt(domain: AnyDomain) -> list[dict[str, str]]:
    """The conversation a row starts from: the policy as the system message (none when the
    environment has no policy, as BFCL), then an empty user message."""
    system = [{"role": "system", "content": domain.policy}] if domain.policy else []
    return [*system, {"role": "user", "content": ""}]


def task_row(task: Task, domain: AnyDomain) -> dict[str, Any]:
    """One dataset row for ``task``: its prompt, id, skill and variant."""
    return {
        "prompt": policy_prompt(domain),
        "task_id": task.id,
        "skill": task.skill,
        "variant": task.variant,
    }


def _tasks(source: Iterable[Task] | str | Path | None, domain: AnyDomain) -> list[Task]:
    if source is None or (isinstance(source, str) and source == "seeds"):
        items = domain.seed_tasks()
    elif isinstance(source, (str, Path)):
        items = load_tasks(source)
    else:
        items = list(source)
    return [t for t in items if t.domain == domain.name]


def task_dataset(
    env_id: str | AnyDomain,
    tasks: Iterable[Task] | str | Path | None = None,
    *,
    split: str | None = "train",
) -> Dataset:
    """A Hugging Face dataset with one row per task of a pool.

    Args:
        env_id: The rods env id (or domain) the tasks belong to.
        tasks: None or ``"seeds"`` for the domain's seed tasks, a JSONL pool (a
            :class:`~rods_env.synthesis.TaskPool` file), or tasks (a ``TaskPool`` iterates
            as tasks). Tasks of other domains are left out.
        split: Keep tasks of this split (``"train"``/``"test"``); a pool task without a split
            counts as train. None keeps every task.

    Raises:
        ConfigError: when no task is left.
    """
    from datasets import Dataset

    domain = _domain(env_id)
    if split not in (None, "train", "test"):
        raise ConfigError(f"split must be 'train', 'test' or None, got {split!r}")
    rows = [
        task_row(t, domain)
        for t in _tasks(tasks, domain)
        if split is None or (t.split or "train") == split
    ]
    if not rows:
        raise ConfigError(
            f"no {domain.name} tasks"
            + (f" of split {split!r}" if split else "")
            + " to build a dataset from"
        )
    return Dataset.from_list(rows)


def train_test_datasets(
    env_id: str | AnyDomain,
    train: Iterable[Task] | str | Path | None = None,
    test: Iterable[Task] | str | Path | None = None,
) -> DatasetDict:
    """Train and test datasets: by default the seed split of the domain.

    A synthesized pool (``rods synth``) has tasks without a split; pass it as ``train`` and
    keep the seed test split as ``test``, so no test task is trained on.

    Args:
        env_id: The rods env id (or domain).
        train: The training pool (default: the seed train split).
        test: The test pool (default: the seed test split).

    Raises:
        ConfigError: when a train task id is also a test task id.
    """
    from datasets import DatasetDict

    train_ds = task_dataset(env_id, train, split="train")
    test_ds = task_dataset(env_id, test, split="test")
    overlap = set(train_ds["task_id"]) & set(test_ds["task_id"])
    if overlap:
        raise ConfigError(
            f"{len(overlap)} task ids are in both the train and the test dataset "
            f"(e.g. {sorted(overlap)[0]})"
        )
    return DatasetDict({"train": train_ds, "test": test_ds})
