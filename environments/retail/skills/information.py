"""Information requests: tracking numbers, refunds or amounts paid of orders, and the
prices of product variants."""

from __future__ import annotations

import random
from collections.abc import Mapping

from environments.retail.schema import (
    Order,
    User,
)
from environments.retail.skills.common import (
    Part,
    amount_text,
    item_facts,
    item_text,
    joined,
    options_text,
    order_facts,
    renders_cleanly,
    tool_call,
)
from rods_env.database import Database


def _order_question(order: Order) -> tuple[str, str] | None:
    """A question about an order and its answer as it appears in get_order_details."""
    if len(order.fulfilments) == 1 and len(order.fulfilments[0].tracking_ids) == 1:
        return "the tracking number", order.fulfilments[0].tracking_ids[0]
    refunds = [p for p in order.payment_history if p.transaction_type == "refund"]
    if order.status == "cancelled" and len(refunds) == 1 and renders_cleanly(refunds[0].amount):
        return "the amount refunded", amount_text(refunds[0].amount)
    payments = order.payment_history
    if order.status == "pending" and len(payments) == 1 and renders_cleanly(payments[0].amount):
        return "the amount I paid", amount_text(payments[0].amount)
    return None


def order_info(
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
            f"Could you tell me {joined(asks)}?",
            f"I have a question about my orders: I'd like to know {joined(asks)}.",
            f"Quick question: what's {joined(asks)}?",
        )
    )
    calls = [tool_call("get_order_details", order_id=o.order_id) for o, _ in chosen]
    outputs = [answer for _, (_, answer) in chosen]
    orders = [o for o, _ in chosen]
    return Part(
        request, calls, order_facts(orders), outputs, orders=tuple(o.order_id for o in orders)
    )


def product_info(
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
        texts.append(item_text(product.name, variant.options))
        asks.append(f"the {product.name} with {options_text(variant.options)}")
        outputs.append(amount_text(variant.price))
    request = rng.choice(
        (
            f"How much does {joined(asks)} cost?",
            f"I'm thinking of buying {joined(asks)}. What's the price?",
            f"Can you look up the current price of {joined(asks)}?",
        )
    )
    calls = [tool_call("list_all_product_types")]
    calls += [tool_call("get_product_details", product_id=p.product_id) for p in chosen]
    facts = item_facts("product", texts)
    return Part(request, calls, facts, outputs, needs_user_details=False)
