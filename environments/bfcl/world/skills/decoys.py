"""The tools a task offers: the functions of the classes it needs and of one decoy class
it does not (as BFCL's tasks sometimes list a class they never use), and the write in
that decoy class that the shared tests inject as a collateral change."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from environments.bfcl.apis import functions, functions_of
from environments.bfcl.world.skills.recipes import RECIPE_BY_NAME
from environments.bfcl.world.state import TABLE
from rods_env.database import Database
from rods_env.task import ToolCall

DECOYS: tuple[str, ...] = ("VehicleControlAPI", "TradingBot", "MessageAPI", "GorillaFileSystem")
"""Classes a task may offer without needing them (each has a write that is always valid:
:func:`unrelated_write`)."""


def decoy(task: Any, classes: Sequence[str]) -> str | None:
    """The class ``task`` offers besides the ones it needs (as BFCL's tasks sometimes list
    a class they never use): one of :data:`DECOYS` not among ``classes``, drawn from the
    task's world (so every variant of a task offers the same)."""
    return _decoy(task.db_seed, classes)


def _decoy(db_seed: int, classes: Sequence[str]) -> str | None:
    options = [c for c in DECOYS if c not in classes]
    if not options:
        return None
    digest = hashlib.sha256(f"bfcl-decoy:{db_seed}".encode()).digest()
    return options[int.from_bytes(digest[:4], "big") % len(options)]


def task_tools(task: Any) -> frozenset[str]:
    """The functions a task offers: those of its skill's classes (each skill of a composed
    task), of every class its gold calls or withheld tools use, and of one class it does
    not need (:func:`decoy`)."""
    return _task_tools(str(task.skill), _tools_used(task), task.db_seed)


def _tools_used(task: Any) -> tuple[str, ...]:
    """The names of the task's gold calls and withheld tools, turn by turn, in order."""
    return tuple(
        name
        for turn in task.turns
        for name in (*(call.name for call in turn.calls), *turn.withheld_tools)
    )


@lru_cache(maxsize=4096)
def _task_tools(skill: str, used: tuple[str, ...], db_seed: int) -> frozenset[str]:
    """:func:`task_tools` of a task with these parts (a task's variants and its checks ask
    for the same again)."""
    classes = _needed_classes(skill, used)
    extra = _decoy(db_seed, classes)
    return frozenset(functions_of([*classes, *([extra] if extra else [])]))


def needed_classes(task: Any) -> list[str]:
    """The classes a task's skills name and its gold calls and withheld tools use."""
    return _needed_classes(str(task.skill), _tools_used(task))


def _needed_classes(skill: str, used: Sequence[str]) -> list[str]:
    table = functions()
    classes: dict[str, None] = {}
    for name in skill.split("+"):
        recipe = RECIPE_BY_NAME.get(name)
        if recipe is not None:
            classes.update(dict.fromkeys(recipe.classes))
    for name in used:
        if name in table:
            classes[table[name].owner] = None
    return list(classes)


def unrelated_write(task: Any, db: Database) -> ToolCall:
    """A write in the task's decoy class (valid at any point, and never a change the gold
    makes): the shared tests inject it to check that collateral changes fail a turn."""
    cls = decoy(task, needed_classes(task))
    if cls == "VehicleControlAPI":
        return ToolCall(name="set_navigation", arguments={"destination": "12 Unrelated Road"})
    if cls == "TradingBot":
        trading = db.get(TABLE, cls).instance()
        stock = sorted(set(trading.stocks) - set(trading.watch_list))[0]
        return ToolCall(name="add_to_watchlist", arguments={"stock": stock})
    if cls == "MessageAPI":
        return ToolCall(name="add_contact", arguments={"user_name": "Unrelated Person"})
    return ToolCall(name="mkdir", arguments={"dir_name": "unrelated_folder"})
