"""Paired differences between the probe's final evaluations (step 12, step 24, the warm start).

Each difference is the mean over (run seed, task) pairs of the two models' progress, with a
two-way bootstrap over run seeds and tasks (4,000 draws, seed 0), as the experiment summary
resamples them. Run: ``python step_differences.py`` in this folder.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent / "final" / "variants-0"
SEEDS = range(5)


def results(folder: Path) -> dict[str, tuple[float, str]]:
    """Task id to (progress, how the episode ended) of one evaluation."""
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    return {r["task_id"]: (r["mean_progress"], r["termination"][0]) for r in rows}


def folder(model: str, step: int, seed: int) -> Path:
    return HERE / f"warm-s{seed}" if model == "warm" else HERE / f"step-{step}" / f"{model}-s{seed}"


def paired_difference(
    d: dict[tuple[int, str], float], seeds: list[int], tasks: list[str], draws: int = 4000
) -> tuple[float, float, float]:
    """Estimate and 95% interval of the mean of ``d`` (per (run seed, task) differences),
    resampling run seeds and tasks (two-way bootstrap, seed 0)."""
    rng = random.Random(0)
    means = []
    for _ in range(draws):
        picked_seeds = [rng.choice(seeds) for _ in seeds]
        picked = [rng.choice(tasks) for _ in tasks]
        total = sum(d[(s, t)] for s in picked_seeds for t in picked)
        means.append(total / (len(picked_seeds) * len(picked)))
    means.sort()
    est = sum(d.values()) / len(d)
    return round(est, 3), round(means[int(0.025 * draws)], 3), round(means[int(0.975 * draws)], 3)


def difference(a: tuple[str, int], b: tuple[str, int]) -> tuple[float, float, float]:
    """Estimate and 95% interval of progress(a) - progress(b), paired by seed and task."""
    ra = {s: results(folder(*a, s)) for s in SEEDS}
    rb = {s: results(folder(*b, s)) for s in SEEDS}
    tasks = sorted(ra[0])
    d = {(s, t): ra[s][t][0] - rb[s][t][0] for s in SEEDS for t in tasks}
    return paired_difference(d, list(SEEDS), tasks)


if __name__ == "__main__":
    for a, b in [
        (("static", 24), ("static", 12)),
        (("rods", 24), ("rods", 12)),
        (("rods", 24), ("static", 24)),
        (("static", 24), ("warm", 0)),
        (("rods", 24), ("warm", 0)),
    ]:
        print(f"{a[0]}@{a[1]} - {b[0]}@{b[1]}: {difference(a, b)}")
    for model in ("static", "rods"):
        for step in (12, 24):
            capped = [
                sum(end == "max_steps" for _, end in results(folder(model, step, s)).values())
                for s in SEEDS
            ]
            print(f"{model}@{step} max_steps endings per seed: {capped}")
