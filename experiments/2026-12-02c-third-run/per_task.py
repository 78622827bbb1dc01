"""The third run's final evaluation (169 held-out tasks, step 18, seeds 0-2) re-read, for
docs/learning.md:

* per task: each model's mean progress over the 169 tasks x 3 run seeds (every task weighs
  the same), beside the summary's per-test-seed mean (a test seed and its variants averaged
  first, then the 121 test seeds: what ``summary.md``'s table printed under "169 tasks");
  paired differences with a two-way bootstrap over test seeds (a seed with its variants as
  one draw) and run seeds, 4,000 draws, seed 0; the same for the 73 of them (the 25 test
  seeds and their 48 variants, no fresh task) that the earlier 73-task table read;
* how much of each mode's change against the warm start is the end of tool looping: of the
  (task, run seed) results a mode improved, how many the warm start had ended at
  ``max_steps``, and the part of the mean difference those pairs carry;
* optimizer steps per mode (``update.optimizer_steps`` of ``metrics.jsonl``): static stepped
  AdamW in every step, filter and rods only in steps with a gradient.

Run: ``python per_task.py`` in this folder (reads ``final/variants-2/*/results.jsonl``,
``final/variants-2/held-out.jsonl`` and ``runs/*/metrics.jsonl``; nothing to unpack).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent
FINAL = HERE / "final" / "variants-2"
SEEDS = range(3)
MODELS = ("warm", "static", "filter", "rods")


def results(model: str, seed: int) -> dict[str, tuple[float, str]]:
    """Task id to (progress, how the episode ended) of one evaluation."""
    folder = FINAL / f"warm-s{seed}" if model == "warm" else FINAL / "step-18" / f"{model}-s{seed}"
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    return {r["task_id"]: (r["mean_progress"], r["termination"][0]) for r in rows}


def families() -> dict[str, str]:
    """Task id to its test seed (a variant's parent; a seed or fresh task is its own)."""
    out = {}
    for line in (FINAL / "held-out.jsonl").read_text().splitlines():
        t = json.loads(line)
        out[t["id"]] = (t.get("provenance") or {}).get("parent_id") or t["id"]
    return out


def per_task_difference(
    d: dict[tuple[int, str], float], family: dict[str, str], draws: int = 4000
) -> tuple[float, float, float]:
    """Mean of ``d`` over (run seed, task), every task weighing the same, and its 95%
    interval resampling run seeds and test seeds (each with all its tasks)."""
    fams = sorted(set(family.values()))
    tasks_of: dict[str, list[str]] = defaultdict(list)
    for t, f in family.items():
        tasks_of[f].append(t)
    sums = {(s, f): sum(d[(s, t)] for t in tasks_of[f]) for s in SEEDS for f in fams}
    rng = random.Random(0)
    means = []
    for _ in range(draws):
        seeds = [rng.choice(list(SEEDS)) for _ in SEEDS]
        picked = [rng.choice(fams) for _ in fams]
        n = len(seeds) * sum(len(tasks_of[f]) for f in picked)
        means.append(sum(sums[(s, f)] for s in seeds for f in picked) / n)
    means.sort()
    est = sum(d.values()) / len(d)
    return round(est, 3), round(means[int(0.025 * draws)], 3), round(means[int(0.975 * draws)], 3)


def per_test_seed_mean(r: dict[int, dict[str, tuple[float, str]]], family: dict[str, str]) -> float:
    """The summary's estimate: per run seed, the mean over test seeds of their tasks' mean."""
    out = []
    for s in SEEDS:
        by: dict[str, list[float]] = defaultdict(list)
        for t, f in family.items():
            by[f].append(r[s][t][0])
        out.append(sum(sum(v) / len(v) for v in by.values()) / len(by))
    return sum(out) / len(out)


def optimizer_steps(mode: str) -> tuple[int, int]:
    """(optimizer steps, steps with a gradient) of a mode's runs, summed over seeds."""
    taken = with_gradient = 0
    for path in sorted((HERE / "runs").glob(f"{mode}-s*/metrics.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if not isinstance(row.get("step"), int):
                continue
            update = row.get("update") or {}
            taken += int(update.get("optimizer_steps") or 0)
            with_gradient += float(update.get("signal_tokens") or 0) > 0
    return taken, with_gradient


def compare(r: dict[str, dict[int, dict[str, tuple[float, str]]]], family: dict[str, str]) -> None:
    """Each model's mean per task and per test seed, and the paired differences per task."""
    print(f"{len(family)} tasks, {len(set(family.values()))} test seeds, run seeds {list(SEEDS)}")
    for m in MODELS:
        per_task = sum(r[m][s][t][0] for s in SEEDS for t in family) / (len(family) * len(SEEDS))
        print(f"{m}: per task {per_task:.3f}, per test seed {per_test_seed_mean(r[m], family):.3f}")
    for a, b in [
        ("static", "warm"),
        ("filter", "warm"),
        ("rods", "warm"),
        ("filter", "static"),
        ("rods", "static"),
    ]:
        d = {(s, t): r[a][s][t][0] - r[b][s][t][0] for s in SEEDS for t in family}
        print(f"{a} - {b}, per task: {per_task_difference(d, family)}")


if __name__ == "__main__":
    family = families()
    r = {m: {s: results(m, s) for s in SEEDS} for m in MODELS}
    assert all(set(r[m][s]) == set(family) for m in MODELS for s in SEEDS), "other tasks"
    compare(r, family)
    print("the 73 tasks of the earlier table (no fresh task):")
    compare(r, {t: f for t, f in family.items() if "-fresh" not in t})
    for m in ("static", "filter", "rods"):
        improved = looped = worse = 0
        carried = 0.0
        for s in SEEDS:
            for t in family:
                (p, _), (q, end) = r[m][s][t], r["warm"][s][t]
                improved += p > q
                worse += p < q
                looped += p > q and end == "max_steps"
                carried += (p - q) if end == "max_steps" else 0.0
        n = len(family) * len(SEEDS)
        print(
            f"{m} - warm: {improved} (task, seed) results improved, {looped} of them from a warm "
            f"start ended at max_steps; {worse} worse; the max_steps pairs carry "
            f"{carried / n:+.3f} of the mean difference"
        )
    for m in ("static", "filter", "rods"):
        taken, grad = optimizer_steps(m)
        print(f"{m}: {taken} optimizer steps, {grad} steps with a gradient (3 runs x 18 steps)")
