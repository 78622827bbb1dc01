"""The Domain spec: everything one domain contributes, exposed through one entry point.

A domain package (``environments/<name>/__init__.py``) builds one :class:`Domain` named
``DOMAIN`` and declares it in ``pyproject.toml``::

    [project.entry-points."rods.domains"]
    retail = "environments.retail:DOMAIN"
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from threading import RLock
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from rods_env.database import Database, Record, Tables, freeze_tables
from rods_env.errors import ConfigError, RodsError
from rods_env.task import Task, ToolCall, Turn, UserProfile, load_tasks
from rods_env.tools import Toolkit

if TYPE_CHECKING:
    from rods_env.gold import Gold

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
        gold: The gold run of the turns' calls, when the skill made them, in order, on the
            state it was given, as :func:`rods_env.gold.replay_gold` runs them
            (:class:`rods_env.gold.GoldRun`): synthesis then does not replay them. None:
            replayed.
    """

    user: UserProfile
    turns: tuple[Turn, ...]
    shape: Mapping[str, int] | None = None
    gold: Gold | None = None


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
        grows: ``shape -> axes``: the axes of ``limits`` whose growth changes the task of
            that shape (a skill whose turns may or may not take several entities: growing
            ``items`` changes nothing when none does). None: every axis.
    """

    name: str
    description: str
    generate: SkillFn
    shape: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    writes: bool = True
    grows: Callable[[Mapping[str, int]], Collection[str]] | None = None


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
_WORLD_CACHE: OrderedDict[tuple[str, int, str], Tables] = OrderedDict()
_SEED_WORLD_CACHE: OrderedDict[tuple[str, int, str], Tables] = OrderedDict()
_BASE_LOCK = RLock()  # a generator may ask for another size of its world
WORLD_CACHE_SIZE = 256
"""Fresh worlds kept per process for a domain whose every task has its own
(:attr:`Domain.world_per_task`: thousands of them; least recently used dropped). Other
domains have a few bases, kept for the process (views and indexes share them)."""

FRESH_WORLDS = 1_000_000_000
"""In a domain where every task has its own world (:attr:`Domain.world_per_task`), a
variant's world seed is drawn at or above this, apart from the seed tasks' (which stay far
below it), so no variant ever shares a seed task's world."""

SEED_WORLD_CACHE_SIZE = 1024
"""Worlds below :data:`FRESH_WORLDS` kept per process (the seed tasks' worlds: a few hundred
at each size, read again by every round of synthesis around them), apart from the fresh
worlds, so the fresh worlds a round draws do not push them out."""


@dataclass(frozen=True)
class TurnRules:
    """How a turn is judged besides its required outputs (see :mod:`rods_env.rewards`).

    Attributes:
        state: ``"effect"``: the records the turn's gold changes hold the gold values and
            nothing else changed during the turn (rods' rule). ``"full"``: the whole state
            equals the gold's after that turn, whatever earlier turns did (BFCL's state
            check, stricter: an earlier mistake fails every later turn).
        results: ``"episode"``: each result text of the turn's gold calls must be among the
            agent's tool results so far, with multiplicity (BFCL's response check: the
            agent made the look-ups, not only guessed their answers); ``"turn"``: among
            its results of this turn (stricter: work done a turn early does not count
            again); ``"off"``: not checked.
    """

    state: Literal["effect", "full"] = "effect"
    results: Literal["off", "episode", "turn"] = "off"


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
        task_tools: ``task -> tool names``: the tools a task offers the agent (e.g. the
            functions of the API classes the task involves). None: every tool.
        user: Builds the domain's default user simulator (None: :class:`rods_env.user.
            ScriptedUser`); an environment given a user keeps it.
        confirm_writes: Whether an agent confirms with the user before a write (rods'
            policies ask for it, and the oracle does); False for a world where a reply
            ends the turn (BFCL's protocol).
        rules: How turns are judged (:class:`TurnRules`).
        world_per_task: Every task has its own generated world: seed task ``i`` is drawn
            on ``db_seed`` ``i`` and each synthesized variant on a fresh one (a domain whose
            state is one person's: a file system, a car, a portfolio). False: every seed
            task on world 0, variants on their parent's.
        seed_augments: Augmentations (:data:`rods_env.synthesis.AUGMENTS`) that part of the
            seed set carries, in equal shares with the base tasks
            (:func:`rods_env.seeds.build_seed_tasks`).
        exploits: Panel agents (:data:`rods_env.exploits.EXTRA_EXPLOITS`) this domain's
            tasks are also played against, besides :data:`rods_env.exploits.EXPLOITS`.
        brief_policy: A short policy for the brief prompt (``ToolEnv(prompt="brief")``): the
            rules an agent needs, in a few lines. None: the domain has no brief prompt.
        brief_tools: Tools the brief prompt always offers besides the task's own (the
            look-ups any task of the domain may start with).
        request_skills: Skills of one request that *expand* composes into a task (``join``,
            ``append``: :mod:`rods_env.synthesis.compose`) instead of :attr:`skills` (a
            domain whose skills draft whole conversations offers its single actions here).
            Seed tasks are drawn from :attr:`skills` only. Empty: :attr:`skills`.
        fresh_world: In a domain with :attr:`world_per_task`, ``(task, rng) -> world seed``:
            the fresh world a new variant of ``task`` is drawn on, like the task's world in
            what its structure depends on (who is logged in where, how many entries a
            listing a skill reads holds); its seed must be at or above
            :data:`FRESH_WORLDS`. None: a fresh world drawn at
            random.
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
    task_tools: Callable[[Task], Collection[str]] | None = None
    user: Callable[[], Any] | None = None
    confirm_writes: bool = True
    rules: TurnRules = field(default_factory=TurnRules)
    world_per_task: bool = False
    seed_augments: tuple[str, ...] = ()
    exploits: tuple[str, ...] = ()
    brief_policy: str | None = None
    brief_tools: tuple[str, ...] = ()
    request_skills: tuple[Skill, ...] = ()
    fresh_world: Callable[[Task, random.Random], int] | None = None

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
        if not self.world_per_task:
            tables = _BASE_CACHE.get(key)
            if tables is None:
                with _BASE_LOCK:
                    tables = _BASE_CACHE.get(key)
                    if tables is None:
                        tables = freeze_tables(self.generate(int(seed), size))
                        _BASE_CACHE[key] = tables
            return tables
        fresh = int(seed) >= FRESH_WORLDS
        cache = _WORLD_CACHE if fresh else _SEED_WORLD_CACHE
        with _BASE_LOCK:
            tables = cache.get(key)
            if tables is None:
                tables = cache[key] = freeze_tables(self.generate(int(seed), size))
                while len(cache) > (WORLD_CACHE_SIZE if fresh else SEED_WORLD_CACHE_SIZE):
                    cache.popitem(last=False)
            else:
                cache.move_to_end(key)
        return tables

    def database(self, seed: int = 0, size: str = "default") -> Database:
        """A fresh episode state over the shared base for ``(seed, size)``."""
        return Database(self.base(seed, size))

    def tools(self, db: Database) -> Toolkit:
        """A toolkit bound to ``db``."""
        return self.toolkit(db)

    def tools_for(self, task: Task) -> frozenset[str]:
        """The names of the tools ``task`` offers (:attr:`task_tools`; every tool when None)."""
        names = frozenset(self.toolkit.names())
        if self.task_tools is None:
            return names
        return names & frozenset(self.task_tools(task))

    def brief_tools_for(self, task: Task) -> frozenset[str]:
        """The tools the brief prompt offers for ``task``: the tools of its gold calls and
        of its withheld tools, plus :attr:`brief_tools`, within :meth:`tools_for`.

        The full prompt offers every tool of the domain (4-5k tokens of schemas and policy
        for a small model's context); the brief one about a fifth of that. The task is
        the same and is scored the same; what the agent is shown is smaller.
        """
        names = {call.name for turn in task.turns for call in turn.calls}
        names.update(name for turn in task.turns for name in turn.withheld_tools)
        names.update(self.brief_tools)
        return self.tools_for(task) & frozenset(names)

    @cached_property
    def skill_map(self) -> dict[str, Skill]:
        """Skills by name (:attr:`skills` and :attr:`request_skills`)."""
        return {s.name: s for s in (*self.skills, *self.request_skills)}

    @property
    def composable(self) -> tuple[Skill, ...]:
        """The skills *expand* draws one more request from (:attr:`request_skills`, else
        :attr:`skills`)."""
        return self.request_skills or self.skills

    def skill(self, name: str) -> Skill:
        """The skill called ``name``. (A composed task's skill, ``"a+b"``, is drawn by the
        composition of its requests, which belongs to synthesis:
        :func:`rods_env.synthesis.compose.resolve_skill`.)"""
        found = self.skill_map.get(name)
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
        _WORLD_CACHE.clear()
        _SEED_WORLD_CACHE.clear()


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
