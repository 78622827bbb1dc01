"""Synthesis speed per core: validated variants per second on the real domains.

A *candidate* is one variant taken through the whole pipeline: the skill draws entities,
the gold calls execute, the critique runs (accepted or rejected). Reported per domain and
mode, single process and thread (= per core): candidates/s and accepted variants/s, the
acceptance rate, and rejections by reason (in ``extra_info`` of the benchmark JSON and
printed). Target: >= 500 validated variants/s per core.

Run: ``pytest benchmarks/test_synthesis.py --benchmark-only -s``.
"""

from __future__ import annotations

import statistics
import time

import pytest

import rods_env
from rods_env.gold import GOLD_CACHE
from rods_env.synthesis import AUGMENTS, SynthesisReport, synthesize

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
    for size in ("default", "long"):
        if size in domain.sizes:
            domain.base(0, size)  # generated once per process, not part of synthesis
    for task in domain.seed_tasks():
        GOLD_CACHE.get(domain, task)
    return domain


@pytest.mark.parametrize(("mode", "augment"), CASES)
def test_synthesis_rate(benchmark, domain, mode, augment):
    seeds = domain.seed_tasks("train")
    reports: list[SynthesisReport] = []

    durations: list[float] = []

    def run() -> SynthesisReport:
        start = time.perf_counter()
        report = SynthesisReport(seeds)
        for outcome in synthesize(seeds, per_seed=PER_SEED, mode=mode, augment=augment):
            report.add(outcome)
        report.finish()
        reports.append(report)
        durations.append(time.perf_counter() - start)
        return report

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    report = reports[-1]
    seconds = statistics.median(durations)  # also set with --benchmark-disable (smoke runs)
    info = {
        "domain": domain.name,
        "mode": mode,
        "augment": list(augment),
        "seeds": len(seeds),
        "candidates": report.candidates,
        "accepted": len(report.accepted),
        "candidates_per_s": round(report.candidates / seconds, 1),
        "accepted_per_s": round(len(report.accepted) / seconds, 1),
        "acceptance_rate": round(len(report.accepted) / max(report.candidates, 1), 3),
        "accepted_by_kind": dict(report.accepted_by_kind),
        "rejected": dict(report.rejected.most_common()),
    }
    benchmark.extra_info.update(info)
    print(
        f"\n{domain.name:<8} {mode:<8} augment={','.join(augment) or '-':<10.10} "
        f"{info['candidates_per_s']:>7.0f} candidates/s  {info['accepted_per_s']:>7.0f} accepted/s  "
        f"acceptance {100 * info['acceptance_rate']:.0f}%  rejected {info['rejected']}"
    )
    assert report.accepted
