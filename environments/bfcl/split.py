"""The paper's split of BFCL multi-turn: half of each category to train on, half held out.

RODS (arXiv 2606.19047) starts "from 400 human seeds": half of each of BFCL v3
multi-turn's four categories as its training tasks, the other half as its test tasks, a
split taken from Environment Tuning (arXiv 2510.10197). Environment Tuning did not release
its processed data, so its exact split cannot be had: rods draws its own with a stated,
seeded procedure (:func:`draw_split`) and commits the result as ``paper_split.json``
beside this module (task ids as in the installed bfcl-eval data). A test re-draws it and
compares it with the file; ``python -m environments.bfcl.split --check`` does the same and
``--write`` rewrites the file.

**Why by index.** BFCL's four categories are built from the same 200 scenarios: task ``k``
of every category has the same involved classes (all 200 indices), the same initial
configuration (191-194 of 200 per category against base) and often the same first question
(base and long_context: 195 of 200; miss_func: 189). A split by task would put a test
task's near twin from another category into the train half, so the split is by index: the
four tasks of one index land on the same side. Indices whose tasks share an initial
configuration in any category (63+83, 66+70+74, 100+104+133: vehicle states) are one unit
too.

**The procedure.** ``random.Random(SEED)``; the units are stratified by the base task's set
of involved classes (20 strata, 2 to 20 indices each), so train and test see the same mix of
API classes. Each stratum of ``n`` indices sends ``n // 2`` to train; of the strata with an
odd ``n``, half (drawn with the generator, in sorted order of their class sets) send one
more, so train holds exactly 100 indices. Within a stratum the units are shuffled with the
generator, then placed largest first (stable), each to train while it fits. Every category
then has the same 100 train and 100 test indices.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from environments.bfcl.tasks import CATEGORIES, SPLIT_FILE, category_tasks, paper_split

__all__ = ["SPLIT_FILE", "draw_installed", "draw_split", "paper_split", "split_document"]

SEED = "rods/bfcl-paper-split/v1"
"""The generator's seed (a string: ``random.Random`` hashes it the same on every platform and
Python version)."""


SPLITS: tuple[str, ...] = ("train", "test")


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _units(tasks_by_category: Mapping[str, Sequence[Any]]) -> list[list[int]]:
    """Indices joined when their tasks share an initial configuration in any category."""
    n = len(next(iter(tasks_by_category.values())))
    parent = list(range(n))
    for tasks in tasks_by_category.values():
        first: dict[str, int] = {}
        for i, task in enumerate(tasks):
            j = first.setdefault(task.config_key, i)
            parent[_find(parent, i)] = _find(parent, j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(_find(parent, i), []).append(i)
    return sorted(groups.values())


def draw_split(
    tasks_by_category: Mapping[str, Sequence[Any]], seed: str = SEED
) -> dict[str, dict[str, list[str]]]:
    """Draw the split (see the module doc for the procedure).

    Args:
        tasks_by_category: Category to its tasks in BFCL's order (each with ``id``,
            ``classes`` and ``config_key``: equal for equal initial configurations).
        seed: The generator's seed.

    Returns:
        Category to ``{"train": ids, "test": ids}``, ids in BFCL's order.

    Raises:
        ValueError: when the categories differ in size or index ``k`` of two categories
            involves different classes (the pairing the procedure relies on).
    """
    cats = list(tasks_by_category)
    base = tasks_by_category[cats[0]]
    n = len(base)
    for cat in cats:
        tasks = tasks_by_category[cat]
        if len(tasks) != n:
            raise ValueError(f"category {cat} has {len(tasks)} tasks, {cats[0]} has {n}")
        for i, task in enumerate(tasks):
            if sorted(task.classes) != sorted(base[i].classes):
                raise ValueError(f"{task.id} and {base[i].id} involve different classes")
    rng = random.Random(seed)
    strata: dict[tuple[str, ...], list[list[int]]] = {}
    for unit in _units(tasks_by_category):
        strata.setdefault(tuple(sorted(base[unit[0]].classes)), []).append(unit)
    keys = sorted(strata)
    sizes = {k: sum(len(u) for u in strata[k]) for k in keys}
    odd = [k for k in keys if sizes[k] % 2]
    extra = set(rng.sample(odd, n // 2 - sum(s // 2 for s in sizes.values())))
    train: set[int] = set()
    for key in keys:
        units = list(strata[key])
        rng.shuffle(units)
        units.sort(key=len, reverse=True)
        want = sizes[key] // 2 + (key in extra)
        taken = 0
        for unit in units:
            if taken + len(unit) <= want:
                train.update(unit)
                taken += len(unit)
        if taken != want:
            raise ValueError(f"stratum {'+'.join(key)}: {taken} train indices, wanted {want}")
    return {
        cat: {
            "train": [t.id for i, t in enumerate(tasks_by_category[cat]) if i in train],
            "test": [t.id for i, t in enumerate(tasks_by_category[cat]) if i not in train],
        }
        for cat in cats
    }


def draw_installed() -> dict[str, dict[str, list[str]]]:
    """:func:`draw_split` on the installed bfcl-eval data."""
    return draw_split({c: category_tasks(c) for c in CATEGORIES})


def split_document(split: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[str, Any]:
    """The JSON document of ``paper_split.json``."""
    from environments.bfcl.apis import BFCL_VERSION

    return {
        "about": (
            "RODS' BFCL setting: half of each BFCL multi-turn category trains, the other "
            "half is the test set. Environment Tuning's own split was not released; this one "
            "is drawn by environments/bfcl/split.py (draw_split): by index (the four tasks of "
            "one index, and indices sharing an initial configuration, on one side), "
            "stratified by involved classes, random.Random(seed)."
        ),
        "seed": SEED,
        "bfcl_eval": BFCL_VERSION,
        "categories": {cat: {s: list(split[cat][s]) for s in SPLITS} for cat in split},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``--check``: the file equals a fresh draw (exit 1 if not); ``--write``: rewrite it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite paper_split.json")
    args = parser.parse_args(argv)
    text = json.dumps(split_document(draw_installed()), indent=1) + "\n"
    if args.write:
        SPLIT_FILE.write_text(text, encoding="utf-8")
        print(f"wrote {SPLIT_FILE}")
        return 0
    same = SPLIT_FILE.is_file() and SPLIT_FILE.read_text(encoding="utf-8") == text
    print(f"{SPLIT_FILE.name}: {'matches a fresh draw' if same else 'DIFFERS from a fresh draw'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
