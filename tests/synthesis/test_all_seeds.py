"""Issue contract: every accepted variant of every seed task is valid.

One variant per seed task (train and test), in both modes, with every augmentation: the
oracle solves it, a talk-only agent gets nothing, and its signature equals its parent's
(resample) or is one step larger (expand: the step the task's provenance records).
"""

from __future__ import annotations

import pytest

import rods_env
from rods_env.synthesis import AUGMENTS, synthesize
from rods_env.synthesis.critique import check_signature
from tests.synthesis.conftest import assert_valid, base_seeded_domains

BASE_SEEDED = base_seeded_domains()
"""Domains whose seeds are base tasks (the BFCL API world's seeds carry BFCL's styles; its
pool is checked in tests/environments/bfcl/test_world_tasks.py)."""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["resample", "expand"])
@pytest.mark.parametrize("name", BASE_SEEDED)
def test_every_accepted_variant_of_every_seed_task_is_valid(name, mode):
    domain = rods_env.load_domain(name)
    seeds = domain.seed_tasks()
    parents = {t.id: t for t in seeds}
    outcomes = list(synthesize(seeds, per_seed=1, mode=mode, augment=AUGMENTS, seed=7))
    accepted = [o.task for o in outcomes if o.accepted]
    base = {t.id: t for t in accepted if t.variant == "base"}
    # most seeds yield a variant, in both modes (expand composes requests of the customer
    # where a skill's own axes are at their limit)
    assert len({t.provenance.parent_id for t in base.values()}) >= 150
    for task in accepted:
        assert_valid(domain, task)
        if task.variant == "base":
            parent = parents[task.provenance.parent_id]
            if mode == "resample":
                assert task.signature == parent.signature, task.id
            else:
                check_signature(parent.signature, task.signature, "expand", task.provenance.step)
        else:
            assert task.provenance.parent_id in base, task.id
