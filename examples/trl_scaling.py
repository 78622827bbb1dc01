"""Steps/s of examples/trl_grpo.py on one process vs two (gloo), with the same total batch.

    python examples/trl_scaling.py --repeats 2 --output-dir results/trl_scaling

Runs the two configurations alternately (so a change in the machine's load hits both),
each ``--repeats`` times, and writes ``scaling.json`` and ``scaling.md``: wall steps/s,
the median step time after the first step, and where each process's time went (generation,
environment, data engine, update), plus the load average before each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).with_name("trl_grpo.py")


def run(processes: int, out: Path, common: list[str]) -> dict[str, Any]:
    """One training run; returns rank 0's timing plus the load average before it."""
    load = os.getloadavg()[0]
    if processes == 1:
        cmd = [sys.executable, str(EXAMPLE)]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        cmd += ["--nproc_per_node", str(processes), str(EXAMPLE)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        [*cmd, "--output-dir", str(out), *common],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    timing = json.loads((out / "timing.json").read_text())
    steady = timing["step_seconds"][1:] or timing["step_seconds"]
    return {**timing, "load_before": load, "median_step_s": statistics.median(steady)}


def main(argv: list[str] | None = None) -> None:
    """Run both configurations and write the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--output-dir", default="results/trl_scaling")
    parser.add_argument("--model", default=None, help="model folder (default: the tiny model)")
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--tasks-per-step", type=int, default=2)
    parser.add_argument("--num-generations", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=32)
    args = parser.parse_args(argv)
    out = Path(args.output_dir)
    common = [
        "--mode",
        "rods",
        "--max-steps",
        str(args.max_steps),
        "--tasks-per-step",
        str(args.tasks_per_step),
        "--num-generations",
        str(args.num_generations),
        "--max-completion-length",
        str(args.max_completion_length),
        "--max-tool-calls",
        "2",
    ]
    if args.model is None:
        from rods_agent.integrations.trl import build_tiny_trl_model

        args.model = str(build_tiny_trl_model(out / "tiny-model"))
    common += ["--model", args.model]
    runs: dict[str, list[dict[str, Any]]] = {"1": [], "2": []}
    for k in range(args.repeats):
        for processes in (1, 2):
            runs[str(processes)].append(run(processes, out / f"p{processes}-r{k}", common))
    from rods_env.fileio import atomic_write, write_json

    write_json(out / "scaling.json", {"settings": vars(args), "runs": runs})
    lines = [
        "| processes | completions per process | steps/s (wall) | median step (s) | generate | env | data engine | update | load before |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    per_step = args.tasks_per_step * args.num_generations
    for processes, items in runs.items():
        for t in items:
            s = t["seconds"]
            lines.append(
                f"| {processes} | {per_step // int(processes)} | {t['steps_per_s']:.4f} | {t['median_step_s']:.1f} "
                f"| {s['generate']:.1f} | {s['env']:.2f} | {s['data_engine']:.3f} | {s['update']:.1f} | {t['load_before']:.2f} |"
            )
    atomic_write(out / "scaling.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
