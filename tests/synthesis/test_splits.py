"""Entity-disjoint splits: test customers (and their records) never reach a train pool."""

from __future__ import annotations

from collections import defaultdict

import pytest

import rods_env
from rods_env.gold import GOLD_CACHE, replay_gold
from rods_env.seeds import build_seed_tasks
from rods_env.splits import (
    customer_split,
    generation_database,
    leaked_customers,
    split_tables,
    task_customers,
)
from rods_env.synthesis import AUGMENTS, TaskPool, critique, dedupe_key, synthesize
from rods_env.synthesis.plan import Reject

DOMAINS = ["retail", "airline"]


def _customers(domain, tasks):
    return {c for t in tasks for c in task_customers(domain, t, GOLD_CACHE.get(domain, t))}


@pytest.mark.parametrize("name", DOMAINS)
def test_seed_splits_use_disjoint_customers(name):
    domain = rods_env.load_domain(name)
    train, test = domain.seed_tasks("train"), domain.seed_tasks("test")
    assert len(test) >= 40 and len(train) >= 150
    train_users, test_users = _customers(domain, train), _customers(domain, test)
    assert train_users and test_users and not train_users & test_users
    assert all(customer_split(name, c) == "test" for c in test_users)
    assert all(customer_split(name, c) == "train" for c in train_users)


@pytest.mark.parametrize("name", DOMAINS)
def test_the_seed_sets_regenerate_identically(name):
    domain = rods_env.load_domain(name)
    first = build_seed_tasks(domain)
    assert [t.to_json() for t in first] == [t.to_json() for t in domain.seed_tasks()]


@pytest.mark.slow
@pytest.mark.parametrize("name", DOMAINS)
def test_a_synthesized_train_pool_shares_no_customer_and_no_key_with_the_test_split(name):
    domain = rods_env.load_domain(name)
    train = domain.seed_tasks("train")
    # two seeds per skill, every augmentation, both modes: what a training run makes
    by_skill = defaultdict(list)
    for t in train:
        by_skill[t.skill].append(t)
    seeds = [t for tasks in by_skill.values() for t in tasks[:2]]
    pool = TaskPool(domains=domain)
    for mode in ("resample", "expand"):
        pool.extend(synthesize(seeds, per_seed=2, mode=mode, augment=AUGMENTS, known=pool.keys()))
    synthesized = pool.query(origin="synthesized")
    assert len(synthesized) > 4 * len(seeds)
    assert {t.split for t in synthesized} == {"train"}
    assert {t.variant for t in synthesized} == {"base", *AUGMENTS}
    test = domain.seed_tasks("test")
    assert not _customers(domain, synthesized) & _customers(domain, test)
    test_keys = {dedupe_key(t, GOLD_CACHE.get(domain, t)) for t in test}
    assert not pool.keys() & test_keys


@pytest.mark.parametrize("name", DOMAINS)
def test_skills_draw_only_customers_of_the_split(name):
    domain = rods_env.load_domain(name)
    table = "users"
    for split in ("train", "test"):
        view = split_tables(domain, 0, "default", split)
        assert view[table] and all(customer_split(name, k) == split for k in view[table])
        owned = "orders" if name == "retail" else "reservations"
        assert all(customer_split(name, r.user_id) == split for r in view[owned].values())
    full = domain.base(0, "default")
    # shared tables are not copied
    shared = "products" if name == "retail" else "flights"
    assert split_tables(domain, 0, "default", "test")[shared] is full[shared]
    assert len(split_tables(domain, 0, "default", "test")[table]) < len(full[table]) / 2
    db = generation_database(domain, 0, "default", None)  # an unknown split counts as train
    assert all(customer_split(name, k) == "train" for k in db.keys(table))


@pytest.mark.parametrize("name", DOMAINS)
def test_a_train_task_on_a_test_customer_is_rejected(name):
    domain = rods_env.load_domain(name)
    test_task = domain.seed_tasks("test")[0]
    leaked = test_task.model_copy(update={"split": "train"})
    gold = replay_gold(domain, leaked)
    assert leaked_customers(domain, leaked, gold)
    with pytest.raises(Reject) as exc:
        critique(domain, leaked, gold, expected=None)
    assert exc.value.reason == "split_leak"
    assert leaked_customers(domain, test_task, gold) == []


@pytest.mark.parametrize("name", DOMAINS)
def test_variants_of_test_seeds_stay_on_test_customers(name):
    domain = rods_env.load_domain(name)
    test = domain.seed_tasks("test")[:8]
    out = [o.task for o in synthesize(test, per_seed=1) if o.accepted]
    assert out and {t.split for t in out} == {"test"}
    assert all(customer_split(name, c) == "test" for c in _customers(domain, out))


@pytest.mark.parametrize("name", DOMAINS)
def test_fresh_test_tasks_are_new_test_customer_tasks_of_the_asked_skills(name):
    """More independent held-out draws for an experiment's last evaluation: test customers
    only, the asked skills, none a repeat of the committed test seeds or of each other, and
    the first k of a larger draw are the draw of k."""
    from rods_env.seeds import fresh_test_tasks

    domain = rods_env.load_domain(name)
    test = domain.seed_tasks("test")
    skills = sorted({t.skill for t in test})[:2]
    fresh = fresh_test_tasks(domain, skills, 6, avoid=test)
    assert len(fresh) == 12 and {t.skill for t in fresh} == set(skills)
    assert all(t.split == "test" and "-fresh1-" in t.id for t in fresh)
    users = _customers(domain, fresh)
    assert users and all(customer_split(name, c) == "test" for c in users)

    def key(t):
        gold = replay_gold(domain, t)
        return gold.fingerprint, tuple(o for turn in t.turns for o in turn.outputs)

    keys = [key(t) for t in fresh]
    assert len(set(keys)) == len(keys) and not set(keys) & {key(t) for t in test}
    fewer = fresh_test_tasks(domain, skills, 2, avoid=test)
    assert [t.to_json() for t in fewer] == [t.to_json() for t in fresh[:4]]
    assert fresh_test_tasks(domain, skills, 2, generation=2, avoid=test) != fewer
    with pytest.raises(rods_env.RodsError, match="no skill 'nope'"):
        fresh_test_tasks(domain, ["nope"], 1)


def test_a_skill_whose_test_customers_are_spent_stops_and_the_others_go_on():
    """Retail's modify_payment runs out of new test tasks before 30 (measured: 16)."""
    from rods_env.seeds import fresh_test_tasks

    domain = rods_env.load_domain("retail")
    fresh = fresh_test_tasks(domain, ["modify_payment", "order_info"], 30, max_tries=20)
    counts = defaultdict(int)
    for t in fresh:
        counts[t.skill] += 1
    assert counts["order_info"] == 30 and 0 < counts["modify_payment"] < 30
