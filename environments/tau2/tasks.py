"""τ²-bench's tasks and splits, read from the installed package, and their rods views.

rods' rollouts, evaluation, data engine and pools handle :class:`rods_env.task.Task`; a
τ²-bench task enters them as a rods task that *names* it: the id ``tau2-airline:12``, the
domain, the split, a skill label for breakdowns (the gold's write tools, or telecom's issue
type), one turn whose request is the reason for the call, whose calls are the gold actions
and whose outputs are the ``communicate_info`` strings. Everything the episode and the
reward use comes from τ²-bench's own task, looked up by that id.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any, Literal

from environments.tau2.package import domain_dir, tau2_module
from rods_env.errors import ConfigError
from rods_env.task import Task, ToolCall, Turn, UserProfile

SPLITS = ("train", "test")
"""τ²-bench's splits that rods uses (telecom's ``base`` is their union)."""

_LOCK = threading.Lock()


@functools.cache
def _splits(domain: str) -> dict[str, tuple[str, ...]]:
    io = tau2_module("tau2.utils.io_utils")
    data = io.load_file(domain_dir(domain) / "split_tasks.json")
    return {name: tuple(str(i) for i in ids) for name, ids in data.items()}


def split_ids(domain: str, split: str) -> tuple[str, ...]:
    """τ²-bench's ids of one split of ``domain`` (``train``, ``test``, and what else the
    package ships, e.g. telecom's ``full``)."""
    splits = _splits(domain)
    if split not in splits:
        raise ConfigError(
            f"τ²-bench's {domain} has no split '{split}'; splits: {', '.join(sorted(splits))}"
        )
    return splits[split]


@functools.cache
def tau2_tasks(domain: str) -> dict[str, Any]:
    """τ²-bench's task models of the train and test splits of ``domain``, by τ²-bench id
    (validated with τ²-bench's own ``Task`` model, read once per process)."""
    with _LOCK:
        io = tau2_module("tau2.utils.io_utils")
        model = tau2_module("tau2.data_model.tasks").Task
        data = io.load_file(domain_dir(domain) / "tasks.json")
        if isinstance(data, dict) and "tasks" in data:
            data = data["tasks"]
        wanted = {i for s in SPLITS for i in split_ids(domain, s)}
        found = {str(t["id"]): t for t in data if str(t["id"]) in wanted}
        missing = wanted - set(found)
        if missing:
            raise ConfigError(
                f"τ²-bench's {domain} split names {len(missing)} tasks that tasks.json lacks"
            )
        return {i: model.model_validate(found[i]) for i in sorted(found, key=_order)}


def _order(task_id: str) -> tuple[int, str]:
    return (int(task_id), "") if task_id.isdigit() else (1 << 30, task_id)


def rods_id(rods_domain: str, tau2_id: str) -> str:
    """The rods id of τ²-bench task ``tau2_id`` (``tau2-airline:12``)."""
    return f"{rods_domain}:{tau2_id}"


def tau2_id(rods_domain: str, task_id: str) -> str:
    """τ²-bench's id inside a rods id.

    Raises:
        ConfigError: when ``task_id`` is not an id of ``rods_domain``.
    """
    prefix = f"{rods_domain}:"
    if not task_id.startswith(prefix):
        raise ConfigError(f"'{task_id}' is not a task id of {rods_domain} ({prefix}<id>)")
    return task_id[len(prefix) :]


def skill_of(domain: str, task: Any, write_tools: frozenset[str]) -> str:
    """A label for per-skill breakdowns: telecom's issue type, else the gold's write tools
    (``cancel_reservation+update_reservation_flights``; ``no_write`` when none)."""
    if domain == "telecom" and task.id.startswith("[") and "]" in task.id:
        return task.id[1 : task.id.index("]")]
    actions = task.evaluation_criteria.actions if task.evaluation_criteria else None
    writes = sorted({a.name for a in actions or [] if a.name in write_tools})
    return "+".join(writes) or "no_write"


def _request(task: Any) -> str:
    if task.ticket and task.user_scenario is None:
        return str(task.ticket)
    instructions = task.user_scenario.instructions
    reason = getattr(instructions, "reason_for_call", None)
    return str(reason if reason else instructions)


def rods_task(
    rods_domain: str,
    domain: str,
    task: Any,
    split: Literal["train", "test"] | None,
    write_tools: frozenset[str],
) -> Task:
    """The rods view of τ²-bench task ``task`` (see the module docstring)."""
    criteria = task.evaluation_criteria
    calls = tuple(
        ToolCall(name=a.name, arguments=dict(a.arguments))
        for a in (criteria.actions or [] if criteria else [])
    )
    outputs = tuple(criteria.communicate_info or []) if criteria else ()
    persona = task.user_scenario.persona if task.user_scenario is not None else None
    return Task(
        id=rods_id(rods_domain, str(task.id)),
        domain=rods_domain,
        skill=skill_of(domain, task, write_tools),
        split=split,
        user=UserProfile(name=f"τ²-bench {domain} customer", persona=persona or ""),
        turns=(Turn(request=_request(task), calls=calls, outputs=outputs),),
    )


def split_of(domain: str, tau2_task_id: str) -> Literal["train", "test"] | None:
    """``train`` or ``test`` (None when in neither)."""
    if tau2_task_id in split_ids(domain, "train"):
        return "train"
    if tau2_task_id in split_ids(domain, "test"):
        return "test"
    return None


def select(tasks: Sequence[Task], split: str | None) -> list[Task]:
    """The tasks of ``split`` (all for None)."""
    if split not in (None, *SPLITS):
        raise ConfigError(f"unknown split '{split}'; use 'train' or 'test'")
    return [t for t in tasks if split is None or t.split == split]
