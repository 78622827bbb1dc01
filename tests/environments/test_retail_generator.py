"""Retail database generation: determinism, sizes, coverage of the states tasks need."""

from __future__ import annotations

import itertools
import re
import time
from collections import Counter

import pytest

from environments.retail import DOMAIN
from environments.retail.generator import generate
from environments.retail.schema import ORDER_STATUSES, GiftCard
from rods_env.database import tables_digest

# Digests of generate(0, size). A change means the generated data changed (for example
# after a Faker upgrade): every seed task and pinned result depends on it. Regenerate the
# seed set (python -m rods_env.seeds retail) and update these digests together.
PINNED = {
    "tiny": "be6c4e8677dd12bb1e24dfbe16033d6da15b909032a2fb2bfc24292da7a203a7",
    "default": "977fd69aab77747977ae0494ac00ab65465cef07eb5811fddbbc0ba83958f6ea",
}


@pytest.fixture(scope="module")
def default():
    return DOMAIN.base(0, "default")


@pytest.fixture(scope="module")
def tiny():
    return DOMAIN.base(0, "tiny")


@pytest.mark.parametrize("size", ["tiny", "default"])
def test_generated_data_is_pinned(size):
    assert tables_digest(DOMAIN.base(0, size)) == PINNED[size]


def test_same_seed_same_data_and_other_seed_other_data():
    assert tables_digest(generate(3, "tiny")) == tables_digest(generate(3, "tiny"))
    assert tables_digest(generate(3, "tiny")) != tables_digest(generate(4, "tiny"))


def test_default_generation_is_fast():
    best = min(_timed(lambda: generate(7, "default")) for _ in range(2))
    assert best < 2.0, f"default generation took {best:.2f} s"


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def test_unknown_size_is_rejected():
    with pytest.raises(ValueError, match="unknown size 'huge'"):
        generate(0, "huge")


def test_sizes(tiny, default):
    assert {t: len(rows) for t, rows in tiny.items()} == {"users": 20, "products": 8, "orders": 40}
    assert {t: len(rows) for t, rows in default.items()} == {
        "users": 500,
        "products": 50,
        "orders": 1000,
    }
    assert sum(len(p.variants) for p in default["products"].values()) >= 500


def test_long_worlds_extend_the_default_world_without_copying_it(default):
    long = DOMAIN.base(0, "long-8k")
    # every default record is there under the same key; only users grow (a longer history)
    assert list(long["users"]) == list(default["users"]) and len(long["orders"]) == 1000
    for key, order in itertools.islice(default["orders"].items(), 50):
        assert long["orders"][key] == order
    for key, user in itertools.islice(default["users"].items(), 20):
        padded = long["users"][key]
        assert padded.model_copy(update={"orders": user.orders}) == user
        assert padded.orders[-len(user.orders) :] == user.orders  # own orders come last
        assert len(padded.orders) > 1500
        past = [o for o in padded.orders if o not in user.orders]
        own_products = {i.product_id for o in user.orders for i in default["orders"][o].items}
        for order_id in past[:: len(past) // 5]:  # past orders exist when looked up
            order = long["orders"][order_id]
            assert order.user_id == key and order.status in ("delivered", "cancelled")
            assert order_id in long["orders"] and order_id not in default["orders"]
            assert not {i.product_id for i in order.items} & own_products
    assert "#W0000000" not in long["orders"] and long["orders"].get("nope") is None
    # products: the default variants first, then new option combinations; new product types
    for key, product in default["products"].items():
        bigger = long["products"][key]
        assert bigger.variants[: len(product.variants)] == product.variants
        combos = [tuple(sorted(v.options.items())) for v in bigger.variants]
        assert len(set(combos)) == len(combos)
    names = {p.name for p in default["products"].values()}
    extra = [p for p in long["products"].values() if p.name not in names]
    assert len(extra) == 100 and not {w for p in extra for w in p.name.split()} & {
        w for n in names for w in n.split()
    }


def test_long_world_sizes_grow_with_the_knob():
    sizes = {s: DOMAIN.base(0, s) for s in ("long-4k", "long-8k", "long-16k", "long-32k")}
    key = next(iter(sizes["long-4k"]["users"]))
    chars = {s: len(t["users"][key].model_dump_json()) for s, t in sizes.items()}
    assert chars["long-4k"] < chars["long-8k"] < chars["long-16k"] < chars["long-32k"]
    # about n thousand tokens of 4 characters each in a customer record of a long-<n>k world
    assert 0.6 * 32_000 * 4 < chars["long-32k"] < 1.2 * 32_000 * 4


@pytest.mark.parametrize("size", ["tiny", "default"])
def test_every_status_appears(size):
    counts = Counter(o.status for o in DOMAIN.base(0, size)["orders"].values())
    assert set(counts) == set(ORDER_STATUSES)
    if size == "default":
        assert min(counts.values()) >= 25
        assert counts["pending"] >= 250 and counts["delivered"] >= 250


def test_records_are_consistent(default):
    users, products, orders = default["users"], default["products"], default["orders"]
    variants = {v.item_id: (p, v) for p in products.values() for v in p.variants}
    assert len(variants) == sum(len(p.variants) for p in products.values())
    for product in products.values():
        assert sum(v.available for v in product.variants) >= 2
        combos = [tuple(v.options.items()) for v in product.variants]
        assert len(set(combos)) == len(combos)
    for user in users.values():
        assert 1 <= len(user.payment_methods) <= 3
        assert all(orders[o].user_id == user.user_id for o in user.orders)
    assert sum(len(u.orders) for u in users.values()) == len(orders)
    assert len({u.email for u in users.values()}) == len(users)
    name_zip = {
        (u.name.first_name.lower(), u.name.last_name.lower(), u.address.zip) for u in users.values()
    }
    assert len(name_zip) == len(users)
    for order_id, order in orders.items():
        assert re.fullmatch(r"#W\d{7}", order_id)
        assert len({i.item_id for i in order.items}) == len(order.items)
        for item in order.items:
            product, variant = variants[item.item_id]
            assert (item.product_id, item.price, item.options) == (
                product.product_id,
                variant.price,
                variant.options,
            )
        payment = order.payment_history[0]
        assert payment.transaction_type == "payment"
        assert payment.amount == round(sum(i.price for i in order.items), 2)
        assert users[order.user_id].payment_method(payment.payment_method_id) is not None
        shipped = order.status in (
            "processed",
            "delivered",
            "return requested",
            "exchange requested",
        )
        assert bool(order.fulfilments) == shipped


def test_prices_have_two_decimals(default):
    for product in default["products"].values():
        for variant in product.variants:
            assert re.fullmatch(r"\d+\.\d[1-9]", repr(variant.price)), variant.price


def test_enough_states_for_the_skills(default):
    orders = list(default["orders"].values())
    products = default["products"]

    def modifiable(order):
        return any(
            v.available and v.item_id != item.item_id
            for item in order.items
            for v in products[item.product_id].variants
        )

    assert sum(o.status == "pending" and modifiable(o) for o in orders) >= 250
    assert sum(o.status == "delivered" and modifiable(o) for o in orders) >= 250
    cards = [
        m for u in default["users"].values() for m in u.payment_methods if isinstance(m, GiftCard)
    ]
    assert len(cards) >= 150 and sum(c.balance > 100 for c in cards) >= 50


def test_base_is_cached_per_process():
    assert DOMAIN.base(0, "tiny") is DOMAIN.base(0, "tiny")
