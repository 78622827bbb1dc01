"""BFCL result files from a ``rods eval`` run, so BFCL's own ``bfcl evaluate`` can score it.

    python -m environments.bfcl.export results/NAME results/bfcl --model gpt-4o-2024-11-20-FC

writes ``results/bfcl/<model>/multi_turn/BFCL_v4_multi_turn_<category>_result.json``: one
line per task, ``{"id": ..., "result": [...]}``, where ``result`` holds per turn, per
step, the calls the environment decoded and ran in the format of BFCL's function-calling
handlers (a list of ``{name: arguments-as-JSON}``). BFCL's decoder turns each step back
into the call strings rods' checker compared, so both score the same calls; a turn the
conversation never reached is left out, which BFCL scores as a force-terminated run, as
rods does. ``bfcl evaluate --model <model> --test-category multi_turn --result-dir
results/bfcl`` then scores it with BFCL's checker; pick a model name BFCL registers with a
function-calling handler (its decoder reads this format), and run it in a sandbox: BFCL's
checker evaluates call strings built from the model's function names.

Only the first trial of each task is written (BFCL runs one); ``--trial`` picks another.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from environments.bfcl.tasks import VERSION_PREFIX, task_index
from rods_env.fileio import atomic_write, iter_jsonl


def bfcl_result(turn_results: Sequence[Mapping[str, Any]]) -> list[list[list[dict[str, str]]]]:
    """An episode's calls as BFCL's ``result`` field: per reached turn, per step with calls,
    ``[{name: arguments JSON}, ...]`` (the OpenAI function-calling handlers' format)."""
    return [
        [
            [{c["name"]: json.dumps(c["arguments"])} for c in step]
            for step in turn.get("calls", ())
            if step
        ]
        for turn in turn_results
        if turn.get("reached", True)
    ]


def export(
    episodes: Iterable[Mapping[str, Any]], out: str | Path, model: str, trial: int = 0
) -> dict[str, int]:
    """Write BFCL result files for the BFCL episodes among ``episodes``.

    Args:
        episodes: ``episodes.jsonl`` rows of a ``rods eval`` run.
        out: BFCL's result folder (``--result-dir``).
        model: The folder name under it (BFCL's model name, ``/`` replaced by ``_``).
        trial: Which trial of each task to write.

    Returns:
        Category to the number of tasks written.
    """
    index = task_index()
    by_category: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in episodes:
        task = index.get(str(row.get("task_id")))
        if task is None or row.get("trial") != trial or row.get("termination") == "error":
            continue
        entry = {"id": task.id, "result": bfcl_result(row.get("turn_results") or [])}
        by_category[task.category][task.id] = entry
    folder = Path(out) / model.replace("/", "_") / "multi_turn"
    order = {task_id: i for i, task_id in enumerate(index)}
    written = {}
    for category, entries in sorted(by_category.items()):
        rows = sorted(entries.values(), key=lambda e: order[e["id"]])
        path = folder / f"{VERSION_PREFIX}_multi_turn_{category}_result.json"
        atomic_write(path, "".join(json.dumps(r) + "\n" for r in rows))
        written[category] = len(rows)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m environments.bfcl.export RUN OUT --model NAME [--trial N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m environments.bfcl.export",
        description="Write BFCL result files from a rods eval run on BFCL multi-turn.",
    )
    parser.add_argument("run", type=Path, help="the rods eval output folder (--out)")
    parser.add_argument("out", type=Path, help="BFCL's result folder to write into")
    parser.add_argument("--model", required=True, help="BFCL model name (a folder under OUT)")
    parser.add_argument("--trial", type=int, default=0, help="which trial of each task")
    args = parser.parse_args(argv)
    episodes = args.run / "episodes.jsonl"
    if not episodes.is_file():
        print(f"export: no {episodes} (is {args.run} a rods eval folder?)", file=sys.stderr)
        return 2
    written = export(iter_jsonl(episodes), args.out, args.model, args.trial)
    if not written:
        print(f"export: no BFCL episodes of trial {args.trial} in {episodes}", file=sys.stderr)
        return 1
    folder = args.out / args.model.replace("/", "_") / "multi_turn"
    for category, n in written.items():
        print(f"export: {n} tasks of multi_turn_{category} -> {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
