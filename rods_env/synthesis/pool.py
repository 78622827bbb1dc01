"""Task pools: seed and synthesized tasks in one JSONL file, with provenance and dedupe."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rods_env.domain import Domain
from rods_env.errors import RodsError, TaskFileError
from rods_env.gold import GOLD_CACHE
from rods_env.synthesis.critique import dedupe_key
from rods_env.task import Signature, Task, dump_tasks, iter_tasks


class TaskPool:
    """An ordered collection of tasks with unique ids and no duplicate gold effects.

    Every task carries its provenance (seed or synthesized, parent id, generation, mode,
    augmentation). Saving is atomic: a crash mid-write leaves the previous file intact.

    Dedupe keys outlive the tasks: a task taken out with :meth:`remove` (retired) keeps its
    key in :meth:`keys`, so a synthesizer given those keys never makes it again, and
    :meth:`add` refuses a task with the same gold effect. :attr:`retired_keys` lists them,
    to persist with the pool's owner (the pool file holds tasks only) and hand back through
    ``retired_keys=`` when the pool is rebuilt.

    Args:
        tasks: Initial tasks (added with :meth:`add`, duplicates dropped when ``dedupe``).
        domains: A domain or name -> domain used to replay gold for dedupe keys (others are
            loaded from the registry).
        dedupe: Whether :meth:`add` drops duplicates (same key as :func:`dedupe_key`).
        retired_keys: Dedupe keys of tasks removed earlier in the pool's life.
    """

    def __init__(
        self,
        tasks: Iterable[Task] = (),
        *,
        domains: Domain | Mapping[str, Domain] | None = None,
        dedupe: bool = True,
        retired_keys: Iterable[str] = (),
    ) -> None:
        if isinstance(domains, Domain):
            domains = {domains.name: domains}
        self._domains: dict[str, Domain] = dict(domains or {})
        self.dedupe = dedupe
        self._tasks: dict[str, Task] = {}
        self._key_of: dict[str, str] = {}
        self._retired: set[str] = set(retired_keys)
        self._keys: set[str] = set(self._retired)
        self.extend(tasks)

    # -- files -----------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        domains: Domain | Mapping[str, Domain] | None = None,
        dedupe: bool = True,
        retired_keys: Iterable[str] = (),
    ) -> TaskPool:
        """Read a pool from a JSONL file; it is taken as written (no dedupe on load).

        ``retired_keys`` are the keys of tasks removed earlier in the pool's life (see
        :attr:`retired_keys`).

        Raises:
            TaskFileError: naming the file, the line and the problem (a malformed or
                truncated line, a bad field, a task id that appears twice).
        """
        pool = cls(domains=domains, dedupe=dedupe, retired_keys=retired_keys)
        lines: list[int] | None = None
        for n, task in enumerate(iter_tasks(path)):
            if task.id in pool._tasks:
                if lines is None:
                    lines = _record_lines(path)
                first = list(pool._tasks).index(task.id)
                raise TaskFileError(
                    f"{path}:{lines[n]}: duplicate task id '{task.id}' "
                    f"(first on line {lines[first]}); ids must be unique in a pool"
                )
            pool._tasks[task.id] = task
        return pool

    def save(self, path: str | Path) -> int:
        """Write the pool to ``path`` atomically; returns the number of tasks."""
        return dump_tasks(self._tasks.values(), path)

    # -- adding ----------------------------------------------------------------------------
    def _domain(self, name: str) -> Domain:
        domain = self._domains.get(name)
        if domain is None:
            from rods_env.registry import load_domain

            domain = self._domains[name] = load_domain(name)
        return domain

    def key(self, task: Task) -> str:
        """The dedupe key of ``task`` (its gold is replayed once and cached)."""
        cached = self._key_of.get(task.id)
        if cached is not None and self._tasks.get(task.id) == task:
            return cached
        return dedupe_key(task, GOLD_CACHE.get(self._domain(task.domain), task))

    def keys(self) -> set[str]:
        """Dedupe keys of every task in the pool and of every task retired from it
        (computed on first use)."""
        for task in self._tasks.values():
            if task.id not in self._key_of:
                k = self.key(task)
                self._key_of[task.id] = k
                self._keys.add(k)
        return set(self._keys)

    def add(self, task: Task, *, key: str | None = None) -> bool:
        """Add ``task`` unless it is already there or duplicates one (when ``dedupe``).

        Args:
            task: The task.
            key: Its dedupe key when already known (e.g. from an accepted synthesis outcome).

        Returns:
            True when added.

        Raises:
            RodsError: when another task with the same id is in the pool.
        """
        old = self._tasks.get(task.id)
        if old is not None:
            if old == task:
                return False
            raise RodsError(f"task id '{task.id}' is already in the pool with different content")
        if self.dedupe:
            if len(self._key_of) < len(self._tasks):
                self.keys()
            k = key or self.key(task)
            if k in self._keys:
                return False
            self._key_of[task.id] = k
            self._keys.add(k)
        self._tasks[task.id] = task
        return True

    def extend(self, tasks: Iterable[Any]) -> int:
        """Add tasks (or accepted synthesis outcomes); returns how many were added."""
        n = 0
        for item in tasks:
            if isinstance(item, Task):
                n += self.add(item)
            elif getattr(item, "accepted", False):
                n += self.add(item.task, key=item.key)
        return n

    def remove(self, task_id: str) -> Task:
        """Remove (retire) and return the task with id ``task_id``.

        Its dedupe key stays in :meth:`keys` for the life of the pool, so the same task is
        neither added nor synthesized again.

        Raises:
            KeyError: when there is no such task.
        """
        if self.dedupe and task_id in self._tasks and task_id not in self._key_of:
            k = self.key(self._tasks[task_id])
            self._key_of[task_id] = k
            self._keys.add(k)
        task = self._tasks.pop(task_id)
        if task_id in self._key_of:
            self._retired.add(self._key_of.pop(task_id))
        return task

    @property
    def retired_keys(self) -> frozenset[str]:
        """Dedupe keys of the tasks removed from the pool (they still count as known)."""
        return frozenset(self._retired)

    # -- reading ---------------------------------------------------------------------------
    @property
    def tasks(self) -> list[Task]:
        """The tasks, in insertion order."""
        return list(self._tasks.values())

    def get(self, task_id: str) -> Task | None:
        """The task with id ``task_id``, or None."""
        return self._tasks.get(task_id)

    def __getitem__(self, task_id: str) -> Task:
        return self._tasks[task_id]

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(list(self._tasks.values()))

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Task):
            return self._tasks.get(item.id) == item
        return item in self._tasks

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskPool):
            return NotImplemented
        return list(self._tasks.values()) == list(other._tasks.values())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        origins = Counter(t.provenance.origin for t in self._tasks.values())
        return f"TaskPool({len(self)} tasks: {dict(origins)})"

    def query(
        self,
        *,
        split: str | None = None,
        skill: str | None = None,
        signature: Signature | str | None = None,
        domain: str | None = None,
        origin: str | None = None,
        mode: str | None = None,
        variant: str | None = None,
        generation: int | None = None,
    ) -> list[Task]:
        """Tasks matching every given filter (a signature by object or by its key)."""
        sig = signature.key if isinstance(signature, Signature) else signature
        out = []
        for t in self._tasks.values():
            p = t.provenance
            if (
                (split is None or t.split == split)
                and (skill is None or t.skill == skill)
                and (domain is None or t.domain == domain)
                and (sig is None or (t.signature is not None and t.signature.key == sig))
                and (origin is None or p.origin == origin)
                and (mode is None or p.mode == mode)
                and (variant is None or t.variant == variant)
                and (generation is None or p.generation == generation)
            ):
                out.append(t)
        return out

    def stats(self) -> dict[str, Any]:
        """Counts by provenance and structure, JSON-able."""

        def count(values: Iterable[Any]) -> dict[str, int]:
            return dict(sorted(Counter(str(v) for v in values).items()))

        tasks = list(self._tasks.values())
        return {
            "tasks": len(tasks),
            "origin": count(t.provenance.origin for t in tasks),
            "generation": count(t.provenance.generation for t in tasks),
            "mode": count(t.provenance.mode or "-" for t in tasks),
            "augment": count(t.provenance.augment or "-" for t in tasks),
            "variant": count(t.variant for t in tasks),
            "domain": count(t.domain for t in tasks),
            "skill": count(t.skill for t in tasks),
            "split": count(t.split or "-" for t in tasks),
            "signatures": len({t.signature.key for t in tasks if t.signature is not None}),
        }


def _record_lines(path: str | Path) -> list[int]:
    """Line numbers of the non-blank lines of ``path`` (the records, in order)."""
    with Path(path).open(encoding="utf-8") as fh:
        return [n for n, line in enumerate(fh, start=1) if line.strip()]
