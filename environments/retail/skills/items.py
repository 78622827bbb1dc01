"""Requests about an order's items: modify (pending) or exchange (delivered) them for other
variants, or return them."""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence

from environments.retail.schema import (
    GiftCard,
    Order,
    OrderItem,
    User,
    Variant,
)
from environments.retail.skills.common import (
    Part,
    alternatives,
    choose,
    item_facts,
    item_text,
    joined,
    method_text,
    options_text,
    order_facts,
    order_ref,
    payer,
    tool_call,
    user_orders,
)
from environments.retail.tools.rules import PaymentMethod
from rods_env.database import Database
from rods_env.task import ToolCall


def replace_items(
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
    difference (``pay_kind``, see :func:`payer`)."""
    orders = user_orders(db, user, status, exclude)
    rng.shuffle(orders)
    for order in orders:
        options = [(item, alternatives(db, order, item)) for item in order.items]
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
        method = payer(user, diff, order.payment_history[0].payment_method_id, pay_kind, rng)
        if method is None:
            continue
        return order, olds, news, method
    return None


def products_calls(items: Sequence[OrderItem]) -> list[ToolCall]:
    seen: list[str] = []
    for item in items:
        if item.product_id not in seen:
            seen.append(item.product_id)
    return [tool_call("get_product_details", product_id=p) for p in seen]


def change_text(old: OrderItem, new: Variant) -> str:
    changed = {k: v for k, v in new.options.items() if old.options.get(k) != v}
    return f"the {item_text(old.name, old.options)} to {options_text(changed)}"


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


def swap_items(
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
    pay_kind = choose(shape, choices, "pay", rng, 0.5)
    picked = replace_items(db, rng, user, shape.get("items", 1), status, exclude, pay_kind)
    if picked is None:
        return None
    order, olds, news, method = picked
    changes = joined([change_text(o, n) for o, n in zip(olds, news, strict=True)])
    ref = order_ref(rng, order, db, user, shape, choices)
    if ref is None:
        return None
    pay = method_text(method)
    request = rng.choice(templates).format(
        ref=ref, Ref=ref[0].upper() + ref[1:], changes=changes, pay=pay
    )
    calls = [
        tool_call("get_order_details", order_id=order.order_id),
        *products_calls(olds),
        tool_call(
            tool_name,
            order_id=order.order_id,
            item_ids=[o.item_id for o in olds],
            new_item_ids=[n.item_id for n in news],
            payment_method_id=method.id,
        ),
    ]
    facts = {
        **order_facts([order]),
        **item_facts("item", [item_text(o.name, o.options) for o in olds]),
        **item_facts(
            "new item", [item_text(o.name, n.options) for o, n in zip(olds, news, strict=True)]
        ),
        "payment method": pay,
    }
    return Part(request, calls, facts, orders=(order.order_id,), choices=choices)


modify_items = functools.partial(
    swap_items,
    status="pending",
    tool_name="modify_pending_order_items",
    templates=_MODIFY_TEMPLATES,
)
exchange_items = functools.partial(
    swap_items,
    status="delivered",
    tool_name="exchange_delivered_order_items",
    templates=_EXCHANGE_TEMPLATES,
)


def return_items(
    db: Database, rng: random.Random, user: User, shape: Mapping[str, int], exclude: frozenset[str]
) -> Part | None:
    count = shape.get("items", 1)
    orders = [o for o in user_orders(db, user, "delivered", exclude) if len(o.items) >= count]
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
    if choose(shape, choices, "refund", rng, 0.35) == 1:
        method = cards[0] if cards else None
    else:
        method = user.payment_method(original)
    if method is None:
        return None
    texts = [item_text(i.name, i.options) for i in items]
    ref = order_ref(rng, order, db, user, shape, choices)
    if ref is None:
        return None
    if method.id == original:
        where, refund = "to the original payment method", "original payment method"
    else:
        where, refund = "to my gift card", "gift card"
    request = rng.choice(
        (
            f"I'd like to return {joined(texts)} from {ref}. Please refund it {where}.",
            f"Can I send back {joined(texts)}? It came in {ref}. The refund should go {where}.",
            f"I want to return some items from {ref}: {joined(texts)}. Refund {where}, please.",
        )
    )
    calls = [
        tool_call("get_order_details", order_id=order.order_id),
        tool_call(
            "return_delivered_order_items",
            order_id=order.order_id,
            item_ids=[i.item_id for i in items],
            payment_method_id=method.id,
        ),
    ]
    facts = {**order_facts([order]), **item_facts("item", texts), "refund method": refund}
    return Part(request, calls, facts, orders=(order.order_id,), choices=choices)
