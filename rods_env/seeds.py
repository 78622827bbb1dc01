"""Building tasks from skills, and the frozen seed sets of the domains.

Regenerate a domain's seed set (bit-identical on every machine)::

    python -m rods_env.seeds retail            # writes environments/retail/seeds.jsonl
    python -m rods_env.seeds retail --check    # verifies the committed file
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rods_env.domain import Domain, Skill, SkillUnavailable
from rods_env.errors import RodsError
from rods_env.gold import replay_gold
from rods_env.signature import compute_signature
from rods_env.splits import generation_database
from rods_env.task import Provenance, Task, dump_tasks


def make_task(
    domain: Domain,
    skill: Skill,
    rng: random.Random,
    *,
    task_id: str,
    db_seed: int = 0,
    db_size: str = "default",
    shape: Mapping[str, int] | None = None,
    split: str | None = None,
    provenance: Provenance | None = None,
) -> Task:
    """Run ``skill`` on the ``(db_seed, db_size)`` database and return a complete task.

    The skill draws its entities from the customers of ``split`` only (None counts as
    train; see :mod:`rods_env.splits`). The gold calls are executed on the whole database
    (a failing call raises :class:`rods_env.gold.GoldError`) and the signature is computed
    from the executed calls.

    Raises:
        SkillUnavailable: when the skill finds no entities for the shape.
    """
    shape = dict(skill.shape if shape is None else shape)
    db = generation_database(domain, db_seed, db_size, split)
    draft = skill.generate(db, rng, shape)
    if draft.shape is not None:
        shape = dict(draft.shape)
    task = Task(
        id=task_id,
        domain=domain.name,
        skill=skill.name,
        shape=shape,
        split=split,
        db_seed=db_seed,
        db_size=db_size,
        user=draft.user,
        turns=draft.turns,
        provenance=provenance or Provenance(),
    )
    gold = replay_gold(domain, task)
    signature = compute_signature(task, gold, domain.toolkit.write_names())
    return task.model_copy(update={"signature": signature})


def augmented_seed(
    domain: Domain,
    task: Task,
    kind: str,
    rng: random.Random,
    alternatives: dict[str, list[str]],
) -> Task:
    """``task`` turned into its ``kind`` variant by synthesis's Augment stage (the same
    function that augments synthesized tasks), keeping its id, split and seed provenance.

    Raises:
        rods_env.synthesis.Reject: when the augmentation does not apply to ``task``.
    """
    from rods_env.synthesis.augment import apply_augment
    from rods_env.synthesis.execute import Candidate
    from rods_env.synthesis.plan import plan

    gold = replay_gold(domain, task)
    cand = Candidate(task=task, gold=gold, plan=plan(domain, task, "resample"))
    out = apply_augment(kind, domain, cand, rng, alternatives=alternatives).task
    return out.model_copy(update={"provenance": Provenance(augment=kind)})


def build_seed_tasks(
    domain: Domain, n: int = 200, seed: int = 0, test_every: int = 4, max_tries: int = 50
) -> list[Task]:
    """Generate ``n`` seed tasks round-robin over the domain's skills.

    Every ``test_every``-th task of each skill goes to the test split, the rest to train.
    Tasks with the same gold effect and outputs as an earlier one are skipped. In a domain
    with :attr:`~rods_env.domain.Domain.seed_augments`, the tasks take the base variant and
    each augmentation in turn (a task the augmentation does not apply to is drawn again);
    with :attr:`~rods_env.domain.Domain.world_per_task`, each attempt draws on a world of its
    own. The seeds of a domain with augmented seeds pass the synthesis critique (execution,
    derivable arguments, the domain's policy checks, the exploit panel), every one.

    Args:
        domain: The domain.
        n: Number of tasks.
        seed: Seed of the generation.
        test_every: One task in this many (per skill) is a test task.
        max_tries: Attempts per task before a skill is declared unable to produce it.
    """
    if not domain.skills:
        raise RodsError(f"domain {domain.name} has no skills")
    kinds = ("base", *domain.seed_augments)
    tasks: list[Task] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    per_skill: dict[str, int] = {}
    guesses: dict[str, set[str]] = {}  # facts of earlier seeds: plausible wrong values
    i = 0
    made: dict[tuple[str, str], int] = {}  # (variant, skill) -> seeds so far
    while len(tasks) < n:
        kind = kinds[len(tasks) % len(kinds)]
        order = [domain.skills[(i + j) % len(domain.skills)] for j in range(len(domain.skills))]
        if domain.seed_augments:
            # a variant does not apply to every skill: the skills with the fewest seeds of
            # it go first, so every skill gets its share of the variants it can take
            order.sort(key=lambda sk: made.get((kind, sk.name), 0))
        for skill in order:
            tries = max_tries if kind == "base" else max(1, max_tries // 10)
            task = _seed_of(
                domain, skill, kind, len(tasks), seed, i, per_skill, test_every, tries, seen,
                guesses,
            )  # fmt: skip
            i += 1
            if task is not None:
                made[(kind, skill.name)] = made.get((kind, skill.name), 0) + 1
                tasks.append(task)
                break
            if kind == "base" and not domain.seed_augments:
                raise RodsError(
                    f"skill {skill.name} of {domain.name} produced no new task in {max_tries} tries"
                )
        else:
            raise RodsError(f"no skill of {domain.name} produced a {kind} seed task")
    return tasks


def _seed_of(
    domain: Domain,
    skill: Skill,
    kind: str,
    index: int,
    seed: int,
    i: int,
    per_skill: dict[str, int],
    test_every: int,
    tries: int,
    seen: set[tuple[str, tuple[str, ...]]],
    guesses: dict[str, set[str]],
) -> Task | None:
    """The seed task number ``index`` from ``skill`` in variant ``kind``, or None when
    ``tries`` attempts give none (see :func:`build_seed_tasks`)."""
    from rods_env.synthesis.critique import critique
    from rods_env.synthesis.plan import Reject

    for attempt in range(tries):
        rng = random.Random(f"{domain.name}:seed:{seed}:{i + 1}:{attempt}")
        k = per_skill.get(skill.name, 0)
        split = "test" if k % test_every == test_every - 1 else "train"
        shape = dict(skill.shape)
        if skill.limits and rng.random() < 0.5:
            # half of the seeds take a random shape within the skill's limits, so the seed
            # set spans structures, not only each skill's default
            shape.update({axis: rng.randint(lo, hi) for axis, (lo, hi) in skill.limits.items()})
        # a world of its own per attempt: its number follows from the seed's position
        world = 1 + (index * 1000 + i) * 64 + attempt if domain.world_per_task else 0
        try:
            task = make_task(
                domain,
                skill,
                rng,
                task_id=f"{domain.name}-{index:04d}",
                db_seed=world,
                split=split,
                shape=shape,
            )
            if kind != "base":
                bank = {label: sorted(values) for label, values in guesses.items()}
                task = augmented_seed(domain, task, kind, rng, bank)
            if domain.seed_augments:  # such a domain's every seed passes the critique
                critique(domain, task, replay_gold(domain, task), expected=None)
        except (SkillUnavailable, Reject):
            continue
        gold = replay_gold(domain, task)
        key = (gold.fingerprint, tuple(o for t in task.turns for o in t.outputs))
        if key in seen:
            continue
        seen.add(key)
        per_skill[skill.name] = k + 1
        for label, value in task.user.facts.items():
            guesses.setdefault(label, set()).add(value)
        return task
    return None


FRESH = "fresh"
"""The mark in a fresh test task's id (``<domain>-fresh<generation>-<n>``)."""


def fresh_test_tasks(
    domain: Domain,
    skills: Sequence[str],
    per_skill: int,
    *,
    generation: int = 1,
    avoid: Sequence[Task] = (),
    max_tries: int = 50,
) -> list[Task]:
    """``per_skill`` new test-split tasks of each of ``skills``, drawn as
    :func:`build_seed_tasks` draws its test tasks (test customers only; half of them at a
    random shape within the skill's limits; base variant) with another generation seed
    (the committed seed sets are generation 0).

    None has the gold effect and outputs of a task of ``avoid`` or of another; each is its
    own draw (no provenance), unlike a synthesized variant, which keeps its seed's call
    structure. A held-out set needs such draws to resolve small differences between models
    (experiments/2026-12-02c-third-run/notebook.md, *What would resolve it*). Deterministic: the first ``k`` of a larger
    ``per_skill`` are the tasks of ``per_skill = k``.

    A skill with no new task in ``max_tries`` tries is spent (its test customers hold no
    other): it stops there and the others go on, so a skill may have fewer.

    Raises:
        RodsError: an unknown skill.
    """
    by_name = {sk.name: sk for sk in domain.skills}
    unknown = [name for name in skills if name not in by_name]
    if unknown:
        raise RodsError(f"domain {domain.name} has no skill {unknown[0]!r}")
    seen = {
        (replay_gold(domain, t).fingerprint, tuple(o for turn in t.turns for o in turn.outputs))
        for t in avoid
    }
    counts: dict[str, int] = {}
    out: list[Task] = []
    live = list(skills)  # a skill that gives no new task in max_tries is spent: it stops
    i = 0
    for _ in range(per_skill):
        for name in list(live):
            task = _seed_of(
                domain, by_name[name], "base", len(out), generation, i, counts, 1, max_tries,
                seen, {},
            )  # fmt: skip
            i += 1
            if task is None:
                live.remove(name)
                continue
            new_id = f"{domain.name}-{FRESH}{generation}-{len(out):04d}"
            out.append(task.model_copy(update={"id": new_id}))
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: write or check a domain's seed set."""
    from rods_env.registry import load_domain

    parser = argparse.ArgumentParser(
        prog="python -m rods_env.seeds", description=__doc__.splitlines()[0]
    )
    parser.add_argument("domain", help="domain name, e.g. retail")
    parser.add_argument(
        "--n",
        type=int,
        default=None,
        help="number of seed tasks (default: as many as the committed file holds, else 200)",
    )
    parser.add_argument("--seed", type=int, default=0, help="generation seed")
    parser.add_argument(
        "--out", type=Path, default=None, help="output file (default: the domain's seeds_path)"
    )
    parser.add_argument(
        "--check", action="store_true", help="verify the existing file regenerates identically"
    )
    args = parser.parse_args(argv)
    try:
        domain = load_domain(args.domain)
        out = args.out or domain.seeds_path
        if out is None:
            print(f"error: domain {domain.name} has no seeds_path; pass --out", file=sys.stderr)
            return 2
        n = args.n
        if n is None:
            committed = Path(out)
            n = sum(1 for line in committed.open() if line.strip()) if committed.exists() else 200
        tasks = build_seed_tasks(domain, n=n, seed=args.seed)
        text = "".join(t.to_json() + "\n" for t in tasks)
        if args.check:
            current = Path(out).read_text(encoding="utf-8") if Path(out).exists() else ""
            if current != text:
                print(
                    f"{out}: differs from a fresh generation (run without --check to rewrite)",
                    file=sys.stderr,
                )
                return 1
            print(f"{out}: {len(tasks)} tasks, identical to a fresh generation")
            return 0
        dump_tasks(tasks, out)
    except RodsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    splits = {s: sum(1 for t in tasks if t.split == s) for s in ("train", "test")}
    print(f"wrote {len(tasks)} tasks to {out} ({splits['train']} train, {splits['test']} test)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
