"""Airline database generation: determinism, pinned digests, sizes and consistency."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import datetime

import pytest

from environments.airline import DOMAIN
from environments.airline.generator import SIZES, generate, tables_digest
from environments.airline.schema import CLOCK_KEY, FLIGHT_STATUSES
from rods_env.errors import ConfigError

# Pinned: a change here means every seed task and every recorded result changes meaning.
# Update deliberately (and regenerate environments/airline/seeds.jsonl) when the data must change.
DIGESTS = {
    "tiny": "f258ac9845f4f293",
    "default": "f70099fdc709dd4d",
}


@pytest.mark.parametrize("size", ["tiny", "default"])
def test_pinned_digest(size):
    assert tables_digest(DOMAIN.base(0, size))[:16] == DIGESTS[size]


def test_same_seed_same_tables_other_seed_other_tables():
    a, b, c = generate(3, "tiny"), generate(3, "tiny"), generate(4, "tiny")
    assert tables_digest(a) == tables_digest(b) != tables_digest(c)


def test_unknown_size_is_a_config_error():
    with pytest.raises(ConfigError, match="tiny, default, long"):
        generate(0, "huge")


def test_default_matches_the_issue_counts():
    tables = DOMAIN.base(0, "default")
    counts = {name: len(rows) for name, rows in tables.items()}
    assert counts == {"meta": 1, "airports": 20, "flights": 300, "users": 500, "reservations": 2000}
    dates = {len(f.dates) for f in tables["flights"].values()}
    assert dates == {30}
    statuses = Counter(i.status for f in tables["flights"].values() for i in f.dates.values())
    assert set(statuses) == set(FLIGHT_STATUSES)
    tiers = Counter(u.membership for u in tables["users"].values())
    assert set(tiers) == {"regular", "silver", "gold"}
    kinds = Counter(m.source for u in tables["users"].values() for m in u.payment_methods.values())
    assert set(kinds) == {"credit_card", "gift_card", "certificate"}
    res = list(tables["reservations"].values())
    assert {r.flight_type for r in res} == {"one_way", "round_trip"}
    assert {len(r.flights) for r in res} >= {1, 2, 3, 4}
    assert {r.cabin for r in res} == {"basic_economy", "economy", "business"}
    assert {r.insurance for r in res} == {"yes", "no"}
    assert max(len(r.passengers) for r in res) <= 5


@pytest.mark.parametrize("size", ["tiny", "default", "long-4k"])
def test_records_are_consistent(size):
    tables = DOMAIN.base(0, size)
    now = datetime.fromisoformat(tables["meta"][CLOCK_KEY].now)
    users = tables["users"]
    owned = Counter()
    for rid, res in tables["reservations"].items():
        assert rid == res.reservation_id and len(rid) == 6
        assert rid in users[res.user_id].reservations
        owned[res.user_id] += 1
        assert datetime.fromisoformat(res.created_at) < now
        assert 1 <= len(res.passengers) <= 5
        for a, b in zip(res.flights, res.flights[1:], strict=False):
            assert a.destination == b.origin
        assert res.flights[0].origin == res.origin
        last = res.flights[-1].destination
        assert last == (res.destination if res.flight_type == "one_way" else res.origin)
        for f in res.flights:
            flight = tables["flights"][f.flight_number]
            assert (flight.origin, flight.destination) == (f.origin, f.destination)
            assert f.price == flight.dates[f.date].prices.of(res.cabin)
        assert sum(p.amount for p in res.payment_history) == (
            0 if res.status == "cancelled" else res.payment_history[0].amount
        )
    for uid, user in users.items():
        assert len(user.reservations) == owned[uid]
        assert any(m.source == "credit_card" for m in user.payment_methods.values())
        assert all(pid == m.id for pid, m in user.payment_methods.items())


def test_long_worlds_extend_the_default_world():
    long, default = DOMAIN.base(0, "long-8k"), DOMAIN.base(0, "default")
    for table in ("meta", "airports", "flights"):
        assert long[table] is default[table] or dict(long[table]) == dict(default[table])
    assert dict(long["reservations"]) == dict(default["reservations"])  # scans: the base
    for key, user in itertools.islice(default["users"].items(), 20):
        padded = long["users"][key]
        assert padded.model_copy(update={"reservations": user.reservations}) == user
        assert padded.reservations[-len(user.reservations) :] == user.reservations
        past = padded.reservations[: -len(user.reservations) or None]
        assert len(past) > 2000
        for rid in past[:: len(past) // 5]:
            res = long["reservations"][rid]
            assert res.user_id == key and res.reservation_id == rid and len(rid) == 6
            assert rid not in default["reservations"]
            (flight,) = res.flights
            assert default["flights"][flight.flight_number].dates[flight.date].status in (
                "landed",
                "cancelled",
            )
    assert set(DOMAIN.sizes) == {"tiny", "default", "long-4k", "long-8k", "long-16k", "long-32k"}
    assert set(SIZES) == {"tiny", "default"}
