"""The Domain spec: everything one domain contributes, exposed through one entry point.

A domain package (``environments/<name>/__init__.py``) builds one :class:`Domain` named
``DOMAIN`` and declares it in ``pyproject.toml``::

    [project.entry-points."rods.domains"]
    retail = "environments.retail:DOMAIN"
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from threading import Lock
from typing import Any, TypeVar

from rods_env.database import Database, Record, Tables, freeze_tables
from rods_env.errors import ConfigError, RodsError
from rods_env.task import Task, ToolCall, Turn, UserProfile, load_tasks
from rods_env.tools import Toolkit

T = TypeVar("T")


class SkillUnavailable(RodsError):
    """A skill found no entities satisfying its preconditions for the requested shape."""


@dataclass(frozen=True)
class Draft:
    """What a skill emits: the user and the turns with gold calls (no id, no signature).

    Attributes:
        user: The simulated user.
        turns: The turns with their gold calls.
        shape: The complete shape the skill used, including structural choices it drew
            itself when the given shape left them open (e.g. which look-up verifies the
            customer, which requests a multi-turn task combines). It is recorded as the
            task's shape, so generating again with it reproduces the structure (the
            signature) with new entities. None means the shape given.
    """

    user: UserProfile
    turns: tuple[Turn, ...]
    shape: Mapping[str, int] | None = None


SkillFn = Callable[[Database, random.Random, Mapping[str, int]], Draft]


@dataclass(frozen=True)
class Skill:
    """A task generator of one kind.

    Attributes:
        name: Short identifier, e.g. ``"cancel_order"``.
        description: One line for docs and summaries.
        generate: ``(db, rng, shape) -> Draft``; picks entities that satisfy the skill's
            preconditions on ``db`` and returns the gold calls (look-ups included), the
            user's facts and the request text. Raises :class:`SkillUnavailable` when no
            entity fits. Must be deterministic given ``rng``, and the same complete shape
            (see :attr:`Draft.shape`) must give the same structure.
        shape: Default shape, e.g. ``{"items": 1}``.
        limits: Inclusive range of each shape axis; *expand* grows one axis by one step.
        writes: Whether the gold calls change the database.
    """

    name: str
    description: str
    generate: SkillFn
    shape: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    writes: bool = True


def scattered(items: Sequence[T], rng: random.Random) -> Iterator[T]:
    """Every item once, in a random order, produced lazily.

    A skill usually takes one of the first few candidates, so shuffling a whole table on
    every draw would dominate synthesis time. A random start and a random stride coprime
    with ``len(items)`` visit each item exactly once in a scattered order, in O(1) setup.

    Args:
        items: The candidates.
        rng: The skill's random generator.
    """
    n = len(items)
    if n == 0:
        return iter(())
    start = rng.randrange(n)
    stride = rng.randrange(1, n) if n > 1 else 1
    while math.gcd(stride, n) != 1:
        stride += 1
    return (items[(start + i * stride) % n] for i in range(n))


_BASE_CACHE: dict[tuple[str, int, str], Tables] = {}
_BASE_LOCK = Lock()


@dataclass(frozen=True, eq=False)
class Domain:
    """One domain: database generator, toolkit, policy, skills and seed tasks.

    Attributes:
        name: Lower-case name, also the entry-point name (``"retail"``).
        title: Name in environment ids (``"Retail"`` gives ``rods/Retail-v0``).
        generate: ``(seed, size) -> tables``; deterministic; ``size`` is one of ``sizes``.
        sizes: Size presets; must include ``"default"`` and ``"tiny"``. For long-context
            variants, ``"long-<n>k"`` sizes (the ``default`` world with about ``n`` thousand
            tokens of padding per customer record, every ``default`` record under the same
            key: see :mod:`rods_env.padding`) or a plain ``"long"`` size.
        toolkit: The domain's :class:`Toolkit` subclass.
        policy: The policy text the agent receives as its system prompt.
        skills: Task generators.
        seeds_path: JSONL file of frozen seed tasks (None if the domain ships none).
        unrelated_write: ``(task, db) -> ToolCall``: a write on the task's own customer that
            the task does not ask for. It must be valid in ``db`` as it is right after the
            task's first gold call (the customer is verified, nothing written yet) and change
            a record that the task's gold never touches. The shared test suite uses it to
            check that collateral changes fail a turn.
        version: Environment version in the id.
        customers: Tables whose records belong to one customer, each with the field that
            names the owner (``{"users": "user_id", "orders": "user_id"}``). With it, the
            customers of the test split and their records are reserved: train tasks never
            touch them (see :mod:`rods_env.splits`). Empty: no entity-disjoint splits.
        policy_checks: The policy's rules as checks over a gold run, ``(domain, task, gold)
            -> what is wrong or None``; synthesis rejects a candidate that breaks one
            (``policy_violation``).
        forbidden_requests: ``(task, db, rng) -> sentences``: requests of the task's own
            customer that the policy forbids (e.g. cancelling a delivered order), worded
            as the customer would; synthesis adds one to a request as a distractor that
            the agent must decline. ``db`` is the state before the task.
        invariants: ``db -> violations``: the domain's state invariants (refunds never
            exceed payments, no negative balances or seats, counts within policy bounds),
            each violation one line; empty when the state is sound. The shared tests check
            them after every fuzzed step. None: the domain states none.
    """

    name: str
    title: str
    generate: Callable[[int, str], Mapping[str, Mapping[str, Record]]]
    sizes: tuple[str, ...]
    toolkit: type[Toolkit]
    policy: str
    skills: tuple[Skill, ...]
    seeds_path: Path | None = None
    unrelated_write: Callable[[Task, Database], ToolCall] | None = None
    version: int = 0
    customers: Mapping[str, str] = field(default_factory=dict)
    policy_checks: tuple[Callable[[Domain, Task, Any], str | None], ...] = ()
    forbidden_requests: Callable[[Task, Database, random.Random], Sequence[str]] | None = None
    invariants: Callable[[Database], list[str]] | None = None

    @property
    def env_id(self) -> str:
        """The Gymnasium id, e.g. ``rods/Retail-v0``."""
        return f"rods/{self.title}-v{self.version}"

    def base(self, seed: int = 0, size: str = "default") -> Tables:
        """The immutable base tables for ``(seed, size)``, generated once per process."""
        if size not in self.sizes:
            raise ConfigError(
                f"unknown size '{size}' for domain {self.name}; sizes: {', '.join(self.sizes)}"
            )
        key = (self.name, int(seed), size)
        tables = _BASE_CACHE.get(key)
        if tables is None:
            with _BASE_LOCK:
                tables = _BASE_CACHE.get(key)
                if tables is None:
                    tables = freeze_tables(self.generate(int(seed), size))
                    _BASE_CACHE[key] = tables
        return tables

    def database(self, seed: int = 0, size: str = "default") -> Database:
        """A fresh episode state over the shared base for ``(seed, size)``."""
        return Database(self.base(seed, size))

    def tools(self, db: Database) -> Toolkit:
        """A toolkit bound to ``db``."""
        return self.toolkit(db)

    @cached_property
    def skill_map(self) -> dict[str, Skill]:
        """Skills by name."""
        return {s.name: s for s in self.skills}

    def skill(self, name: str) -> Skill:
        """The skill called ``name``, or for a composed task's skill (``"a+b"``) the skill
        that draws its requests (:func:`rods_env.synthesis.compose.composite_skill`)."""
        found = self.skill_map.get(name)
        if found is None and "+" in name:
            from rods_env.synthesis.compose import resolve_skill

            found = resolve_skill(self, name)
        if found is None:
            raise ConfigError(
                f"unknown skill '{name}' in domain {self.name}; skills: {', '.join(self.skill_map)}"
            )
        return found

    @cached_property
    def _seed_tasks(self) -> tuple[Task, ...]:
        if self.seeds_path is None or not Path(self.seeds_path).exists():
            return ()
        return tuple(load_tasks(self.seeds_path))

    def seed_tasks(self, split: str | None = None) -> list[Task]:
        """The frozen seed tasks, optionally of one split (``"train"`` or ``"test"``)."""
        if split not in (None, "train", "test"):
            raise ConfigError(f"unknown split '{split}'; use 'train' or 'test'")
        return [t for t in self._seed_tasks if split is None or t.split == split]

    def __repr__(self) -> str:
        return (
            f"Domain({self.name!r}, {len(self.skills)} skills, {len(self.toolkit.names())} tools)"
        )


def clear_base_cache() -> None:
    """Forget generated bases (tests use it to measure generation)."""
    with _BASE_LOCK:
        _BASE_CACHE.clear()


def describe(domain: Domain) -> dict[str, Any]:
    """A JSON-able summary of a domain: sizes, tools, skills, number of seed tasks."""
    return {
        "name": domain.name,
        "env_id": domain.env_id,
        "sizes": list(domain.sizes),
        "tools": list(domain.toolkit.names()),
        "write_tools": sorted(domain.toolkit.write_names()),
        "skills": [s.name for s in domain.skills],
        "seed_tasks": len(domain.seed_tasks()),
    }
