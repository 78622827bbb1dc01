"""Synthesis speed per core: validated variants per second on the real domains.

A *candidate* is one variant taken through the whole pipeline: the skill draws entities
(from the customers of the seed's split), the gold calls execute, the template Rewrite
runs, the critique runs (every check, the policy checks and the no-ask check included):
accepted or rejected. Reported per domain and mode, single process and thread: candidates
and accepted (validated) variants per second of *CPU time* of this process (per core: a
shared machine's other jobs do not count) and of wall time, the acceptance rate,
rejections by reason and distinct request skeletons (in ``extra_info`` of the benchmark
JSON, and printed). Target: >= 300 validated variants per second per core with the
template rewrite.

Run: ``pytest benchmarks/test_synthesis.py --benchmark-only -s``.
"""

from __future__ import annotations

import datetime
import os
import statistics
import subprocess
import time
from pathlib import Path

import pytest

import rods_env
from rods_env.gold import GOLD_CACHE
from rods_env.synthesis import AUGMENTS, SynthesisReport, synthesize

ROOT = Path(__file__).resolve().parents[1]

DOMAINS = [n for n in ("retail", "airline") if n in rods_env.domain_names()]
PER_SEED = 2

CASES = [
    pytest.param("resample", (), id="resample"),
    pytest.param("expand", (), id="expand"),
    pytest.param("resample", AUGMENTS, id="resample+augment"),
]


@pytest.fixture(scope="module", params=DOMAINS)
def domain(request):
    domain = rods_env.load_domain(request.param)
    for size in ("default", "long-8k", "long-16k"):
        if size in domain.sizes:
            domain.base(0, size)  # generated once per process, not part of synthesis
    for task in domain.seed_tasks():
        GOLD_CACHE.get(domain, task)
    list(synthesize(domain.seed_tasks("train")[:3], per_seed=1, augment=AUGMENTS))  # warm up
    return domain


@pytest.mark.parametrize(("mode", "augment"), CASES)
def test_synthesis_rate(benchmark, domain, mode, augment):
    seeds = domain.seed_tasks("train")
    reports: list[SynthesisReport] = []
    cpu: list[float] = []
    wall: list[float] = []

    def run() -> SynthesisReport:
        start, start_cpu = time.perf_counter(), time.process_time()
        report = SynthesisReport(seeds)
        for outcome in synthesize(seeds, per_seed=PER_SEED, mode=mode, augment=augment):
            report.add(outcome)
        report.finish()
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start)
        reports.append(report)
        return report

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    report = reports[-1]
    cpu_s, wall_s = statistics.median(cpu), statistics.median(wall)  # also with --benchmark-disable
    d = report.to_dict()
    info = {
        "domain": domain.name,
        "mode": mode,
        "augment": list(augment),
        "seeds": len(seeds),
        "candidates": report.candidates,
        "accepted": len(report.accepted),
        "cpu_seconds": round(cpu_s, 3),
        "wall_seconds": round(wall_s, 3),
        "candidates_per_cpu_s": round(report.candidates / cpu_s, 1),
        "accepted_per_cpu_s": round(len(report.accepted) / cpu_s, 1),
        "accepted_per_wall_s": round(len(report.accepted) / wall_s, 1),
        "acceptance_rate": round(len(report.accepted) / max(report.candidates, 1), 3),
        "accepted_by_kind": dict(report.accepted_by_kind),
        "rejected": dict(report.rejected.most_common()),
        "rejected_by_kind": d["rejected_by_kind"],
        "distinct_skeletons": d["distinct_skeletons"],
    }
    benchmark.extra_info.update(info)
    print(
        f"\n{domain.name:<8} {mode:<8} augment={'all' if augment else '-':<4} "
        f"{info['candidates_per_cpu_s']:>6.0f} candidates/cpu-s  "
        f"{info['accepted_per_cpu_s']:>6.0f} accepted/cpu-s ({info['accepted_per_wall_s']:.0f}/wall-s)  "
        f"acceptance {100 * info['acceptance_rate']:.0f}%  skeletons {info['distinct_skeletons']}\n"
        f"         accepted {info['accepted_by_kind']}  rejected {info['rejected_by_kind']}"
    )
    assert report.accepted


@pytest.mark.skipif(
    not os.environ.get("RODS_BENCH_GENERATIONS"),
    reason="ten generations of expand on every train seed, both domains (a few minutes): set "
    "RODS_BENCH_GENERATIONS=1 (tests/synthesis/test_generations.py checks a sample in CI)",
)
def test_generations(benchmark):
    """Issue 19's table: each generation expanded from the previous one's output (per seed
    1), ten generations, every train seed of both domains; accepted tasks per generation,
    their mean difficulty knobs, and CPU seconds."""
    rows: list[str] = []

    def run() -> None:
        for name in DOMAINS:
            domain = rods_env.load_domain(name)
            parents = domain.seed_tasks("train")
            counts = []
            for generation in range(1, 11):
                start = time.process_time()
                parents = [
                    o.task
                    for o in synthesize(parents, per_seed=1, mode="expand", domains=domain)
                    if o.accepted
                ]
                cpu = time.process_time() - start
                counts.append(len(parents))
                knobs = [t.signature.knobs for t in parents if t.signature is not None]
                mean = {k: sum(x[k] for x in knobs) / len(knobs) for k in knobs[0]} if knobs else {}
                rows.append(
                    f"| {name} | {generation} | {len(parents)} | "
                    + " | ".join(
                        f"{mean.get(k, 0):.2f}" for k in ("depth", "width", "turns", "skills")
                    )
                    + f" | {cpu:.1f} |"
                )
                if not parents:
                    break
            benchmark.extra_info[name] = counts
            assert min(counts) >= 0.5 * counts[0], counts

    benchmark.pedantic(run, rounds=1, iterations=1)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    print()
    print(
        f"Measured {datetime.date.today().isoformat()} at commit {commit or '?'} by "
        "`RODS_BENCH_GENERATIONS=1 pytest benchmarks/test_synthesis.py -k generations "
        "--benchmark-only -s`:"
    )
    print()
    print("| domain | generation | accepted | depth | width | turns | skills | CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
