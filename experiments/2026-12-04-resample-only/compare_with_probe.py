"""Compare this experiment (rods with resample-only synthesis, seeds 0-2, 12 steps) with the
2026-12-04 probe's step-12 models (static, rods with resample+expand) on the same 25 tasks.

Paired by (run seed, task); two-way bootstrap over run seeds and tasks (4,000 draws, seed 0),
as the probe's step_differences.py. The two experiments' warm starts were trained apart (the
same pools and settings, other thread counts: SFT loss 0.7177 -> 0.2160 here, 0.7191 ->
0.2153 there), so cross-experiment differences also carry the warm starts' difference,
which the warm rows measure. Run: ``python compare_with_probe.py`` in this folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent / "final" / "variants-0"
PROBE = Path(__file__).parent.parent / "2026-12-04-order-info-probe" / "final" / "variants-0"
SEEDS = range(3)

sys.path.insert(0, str(PROBE.parent.parent))  # the probe's bootstrap, as it ran there
from step_differences import paired_difference  # noqa: E402


def results(folder: Path) -> dict[str, tuple[float, str]]:
    """Task id to (progress, how the episode ended) of one evaluation."""
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    return {r["task_id"]: (r["mean_progress"], r["termination"][0]) for r in rows}


def folder(name: str, seed: int) -> Path:
    """``new-warm``, ``new-rods`` (this experiment), ``warm``, ``static``, ``rods`` (probe)."""
    if name == "new-warm":
        return HERE / f"warm-s{seed}"
    if name == "new-rods":
        return HERE / "step-12" / f"rods-s{seed}"
    if name == "warm":
        return PROBE / f"warm-s{seed}"
    return PROBE / "step-12" / f"{name}-s{seed}"


def difference(a: str, b: str) -> tuple[float, float, float]:
    """Estimate and 95% interval of progress(a) - progress(b), paired by seed and task."""
    ra = {s: results(folder(a, s)) for s in SEEDS}
    rb = {s: results(folder(b, s)) for s in SEEDS}
    tasks = sorted(ra[0])
    assert all(sorted(ra[s]) == tasks == sorted(rb[s]) for s in SEEDS), "other tasks"
    d = {(s, t): ra[s][t][0] - rb[s][t][0] for s in SEEDS for t in tasks}
    return paired_difference(d, list(SEEDS), tasks)


if __name__ == "__main__":
    for name in ("new-warm", "new-rods", "warm", "static", "rods"):
        per = [sum(p for p, _ in results(folder(name, s)).values()) / 25 for s in SEEDS]
        capped = [
            sum(e == "max_steps" for _, e in results(folder(name, s)).values()) for s in SEEDS
        ]
        print(f"{name}: progress per seed {[round(p, 2) for p in per]}, max_steps {capped}")
    same = sum(
        results(folder("new-warm", s))[t][0] == results(folder("warm", s))[t][0]
        for s in SEEDS
        for t in results(folder("warm", s))
    )
    print(f"warm starts: {same} of 75 (seed, task) results equal")
    for a, b in [
        ("new-warm", "warm"),
        ("new-rods", "new-warm"),
        ("static", "warm"),
        ("rods", "warm"),
        ("new-rods", "rods"),
        ("new-rods", "static"),
    ]:
        print(f"{a} - {b}: {difference(a, b)}")
