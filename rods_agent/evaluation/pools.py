"""The task pools an evaluation runs on, and the checks before it starts (gold sound,
the user named).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from rods_env.benchmark import BenchmarkDomain
from rods_env.errors import ConfigError
from rods_env.gold import GOLD_CACHE, GoldError
from rods_env.registry import AnyDomain, load_any_domain
from rods_env.task import Task, load_tasks

log = logging.getLogger(__name__)


# -- pools -------------------------------------------------------------------------------
def load_pool(env: str, pool: str | Path = "seeds", split: str = "test") -> list[Task]:
    """The tasks of one domain or benchmark to evaluate.

    Args:
        env: Environment id, domain or benchmark name (``rods/Retail-v0``, ``retail``,
            ``bfcl``, ``rods/BFCL-MultiTurn-Base-v0``). A benchmark's id selects its subset.
        pool: ``"seeds"`` (the domain's frozen seed tasks, or the benchmark's own tasks) or,
            for a domain, a JSONL task file; tasks of other domains in the file are skipped,
            tasks without a split kept for any split.
        split: ``"train"``, ``"test"`` or ``"all"``.

    Raises:
        ConfigError: for an unknown split, a missing file, or no tasks left.
    """
    if split not in ("train", "test", "all"):
        raise ConfigError(f"unknown split '{split}'; splits: train, test, all")
    want = None if split == "all" else split
    family = load_any_domain(env)
    if isinstance(family, BenchmarkDomain):
        if str(pool) != "seeds":
            raise ConfigError(
                f"--pool {pool}: the tasks of {family.name} come from its own package; "
                "use --pool seeds (the default)"
            )
        family.require()
        found = family.seed_tasks(want)
        if not found:
            raise ConfigError(f"{family.name} has no tasks in split '{split}'")
        return found
    domain = family
    if str(pool) == "seeds":
        seeds = domain.seed_tasks(want)
        if not seeds:
            raise ConfigError(f"domain {domain.name} has no seed tasks in split '{split}'")
        return seeds
    path = Path(pool)
    if not path.is_file():
        raise ConfigError(f"--pool: no file '{pool}'; use 'seeds' or a JSONL file of tasks")
    tasks = load_tasks(path)
    other = sum(1 for t in tasks if t.domain != domain.name)
    tasks = [t for t in tasks if t.domain == domain.name]
    if want is not None:
        tasks = [t for t in tasks if t.split in (None, want)]
    if other:
        log.warning("skipping %d tasks of other domains in %s", other, pool)
    if not tasks:
        raise ConfigError(f"--pool {pool}: no tasks of domain {domain.name} in split '{split}'")
    return tasks


def check_gold(tasks: Sequence[Task]) -> dict[str, AnyDomain]:
    """Replay every rods task's gold calls (cached for the episodes), and have each
    benchmark domain check its own tasks; returns the domains the tasks come from.

    Raises:
        ConfigError: when some tasks' gold calls fail: no agent could pass those tasks, so
            their scores would mean nothing. The message names them.
    """
    families: dict[str, AnyDomain] = {}
    broken: list[str] = []
    for task in tasks:
        family = families.get(task.domain)
        if family is None:
            family = families[task.domain] = load_any_domain(task.domain)
        if isinstance(family, BenchmarkDomain):
            continue
        try:
            GOLD_CACHE.get(family, task)
        except GoldError as exc:
            broken.append(str(exc))
    for name, family in families.items():
        if isinstance(family, BenchmarkDomain):
            broken += family.check_tasks([t for t in tasks if t.domain == name])
    if broken:
        raise ConfigError(
            f"the gold calls of {len(broken)} of {len(tasks)} tasks fail, so no agent can "
            f"pass them; fix or drop them from the pool (first: {broken[0]})"
        )
    return families


USER_MODES: tuple[str, ...] = ("scripted", "llm", "solo")
"""Who plays the user: rods' scripted user (a benchmark's deterministic stand-in), a
model (:class:`rods_agent.rollouts.user.LLMUser`), or nobody (a benchmark's solo mode)."""
