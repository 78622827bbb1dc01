"""Plan: from a seed task, choose the structure of the next variant.

*resample* keeps the seed's skill and shape (so the signature should come out equal);
*expand* takes one step: it grows one shape axis of the skill by one (one more item, one
more passenger, one more turn, within :attr:`rods_env.domain.Skill.limits`), or adds one
request of the same customer (:mod:`rods_env.synthesis.compose`: ``join``, in the last
turn; ``append``, in a new turn), or makes a value the customer states one the agent must
find (``deepen``, :mod:`rods_env.synthesis.deepen`). The steps open to a seed are tried
round-robin over the variant index, the attempt and the seed's generation: the skill's
axes first, in declared order, skipping axes at their maximum; then ``join``, ``append``
and ``deepen``. So a seed's expansions cover every step that can grow it, and a chain of
generations alternates between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rods_env.domain import Domain, Skill
from rods_env.errors import Reject
from rods_env.gold import GOLD_CACHE
from rods_env.signature import compute_signature
from rods_env.task import Signature, Task

Mode = Literal["resample", "expand"]
MODES: tuple[str, ...] = ("resample", "expand")

GROW: tuple[str, ...] = ("shape", "join", "append", "deepen", "chain")
"""What *expand* may grow: ``shape`` (an axis of the skill's limits), ``join`` (one more
request in the last turn: width), ``append`` (one more request in a new turn: turns),
``deepen`` (a stated value the agent must now find: dependency depth), ``chain`` (one more
request, in a new turn, that takes a value an earlier request's call returned: dependency
depth across requests)."""

STEPS: tuple[str, ...] = ("join", "append", "deepen", "chain")
"""The expansion steps that come from the domain's tools and customers, not a skill's
limits (``Plan.axis`` names them)."""


@dataclass(frozen=True)
class Plan:
    """What the Execute stage should build.

    Attributes:
        parent: The seed task.
        skill: The skill that generates the variant (the parent's skill).
        mode: ``"resample"`` or ``"expand"``.
        shape: Shape passed to the skill.
        axis: What *expand* grows: a shape axis of the skill, or one of :data:`STEPS`
            (None for *resample*).
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


def resolve(domain: Domain, name: str) -> Skill | None:
    """The domain's skill ``name``, or the composite of a composed task's skills."""
    from rods_env.synthesis.compose import resolve_skill

    return resolve_skill(domain, name)


def steps(domain: Domain, parent: Task, skill: Skill, grow: tuple[str, ...] = GROW) -> list[str]:
    """The expansion steps open to ``parent``, in the order they are tried: the skill's
    axes below their maximum (a task of one skill), then ``join`` and ``append`` (in a
    domain that declares its customers, or whose every task has a world of one person's),
    then ``deepen`` (when a value the customer states could be found with the tools
    instead), then ``chain`` (in such a domain that offers requests of one action,
    :attr:`~rods_env.domain.Domain.request_skills`, which can build on what a conversation
    created).

    The steps of :data:`STEPS` keep the parent's turns as they are, augmentation included
    (a held-back fact, a withheld turn, a distractor stay where they are), so they apply to
    every variant but long context (whose world is derived, not drawn from).
    """
    out: list[str] = []
    if "shape" in grow and not parent.composed:
        out += growable_axes(skill, dict(parent.shape))
    if parent.variant != "long_context":
        composes = bool(domain.customers) or domain.world_per_task  # one person's world
        if composes:
            out += [step for step in ("join", "append") if step in grow]
        if "deepen" in grow:
            from rods_env.synthesis.deepen import can_deepen

            if can_deepen(domain, parent):
                out.append("deepen")
        if composes and domain.request_skills and "chain" in grow:
            out.append("chain")
    return out


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
    """Axes of ``skill.limits`` still below their maximum at ``shape``, in declared order
    (those whose growth changes the task, where the skill says: :attr:`Skill.grows`)."""
    shape = full_shape(skill, shape)
    axes = [axis for axis, (_lo, hi) in skill.limits.items() if shape[axis] < hi]
    if skill.grows is not None:
        grows = skill.grows(shape)
        axes = [axis for axis in axes if axis in grows]
    return axes


def plan(
    domain: Domain,
    parent: Task,
    mode: str,
    index: int = 0,
    attempt: int = 0,
    grow: tuple[str, ...] = GROW,
) -> Plan:
    """Choose the structure of variant number ``index`` of ``parent``.

    Args:
        domain: The parent's domain.
        parent: The seed task.
        mode: ``"resample"`` or ``"expand"``.
        index: Variant number; *expand* takes step ``(index + attempt + generation) mod
            (open steps)`` of :func:`steps`.
        attempt: The try for this variant: a failed try moves on to the next step.
        grow: What *expand* may grow (see :data:`GROW`).

    Raises:
        Reject: ``unknown_skill`` when the domain has no skill of that name,
            ``cannot_expand`` when no step can grow the task (every axis at its maximum,
            and no customers to compose requests of, or an augmented variant).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    skill = resolve(domain, parent.skill)
    if skill is None:
        raise Reject("unknown_skill", f"domain {domain.name} has no skill '{parent.skill}'")
    shape = full_shape(skill, dict(parent.shape))
    axis = None
    if mode == "expand":
        open_steps = steps(domain, parent, skill, grow)
        if not open_steps:
            limits = ", ".join(f"{a}<={hi}" for a, (_lo, hi) in skill.limits.items())
            raise Reject(
                "cannot_expand",
                f"skill {skill.name} at shape {shape} has no axis below its limit"
                + (f" ({limits})" if limits else " (it declares no limits)")
                + ", and no other step applies",
            )
        generation = parent.provenance.generation
        axis = open_steps[(index + attempt + generation) % len(open_steps)]
        if axis not in STEPS:
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
