"""Task generators (skills) of the Retail domain.

Each skill picks entities that satisfy its preconditions on the given database, and emits
the gold calls a careful agent makes (identity look-up, account and order look-ups, product
look-ups, then the write), the facts the simulated user knows, and the request text. Every
gold argument comes either from an earlier gold call's output, from a fact value, or from
a constant the policy defines (cancellation reasons). Requests never state identity facts:
the agent has to ask for them. Requests carry no greeting: the user simulator frames turns.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from faker import Faker

from environments.retail.generator import fake_address
from environments.retail.schema import (
    CANCEL_REASONS,
    Address,
    CreditCard,
    GiftCard,
    Order,
    OrderItem,
    PayPal,
    Product,
    User,
    Variant,
)
from environments.retail.tools import RetailTools, name_zip_key
from rods_env.database import Database
from rods_env.domain import Draft, Skill, SkillUnavailable, scattered
from rods_env.task import Task, ToolCall, Turn, UserProfile
from rods_env.user import PERSONA_NAMES, persona_text

PaymentMethod = CreditCard | GiftCard | PayPal

_ORDINALS = ("first", "second", "third", "fourth")

_REASON_TEXT = {
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


def _faker(rng: random.Random) -> Faker:
    """A shared Faker re-seeded from ``rng``, so its output depends on ``rng`` only."""
    global _FAKE
    if _FAKE is None:
        _FAKE = Faker("en_US")
    _FAKE.seed_instance(rng.randrange(2**32))
    return _FAKE


def _amount(value: float) -> str:
    """An amount as the tools render it (JSON)."""
    return json.dumps(value)


def _renders_cleanly(value: float) -> bool:
    """True when the JSON text of an amount has exactly two decimals (e.g. 54.04, not 54.1)."""
    return _amount(value) == f"{value:.2f}"


def _options(options: Mapping[str, str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in options.items())


def _item_text(name: str, options: Mapping[str, str]) -> str:
    return f"{name} ({_options(options)})"


def _join(parts: Sequence[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _method_text(method: PaymentMethod) -> str:
    if isinstance(method, CreditCard):
        return f"{method.brand} credit card ending in {method.last_four}"
    if isinstance(method, GiftCard):
        return "gift card"
    return "PayPal account"


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(name=name, arguments=dict(arguments))


def _address_args(address: Address) -> dict[str, str]:
    return address.model_dump()


def _new_address(rng: random.Random) -> Address:
    return fake_address(_faker(rng))


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
    """Structural choices made (see :func:`_choose`), recorded in the task's shape."""


Builder = Callable[
    [Database, random.Random, User, Mapping[str, int], frozenset[str]], "Part | None"
]


# -- selection helpers ---------------------------------------------------------------------
def _user_orders(db: Database, user: User, status: str, exclude: frozenset[str]) -> list[Order]:
    orders = []
    for order_id in user.orders:
        order = db.get("orders", order_id)
        if order is not None and order.status == status and order_id not in exclude:
            orders.append(order)
    return orders


def _alternatives(db: Database, order: Order, item: OrderItem) -> list[Variant]:
    """Available variants of the item's product that are not already in the order."""
    product: Product | None = db.get("products", item.product_id)
    if product is None:
        return []
    taken = {i.item_id for i in order.items}
    return [v for v in product.variants if v.available and v.item_id not in taken]


def _choose(
    shape: Mapping[str, int], choices: dict[str, int], name: str, rng: random.Random, p_one: float
) -> int:
    """A structural choice (0 or 1) of a request: the shape's value when it fixes one, else a
    draw (1 with probability ``p_one``). It changes which call a value flows from, hence the
    signature, so it is recorded in ``choices`` and, through :attr:`Draft.shape`, in the task."""
    value = int(shape[name]) if name in shape else int(rng.random() < p_one)
    choices[name] = value
    return value


def _order_ref(
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
    if _choose(shape, choices, "ref", rng, 0.4) == 0:
        return f"order {order.order_id}"
    name = order.items[0].name
    for order_id in user.orders:
        other = db.get("orders", order_id)
        if order_id != order.order_id and any(i.name == name for i in other.items):
            return None
    return f"the order with the {name}"


def _order_facts(orders: Sequence[Order]) -> dict[str, str]:
    if len(orders) == 1:
        return {"order id": orders[0].order_id}
    return {"order ids": ", ".join(o.order_id for o in orders)}


def _item_facts(label: str, texts: Sequence[str]) -> dict[str, str]:
    if len(texts) == 1:
        return {label: texts[0]}
    return {f"{label}s": "; ".join(texts)}


def _payer(
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


# -- builders (one request each) -----------------------------------------------------------
def _cancel(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("orders", 1)
    pending = _user_orders(db, user, "pending", exclude)
    if len(pending) < count:
        return None
    orders = rng.sample(pending, count)
    choices: dict[str, int] = {}
    reason = rng.choice(CANCEL_REASONS)
    why = rng.choice(_REASON_TEXT[reason])
    calls = []
    for order in orders:
        calls += [
            _call("get_order_details", order_id=order.order_id),
            _call("cancel_pending_order", order_id=order.order_id, reason=reason),
        ]
    if count == 1:
        ref = _order_ref(rng, orders[0], db, user, shape, choices)
        if ref is None:
            return None
        request = rng.choice(
            (
                f"I'd like to cancel {ref}. {why}",
                f"Can you cancel {ref} for me? {why}",
                f"I need to cancel an order that hasn't shipped yet: {ref}. {why}",
                f"{why} Please cancel {ref}.",
            )
        )
    else:
        ids = _join([o.order_id for o in orders])
        request = rng.choice(
            (
                f"I want to cancel two orders, {ids}. {why}",
                f"Please cancel my orders {ids}. {why}",
                f"{why} Could you cancel both {ids}?",
            )
        )
    facts = {**_order_facts(orders), "reason": reason}
    return Part(request, calls, facts, orders=tuple(o.order_id for o in orders), choices=choices)


def _replace_items(
    db: Database,
    rng: random.Random,
    user: User,
    count: int,
    status: str,
    exclude: frozenset[str],
    pay_kind: int,
) -> tuple[Order, list[OrderItem], list[Variant], PaymentMethod] | None:
    """Pick an order of ``status`` and ``count`` of its items, of distinct products (one
    product look-up each), with replacement variants, and the method that settles the
    difference (``pay_kind``, see :func:`_payer`)."""
    orders = _user_orders(db, user, status, exclude)
    rng.shuffle(orders)
    for order in orders:
        options = [(item, _alternatives(db, order, item)) for item in order.items]
        options = [(item, alts) for item, alts in options if alts]
        if len(options) < count:
            continue
        chosen = rng.sample(options, count)
        if len({item.product_id for item, _ in chosen}) < count:
            continue
        # Keep the order's item order, so the gold call lists items as the order does.
        chosen.sort(key=lambda pair: order.items.index(pair[0]))
        olds, news, taken = [], [], set()
        for item, alts in chosen:
            alts = [v for v in alts if v.item_id not in taken]
            if not alts:
                break
            new = rng.choice(alts)
            taken.add(new.item_id)
            olds.append(item)
            news.append(new)
        if len(olds) < count:
            continue
        diff = round(sum(n.price - o.price for o, n in zip(olds, news, strict=True)), 2)
        if status == "pending" and pay_kind == 1 and diff < 0:
            continue  # a refund goes back to a method that paid the order, not another one
        method = _payer(user, diff, order.payment_history[0].payment_method_id, pay_kind, rng)
        if method is None:
            continue
        return order, olds, news, method
    return None


def _products_calls(items: Sequence[OrderItem]) -> list[ToolCall]:
    seen: list[str] = []
    for item in items:
        if item.product_id not in seen:
            seen.append(item.product_id)
    return [_call("get_product_details", product_id=p) for p in seen]


def _change_text(old: OrderItem, new: Variant) -> str:
    changed = {k: v for k, v in new.options.items() if old.options.get(k) != v}
    return f"the {_item_text(old.name, old.options)} to {_options(changed)}"


_MODIFY_TEMPLATES = (
    "{Ref} hasn't shipped yet and I'd like to change {changes}. Use my {pay} for any difference.",
    "Could you modify {ref}? I want to switch {changes}. Any price difference can go on my {pay}.",
    "I picked the wrong options in {ref}. Please change {changes}; my {pay} is fine for the "
    "difference.",
    "For {ref}, I'd like to swap {changes}. Charge or refund the difference with my {pay}, please.",
)
_EXCHANGE_TEMPLATES = (
    "I received {ref} and I'd like to exchange {changes}. Settle any difference with my {pay}.",
    "Can I exchange something from {ref}? I want {changes}. My {pay} works for the price "
    "difference.",
    "The items in {ref} arrived but I need to exchange {changes}. Use my {pay} for the "
    "difference, please.",
)


def _swap_items(
    db: Database,
    rng: random.Random,
    user: User,
    shape: Mapping[str, int],
    exclude: frozenset[str],
    *,
    status: str,
    tool_name: str,
    templates: Sequence[str],
) -> Part | None:
    """Items of an order of ``status`` swapped for other variants of the same products:
    modifying a pending order and exchanging a delivered one differ only in these."""
    choices: dict[str, int] = {}
    pay_kind = _choose(shape, choices, "pay", rng, 0.5)
    picked = _replace_items(db, rng, user, shape.get("items", 1), status, exclude, pay_kind)
    if picked is None:
        return None
    order, olds, news, method = picked
    changes = _join([_change_text(o, n) for o, n in zip(olds, news, strict=True)])
    ref = _order_ref(rng, order, db, user, shape, choices)
    if ref is None:
        return None
    pay = _method_text(method)
    request = rng.choice(templates).format(
        ref=ref, Ref=ref[0].upper() + ref[1:], changes=changes, pay=pay
    )
    calls = [
        _call("get_order_details", order_id=order.order_id),
        *_products_calls(olds),
        _call(
            tool_name,
            order_id=order.order_id,
            item_ids=[o.item_id for o in olds],
            new_item_ids=[n.item_id for n in news],
            payment_method_id=method.id,
        ),
    ]
    facts = {
        **_order_facts([order]),
        **_item_facts("item", [_item_text(o.name, o.options) for o in olds]),
        **_item_facts(
            "new item", [_item_text(o.name, n.options) for o, n in zip(olds, news, strict=True)]
        ),
        "payment method": pay,
    }
    return Part(request, calls, facts, orders=(order.order_id,), choices=choices)


_modify_items = functools.partial(
    _swap_items,
    status="pending",
    tool_name="modify_pending_order_items",
    templates=_MODIFY_TEMPLATES,
)
_exchange_items = functools.partial(
    _swap_items,
    status="delivered",
    tool_name="exchange_delivered_order_items",
    templates=_EXCHANGE_TEMPLATES,
)


def _return_items(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("items", 1)
    orders = [o for o in _user_orders(db, user, "delivered", exclude) if len(o.items) >= count]
    if not orders:
        return None
    order = rng.choice(orders)
    items = rng.sample(order.items, count)
    items.sort(key=order.items.index)
    original = order.payment_history[0].payment_method_id
    cards = [m for m in user.payment_methods if isinstance(m, GiftCard) and m.id != original]
    choices: dict[str, int] = {}
    method: PaymentMethod | None
    # refund 0: to the original method (its id is in the order); 1: to a gift card (in the user)
    if _choose(shape, choices, "refund", rng, 0.35) == 1:
        method = cards[0] if cards else None
    else:
        method = user.payment_method(original)
    if method is None:
        return None
    texts = [_item_text(i.name, i.options) for i in items]
    ref = _order_ref(rng, order, db, user, shape, choices)
    if ref is None:
        return None
    if method.id == original:
        where, refund = "to the original payment method", "original payment method"
    else:
        where, refund = "to my gift card", "gift card"
    request = rng.choice(
        (
            f"I'd like to return {_join(texts)} from {ref}. Please refund it {where}.",
            f"Can I send back {_join(texts)}? It came in {ref}. The refund should go {where}.",
            f"I want to return some items from {ref}: {_join(texts)}. Refund {where}, please.",
        )
    )
    calls = [
        _call("get_order_details", order_id=order.order_id),
        _call(
            "return_delivered_order_items",
            order_id=order.order_id,
            item_ids=[i.item_id for i in items],
            payment_method_id=method.id,
        ),
    ]
    facts = {**_order_facts([order]), **_item_facts("item", texts), "refund method": refund}
    return Part(request, calls, facts, orders=(order.order_id,), choices=choices)


def _orders_ref(
    rng: random.Random,
    orders: Sequence[Order],
    db: Database,
    user: User,
    shape: Mapping[str, int],
    choices: dict[str, int],
) -> str | None:
    """How the customer names one order (see :func:`_order_ref`) or several (by their ids)."""
    if len(orders) == 1:
        return _order_ref(rng, orders[0], db, user, shape, choices)
    return f"my orders {_join([o.order_id for o in orders])}"


def _modify_address(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("orders", 1)
    pending = _user_orders(db, user, "pending", exclude)
    if len(pending) < count:
        return None
    orders = rng.sample(pending, count)
    choices: dict[str, int] = {}
    ref = _orders_ref(rng, orders, db, user, shape, choices)
    if ref is None:
        return None
    verb = "is" if count == 1 else "are"
    # to_default 1: ship to the default address (its fields come from the user's details)
    to_default = _choose(shape, choices, "to_default", rng, 0.4)
    if to_default == 1 and any(o.address == user.address for o in orders):
        return None
    if to_default == 1:
        address = user.address
        request = rng.choice(
            (
                f"Could you ship {ref} to my default address instead? I entered a different "
                "one by mistake.",
                f"Please change the shipping address of {ref} to the default address on my "
                "account.",
            )
        )
        facts = {**_order_facts(orders), "new address": "my default address on file"}
    else:
        address = _new_address(rng)
        request = rng.choice(
            (
                f"I need to change the shipping address of {ref}. The new address is "
                f"{address.text()}.",
                f"I'm moving, so please send {ref} to {address.text()} instead.",
                f"Can you update where {ref} {verb} going? Ship to {address.text()}.",
            )
        )
        facts = {**_order_facts(orders), "new address": address.text()}
    calls = []
    for order in orders:
        calls += [
            _call("get_order_details", order_id=order.order_id),
            _call(
                "modify_pending_order_address", order_id=order.order_id, **_address_args(address)
            ),
        ]
    return Part(request, calls, facts, orders=tuple(o.order_id for o in orders), choices=choices)


def _modify_payment(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("orders", 1)
    single = [o for o in _user_orders(db, user, "pending", exclude) if len(o.payment_history) == 1]
    methods = list(user.payment_methods)
    rng.shuffle(methods)
    for method in methods:
        fits = [o for o in single if o.payment_history[0].payment_method_id != method.id]
        if len(fits) < count:
            continue
        orders = rng.sample(fits, count)
        # a gift card pays every order switched to it: its balance must cover them all
        if isinstance(method, GiftCard) and method.balance < sum(
            o.payment_history[0].amount for o in orders
        ):
            continue
        break
    else:
        return None
    choices: dict[str, int] = {}
    ref = _orders_ref(rng, orders, db, user, shape, choices)
    if ref is None:
        return None
    pay = _method_text(method)
    request = rng.choice(
        (
            f"I'd like to pay for {ref} with my {pay} instead.",
            f"Can you switch the payment of {ref} to my {pay}?",
            f"Please change the payment method on {ref}; I want to use my {pay}.",
        )
    )
    calls = []
    for order in orders:
        calls += [
            _call("get_order_details", order_id=order.order_id),
            _call(
                "modify_pending_order_payment", order_id=order.order_id, payment_method_id=method.id
            ),
        ]
    facts = {**_order_facts(orders), "payment method": pay}
    return Part(request, calls, facts, orders=tuple(o.order_id for o in orders), choices=choices)


def _modify_user_address(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    address = _new_address(rng)
    if address == user.address:
        return None
    request = rng.choice(
        (
            f"I've moved. Please update the default address on my account to {address.text()}.",
            f"Can you change my account's address to {address.text()}?",
            f"My address has changed; it's now {address.text()}. Please update my profile.",
        )
    )
    calls = [_call("modify_user_address", user_id=user.user_id, **_address_args(address))]
    return Part(request, calls, {"new address": address.text()})


def _order_question(order: Order) -> tuple[str, str] | None:
    """A question about an order and its answer as it appears in get_order_details."""
    if len(order.fulfilments) == 1 and len(order.fulfilments[0].tracking_ids) == 1:
        return "the tracking number", order.fulfilments[0].tracking_ids[0]
    refunds = [p for p in order.payment_history if p.transaction_type == "refund"]
    if order.status == "cancelled" and len(refunds) == 1 and _renders_cleanly(refunds[0].amount):
        return "the amount refunded", _amount(refunds[0].amount)
    payments = order.payment_history
    if order.status == "pending" and len(payments) == 1 and _renders_cleanly(payments[0].amount):
        return "the amount I paid", _amount(payments[0].amount)
    return None


def _order_info(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("orders", 1)
    answerable = []
    for order_id in user.orders:
        order = db.get("orders", order_id)
        if order is None or order_id in exclude:
            continue
        qa = _order_question(order)
        if qa is not None:
            answerable.append((order, qa))
    if len(answerable) < count:
        return None
    chosen = rng.sample(answerable, count)
    asks = [f"{q} for order {o.order_id}" for o, (q, _) in chosen]
    request = rng.choice(
        (
            f"Could you tell me {_join(asks)}?",
            f"I have a question about my orders: I'd like to know {_join(asks)}.",
            f"Quick question: what's {_join(asks)}?",
        )
    )
    calls = [_call("get_order_details", order_id=o.order_id) for o, _ in chosen]
    outputs = [answer for _, (_, answer) in chosen]
    orders = [o for o, _ in chosen]
    return Part(
        request, calls, _order_facts(orders), outputs, orders=tuple(o.order_id for o in orders)
    )


def _product_info(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("products", 1)
    products = list(db.values("products"))
    if len(products) < count:
        return None
    chosen = rng.sample(products, count)
    asks, texts, outputs = [], [], []
    for product in chosen:
        variant = rng.choice([v for v in product.variants if v.available])
        texts.append(_item_text(product.name, variant.options))
        asks.append(f"the {product.name} with {_options(variant.options)}")
        outputs.append(_amount(variant.price))
    request = rng.choice(
        (
            f"How much does {_join(asks)} cost?",
            f"I'm thinking of buying {_join(asks)}. What's the price?",
            f"Can you look up the current price of {_join(asks)}?",
        )
    )
    calls = [_call("list_all_product_types")]
    calls += [_call("get_product_details", product_id=p.product_id) for p in chosen]
    facts = _item_facts("product", texts)
    return Part(request, calls, facts, outputs, needs_user_details=False)


# -- assembling drafts ---------------------------------------------------------------------
def _name_zip_unique(db: Database, user: User) -> bool:
    key = name_zip_key(user)
    return len(db.find("users", "name_zip", key, key=name_zip_key)) == 1


_EMAIL, _NAME_ZIP = 0, 1


def _identity_choice(rng: random.Random, shape: Mapping[str, int]) -> int:
    """Which look-up verifies the customer: the shape's ``identity`` or a draw (60% email)."""
    if "identity" in shape:
        return int(shape["identity"])
    return _EMAIL if rng.random() < 0.6 else _NAME_ZIP


def _identity(
    db: Database, user: User, method: int
) -> tuple[list[ToolCall], dict[str, str]] | None:
    """The verifying look-up and the identity facts; None when ``method`` cannot single the
    customer out (another customer shares the name and zip code)."""
    names = {"first name": user.name.first_name, "last name": user.name.last_name}
    if method == _EMAIL:
        facts = {"email": user.email, **names, "zip code": user.address.zip}
        return [_call("find_user_id_by_email", email=user.email)], facts
    if not _name_zip_unique(db, user):
        return None
    call = _call(
        "find_user_id_by_name_zip",
        first_name=user.name.first_name,
        last_name=user.name.last_name,
        zip=user.address.zip,
    )
    return [call], {**names, "zip code": user.address.zip}


def _profile(rng: random.Random, user: User, facts: dict[str, str]) -> UserProfile:
    name = f"{user.name.first_name} {user.name.last_name}"
    return UserProfile(name=name, persona=persona_text(rng.choice(PERSONA_NAMES)), facts=facts)


def _users(db: Database, rng: random.Random) -> Iterator[User]:
    return scattered(list(db.values("users")), rng)


def _writes(calls: Sequence[ToolCall]) -> bool:
    writes = RetailTools.write_names()
    return any(c.name in writes for c in calls)


def _has_spare(db: Database, user: User, used: Collection[str]) -> bool:
    """Whether the customer has a pending or delivered order the task leaves alone, so a
    write unrelated to the task exists (see :func:`unrelated_write`)."""
    for order_id in user.orders:
        order = db.get("orders", order_id)
        if order_id not in used and order is not None and order.status in ("pending", "delivered"):
            return True
    return False


def _single(builder: Builder) -> Callable[[Database, random.Random, Mapping[str, int]], Draft]:
    """A skill made of one request on one user's account."""

    def generate(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
        method = _identity_choice(rng, shape)
        for user in _users(db, rng):
            part = builder(db, rng, user, shape, frozenset())
            if part is None or (_writes(part.calls) and not _has_spare(db, user, part.orders)):
                continue
            identity = _identity(db, user, method)
            if identity is None:
                continue
            calls, facts = identity
            if part.needs_user_details:
                calls.append(_call("get_user_details", user_id=user.user_id))
            turn = Turn(
                request=part.request,
                calls=tuple(calls + part.calls),
                outputs=tuple(part.outputs),
            )
            return Draft(
                user=_profile(rng, user, {**facts, **part.facts}),
                turns=(turn,),
                shape={**shape, "identity": method, **part.choices},
            )
        raise SkillUnavailable(f"no user satisfies the preconditions for shape {dict(shape)}")

    return generate


_TURN_BUILDERS: tuple[Builder, ...] = (
    _cancel,
    _modify_items,
    _modify_address,
    _modify_payment,
    _return_items,
    _exchange_items,
    _order_info,
    _product_info,
    _modify_user_address,
)


_READ_BUILDERS = (_order_info, _product_info)


def _multi_turn_plan(count: int, plan: int) -> list[Builder]:
    """The requests of a multi-turn task, fixed by ``plan``: the first ``count`` builders of
    a plan-seeded shuffle, with at least one write among them. Growing ``count`` keeps the
    earlier turns, so *expand* adds exactly one request."""
    order = list(_TURN_BUILDERS)
    random.Random(f"retail-multi-turn:{plan}").shuffle(order)
    if all(b in _READ_BUILDERS for b in order[:count]):
        first_write = next(i for i, b in enumerate(order) if b not in _READ_BUILDERS)
        order.insert(0, order.pop(first_write))
    return order[:count]


def _multi_turn(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Two or three requests of one customer; each turn is drawn on the state the previous
    turns' gold calls leave, so later turns stay valid. Which requests, in which order, is
    fixed by the shape's ``plan`` (drawn when absent), so a resample keeps the structure."""
    count = shape.get("turns", 2)
    method = _identity_choice(rng, shape)
    # a given plan is kept (resample, expand); otherwise draw plans until one is feasible
    plans = [int(shape["plan"])] if "plan" in shape else [rng.randrange(1_000) for _ in range(8)]
    for plan in plans:
        draft = _multi_turn_with_plan(db, rng, shape, count, plan, method)
        if draft is not None:
            return draft
    raise SkillUnavailable(f"no user supports the {count} requests of plans {plans}")


def _multi_turn_with_plan(
    db: Database, rng: random.Random, shape: Mapping[str, int], count: int, plan: int, method: int
) -> Draft | None:
    builders = _multi_turn_plan(count, plan)
    for user in itertools.islice(_users(db, rng), 100):
        identity = _identity(db, user, method)
        if identity is None:
            continue
        calls, facts = identity
        calls.append(_call("get_user_details", user_id=user.user_id))
        state = db.fork()
        tools = RetailTools(state)
        turns: list[Turn] = []
        used_orders: frozenset[str] = frozenset()
        choices: dict[str, int] = {}
        for index, builder in enumerate(builders):
            current = state.get("users", user.user_id)
            prefix = f"t{index}."
            sub = {k[len(prefix) :]: v for k, v in shape.items() if k.startswith(prefix)}
            part = builder(state, rng, current, sub, used_orders)
            if part is None:
                break
            turn_calls = calls + part.calls if index == 0 else part.calls
            for call in turn_calls:
                result = tools.call(call.name, call.arguments, render=False)
                if not result.ok:  # pragma: no cover - a bug in a builder
                    raise AssertionError(f"gold call failed: {call.key()}: {result.output}")
            for label, value in part.facts.items():
                key = label if label not in facts else f"{label} ({_ORDINALS[index]} request)"
                facts[key] = value
            used_orders |= set(part.orders)
            choices.update({prefix + k: v for k, v in part.choices.items()})
            turns.append(
                Turn(request=part.request, calls=tuple(turn_calls), outputs=tuple(part.outputs))
            )
        if len(turns) == count and _has_spare(state, user, used_orders):
            return Draft(
                user=_profile(rng, user, facts),
                turns=tuple(turns),
                shape={**shape, "turns": count, "plan": plan, "identity": method, **choices},
            )
    return None


def _gold_replay(task: Task, db: Database) -> tuple[str, set[tuple[str, str]]]:
    """Replay the task's gold calls on a fresh state over ``db``'s base: the customer the
    first call verifies, and the records the calls change."""
    fresh = Database(db.base)
    tools = RetailTools(fresh)
    for call in task.gold_calls:
        result = tools.call(call.name, call.arguments, render=False)
        if not result.ok:
            raise ValueError(f"task {task.id}: gold call {call.key()} fails: {result.output}")
    if tools.verified_user_id is None:
        raise ValueError(f"task {task.id} never verifies a customer")
    return tools.verified_user_id, set(fresh.changes())


def unrelated_write(task: Task, db: Database) -> ToolCall:
    """A valid write on the task's customer that touches no record the task's gold changes.

    Preference: a new default address for the customer; else a new shipping address for
    one of their other pending orders; else a return of one item of another delivered order.
    Valid once the customer is verified (every Retail task starts with that look-up).

    Args:
        task: A Retail task.
        db: The current state (during or after the task's gold calls).

    Raises:
        ValueError: The task's gold fails or verifies no customer, or the customer has no
            record outside the task's effect that can be written.
    """
    user_id, touched = _gold_replay(task, db)
    user: User = db.get("users", user_id)
    rng = random.Random(f"unrelated:{task.id}")
    address = _new_address(rng)
    if ("users", user.user_id) not in touched and address != user.address:
        return _call("modify_user_address", user_id=user.user_id, **_address_args(address))
    for order_id in user.orders:
        order = db.get("orders", order_id)
        if order is None or ("orders", order_id) in touched:
            continue
        if order.status == "pending" and address != order.address:
            return _call(
                "modify_pending_order_address", order_id=order_id, **_address_args(address)
            )
        if order.status == "delivered":
            return _call(
                "return_delivered_order_items",
                order_id=order_id,
                item_ids=[order.items[0].item_id],
                payment_method_id=order.payment_history[0].payment_method_id,
            )
    raise ValueError(f"task {task.id}: customer {user.user_id} has no record left to write")


def forbidden_requests(task: Task, db: Database, rng: random.Random) -> list[str]:
    """Requests of the task's customer that the policy forbids, about orders the task does
    not touch: cancelling a delivered order, changing a processed one, returning items of a
    cancelled one. The right answer is to decline them (the distractor augmentation adds
    one to a request)."""
    try:
        user_id, _ = _gold_replay(task, db)
    except ValueError:
        return []
    user: User = db.get("users", user_id)
    used = {str(c.arguments.get("order_id")) for c in task.gold_calls}
    out = []
    for order_id in user.orders:
        order = db.get("orders", order_id)
        if order is None or order_id in used:
            continue
        if order.status == "delivered":
            out.append(
                f"Also, please cancel my order {order_id}; it already arrived but I don't want "
                "it any more."
            )
        elif order.status == "processed":
            out.append(f"And could you change the shipping address of order {order_id} too?")
        elif order.status == "cancelled":
            out.append(f"Could you also return the items of my order {order_id}?")
    return out


SKILLS: tuple[Skill, ...] = (
    Skill(
        "cancel_order",
        "Cancel one or two pending orders with a policy reason.",
        _single(_cancel),
        shape={"orders": 1},
        limits={"orders": (1, 2)},
    ),
    Skill(
        "modify_items",
        "Change items of a pending order to other variants, paying the difference.",
        _single(_modify_items),
        shape={"items": 1},
        limits={"items": (1, 3)},
    ),
    Skill(
        "modify_address",
        "Change the shipping address of one or two pending orders.",
        _single(_modify_address),
        shape={"orders": 1},
        limits={"orders": (1, 2)},
    ),
    Skill(
        "modify_payment",
        "Pay one or two pending orders with another payment method of the customer.",
        _single(_modify_payment),
        shape={"orders": 1},
        limits={"orders": (1, 2)},
    ),
    Skill(
        "return_items",
        "Return items of a delivered order to the original method or a gift card.",
        _single(_return_items),
        # more items is one longer list in the same call: the structure does not grow, so the
        # axis is not offered to *expand* (shape {"items": 2 or 3} still works when asked)
        shape={"items": 1},
    ),
    Skill(
        "exchange_items",
        "Exchange items of a delivered order for other variants of the same products.",
        _single(_exchange_items),
        shape={"items": 1},
        limits={"items": (1, 3)},
    ),
    Skill(
        "modify_user_address",
        "Change the customer's default address.",
        _single(_modify_user_address),
    ),
    Skill(
        "order_info",
        "Answer tracking numbers, refunds or amounts paid for one to three orders.",
        _single(_order_info),
        shape={"orders": 1},
        limits={"orders": (1, 3)},
        writes=False,
    ),
    Skill(
        "product_info",
        "Answer the price of one or two product variants.",
        _single(_product_info),
        shape={"products": 1},
        limits={"products": (1, 2)},
        writes=False,
    ),
    Skill(
        "multi_turn",
        "Two or three different requests of one customer, one per turn.",
        _multi_turn,
        shape={"turns": 2},
        limits={"turns": (2, 3)},
    ),
)
