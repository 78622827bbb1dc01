"""The boundary detector: group statistics and zones by configurable thresholds."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rods_agent.data import GroupStats, Thresholds
from rods_env.errors import ConfigError

rewards = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=16)


@given(rewards)
def test_group_stats_are_the_population_mean_and_std(values):
    stats = GroupStats.of(values)
    assert stats.n == len(values)
    assert stats.mean == pytest.approx(statistics.fmean(values), abs=1e-12)
    assert stats.std == pytest.approx(statistics.pstdev(values), abs=1e-9)


@given(rewards, st.floats(0.05, 0.45), st.floats(0.55, 0.95))
def test_zones_follow_the_thresholds(values, hard, mastered):
    thresholds = Thresholds(mastered=mastered, hard=hard)
    stats = GroupStats.of(values)
    zone = thresholds.zone(stats)
    if stats.mean >= mastered:
        assert zone == "mastered"
    elif stats.mean <= hard:
        assert zone == "hard"
    elif stats.std > thresholds.min_std:
        assert zone == "boundary"
    else:
        assert zone == "hard"


def test_zones_of_typical_groups():
    t = Thresholds(mastered=0.9, hard=0.1)
    assert t.zone(GroupStats.of([1.0] * 8)) == "mastered"
    assert t.zone(GroupStats.of([1.0] * 7 + [0.5])) == "mastered"  # mean 0.9375
    assert t.zone(GroupStats.of([0.0] * 8)) == "hard"
    assert t.zone(GroupStats.of([1.0, 0.0, 0.0, 0.0])) == "boundary"
    # every rollout passes the first of two turns and fails the second: stuck, no signal
    assert t.zone(GroupStats.of([0.5] * 8)) == "hard"
    assert not t.has_signal(GroupStats.of([0.5] * 8))
    assert t.has_signal(GroupStats.of([1.0] * 7 + [0.5]))


@pytest.mark.parametrize(("hard", "mastered"), [(0.5, 0.5), (0.6, 0.4), (-0.1, 0.9), (0.1, 1.5)])
def test_inconsistent_thresholds_are_a_config_error(hard, mastered):
    with pytest.raises(ConfigError, match="hard < mastered"):
        Thresholds(mastered=mastered, hard=hard)
