"""Plan: from a seed task, choose the structure of the next variant.

*resample* keeps the seed's skill and shape (so the signature should come out equal);
*expand* grows one shape axis of the skill by one step (one more item, one more passenger,
one more turn). Axes are tried round-robin over the variant index, in the order the skill
declares them in :attr:`rods_env.domain.Skill.limits`, skipping axes already at their
maximum, so a seed's expansions cover every axis that can grow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rods_env.domain import Domain, Skill
from rods_env.gold import GOLD_CACHE
from rods_env.signature import compute_signature
from rods_env.task import Signature, Task

Mode = Literal["resample", "expand"]
MODES: tuple[str, ...] = ("resample", "expand")


class Reject(Exception):
    """A stage's verdict that the candidate is invalid.

    Args:
        reason: A short code counted in summaries (e.g. ``"signature_mismatch"``).
        detail: What exactly was wrong, for logs.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Plan:
    """What the Execute stage should build.

    Attributes:
        parent: The seed task.
        skill: The skill that generates the variant (the parent's skill).
        mode: ``"resample"`` or ``"expand"``.
        shape: Shape passed to the skill.
        axis: The shape axis grown by *expand* (None for *resample*).
        db_seed: Database seed of the variant (the parent's).
        db_size: Database size of the variant (the parent's).
        variant: The parent's variant, re-applied to the new entities so the structure
            (a withheld turn, a hidden fact, a long database) is kept.
        parent_signature: The parent's signature (computed when the task has none).
    """

    parent: Task
    skill: Skill
    mode: str
    shape: dict[str, int]
    axis: str | None
    db_seed: int
    db_size: str
    variant: str
    parent_signature: Signature


def task_signature(domain: Domain, task: Task) -> Signature:
    """The task's signature, computed from its (cached) gold replay when it has none."""
    if task.signature is not None:
        return task.signature
    gold = GOLD_CACHE.get(domain, task)
    return compute_signature(task, gold, domain.toolkit.write_names())


def full_shape(skill: Skill, shape: dict[str, int]) -> dict[str, int]:
    """The skill's default shape overridden by ``shape`` (missing axes take defaults)."""
    out = dict(skill.shape)
    out.update(shape)
    for axis, (lo, _hi) in skill.limits.items():
        out.setdefault(axis, lo)
    return out


def growable_axes(skill: Skill, shape: dict[str, int]) -> list[str]:
    """Axes of ``skill.limits`` still below their maximum at ``shape``, in declared order."""
    shape = full_shape(skill, shape)
    return [axis for axis, (_lo, hi) in skill.limits.items() if shape[axis] < hi]


def plan(domain: Domain, parent: Task, mode: str, index: int = 0) -> Plan:
    """Choose the structure of variant number ``index`` of ``parent``.

    Args:
        domain: The parent's domain.
        parent: The seed task.
        mode: ``"resample"`` or ``"expand"``.
        index: Variant number; *expand* grows axis ``index mod (growable axes)``.

    Raises:
        Reject: ``unknown_skill`` when the domain has no skill of that name,
            ``cannot_expand`` when every axis is at its maximum (or the skill has none).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    skill = domain.skill_map.get(parent.skill)
    if skill is None:
        raise Reject("unknown_skill", f"domain {domain.name} has no skill '{parent.skill}'")
    shape = full_shape(skill, dict(parent.shape))
    axis = None
    if mode == "expand":
        axes = growable_axes(skill, shape)
        if not axes:
            limits = ", ".join(f"{a}<={hi}" for a, (_lo, hi) in skill.limits.items())
            raise Reject(
                "cannot_expand",
                f"skill {skill.name} at shape {shape} has no axis below its limit"
                + (f" ({limits})" if limits else " (it declares no limits)"),
            )
        axis = axes[index % len(axes)]
        shape[axis] += 1
    return Plan(
        parent=parent,
        skill=skill,
        mode=mode,
        shape=shape,
        axis=axis,
        db_seed=parent.db_seed,
        db_size=parent.db_size,
        variant=parent.variant,
        parent_signature=task_signature(domain, parent),
    )
