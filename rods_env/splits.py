"""Splits: which tasks are test tasks, and entity-disjoint generation.

**The split rule** (one, used everywhere: ``reset``'s pools, ``options["split"]``, training
pools, synthesis): a task whose ``split`` is ``"test"`` is a test task; every other task is a
train task, a task without a split (a pool task of unknown origin, a synthesized one)
included (:func:`split_of`, :func:`in_split`). A test task is always labelled, because the
test split is reserved; an unlabelled task is one training may use.

A domain that declares :attr:`rods_env.domain.Domain.customers` (tables whose records
belong to one customer, and the field naming the owner) has its customers divided once and
for all: one in :data:`TEST_SHARE` is a *test* customer, by a stable hash of the domain name
and the customer's key (:func:`customer_split`). Test tasks are generated only on test
customers, train tasks only on the others, so a synthesized train task can never reproduce
a test task's effect (same return of the same item of the same order):

- :func:`generation_database` is the state a skill draws entities from: a view of the
  database holding only the customers of one split and their records (shared tables such
  as products or flights stay whole). The gold calls still run on the full database.
- :func:`task_customers` names the customers whose records a task touches, from its gold
  run, and :func:`leaked_customers` those outside the task's split; synthesis rejects such
  a candidate (``split_leak``). A task without a split must not touch test customers
  either (it is a train task).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from threading import Lock
from typing import Any

from rods_env.database import Database, Tables, freeze_tables
from rods_env.domain import Domain
from rods_env.errors import ConfigError
from rods_env.gold import Gold
from rods_env.task import Task

TEST_SHARE = 4
"""One customer in this many is a test customer."""

SPLITS: tuple[str, ...] = ("train", "test")

_VIEWS: dict[tuple[str, int, str, str], Tables] = {}
_VIEWS_LOCK = Lock()


def split_of(task: Task) -> str:
    """The split of ``task`` by the split rule (see the module doc): ``"test"`` for a test
    task, ``"train"`` for any other, one without a split included."""
    return "test" if task.split == "test" else "train"


def in_split(tasks: Iterable[Task], split: str | None) -> list[Task]:
    """The tasks of ``split`` by the split rule (:func:`split_of`), in order; None: all.

    Raises:
        ConfigError: for a split that is not ``train``, ``test`` or None.
    """
    if split is None:
        return list(tasks)
    if split not in SPLITS:
        raise ConfigError(f"split must be 'train', 'test' or None, got {split!r}")
    return [t for t in tasks if ("test" if t.split == "test" else "train") == split]


def customer_split(domain: str, customer: str) -> str:
    """The split of customer ``customer`` of domain ``domain`` (stable across processes)."""
    digest = hashlib.sha256(f"{domain}\x1f{customer}".encode()).digest()
    return "test" if int.from_bytes(digest[:4], "big") % TEST_SHARE == 0 else "train"


def _owner(record: Any, field: str) -> str | None:
    value = getattr(record, field, None)
    return value if isinstance(value, str) else None


def split_tables(domain: Domain, seed: int, size: str, split: str) -> Tables:
    """The tables of ``(seed, size)`` with only the customers of ``split`` and their records.

    Built once per process and split; tables that no customer owns are shared unchanged.

    Raises:
        ValueError: for a split other than ``"train"`` or ``"test"``.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    key = (domain.name, int(seed), size, split)
    view = _VIEWS.get(key)
    if view is not None:
        return view
    with _VIEWS_LOCK:
        view = _VIEWS.get(key)
        if view is None:
            base = domain.base(seed, size)
            tables: dict[str, Mapping[str, Any]] = {}
            for name, rows in base.items():
                field = domain.customers.get(name)
                if field is None:
                    tables[name] = rows
                    continue
                tables[name] = {
                    k: r
                    for k, r in rows.items()
                    if (owner := _owner(r, field)) is None
                    or customer_split(domain.name, owner) == split
                }
            view = _VIEWS[key] = freeze_tables(tables)
    return view


def generation_database(domain: Domain, seed: int, size: str, split: str | None) -> Database:
    """The state a skill draws a task of ``split`` from (see the module docstring).

    The full database when the domain declares no customers.
    """
    if not domain.customers:
        return domain.database(seed, size)
    return Database(split_tables(domain, seed, size, "test" if split == "test" else "train"))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str) and value:
        yield value


def task_customers(domain: Domain, task: Task, gold: Gold) -> set[str]:
    """Customers whose records the task touches.

    A record is touched when its key is a gold call's string argument or a gold call's
    whole output (a look-up that returns an id), or when the gold changes it.
    """
    if not domain.customers:
        return set()
    base = domain.base(task.db_seed, task.db_size)
    owned = [(base[t], f) for t, f in domain.customers.items() if t in base]
    found: set[str] = set()

    def look(key: str) -> None:
        for rows, field in owned:
            record = rows.get(key)
            if record is not None:
                owner = _owner(record, field)
                if owner is not None:
                    found.add(owner)

    for call in task.gold_calls:
        for leaf in _strings(call.arguments):
            look(leaf)
    for out in gold.call_outputs:
        if isinstance(out, str):
            look(out)
    for (table, _key), record in gold.final.items():
        field = domain.customers.get(table)
        if field is not None:
            owner = _owner(record, field)
            if owner is not None:
                found.add(owner)
    return found


def leaked_customers(domain: Domain, task: Task, gold: Gold) -> list[str]:
    """Customers the task touches that belong to another split than the task's, sorted."""
    split = split_of(task)
    return sorted(
        c for c in task_customers(domain, task, gold) if customer_split(domain.name, c) != split
    )
