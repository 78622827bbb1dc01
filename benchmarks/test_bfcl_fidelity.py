"""The whole perturbation harness: every BFCL multi-turn task, its gold and edited gold
trajectories, rods' verdicts against BFCL's own checker (tests/environments/bfcl/fidelity.py).

For each of the 800 tasks: the gold, sent in a form drawn per task, and
``RODS_BFCL_FIDELITY_CASES`` edited trajectories (default 1, as CI runs it; the figures in
docs/bfcl.md are from 15), drawn by hypothesis with a seed per task. Every
task verdict and every checked turn's verdict of the default environment must equal BFCL's
(``multi_turn_checker``, and its loop without the early return); where BFCL's executor
leaves the argument text alone, the strict verdicts must equal its executor's run without
sharing. The counts go into ``extra_info`` and are printed.

    RODS_BFCL_FIDELITY_CASES=15 OMP_NUM_THREADS=1 .venv/bin/python -m pytest \\
        benchmarks/test_bfcl_fidelity.py --benchmark-disable -s
"""

from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import HealthCheck, given, seed, settings

from environments.bfcl.apis import bfcl_missing
from tests.requires import require

CASES = int(os.environ.get("RODS_BFCL_FIDELITY_CASES", "1"))
"""Edited trajectories per task (besides its gold)."""


@pytest.fixture(scope="module")
def tasks():
    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")
    from environments.bfcl.tasks import load_tasks

    return load_tasks()


def test_every_task_perturbed_against_bfcls_checker(benchmark, tasks):
    from hypothesis import strategies as st

    from environments.bfcl.env import BFCLEnv
    from tests.environments.bfcl.fidelity import FORMS, Case, Tally, case_of, compare, gold_case

    def run() -> Tally:
        env = BFCLEnv()
        total = Tally()
        for i, task in enumerate(tasks):
            gold = gold_case(task, FORMS[i % len(FORMS)])

            # hypothesis tries the simplest example first (the gold), never twice
            @seed(zlib.crc32(task.id.encode()))
            @settings(
                max_examples=1 + CASES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(st.one_of(st.just(gold), case_of(task, min_edits=1, max_edits=3)))
            def check(case: Case) -> None:
                compare(env, case, total)

            check()
        return total

    tally = benchmark.pedantic(run, rounds=1, iterations=1)
    counts = {k: v for k, v in vars(tally).items() if isinstance(v, int)}
    benchmark.extra_info.update(counts)
    benchmark.extra_info["by_edit"] = {
        name: [n, tally.passed_by_edit[name], tally.differ_by_edit[name]]
        for name, n in sorted(tally.by_edit.items())
    }
    print(f"\nBFCL fidelity: {counts}")
    for name, n in sorted(tally.by_edit.items()):
        passed, differ = tally.passed_by_edit[name], tally.differ_by_edit[name]
        print(f"  {name:22s} {n:6d} trajectories, BFCL passes {passed:5d}, strict differs {differ}")
    assert not tally.disagreements, "\n".join(tally.disagreements[:10])
    assert tally.trajectories >= len(tasks) * (1 + CASES) * 0.95  # hypothesis may dedupe
