"""The BFCL API world: synthesis speed per core and oracle episodes per second.

A *candidate* is one variant through the whole pipeline: a fresh world is generated for
it, its skill drafts the turns on a live copy, the gold replays, the template Rewrite
runs, and the critique runs every check: the domain's policy checks (no error results,
required values shown, the contamination guard against BFCL's 800 tasks) and the exploit
panel (the five rods agents and the read-only, late and early ones). Reported per mode with
BFCL's three styles as augmentations: candidates and accepted tasks per CPU-second of this
process, acceptance, and rejections by reason (``extra_info``, and printed).

Run: ``pytest benchmarks/test_bfcl_world.py --benchmark-only -s``.
"""

from __future__ import annotations

import os
import time

import pytest

from rods_env.synthesis import SynthesisReport, synthesize
from tests.requires import require

STYLES = ("missing_parameter", "missing_function", "long_context")
SEEDS = 40


@pytest.fixture(scope="module")
def domain():
    from environments.bfcl.apis import bfcl_missing

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")
    from environments.bfcl.world import DOMAIN
    from environments.bfcl.world.contamination import bfcl_index

    bfcl_index()  # built once per process, not part of synthesis
    list(synthesize(DOMAIN.seed_tasks("train")[:2], per_seed=1, augment=STYLES))  # warm up
    return DOMAIN


@pytest.mark.parametrize("mode", ["resample", "expand"])
def test_synthesis_rate(benchmark, domain, mode):
    seeds = domain.seed_tasks("train")[:SEEDS]
    reports: list[tuple[SynthesisReport, float]] = []

    def run() -> None:
        start = time.process_time()
        report = SynthesisReport(seeds)
        for outcome in synthesize(seeds, per_seed=1, mode=mode, augment=STYLES, seed=len(reports)):
            report.add(outcome)
        report.finish()
        reports.append((report, time.process_time() - start))

    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
    report, cpu = reports[-1]
    d = report.to_dict()
    info = {
        "mode": mode,
        "seeds": len(seeds),
        "candidates": report.candidates,
        "accepted": len(report.accepted),
        "cpu_seconds": round(cpu, 2),
        "accepted_per_cpu_s": round(len(report.accepted) / cpu, 1),
        "candidates_per_cpu_s": round(report.candidates / cpu, 1),
        "rejected": d.get("rejected", {}),
    }
    benchmark.extra_info.update(info)
    print(info)
    assert report.accepted


def test_oracle_episode(benchmark, domain):
    from rods_env.env import ToolEnv
    from rods_env.gold import GOLD_CACHE
    from rods_env.oracle import oracle_agent, run_episode

    tasks = [t for t in domain.seed_tasks("test") if t.variant != "long_context"]
    for task in tasks:
        GOLD_CACHE.get(domain, task)
    env = ToolEnv(domain, tasks=tasks, split=None, max_steps=80)
    state = {"i": 0}

    def episode() -> None:
        state["i"] += 1
        task = tasks[state["i"] % len(tasks)]
        assert run_episode(env, oracle_agent(domain, task), task=task)["success"]

    benchmark.pedantic(episode, rounds=len(tasks) * 2, iterations=1)


@pytest.mark.skipif(
    not os.environ.get("RODS_BENCH_GENERATIONS"),
    reason="ten generations of expand on every train seed, then the guard over the pool (a few "
    "minutes): set RODS_BENCH_GENERATIONS=1",
)
def test_ten_generations_share_nothing_with_bfcl(benchmark, domain):
    """Issue 28's guard table: expand every train seed ten generations (per seed 1, each
    generation fed its own output), then measure the contamination guard on each
    generation and on the whole pool (nearest BFCL question, shared call sequences, shared
    initial states). The critique rejected every candidate that shared anything; this
    measures what the accepted pool holds."""
    from environments.bfcl.world.contamination import report

    pools: list[list] = []

    def run() -> None:
        parents = domain.seed_tasks("train")
        for _ in range(10):
            parents = [
                o.task
                for o in synthesize(parents, per_seed=1, mode="expand", domains=domain)
                if o.accepted
            ]
            pools.append(parents)

    benchmark.pedantic(run, rounds=1, iterations=1)
    rows = []
    for generation, pool in [*enumerate(pools, 1), ("all", [t for p in pools for t in p])]:
        r = report(pool)
        rows.append(
            f"| {generation} | {r['tasks']} | {r['requests']} | {r['nearest_similarity_max']:.2f} | "
            f"{r['nearest_similarity_p99']:.2f} | {r['nearest_similarity_mean']:.3f} | "
            f"{r['near_duplicates']} | {r['tasks_sharing_anything']} |"
        )
        assert r["near_duplicates"] == 0 and r["tasks_sharing_anything"] == 0, (generation, r)
    benchmark.extra_info["generations"] = [len(p) for p in pools]
    print()
    print(
        "| generation | tasks | requests | nearest BFCL question, max | 99th percentile | mean "
        "| near duplicates (>= 0.5) | tasks sharing a call sequence or an initial state |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
