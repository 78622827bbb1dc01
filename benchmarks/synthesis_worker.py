"""One synthesis speed measurement in a process of its own, printed as one JSON line.

``benchmarks/test_synthesis.py`` runs it on this checkout and, for the in-run baseline, on
another commit's ``rods_env`` and ``environments`` (extracted with ``git archive`` and put
first on ``PYTHONPATH``), alternating the two, so both are measured under the same load. It
uses only the public synthesis API, which both sides share.

Each measured run synthesizes around every train seed of the domain with a round of its own
(``round=0, 1, ...``): no run repeats another's candidates, so a cache can only help with
what one run itself asks for again. The fingerprint is a hash of every outcome of every
run (accepted tasks with their dedupe keys, rejections with their reasons and details): two
versions that synthesize the same pools and reject the same candidates for the same reasons
print the same fingerprint.

Run: ``python benchmarks/synthesis_worker.py retail expand --runs 3`` (``--augment all`` for
every augmentation).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def measure(domain_name: str, mode: str, augment: str, runs: int, per_seed: int) -> dict:
    """Warm the domain up as the benchmark fixture does, then time ``runs`` rounds.

    Returns:
        ``rods_env`` (where it was imported from), ``cpu`` and ``wall`` seconds per run,
        ``candidates`` and ``accepted`` per run, and ``fingerprint``.
    """
    import rods_env
    from rods_env.gold import GOLD_CACHE
    from rods_env.synthesis import AUGMENTS, SynthesisReport, synthesize

    kinds = tuple(AUGMENTS) if augment == "all" else ()
    domain = rods_env.load_domain(domain_name)
    for size in ("default", "long-8k", "long-16k"):
        if size in domain.sizes:
            domain.base(0, size)  # generated once per process, not part of synthesis
    for task in domain.seed_tasks():
        GOLD_CACHE.get(domain, task)
    list(synthesize(domain.seed_tasks("train")[:3], per_seed=1, augment=AUGMENTS))  # warm up
    seeds = domain.seed_tasks("train")
    digest = hashlib.sha256()
    out: dict = {"rods_env": os.path.dirname(rods_env.__file__), "cpu": [], "wall": []}
    out.update(candidates=[], accepted=[])
    for round_ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        report = SynthesisReport(seeds)
        outcomes = []
        for outcome in synthesize(
            seeds, per_seed=per_seed, mode=mode, augment=kinds, domains=domain, round=round_
        ):
            report.add(outcome)
            outcomes.append(outcome)
        report.finish()
        out["cpu"].append(time.process_time() - start_cpu)
        out["wall"].append(time.perf_counter() - start)
        out["candidates"].append(report.candidates)
        out["accepted"].append(len(report.accepted))
        for o in outcomes:  # after the clock: the fingerprint is not part of synthesis
            if o.accepted:
                digest.update(o.task.model_dump_json().encode())
                digest.update(o.key.encode())
            else:
                row = [o.parent_id, o.reason, o.detail, o.mode, o.augment]
                digest.update(json.dumps(row).encode())
    out["fingerprint"] = digest.hexdigest()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("domain")
    parser.add_argument("mode", choices=("resample", "expand"))
    parser.add_argument("--augment", choices=("none", "all"), default="none")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--per-seed", type=int, default=2)
    args = parser.parse_args()
    result = measure(args.domain, args.mode, args.augment, args.runs, args.per_seed)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
