"""The replay buffer on synthetic statistics: injection caps, probation, retirement, parking."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from rods_agent.data import GroupStats, ReplayBuffer, Thresholds
from rods_agent.training.config import DataConfig
from rods_env.errors import RodsError

from .conftest import synthetic

THRESHOLDS = Thresholds()
MASTERED = GroupStats.of([1.0] * 8)
HARD = GroupStats.of([0.0] * 8)
BOUNDARY = GroupStats.of([1.0, 0.0] * 4)


def visit(buffer: ReplayBuffer, task_id: str, stats: GroupStats, step: int):
    return buffer.visit(task_id, stats, THRESHOLDS.zone(stats), step=step)


def make(config: DataConfig, seeds, *, dynamic: bool = True) -> ReplayBuffer:
    buffer = ReplayBuffer(config, dynamic=dynamic)
    for task in seeds:
        buffer.add_seed(task)
    return buffer


def test_capacity_admission_rate_and_synthesized_cap(retail_train):
    config = DataConfig(capacity=10, admit_per_step=2, p_max=0.3, hard_m=1)
    seeds = retail_train[:10]
    buffer = make(config, seeds)
    for seed in seeds[:5]:  # parked: their places stay theirs (they are retried)
        assert visit(buffer, seed.id, HARD, 0) == "parked"
    for i in range(8):
        buffer.offer(synthetic(retail_train[0], i), f"k{i}", step=0)
    assert buffer.composition()["candidates"] == 8
    assert buffer.admit(0) == {"retried": 0, "synthesized": 2, "seeds": 0}  # the rate
    assert buffer.admit(1)["synthesized"] == 1  # the cap: 3 = 0.3 x 10 synthesized
    assert buffer.admit(2)["synthesized"] == 0
    pool = buffer.composition()
    assert pool["synthesized"] == 3 and pool["seed"] == 5 and pool["candidates"] == 5
    assert pool["active"] == 8  # room the parked seeds will take again
    # candidates enter in the order they were made
    assert [t.id for t in buffer.tasks() if t.provenance.origin == "synthesized"] == [
        f"{retail_train[0].id}-syn{i}" for i in range(3)
    ]


def test_room_no_seed_can_take_goes_to_synthesized_tasks(retail_train):
    """p_max keeps the starting pool's place while it has tasks to fill it; as they are
    retired, the room they leave goes to synthesized tasks, and the pool stays full."""
    config = DataConfig(capacity=4, admit_per_step=4, p_max=0.5, mastered_k=1)
    seeds = retail_train[:5]
    buffer = make(config, seeds)  # 4 active, 1 waiting
    for i in range(8):
        buffer.offer(synthetic(retail_train[6], i), f"k{i}", step=0)
    assert buffer.synthesized_cap() == 2
    for step, seed in enumerate(seeds):
        assert visit(buffer, seed.id, MASTERED, step) == "retired"
        buffer.admit(step)
        left = len(seeds) - step - 1
        assert buffer.synthesized_cap() == max(2, 4 - left)
        assert buffer.count("active") == 4  # always full
    pool = buffer.composition()
    assert pool["seed"] == 0 and pool["synthesized"] == 4


def test_seeds_beyond_capacity_wait_and_enter_as_room_frees(retail_train):
    config = DataConfig(capacity=4, mastered_k=1)
    buffer = make(config, retail_train[:6])
    assert buffer.count("active") == 4 and buffer.count("waiting") == 2
    first = buffer.tasks()[0].id
    assert visit(buffer, first, MASTERED, 0) == "retired"
    assert buffer.admit(0)["seeds"] == 1
    assert buffer.count("active") == 4
    assert retail_train[4].id in [t.id for t in buffer.tasks()]


def test_probation_keeps_only_candidates_confirmed_at_the_boundary(retail_train):
    config = DataConfig(confirm_visits=2, admit_per_step=8)
    buffer = make(config, retail_train[:2])
    a, b, c = (synthetic(retail_train[0], i) for i in range(3))
    for i, task in enumerate((a, b, c)):
        buffer.offer(task, f"k{i}", step=0)
    buffer.admit(0)
    assert visit(buffer, a.id, MASTERED, 1) == "dropped"
    assert visit(buffer, b.id, HARD, 1) == "dropped"
    assert visit(buffer, c.id, BOUNDARY, 1) is None  # one of two confirming visits
    assert visit(buffer, c.id, BOUNDARY, 2) == "confirmed"
    assert {t.id for t in buffer.tasks()} == {retail_train[0].id, retail_train[1].id, c.id}
    assert [r["reason"] for r in buffer.removed] == ["not_boundary", "not_boundary"]
    # once confirmed, a mastered visit no longer drops it
    assert visit(buffer, c.id, MASTERED, 3) is None


def test_mastered_k_in_a_row_retires_and_a_boundary_visit_resets_the_streak(retail_train):
    buffer = make(DataConfig(mastered_k=3), retail_train[:3])
    tid = retail_train[0].id
    assert visit(buffer, tid, MASTERED, 0) is None
    assert visit(buffer, tid, MASTERED, 1) is None
    assert visit(buffer, tid, BOUNDARY, 2) is None
    assert visit(buffer, tid, MASTERED, 3) is None
    assert visit(buffer, tid, MASTERED, 4) is None
    assert visit(buffer, tid, MASTERED, 5) == "retired"
    assert tid not in buffer.entries
    assert buffer.removed[-1] == {
        "id": tid,
        "reason": "mastered",
        "step": 5,
        "origin": "seed",
        "generation": 0,
        "visits": 6,
    }


def test_hard_m_in_a_row_parks_then_retries_with_a_doubled_wait(retail_train):
    buffer = make(DataConfig(hard_m=2, park_steps=10), retail_train[:20])
    tid = retail_train[0].id
    assert visit(buffer, tid, HARD, 0) is None
    assert visit(buffer, tid, HARD, 1) == "parked"
    assert buffer.entries[tid].parked_until == 11
    rng = random.Random(0)
    for _ in range(50):  # a parked task is never sampled while the pool is big enough
        assert tid not in [t.id for t in buffer.sample(8, rng)]
    assert buffer.admit(10)["retried"] == 0
    assert buffer.admit(11)["retried"] == 1
    assert buffer.entries[tid].status == "active"
    # still hard on the retry: parked again at once, for twice as long
    assert visit(buffer, tid, HARD, 12) == "parked"
    assert buffer.entries[tid].parked_until == 12 + 20
    buffer.admit(32)
    # learnable now: the streak resets and it stays
    assert visit(buffer, tid, BOUNDARY, 33) is None
    assert visit(buffer, tid, HARD, 34) is None
    assert buffer.entries[tid].status == "active"


def test_age_limit_retires_synthesized_tasks_only(retail_train):
    buffer = make(DataConfig(max_age=5, admit_per_step=8), retail_train[:2])
    task = synthetic(retail_train[0], 0)
    buffer.offer(task, "k0", step=0)
    buffer.admit(1)
    assert buffer.expire(5) == []
    assert buffer.expire(6) == [task.id]
    assert buffer.removed[-1]["reason"] == "age"
    assert buffer.count("active") == 2  # the seeds stay, however old


def test_sampling_favours_recent_variance(retail_train):
    tasks = retail_train[:20]
    buffer = make(DataConfig(variance_weight=4.0), tasks)
    for i, task in enumerate(tasks):
        visit(buffer, task.id, BOUNDARY if i < 5 else GroupStats.of([0.5] * 8), 0)
    rng = random.Random(0)
    counts = Counter(t.id for _ in range(2000) for t in buffer.sample(4, rng))
    boundary = sum(counts[t.id] for t in tasks[:5]) / 5
    flat = sum(counts[t.id] for t in tasks[5:]) / 15
    assert boundary > 2.5 * flat


def test_a_fixed_pool_samples_uniformly_and_never_retires(retail_train):
    tasks = retail_train[:20]
    buffer = make(DataConfig(capacity=5, mastered_k=1, hard_m=1), tasks, dynamic=False)
    assert buffer.count("active") == 20  # no capacity in the fixed-pool modes
    for i, task in enumerate(tasks):
        assert visit(buffer, task.id, BOUNDARY if i < 5 else MASTERED, 0) is None
    rng = random.Random(0)
    counts = Counter(t.id for _ in range(4000) for t in buffer.sample(4, rng))
    assert max(counts.values()) / min(counts.values()) < 1.3
    assert buffer.admit(1) == {"retried": 0, "synthesized": 0, "seeds": 0}


def test_short_pool_retries_parked_tasks_early(retail_train):
    buffer = make(DataConfig(hard_m=1, park_steps=100), retail_train[:3])
    for task in retail_train[:2]:
        visit(buffer, task.id, HARD, 0)
    got = buffer.sample(3, random.Random(0))
    assert len(got) == 3
    assert visit(buffer, retail_train[0].id, BOUNDARY, 1) is None
    assert buffer.entries[retail_train[0].id].status == "active"


def test_history_is_bounded_and_zones_recorded(retail_train):
    buffer = make(DataConfig(history=3), retail_train[:1], dynamic=False)
    tid = retail_train[0].id
    for step, stats in enumerate([MASTERED, HARD, BOUNDARY, BOUNDARY, HARD]):
        visit(buffer, tid, stats, step)
    entry = buffer.entries[tid]
    assert [v[:2] for v in entry.history] == [[2, "boundary"], [3, "boundary"], [4, "hard"]]
    assert entry.visits == 5 and entry.zone == "hard"


def test_unknown_task_and_duplicate_ids_are_errors(retail_train):
    buffer = make(DataConfig(), retail_train[:2])
    with pytest.raises(RodsError, match="does not hold"):
        visit(buffer, "nope", BOUNDARY, 0)
    with pytest.raises(RodsError, match="appears twice"):
        buffer.add_seed(retail_train[0])


def test_state_round_trip_restores_every_entry(retail_train):
    config = DataConfig(capacity=4, admit_per_step=1, hard_m=1)
    buffer = make(config, retail_train[:5])
    buffer.offer(synthetic(retail_train[0], 0), "k0", step=0)
    buffer.admit(0)
    visit(buffer, retail_train[1].id, HARD, 1)
    visit(buffer, retail_train[2].id, BOUNDARY, 1)
    state = buffer.state_dict()
    again = ReplayBuffer(config, dynamic=True)
    again.load_state_dict(state, {t.id: t for t in retail_train[:5]})
    assert again.state_dict() == state
    assert [e.task for e in again] == [e.task for e in buffer]
    with pytest.raises(RodsError, match="not in the training pool"):
        ReplayBuffer(config, dynamic=True).load_state_dict(state, {})


def test_a_full_pool_evicts_tasks_last_seen_mastered_for_candidates(retail_train):
    config = DataConfig(capacity=4, admit_per_step=2, p_max=1.0, mastered_k=3)
    seeds = retail_train[:4]
    buffer = make(config, seeds)
    visit(buffer, seeds[0].id, MASTERED, 0)  # streak 1 of 3: not retired, but evictable
    visit(buffer, seeds[1].id, BOUNDARY, 0)
    visit(buffer, seeds[2].id, GroupStats.of([1.0] * 7 + [0.0]), 0)  # mastered, some variance
    for i in range(3):
        buffer.offer(synthetic(retail_train[5], i), f"k{i}", step=0)
    assert buffer.admit(1)["synthesized"] == 2
    # the lowest recent variance goes first; the boundary and the unvisited task stay
    assert [r["id"] for r in buffer.removed] == [seeds[0].id, seeds[2].id]
    assert {r["reason"] for r in buffer.removed} == {"evicted"}
    active = {t.id for t in buffer.tasks()}
    assert {seeds[1].id, seeds[3].id} <= active and len(active) == 4
    # nothing left to evict: the last candidate waits
    assert buffer.admit(2)["synthesized"] == 0
    assert buffer.composition()["candidates"] == 1


def test_a_full_pool_with_a_retry_due_still_evicts_and_admits(retail_train):
    config = DataConfig(capacity=3, admit_per_step=2, p_max=1.0, mastered_k=3, hard_m=1,
                        park_steps=2)  # fmt: skip
    seeds = retail_train[:4]
    buffer = make(config, seeds)  # 3 active, 1 waiting
    assert visit(buffer, seeds[0].id, HARD, 0) == "parked"  # due again at step 2
    assert buffer.admit(1)["seeds"] == 1  # the waiting seed takes its place: the pool is full
    visit(buffer, seeds[1].id, MASTERED, 1)  # evictable
    visit(buffer, seeds[2].id, MASTERED, 1)  # evictable
    for i in range(2):
        buffer.offer(synthetic(retail_train[5], i), f"k{i}", step=1)
    assert buffer.count("active") == config.capacity
    # A retry is due and the pool is full: the mastered tasks make room for the retry and
    # a candidate (the rate would allow two; the room is two).
    assert buffer.admit(2) == {"retried": 1, "synthesized": 1, "seeds": 0}
    assert sorted(r["id"] for r in buffer.removed) == sorted([seeds[1].id, seeds[2].id])
    assert buffer.entries[seeds[0].id].status == "active"
    assert buffer.count("active") == config.capacity


def test_eviction_frees_no_room_that_nothing_may_take(retail_train):
    config = DataConfig(capacity=3, admit_per_step=1, p_max=1.0, mastered_k=3)
    seeds = retail_train[:3]
    buffer = make(config, seeds)
    for seed in seeds:
        visit(buffer, seed.id, MASTERED, 0)
    for i in range(3):
        buffer.offer(synthetic(retail_train[5], i), f"k{i}", step=0)
    # Three candidates wait, but one may enter per step: one eviction, not three.
    assert buffer.admit(1) == {"retried": 0, "synthesized": 1, "seeds": 0}
    assert len(buffer.removed) == 1 and buffer.count("active") == 3


def test_exhausted_when_only_tasks_parked_since_the_last_signal_remain(retail_train):
    buffer = make(DataConfig(hard_m=1, mastered_k=1), retail_train[:3])
    visit(buffer, retail_train[0].id, HARD, 0)
    visit(buffer, retail_train[1].id, MASTERED, 0)
    assert len(buffer.sample(3, random.Random(0))) == 2  # the parked one retried early
    visit(buffer, retail_train[2].id, BOUNDARY, 1)  # the policy learns something at step 1
    visit(buffer, retail_train[2].id, MASTERED, 2)
    assert buffer.count("parked") == 1 and buffer.count("active") == 0
    assert not buffer.exhausted(since=1)  # parked at step 0, before the last signal: retry
    assert [t.id for t in buffer.sample(3, random.Random(0))] == [retail_train[0].id]
    visit(buffer, retail_train[0].id, HARD, 3)  # still hard after the retry
    assert buffer.exhausted(since=1)


def test_invariants_hold_under_any_sequence_of_events(retail_train):
    """Capacity and the synthesized cap hold, removed tasks are gone for good, and the
    state round-trips, whatever happens (a batch of one is taken early from waiting or
    parked tasks only when nothing is active, hence the ``max(..., 1)``)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    seeds = retail_train[:12]
    extra = [synthetic(retail_train[20], i) for i in range(12)]
    stats = st.sampled_from([MASTERED, HARD, BOUNDARY, GroupStats.of([1.0] * 7 + [0.0])])
    kinds = st.sampled_from(["visit", "offer", "admit", "expire"])

    @settings(max_examples=80, deadline=None)
    @given(st.lists(st.tuples(kinds, stats), max_size=80), st.integers(2, 8), st.floats(0, 1))
    def check(events, capacity, p_max):
        config = DataConfig(
            capacity=capacity,
            p_max=p_max,
            admit_per_step=2,
            mastered_k=2,
            hard_m=2,
            park_steps=3,
            max_age=10,
        )
        buffer = make(config, seeds)
        offered = 0
        for step, (kind, group) in enumerate(events):
            if kind == "visit":
                for task in buffer.sample(1, random.Random(step)):
                    visit(buffer, task.id, group, step)
            elif kind == "offer" and offered < len(extra):
                buffer.offer(extra[offered], f"k{offered}", step=step)
                offered += 1
            elif kind == "admit":
                buffer.admit(step)
            else:
                buffer.expire(step)
            active = [e for e in buffer if e.status == "active"]
            assert len(active) <= capacity
            assert sum(e.synthesized for e in active) <= max(int(p_max * capacity), 1)
            removed = [r["id"] for r in buffer.removed]
            assert len(set(removed)) == len(removed)
            assert not set(removed) & set(buffer.entries)
            assert len(buffer) + len(removed) == len(seeds) + offered
        state = buffer.state_dict()
        again = ReplayBuffer(config, dynamic=True)
        again.load_state_dict(state, {t.id: t for t in seeds})
        assert again.state_dict() == state

    check()
