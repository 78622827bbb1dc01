"""How much of the probe's RL gains (and of resample-only's, in ../2026-12-04-resample-only)
is the end of tool looping, and how many optimizer steps each mode took, for
docs/learning.md.

* Of the (task, run seed) results a model improved over its warm start, how many the warm
  start had ended at ``max_steps`` (the model calling look-up tools until the step limit),
  and the part of the mean paired difference that those pairs carry.
* Optimizer steps per mode, steps 0-11 and 12-23 (``update.optimizer_steps`` of each run's
  ``metrics.jsonl``): before 2026-12-06 static stepped AdamW in every step, a step whose
  groups all tied included (on zero gradients: its momentum moved the weights), while
  filter and rods took no step then; so the modes did not take the same optimizer steps.

Run: ``python looping.py`` in this folder (reads ``final/variants-0/*/results.jsonl`` here
and there and ``runs/*/metrics.jsonl``; nothing to unpack).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from step_differences import folder, results

HERE = Path(__file__).parent
RESAMPLE = HERE.parent / "2026-12-04-resample-only" / "final" / "variants-0"


def looping(base: Callable[[int], Path], new: Callable[[int], Path], seeds: range) -> str:
    """Improved results, those whose baseline ended at max_steps, and their share of the gain."""
    improved = looped = worse = n = 0
    total = carried = 0.0
    for s in seeds:
        b, a = results(base(s)), results(new(s))
        for t, (q, end) in b.items():
            p = a[t][0]
            n += 1
            total += p - q
            improved += p > q
            worse += p < q
            looped += p > q and end == "max_steps"
            carried += (p - q) if end == "max_steps" else 0.0
    return (
        f"{improved} improved, {looped} of them from a baseline ended at max_steps, {worse} "
        f"worse; mean difference {total / n:+.3f}, of which the max_steps pairs {carried / n:+.3f}"
    )


def optimizer_steps(runs: Path, mode: str) -> str:
    """Optimizer steps and steps with a gradient of a mode's runs, by half, over seeds."""
    halves = {0: [0, 0], 1: [0, 0]}
    for path in sorted(runs.glob(f"{mode}-s*/metrics.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if not isinstance(row.get("step"), int):
                continue
            update = row.get("update") or {}
            half = halves[int(row["step"] >= 12)]
            half[0] += int(update.get("optimizer_steps") or 0)
            half[1] += float(update.get("signal_tokens") or 0) > 0
    return (
        f"optimizer steps {halves[0][0]} + {halves[1][0]}, "
        f"steps with a gradient {halves[0][1]} + {halves[1][1]} (steps 0-11 + 12-23)"
    )


if __name__ == "__main__":
    for model in ("static", "rods"):
        for step in (12, 24):
            line = looping(
                lambda s: folder("warm", 0, s),
                lambda s, m=model, st=step: folder(m, st, s),
                range(5),
            )
            print(f"probe {model}@{step} - warm: {line}")
    line = looping(
        lambda s: RESAMPLE / f"warm-s{s}", lambda s: RESAMPLE / "step-12" / f"rods-s{s}", range(3)
    )
    print(f"resample-only rods@12 - its warm start: {line}")
    for mode in ("static", "rods"):
        print(f"probe {mode}: {optimizer_steps(HERE / 'runs', mode)}")
    resample_runs = RESAMPLE.parent.parent / "runs"
    print(f"resample-only rods: {optimizer_steps(resample_runs, 'rods')}")
