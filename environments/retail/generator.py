"""Deterministic generation of Retail databases.

``generate(seed, size)`` depends only on ``(seed, size)`` and the installed Faker version:
names and addresses come from ``Faker("en_US")`` seeded with ``seed``; every other choice
comes from ``random.Random(seed)``. Nothing iterates a set or uses ``hash()``, so the output
is the same in every process. Money follows :func:`environments.retail.schema.money`.

Sizes:

* ``tiny``: 20 users, 40 orders, 8 product types (tests).
* ``default``: 500 users, 1,000 orders, 50 product types, ~600 variants (like tau-bench retail).
* ``long-4k``, ``long-8k``, ``long-16k``, ``long-32k``: the ``default`` world with long
  histories, for long-context variants: every customer and order of ``default`` is there
  with the same key and content, except that each customer also has ~1,000 to ~7,900 older
  orders (listed before their own, and built only when looked up: see
  :mod:`rods_env.padding`), each product 16 to 128 more variants (new option combinations,
  so a request still names one variant), and 50 to 300 more product types (names that share
  no word with the catalog's). A customer's record is then about
  ``n`` thousand tokens (4 characters a token) of a ``long-<n>k`` world. Past orders are
  delivered or cancelled, of products the customer's own orders do not have (an order named
  by one of its items stays unique).
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from faker import Faker

from environments.retail.catalog import CATALOG, EXTRA_NOUNS, EXTRA_OPTIONS, EXTRA_STYLES
from environments.retail.schema import (
    Address,
    CreditCard,
    Fulfilment,
    GiftCard,
    Name,
    Order,
    OrderItem,
    PayPal,
    Product,
    Transaction,
    User,
    Variant,
    money,
    order_table,
    product_table,
    user_table,
)
from rods_env.database import Record
from rods_env.padding import DerivedTable, KeyCodec, long_size_tokens


@dataclass(frozen=True)
class SizePreset:
    """Parameters of one database size."""

    users: int
    orders: int
    products: int
    variants: tuple[int, int]
    items: tuple[int, int]


SIZES: dict[str, SizePreset] = {
    "tiny": SizePreset(users=20, orders=40, products=8, variants=(6, 9), items=(1, 4)),
    "default": SizePreset(users=500, orders=1000, products=50, variants=(8, 16), items=(1, 5)),
}

LONG_SIZES: tuple[str, ...] = ("long-4k", "long-8k", "long-16k", "long-32k")
"""Long-context worlds (the ``default`` world with long histories), by padding size."""

ORDER_CHARS = 13
"""Characters an order id takes in a customer's record (``"#W1234567", ``)."""

MAX_PAST_ORDERS = 10_000
"""Most past orders a customer gets (the id space reserved per customer)."""

_PAST_ORDER_IDS = KeyCodec("0123456789", 7, MAX_PAST_ORDERS, prefix="#W", first="123456789")

# Share of each status among generated orders (cumulative draw in this order).
_STATUS_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("pending", 30),
    ("processed", 14),
    ("delivered", 32),
    ("cancelled", 10),
    ("return requested", 6),
    ("exchange requested", 5),
    ("pending (item modified)", 3),
)

_CARD_BRANDS = ("visa", "mastercard", "amex", "discover")


def _price(rng: random.Random, low: float, high: float) -> float:
    """A price in [low, high] whose cents never end in 0, so it renders with two decimals."""
    dollars = rng.randint(int(low), int(high) - 1)
    cents = rng.randint(1, 9) * 10 + rng.randint(1, 9)
    return money(dollars + cents / 100)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())


class _Ids:
    """Unique random numeric ids (membership only: no set is ever iterated)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._used: set[str] = set()

    def new(self, template: str, digits: int) -> str:
        while True:
            value = template.format(self._rng.randrange(10 ** (digits - 1), 10**digits))
            if value not in self._used:
                self._used.add(value)
                return value


def _products(rng: random.Random, ids: _Ids, preset: SizePreset) -> list[Product]:
    entries = list(CATALOG)
    chosen = entries if preset.products >= len(entries) else rng.sample(entries, preset.products)
    products = []
    for name, options, (low, high) in chosen:
        keys = [k for k, _ in options]
        combos = list(itertools.product(*(values for _, values in options)))
        count = min(len(combos), rng.randint(*preset.variants))
        picked = sorted(rng.sample(range(len(combos)), count))
        variants = []
        for index in picked:
            variants.append(
                Variant(
                    item_id=ids.new("{}", 10),
                    options=dict(zip(keys, combos[index], strict=True)),
                    price=_price(rng, low, high),
                    available=rng.random() < 0.7,
                )
            )
        # Every product keeps at least two available variants, so modifications have targets.
        for i in rng.sample(range(len(variants)), 2):
            variants[i] = variants[i].model_copy(update={"available": True})
        products.append(Product(product_id=ids.new("{}", 10), name=name, variants=tuple(variants)))
    return products


def fake_address(fake: Faker) -> Address:
    """A US address drawn from ``fake`` (the generator's and the skills' one recipe)."""
    return Address(
        address1=f"{fake.building_number()} {fake.street_name()}",
        address2=fake.secondary_address(),
        city=fake.city(),
        state=fake.state_abbr(include_territories=False, include_freely_associated_states=False),
        country="USA",
        zip=fake.zipcode(),
    )


def _users(fake: Faker, rng: random.Random, ids: _Ids, preset: SizePreset) -> list[User]:
    users: list[User] = []
    seen_name_zip: set[tuple[str, str, str]] = set()
    for _ in range(preset.users):
        while True:
            first, last = fake.first_name(), fake.last_name()
            address = fake_address(fake)
            key = (first.lower(), last.lower(), address.zip)
            if key not in seen_name_zip:
                seen_name_zip.add(key)
                break
        user_id = ids.new(f"{_slug(first)}_{_slug(last)}_{{}}", 4)
        email = ids.new(f"{_slug(first)}.{_slug(last)}{{}}@example.com", 4)
        kinds = rng.choice(
            (
                ("credit_card",),
                ("gift_card",),
                ("paypal",),
                ("credit_card", "gift_card"),
                ("credit_card", "paypal"),
                ("gift_card", "paypal"),
                ("credit_card", "gift_card", "paypal"),
                ("credit_card", "credit_card"),
                ("credit_card", "credit_card", "gift_card"),
            )
        )
        methods: list[CreditCard | GiftCard | PayPal] = []
        for kind in kinds:
            if kind == "credit_card":
                methods.append(
                    CreditCard(
                        id=ids.new("credit_card_{}", 7),
                        brand=rng.choice(_CARD_BRANDS),
                        last_four=f"{rng.randrange(10000):04d}",
                    )
                )
            elif kind == "gift_card":
                balance = _price(rng, 0, 400) if rng.random() < 0.9 else 0.0
                methods.append(GiftCard(id=ids.new("gift_card_{}", 7), balance=balance))
            else:
                methods.append(PayPal(id=ids.new("paypal_{}", 7)))
        users.append(
            User(
                user_id=user_id,
                name=Name(first_name=first, last_name=last),
                email=email,
                address=address,
                payment_methods=tuple(methods),
            )
        )
    return users


def _statuses(rng: random.Random, count: int) -> list[str]:
    """Statuses in fixed proportions (at least one of each), shuffled."""
    total = sum(w for _, w in _STATUS_WEIGHTS)
    statuses: list[str] = []
    for status, weight in _STATUS_WEIGHTS:
        statuses += [status] * max(1, count * weight // total)
    statuses += ["delivered", "pending"] * count
    statuses = statuses[:count]
    rng.shuffle(statuses)
    return statuses


def _order_item(product: Product, variant: Variant) -> OrderItem:
    """An order line for one variant of ``product`` at its current price."""
    return OrderItem(
        item_id=variant.item_id,
        product_id=product.product_id,
        name=product.name,
        options=dict(variant.options),
        price=variant.price,
    )


def _order(
    fake: Faker,
    rng: random.Random,
    ids: _Ids,
    user: User,
    products: list[Product],
    preset: SizePreset,
    status: str,
) -> Order:
    count = rng.randint(*preset.items)
    items: list[OrderItem] = []
    taken: set[str] = set()
    while len(items) < count:
        product = rng.choice(products)
        variant = rng.choice(product.variants)
        if variant.item_id in taken:
            continue
        taken.add(variant.item_id)
        items.append(_order_item(product, variant))
    order_id = ids.new("#W{}", 7)
    address = user.address if rng.random() < 0.85 else fake_address(fake)
    method = rng.choice(user.payment_methods)
    total = money(sum(item.price for item in items))
    history = [Transaction(transaction_type="payment", amount=total, payment_method_id=method.id)]
    fields: dict[str, object] = {}
    item_ids = tuple(item.item_id for item in items)
    if status in ("processed", "delivered", "return requested", "exchange requested"):
        if len(items) > 1 and rng.random() < 0.3:
            cut = rng.randint(1, len(items) - 1)
            parts: tuple[tuple[str, ...], ...] = (item_ids[:cut], item_ids[cut:])
        else:
            parts = (item_ids,)
        fields["fulfilments"] = tuple(
            Fulfilment(tracking_ids=(ids.new("{}", 12),), item_ids=part) for part in parts
        )
    if status == "cancelled":
        history.append(
            Transaction(transaction_type="refund", amount=total, payment_method_id=method.id)
        )
        fields["cancel_reason"] = rng.choice(("no longer needed", "ordered by mistake"))
    elif status == "return requested":
        chosen = rng.sample(items, rng.randint(1, len(items)))
        fields["return_items"] = tuple(sorted(item.item_id for item in chosen))
        fields["return_payment_method_id"] = method.id
    elif status == "exchange requested":
        by_id = {p.product_id: p for p in products}
        olds, news, diff = [], [], 0.0
        for item in items:
            others = [
                v
                for v in by_id[item.product_id].variants
                if v.available and v.item_id != item.item_id
            ]
            if others:
                new = rng.choice(others)
                olds.append(item.item_id)
                news.append(new.item_id)
                diff += new.price - item.price
        if olds:
            fields["exchange_items"] = tuple(olds)
            fields["exchange_new_items"] = tuple(news)
            fields["exchange_payment_method_id"] = method.id
            fields["exchange_price_difference"] = money(diff)
        else:
            status = "delivered"
    return Order(
        order_id=order_id,
        user_id=user.user_id,
        address=address,
        items=tuple(items),
        status=status,
        payment_history=tuple(history),
        **fields,
    )


def generate(seed: int, size: str) -> dict[str, dict[str, Record]]:
    """Generate a Retail database.

    Args:
        seed: Seed of every random choice.
        size: One of ``"tiny"``, ``"default"`` or a long size (see the module docstring).

    Returns:
        Tables ``users``, ``products`` and ``orders``, each keyed by the record's id.

    Raises:
        ValueError: ``size`` is not a known preset.
    """
    tokens = long_size_tokens(size)
    if tokens is not None and size in LONG_SIZES:
        return _long_world(seed, tokens)
    if size not in SIZES:
        raise ValueError(f"unknown size '{size}'; sizes: {', '.join((*SIZES, *LONG_SIZES))}")
    preset = SIZES[size]
    rng = random.Random(seed)
    fake = Faker("en_US")
    fake.seed_instance(seed)
    ids = _Ids(rng)
    products = _products(rng, ids, preset)
    users = _users(fake, rng, ids, preset)
    user_orders: dict[str, list[str]] = {u.user_id: [] for u in users}
    orders: dict[str, Order] = {}
    statuses = _statuses(rng, preset.orders)
    for n in range(preset.orders):
        # The first pass gives every user one order; the rest go to random users.
        user = users[n] if n < len(users) else rng.choice(users)
        order = _order(fake, rng, ids, user, products, preset, statuses[n])
        orders[order.order_id] = order
        user_orders[user.user_id].append(order.order_id)
    users = [u.model_copy(update={"orders": tuple(user_orders[u.user_id])}) for u in users]
    return {
        "users": {u.user_id: u for u in users},
        "products": {p.product_id: p for p in products},
        "orders": dict(orders),
    }


# -- long-context worlds -------------------------------------------------------------------
@functools.lru_cache(maxsize=2)
def _default_tables(seed: int) -> dict[str, dict[str, Record]]:
    return generate(seed, "default")


def _long_world(seed: int, tokens: int) -> dict[str, Any]:
    """The ``default`` world of ``seed`` with long histories (see the module docstring)."""
    base = _default_tables(seed)
    users, orders, products = user_table(base), order_table(base), product_table(base)
    past = min(MAX_PAST_ORDERS, tokens * 4 * 4 // (5 * ORDER_CHARS))  # 80% of the budget
    owners = list(users)
    owner_index = {uid: i for i, uid in enumerate(owners)}
    product_list = sorted(products.values(), key=lambda p: p.product_id)

    def past_ids(user: User) -> list[str]:
        index = owner_index[user.user_id]
        return [oid for oid in _PAST_ORDER_IDS.encode_range(index, past) if oid not in orders]

    def longer_history(record: Record) -> Record:
        assert isinstance(record, User)
        return record.model_copy(update={"orders": (*past_ids(record), *record.orders)})

    def past_order(order_id: str) -> Order | None:
        decoded = _PAST_ORDER_IDS.decode(order_id)
        if decoded is None or order_id in orders:
            return None
        index, i = decoded
        if index >= len(owners) or i >= past:
            return None
        user = users[owners[index]]
        own = {item.product_id for oid in user.orders for item in orders[oid].items}
        choices = [p for p in product_list if p.product_id not in own]
        rng = random.Random(f"retail-past-order:{seed}:{order_id}")
        items = []
        for product in rng.sample(choices, rng.randint(1, min(3, len(choices)))):
            variant = rng.choice(product.variants)
            items.append(_order_item(product, variant))
        method = rng.choice(user.payment_methods)
        total = money(sum(item.price for item in items))
        history = [
            Transaction(transaction_type="payment", amount=total, payment_method_id=method.id)
        ]
        fields: dict[str, Any] = {}
        if rng.random() < 0.25:
            status = "cancelled"
            history.append(
                Transaction(transaction_type="refund", amount=total, payment_method_id=method.id)
            )
            fields["cancel_reason"] = rng.choice(("no longer needed", "ordered by mistake"))
        else:
            status = "delivered"
            tracking = f"{rng.randrange(10**11, 10**12)}"
            fields["fulfilments"] = (
                Fulfilment(tracking_ids=(tracking,), item_ids=tuple(i.item_id for i in items)),
            )
        return Order(
            order_id=order_id,
            user_id=user.user_id,
            address=user.address,
            items=tuple(items),
            status=status,
            payment_history=tuple(history),
            **fields,
        )

    return {
        "users": MappingProxyType(
            DerivedTable(users, transform=longer_history, cache_size=max(16, 400_000 // past))
        ),
        "products": _more_products(seed, products, tokens // 4000),
        "orders": MappingProxyType(DerivedTable(orders, virtual=past_order, cache_size=256)),
    }


def _more_products(seed: int, products: Mapping[str, Product], scale: int) -> dict[str, Record]:
    """The products with more variants (``16 x scale`` more option combinations each, new
    item ids) and ``50 x scale`` more product types (of :data:`EXTRA_NOUNS`; none shares
    a word with a catalog name, so a request still names one product and one variant)."""
    rng = random.Random(f"retail-more-products:{seed}:{scale}")
    catalog = {name: (options, prices) for name, options, prices in CATALOG}
    ids = _Ids(rng)
    ids._used.update(p.product_id for p in products.values())
    ids._used.update(v.item_id for p in products.values() for v in p.variants)
    out: dict[str, Record] = {}
    for key, product in products.items():
        options, (low, high) = catalog[product.name]
        names = [k for k, _ in options]
        have = {tuple(v.options[k] for k in names) for v in product.variants}
        combos = [c for c in itertools.product(*(vals for _, vals in options)) if c not in have]
        added = [
            Variant(
                item_id=ids.new("{}", 10),
                options=dict(zip(names, combo, strict=True)),
                price=_price(rng, low, high),
                available=rng.random() < 0.7,
            )
            for combo in rng.sample(combos, min(16 * scale, len(combos)))
        ]
        out[key] = product.model_copy(update={"variants": (*product.variants, *added)})
    names = [f"{style} {noun}" for noun in EXTRA_NOUNS for style in EXTRA_STYLES]
    keys = [k for k, _ in EXTRA_OPTIONS]
    combos = list(itertools.product(*(vals for _, vals in EXTRA_OPTIONS)))
    for name in rng.sample(names, min(50 * scale, len(names))):
        variants = tuple(
            Variant(
                item_id=ids.new("{}", 10),
                options=dict(zip(keys, combo, strict=True)),
                price=_price(rng, 10, 80),
                available=rng.random() < 0.7,
            )
            for combo in sorted(rng.sample(combos, rng.randint(4, 8)))
        )
        product = Product(product_id=ids.new("{}", 10), name=name, variants=variants)
        out[product.product_id] = product
    return out
