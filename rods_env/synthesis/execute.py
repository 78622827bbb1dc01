"""Execute: run the skill for the planned structure and replay the gold calls.

This is :func:`rods_env.seeds.make_task` (the same steps, the same result for the same
generator), except that the replayed :class:`~rods_env.gold.Gold` is kept with the task so
the later stages never replay it again, and failures become :class:`~.plan.Reject` verdicts
instead of exceptions.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

from rods_env.domain import FRESH_WORLDS, Domain, SkillUnavailable
from rods_env.gold import GOLD_CACHE, Gold, GoldError, replay_gold
from rods_env.signature import compute_signature
from rods_env.splits import generation_database
from rods_env.synthesis.compose import extend
from rods_env.synthesis.deepen import deepen
from rods_env.synthesis.plan import STEPS, Plan, Reject
from rods_env.task import Provenance, Task

PENDING_ID = "pending"
"""Id of a candidate until it is accepted (then :func:`content_id` names it)."""


def world_seed(domain: Domain, plan: Plan, rng: random.Random) -> int:
    """The world a variant is drawn on: the parent's, or a fresh one where every task has
    its own (drawn from the variant's generator, so the same candidate gets the same), like
    the parent's in what its structure depends on when the domain says how
    (:attr:`~rods_env.domain.Domain.fresh_world`)."""
    if not domain.world_per_task:
        return plan.db_seed
    if domain.fresh_world is not None:
        seed = domain.fresh_world(plan.parent, rng)
        if seed < FRESH_WORLDS:
            raise ValueError(f"{domain.name}: a fresh world's seed must be >= {FRESH_WORLDS}")
        return seed
    return FRESH_WORLDS + rng.randrange(1_000_000_000)


@dataclass(frozen=True)
class Candidate:
    """A task under construction, with its replayed gold and the plan it came from.

    Attributes:
        task: The task (id :data:`PENDING_ID` until accepted).
        gold: The gold replay of ``task``.
        plan: The plan that produced it.
    """

    task: Task
    gold: Gold
    plan: Plan


def replay(domain: Domain, task: Task, gold: Gold | None = None) -> tuple[Gold, Task]:
    """Replay ``task``'s gold calls and return the gold and the task with its signature.

    Args:
        domain: The task's domain.
        task: The task.
        gold: Its gold run, when the skill already made its calls (:attr:`Draft.gold`):
            not replayed then.

    Raises:
        Reject: ``execution_error`` when a gold call fails or a tool raises.
    """
    if gold is not None:
        signature = compute_signature(task, gold, domain.toolkit.write_names())
        return gold, task.model_copy(update={"signature": signature})
    try:
        gold = replay_gold(domain, task)
    except GoldError as exc:
        raise Reject("execution_error", str(exc)) from None
    except Exception as exc:  # a tool bug must not stop the data engine
        raise Reject("execution_error", f"a tool raised {type(exc).__name__}: {exc}") from None
    signature = compute_signature(task, gold, domain.toolkit.write_names())
    return gold, task.model_copy(update={"signature": signature})


def precheck_tools(plan: Plan, tools: tuple[str, ...]) -> None:
    """Reject a draft whose gold tools already rule out the planned signature.

    Comparing the tool sequence is free, whereas the full signature needs the gold replay;
    skills that draw their structure at random (e.g. which look-up identifies the user)
    miss the seed's structure often, and are turned away here at no cost.

    Raises:
        Reject: ``signature_mismatch`` (resample: other tools than the seed's; expand: a
            call of the seed is missing).
    """
    old = plan.parent_signature.tools
    if plan.axis in STEPS:
        if tools[: len(old)] != old:
            raise Reject(
                "signature_mismatch",
                f"expand by {plan.axis}: tools {'+'.join(tools)} do not start with {'+'.join(old)}",
            )
    elif plan.mode == "resample":
        if tools != old:
            raise Reject("signature_mismatch", f"tools {'+'.join(tools)} != {'+'.join(old)}")
    elif Counter(old) - Counter(tools):
        raise Reject(
            "signature_mismatch",
            f"expand along {plan.axis}: tools {'+'.join(tools)} lack calls of {'+'.join(old)}",
        )


def calls_key(task: Task) -> str:
    """The gold calls of ``task`` on its database, turn by turn, with what each turn requires
    and the labels of the customer's facts: two tasks with the same calls key have the same
    gold effect and facts, hence the same dedupe key."""
    parts = [task.domain, task.variant, str(task.db_seed), task.db_size, *sorted(task.user.facts)]
    for turn in task.turns:
        parts.append("\x1e".join(c.key() for c in turn.calls))
        parts.append(repr((turn.outputs, turn.withheld_tools, sorted(turn.hidden_facts))))
    return "\x1d".join(parts)


def execute(
    domain: Domain,
    plan: Plan,
    rng: random.Random,
    seen_calls: Collection[str] = (),
) -> Candidate:
    """Generate a task for ``plan`` with new entities drawn by ``rng``, and replay its gold.

    Args:
        domain: The domain.
        plan: What to build.
        rng: The variant's own generator (the skill draws entities from it).
        seen_calls: :func:`calls_key` of tasks already in the pool: a draft with the same
            calls is a duplicate, known before its gold is replayed.

    Raises:
        Reject: ``skill_unavailable`` when the skill finds no entities for the shape;
            ``duplicate`` when the draft's calls are in ``seen_calls``;
            ``execution_error`` when the skill or a gold call fails.
    """
    # a step that extends the parent keeps its world; a new draft may take a fresh one
    db_seed = plan.db_seed if plan.axis in STEPS else world_seed(domain, plan, rng)
    # entities are drawn from the customers of the parent's split only (rods_env.splits)
    db = generation_database(domain, db_seed, plan.db_size, plan.parent.split)
    skill_name = plan.skill.name
    ran: Gold | None = None  # the skill's own gold run, when it made its calls on ``db``
    try:
        if plan.axis in ("join", "append", "chain"):
            gold = GOLD_CACHE.get(domain, plan.parent)
            skill_name, draft = extend(
                domain,
                plan.parent,
                gold,
                db.base,
                rng,
                join=plan.axis == "join",
                chain=plan.axis == "chain",
            )
        elif plan.axis == "deepen":
            draft = deepen(domain, plan.parent, GOLD_CACHE.get(domain, plan.parent), rng)
        else:
            draft = plan.skill.generate(db, rng, dict(plan.shape))
            ran = draft.gold
        precheck_tools(plan, tuple(c.name for turn in draft.turns for c in turn.calls))
        parent = plan.parent
        # The skill may report the complete shape it used (structural choices it drew
        # itself); recording it lets a later resample reproduce the structure.
        drawn = getattr(draft, "shape", None)
        task = Task(
            id=PENDING_ID,
            domain=domain.name,
            skill=skill_name,
            shape=dict(plan.shape if drawn is None else drawn),
            split=parent.split,
            # a step of STEPS keeps the parent's turns, and so its augmentation
            variant=parent.variant if plan.axis in STEPS else "base",
            db_seed=db_seed,
            db_size=plan.db_size,
            user=draft.user,
            turns=draft.turns,
            provenance=Provenance(
                origin="synthesized",
                parent_id=parent.id,
                generation=parent.provenance.generation + 1,
                mode=plan.mode,
                augment=parent.provenance.augment if plan.axis in STEPS else None,
                step=plan.axis,
            ),
        )
    except SkillUnavailable as exc:
        raise Reject("skill_unavailable", f"{plan.skill.name} {plan.shape}: {exc}") from None
    except Reject:
        raise
    except Exception as exc:  # a skill bug is counted, not fatal
        raise Reject(
            "execution_error", f"skill {plan.skill.name} raised {type(exc).__name__}: {exc}"
        ) from None
    if seen_calls and calls_key(task) in seen_calls:
        raise Reject("duplicate", "same gold calls as a task already in the pool")
    gold, task = replay(domain, task, ran)
    return Candidate(task=task, gold=gold, plan=plan)


def content_id(task: Task) -> str:
    """A stable id from the task's content: ``<domain>-syn-<hash>``."""
    return f"{task.domain}-syn-{task.content_hash()[:12]}"
