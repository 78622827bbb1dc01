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
