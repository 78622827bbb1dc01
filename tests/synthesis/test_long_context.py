"""Long-context variants are controlled pairs of their base variant, and really long."""

from __future__ import annotations

from collections import defaultdict

import pytest

import rods_env
from rods_env.gold import replay_gold
from rods_env.padding import long_size_tokens
from rods_env.signature import compute_signature
from rods_env.synthesis import synthesize
from rods_env.synthesis.augment import output_chars
from tests.synthesis.conftest import assert_valid

DOMAINS = ["retail", "airline"]


def _one_per_skill(domain):
    by_skill = defaultdict(list)
    for t in domain.seed_tasks("train"):
        by_skill[t.skill].append(t)
    return [tasks[0] for tasks in by_skill.values()]


def _pairs(domain, seeds, **kw):
    out = [o for o in synthesize(seeds, per_seed=1, augment=("long_context",), **kw)]
    accepted = {o.task.id: o.task for o in out if o.accepted}
    pairs = [
        (accepted[t.provenance.parent_id], t)
        for t in accepted.values()
        if t.variant == "long_context"
    ]
    return pairs, out


@pytest.mark.slow
@pytest.mark.parametrize("name", DOMAINS)
def test_a_long_variant_is_the_same_task_on_a_longer_world(name):
    domain = rods_env.load_domain(name)
    pairs, out = _pairs(domain, _one_per_skill(domain))
    rejected = [o for o in out if not o.accepted and o.augment == "long_context"]
    assert len(pairs) >= len(domain.skills) - 2 and not rejected, [o.detail for o in rejected]
    for base, long in pairs:
        # the same requests, user, entities, gold calls and required outputs
        assert long.turns == base.turns and long.user == base.user
        assert long.signature == base.signature and long.shape == base.shape
        assert base.db_size == "default" and long_size_tokens(long.db_size) >= 8000
        short_gold, long_gold = replay_gold(domain, base), replay_gold(domain, long)
        # the value flow traced in full through the padded outputs is the base's
        assert compute_signature(long, long_gold, domain.toolkit.write_names()) == long.signature
        assert [set(t.effect) for t in long_gold.turns] == [set(t.effect) for t in short_gold.turns]
        # and at least 4x the tool-output characters
        assert output_chars(long_gold) >= 4 * output_chars(short_gold), long.skill
    for _, long in pairs[:4]:
        assert_valid(domain, long)  # the oracle solves it; doing nothing earns nothing


@pytest.mark.parametrize("name", DOMAINS)
def test_the_size_knob_reaches_model_context_lengths(name):
    domain = rods_env.load_domain(name)
    seeds = [t for t in _one_per_skill(domain) if t.skill != "product_info"][:2]
    pairs, _ = _pairs(domain, seeds, long_tokens=32_000)
    assert len(pairs) == len(seeds)
    for base, long in pairs:
        assert long.db_size == "long-32k"
        chars = output_chars(replay_gold(domain, long))
        assert chars >= 0.75 * 32_000 * 4  # about 32k tokens of 4 characters
        assert chars >= 4 * output_chars(replay_gold(domain, base))


def test_a_long_seed_is_resampled_as_a_long_pair():
    domain = rods_env.load_domain("retail")
    seed = _one_per_skill(domain)[0]
    (_, long), *_ = _pairs(domain, [seed])[0]
    again = [o.task for o in synthesize([long], per_seed=2) if o.accepted]
    assert again and all(t.variant == "long_context" for t in again)
    assert {t.db_size for t in again} == {long.db_size}
    for task in again:
        assert task.provenance.augment == "long_context" and task.signature == long.signature
        assert output_chars(replay_gold(domain, task)) > 4 * output_chars(
            replay_gold(domain, task.model_copy(update={"db_size": "default"}))
        )
