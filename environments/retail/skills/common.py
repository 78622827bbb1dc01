"""What the Retail skills share: wording (amounts, items, payment methods as a customer
names them), the tool calls and addresses they build, one request's :class:`Part`, and
the helpers that select orders, items and payers and record structural choices."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from faker import Faker

from environments.retail.generator import fake_address
from environments.retail.schema import (
    Address,
    CreditCard,
    GiftCard,
    Order,
    OrderItem,
    Product,
    User,
    Variant,
)
from environments.retail.tools.rules import PaymentMethod
from rods_env.database import Database
from rods_env.task import ToolCall

ORDINALS = ("first", "second", "third", "fourth")

REASON_TEXT = {
    "no longer needed": (
        "I don't need it anymore.",
        "It turns out I no longer need it.",
        "I've changed my mind, I don't need it any more.",
    ),
    "ordered by mistake": (
        "I ordered it by mistake.",
        "I placed it by accident.",
        "That order was a mistake on my part.",
    ),
}

_FAKE: Faker | None = None


def seeded_faker(rng: random.Random) -> Faker:
    """A shared Faker re-seeded from ``rng``, so its output depends on ``rng`` only."""
    global _FAKE
    if _FAKE is None:
        _FAKE = Faker("en_US")
    _FAKE.seed_instance(rng.randrange(2**32))
    return _FAKE


def amount_text(value: float) -> str:
    """An amount as the tools render it (JSON)."""
    return json.dumps(value)


def renders_cleanly(value: float) -> bool:
    """True when the JSON text of an amount has exactly two decimals (e.g. 54.04, not 54.1)."""
    return amount_text(value) == f"{value:.2f}"


def options_text(options: Mapping[str, str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in options.items())


def item_text(name: str, options: Mapping[str, str]) -> str:
    return f"{name} ({options_text(options)})"


def joined(parts: Sequence[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def method_text(method: PaymentMethod) -> str:
    if isinstance(method, CreditCard):
        return f"{method.brand} credit card ending in {method.last_four}"
    if isinstance(method, GiftCard):
        return "gift card"
    return "PayPal account"


def tool_call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(name=name, arguments=dict(arguments))


def address_args(address: Address) -> dict[str, str]:
    return address.model_dump()


def new_address(rng: random.Random) -> Address:
    return fake_address(seeded_faker(rng))


@dataclass
class Part:
    """One request's share of a task: text, gold calls (no identity look-up), facts, outputs."""

    request: str
    calls: list[ToolCall]
    facts: dict[str, str]
    outputs: list[str] = field(default_factory=list)
    orders: tuple[str, ...] = ()
    needs_user_details: bool = True
    choices: dict[str, int] = field(default_factory=dict)
    """Structural choices made (see :func:`choose`), recorded in the task's shape."""


Builder = Callable[
    [Database, random.Random, User, Mapping[str, int], frozenset[str]], "Part | None"
]


# -- selection helpers ---------------------------------------------------------------------
def user_orders(db: Database, user: User, status: str, exclude: frozenset[str]) -> list[Order]:
    orders = []
    for order_id in user.orders:
        order = db.get("orders", order_id)
        if order is not None and order.status == status and order_id not in exclude:
            orders.append(order)
    return orders


def alternatives(db: Database, order: Order, item: OrderItem) -> list[Variant]:
    """Available variants of the item's product that are not already in the order."""
    product: Product | None = db.get("products", item.product_id)
    if product is None:
        return []
    taken = {i.item_id for i in order.items}
    return [v for v in product.variants if v.available and v.item_id not in taken]


def choose(
    shape: Mapping[str, int], choices: dict[str, int], name: str, rng: random.Random, p_one: float
) -> int:
    """A structural choice (0 or 1) of a request: the shape's value when it fixes one, else a
    draw (1 with probability ``p_one``). It changes which call a value flows from, hence the
    signature, so it is recorded in ``choices`` and, through :attr:`Draft.shape`, in the task."""
    value = int(shape[name]) if name in shape else int(rng.random() < p_one)
    choices[name] = value
    return value


def order_ref(
    rng: random.Random,
    order: Order,
    db: Database,
    user: User,
    shape: Mapping[str, int],
    choices: dict[str, int],
) -> str | None:
    """How the customer names an order (choice ``ref``): 0, by its id; 1, by an item only this
    order of theirs has (then the agent finds the id in the user's orders). None when the
    order has no such item."""
    if choose(shape, choices, "ref", rng, 0.4) == 0:
        return f"order {order.order_id}"
    name = order.items[0].name
    for order_id in user.orders:
        other = db.get("orders", order_id)
        if order_id != order.order_id and any(i.name == name for i in other.items):
            return None
    return f"the order with the {name}"


def order_facts(orders: Sequence[Order]) -> dict[str, str]:
    if len(orders) == 1:
        return {"order id": orders[0].order_id}
    return {"order ids": ", ".join(o.order_id for o in orders)}


def item_facts(label: str, texts: Sequence[str]) -> dict[str, str]:
    if len(texts) == 1:
        return {label: texts[0]}
    return {f"{label}s": "; ".join(texts)}


def payer(
    user: User, amount: float, original: str, kind: int, rng: random.Random
) -> PaymentMethod | None:
    """A payment method of the user that can pay ``amount`` (gift cards need the balance):
    ``kind`` 0, the order's ``original`` method; 1, another one."""
    usable = [
        m for m in user.payment_methods if not (isinstance(m, GiftCard) and m.balance < amount)
    ]
    if kind == 0:
        return next((m for m in usable if m.id == original), None)
    others = [m for m in usable if m.id != original]
    return rng.choice(others) if others else None
