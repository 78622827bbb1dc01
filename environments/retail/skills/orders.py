"""Requests that change pending orders and the account: cancel, a new shipping address,
another payment method, a new default address."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from environments.retail.schema import (
    CANCEL_REASONS,
    GiftCard,
    Order,
    User,
)
from environments.retail.skills.common import (
    REASON_TEXT,
    Part,
    address_args,
    choose,
    joined,
    method_text,
    new_address,
    order_facts,
    order_ref,
    tool_call,
    user_orders,
)
from rods_env.database import Database


def _pending(
    db: Database, rng: random.Random, user: User, count: int, exclude: frozenset[str]
) -> list[Order] | None:
    """``count`` of the customer's pending orders (not in ``exclude``), drawn; None when
    they have fewer."""
    pending = user_orders(db, user, "pending", exclude)
    if len(pending) < count:
        return None
    return rng.sample(pending, count)


def cancel_orders(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("orders", 1)
    orders = _pending(db, rng, user, count, exclude)
    if orders is None:
        return None
    choices: dict[str, int] = {}
    reason = rng.choice(CANCEL_REASONS)
    why = rng.choice(REASON_TEXT[reason])
    calls = []
    for order in orders:
        calls += [
            tool_call("get_order_details", order_id=order.order_id),
            tool_call("cancel_pending_order", order_id=order.order_id, reason=reason),
        ]
    if count == 1:
        ref = order_ref(rng, orders[0], db, user, shape, choices)
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
        ids = joined([o.order_id for o in orders])
        request = rng.choice(
            (
                f"I want to cancel two orders, {ids}. {why}",
                f"Please cancel my orders {ids}. {why}",
                f"{why} Could you cancel both {ids}?",
            )
        )
    facts = {**order_facts(orders), "reason": reason}
    return Part(request, calls, facts, orders=tuple(o.order_id for o in orders), choices=choices)


def orders_ref(
    rng: random.Random,
    orders: Sequence[Order],
    db: Database,
    user: User,
    shape: Mapping[str, int],
    choices: dict[str, int],
) -> str | None:
    """How the customer names one order (see :func:`order_ref`) or several (by their ids)."""
    if len(orders) == 1:
        return order_ref(rng, orders[0], db, user, shape, choices)
    return f"my orders {joined([o.order_id for o in orders])}"


def modify_address(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("orders", 1)
    orders = _pending(db, rng, user, count, exclude)
    if orders is None:
        return None
    choices: dict[str, int] = {}
    ref = orders_ref(rng, orders, db, user, shape, choices)
    if ref is None:
        return None
    verb = "is" if count == 1 else "are"
    # to_default 1: ship to the default address (its fields come from the user's details)
    to_default = choose(shape, choices, "to_default", rng, 0.4)
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
        facts = {**order_facts(orders), "new address": "my default address on file"}
    else:
        address = new_address(rng)
        request = rng.choice(
            (
                f"I need to change the shipping address of {ref}. The new address is "
                f"{address.text()}.",
                f"I'm moving, so please send {ref} to {address.text()} instead.",
                f"Can you update where {ref} {verb} going? Ship to {address.text()}.",
            )
        )
        facts = {**order_facts(orders), "new address": address.text()}
    calls = []
    for order in orders:
        calls += [
            tool_call("get_order_details", order_id=order.order_id),
            tool_call(
                "modify_pending_order_address", order_id=order.order_id, **address_args(address)
            ),
        ]
    return Part(request, calls, facts, orders=tuple(o.order_id for o in orders), choices=choices)


def modify_payment(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("orders", 1)
    single = [o for o in user_orders(db, user, "pending", exclude) if len(o.payment_history) == 1]
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
    ref = orders_ref(rng, orders, db, user, shape, choices)
    if ref is None:
        return None
    pay = method_text(method)
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
            tool_call("get_order_details", order_id=order.order_id),
            tool_call(
                "modify_pending_order_payment", order_id=order.order_id, payment_method_id=method.id
            ),
        ]
    facts = {**order_facts(orders), "payment method": pay}
    return Part(request, calls, facts, orders=tuple(o.order_id for o in orders), choices=choices)


def modify_user_address(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    address = new_address(rng)
    if address == user.address:
        return None
    request = rng.choice(
        (
            f"I've moved. Please update the default address on my account to {address.text()}.",
            f"Can you change my account's address to {address.text()}?",
            f"My address has changed; it's now {address.text()}. Please update my profile.",
        )
    )
    calls = [tool_call("modify_user_address", user_id=user.user_id, **address_args(address))]
    return Part(request, calls, {"new address": address.text()})
