"""Issue 19's contract on a sample: expanding each generation's output for ten generations
keeps at least half of generation 1's accepted count in every generation, in both domains
(the full table over every train seed: ``RODS_BENCH_GENERATIONS=1 pytest
benchmarks/test_synthesis.py -k generations --benchmark-only -s``)."""

from __future__ import annotations

import pytest

import rods_env
from rods_env.synthesis import synthesize

GENERATIONS = 10


def generation_counts(domain, seeds, generations: int = GENERATIONS) -> list[int]:
    """Accepted tasks per generation, each generation expanded from the previous one's
    output (per seed 1)."""
    counts, parents = [], seeds
    for _ in range(generations):
        parents = [
            o.task for o in synthesize(parents, per_seed=1, mode="expand", domains=domain)
            if o.accepted
        ]  # fmt: skip
        counts.append(len(parents))
        if not parents:
            break
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("name", ["retail", "airline"])
def test_ten_generations_keep_half_of_the_first(name):
    domain = rods_env.load_domain(name)
    seeds = domain.seed_tasks("train")[::5]  # 30 and 32 seeds, every skill
    counts = generation_counts(domain, seeds)
    assert len(counts) == GENERATIONS and counts[0] >= 0.9 * len(seeds), counts
    assert min(counts) >= 0.5 * counts[0], counts


@pytest.mark.slow
def test_bfcl_api_ten_generations_keep_half_of_the_first():
    """Issue 28: the BFCL API world expands for ten generations (its requests compose over
    every class's actions, in a turn, in new turns, and chained on an earlier request's
    result); before, 149, 99, 30, 15 and 0."""
    from environments.bfcl.apis import bfcl_missing
    from tests.requires import require

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")
    domain = rods_env.load_domain("bfcl-api")
    seeds = domain.seed_tasks("train")[::7]  # 32 seeds, every class combination and style
    counts = generation_counts(domain, seeds)
    assert len(counts) == GENERATIONS and counts[0] >= 0.7 * len(seeds), counts
    assert min(counts) >= 0.5 * counts[0], counts
