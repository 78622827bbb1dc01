"""Each evaluation of this experiment restricted to its test pool (pools/test.jsonl), one
line per seed: seed 0's static and rods runs scored the domain's whole test split (50 tasks;
the runner did not yet pass data.eval_pool), the other runs the pool's 25 (notebook.md).
summary.md does the same restriction (the tasks every seed has).

    python experiments/2026-12-02-first-run/restrict_to_pool.py
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).parent
test = {json.loads(line)["id"] for line in (HERE / "pools" / "test.jsonl").read_text().splitlines()}
files = sorted(HERE.glob("eval/*/results.jsonl")) + sorted(
    HERE.glob("runs/*/eval/step-*/results.jsonl")
)
for path in files:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    sub = [r for r in rows if r["task_id"] in test]
    progress = [sum(r["progress"]) / len(r["progress"]) for r in sub]
    success = [sum(r["success"]) / len(r["success"]) for r in sub]
    random.seed(0)
    draws = sorted(
        sum(random.choice(progress) for _ in progress) / len(progress) for _ in range(10000)
    )
    print(
        f"{path.relative_to(HERE)}: {len(sub)} pool tasks, progress "
        f"{sum(progress) / len(progress):.3f} (95% CI {draws[250]:.3f}-{draws[9750]:.3f}), "
        f"pass^1 {sum(success) / len(success):.3f}"
    )
