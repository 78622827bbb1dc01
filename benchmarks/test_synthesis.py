"""Synthesis speed per core: validated variants per second on the real domains.

A *candidate* is one variant taken through the whole pipeline: the skill draws entities
(from the customers of the seed's split), the gold calls execute, the template Rewrite
runs, the critique runs (every check, the policy checks and the no-ask check included):
accepted or rejected. Reported per domain and mode, single process and thread: candidates
and accepted (validated) variants per second of *CPU time* of this process (per core: a
shared machine's other jobs do not count) and of wall time, the acceptance rate,
rejections by reason and distinct request skeletons (in ``extra_info`` of pytest-benchmark's
JSON, and printed). Targets: >= 500 validated variants per CPU-second in retail and
airline, >= 250 in the BFCL API world (issue 28), with the template rewrite.

Run: ``pytest benchmarks/test_synthesis.py --benchmark-only -s``.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import rods_env
from rods_env.gold import GOLD_CACHE
from rods_env.synthesis import AUGMENTS, SynthesisReport, synthesize

ROOT = Path(__file__).resolve().parents[1]


def _installed(name: str) -> bool:
    """Whether domain ``name`` loads here (the BFCL API world needs bfcl-eval)."""
    if name not in rods_env.domain_names():
        return False
    try:
        rods_env.load_domain(name)
    except rods_env.RodsError:
        return False
    return True


DOMAINS = [n for n in ("retail", "airline", "bfcl-api") if _installed(n)]
PER_SEED = 2
TARGETS = {"retail": 500, "airline": 500, "bfcl-api": 250}
"""Accepted variants per CPU-second each domain's synthesis should reach (per core)."""

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
    """Issue 19's table (and issue 28's for the BFCL API world): each generation expanded
    from the previous one's output (per seed 1), ten generations, every train seed of each
    domain (``RODS_BENCH_DOMAINS=bfcl-api`` picks domains); accepted tasks per generation,
    their mean difficulty knobs, the steps that made them, and CPU seconds."""
    rows: list[str] = []

    def run() -> None:
        for name in _chosen(DOMAINS):
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
                steps = Counter(t.provenance.step for t in parents)
                rows.append(
                    f"| {name} | {generation} | {len(parents)} | "
                    + " | ".join(
                        f"{mean.get(k, 0):.2f}" for k in ("depth", "width", "turns", "skills")
                    )
                    + f" | {', '.join(f'{s} {n}' for s, n in steps.most_common())} | {cpu:.1f} |"
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
    print("| domain | generation | accepted | depth | width | turns | skills | steps | CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


def _chosen(names: list[str]) -> list[str]:
    """``names``, or those ``RODS_BENCH_DOMAINS`` lists (comma-separated)."""
    wanted = [n for n in os.environ.get("RODS_BENCH_DOMAINS", "").split(",") if n]
    return [n for n in names if not wanted or n in wanted]


SPEED_CASES = [
    (name, mode, augment)
    for name in _chosen(DOMAINS)
    for mode, augment in (("resample", "none"), ("resample", "all"), ("expand", "none"))
]


def _worker(side: Path | None, name: str, mode: str, augment: str, runs: int) -> dict:
    """One measurement in a fresh process (benchmarks/synthesis_worker.py), of this checkout
    (``side`` None) or of the ``rods_env`` and ``environments`` extracted under ``side``."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if side is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(side), env.get("PYTHONPATH")]))
    command = [sys.executable, str(ROOT / "benchmarks" / "synthesis_worker.py"), name, mode]
    command += ["--augment", augment, "--runs", str(runs), "--per-seed", str(PER_SEED)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(
    not os.environ.get("RODS_BENCH_BASELINE"),
    reason="this checkout against another commit, alternating, every mode (several minutes): "
    "set RODS_BENCH_BASELINE=<commit> (e.g. main)",
)
def test_speed_against_baseline(benchmark, tmp_path):
    """Accepted variants per CPU-second of this checkout and of ``RODS_BENCH_BASELINE``,
    measured alternately in fresh processes under the same load (``RODS_BENCH_ROUNDS``
    alternations, default 2, each of 2 timed runs; the best run of each side is reported,
    as the least disturbed by other jobs). Both sides must synthesize the same pools and
    reject the same candidates for the same reasons (the workers' fingerprints), except in
    the domains ``RODS_BENCH_CHANGED`` lists (comma-separated), whose output the change
    measured is meant to change (the table says whether they differ)."""
    baseline = os.environ["RODS_BENCH_BASELINE"]
    changed = {n for n in os.environ.get("RODS_BENCH_CHANGED", "").split(",") if n}
    rounds = int(os.environ.get("RODS_BENCH_ROUNDS", "2"))
    git = ["git", "-C", str(ROOT)]
    base_commit = subprocess.run(
        [*git, "rev-parse", "--short", baseline], capture_output=True, text=True, check=True
    ).stdout.strip()
    head = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    archive = subprocess.run(
        [*git, "archive", base_commit, "rods_env", "environments"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    rows: list[str] = []

    def run() -> None:
        for name, mode, augment in SPEED_CASES:
            results: dict[str, list[dict]] = {"base": [], "this": []}
            for _ in range(rounds):
                results["base"].append(_worker(tmp_path, name, mode, augment, 2))
                results["this"].append(_worker(None, name, mode, augment, 2))
            assert str(tmp_path) in results["base"][0]["rods_env"]  # the baseline ran
            assert str(ROOT) in results["this"][0]["rods_env"]
            prints = {side: {r["fingerprint"] for r in rs} for side, rs in results.items()}
            same = prints["base"] == prints["this"]
            assert same or name in changed, f"{name} {mode} {augment}: outputs differ"
            best = {
                side: max(a / c for r in rs for a, c in zip(r["accepted"], r["cpu"], strict=True))
                for side, rs in results.items()
            }
            cand = {
                side: max(n / c for r in rs for n, c in zip(r["candidates"], r["cpu"], strict=True))
                for side, rs in results.items()
            }
            label = f"{mode} + all augmentations" if augment == "all" else mode
            benchmark.extra_info[f"{name} {label}"] = {"this": best["this"], "base": best["base"]}
            accepted = {side: rs[0]["accepted"][0] for side, rs in results.items()}
            rows.append(
                f"| {name} | {label} | **{best['this']:.0f}** | {best['base']:.0f} | "
                f"{best['this'] / best['base']:.2f}x | {cand['this']:.0f} | {cand['base']:.0f} | "
                f"{accepted['this']} | {accepted['base']} | {'same' if same else 'changed'} | "
                f"{'yes' if best['this'] >= TARGETS[name] else 'no'} ({TARGETS[name]}) |"
            )

    benchmark.pedantic(run, rounds=1, iterations=1)
    load = os.getloadavg()
    knobs = " ".join(
        f"{k}={os.environ[k]}"
        for k in ("RODS_BENCH_CHANGED", "RODS_BENCH_DOMAINS")
        if k in os.environ
    )
    print()
    print(
        f"Measured {datetime.date.today().isoformat()}, this checkout at {head}"
        f"{' (with uncommitted changes)' if dirty else ''} against {base_commit}, alternating "
        f"{rounds} times, best of {2 * rounds} runs each, load {load[0]:.1f} at the end, by "
        f"`RODS_BENCH_BASELINE={baseline} {knobs + ' ' if knobs else ''}pytest "
        "benchmarks/test_synthesis.py -k baseline --benchmark-only -s`:"
    )
    print()
    print(
        f"| domain | mode | accepted / CPU-s | {base_commit} | speed-up | "
        f"candidates / CPU-s | {base_commit} | accepted (first run) | {base_commit} | "
        "outputs | target |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
