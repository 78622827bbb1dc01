"""Task generators (skills) of the Retail domain.

Each skill picks entities that satisfy its preconditions on the given database, and emits
the gold calls a careful agent makes (identity look-up, account and order look-ups, product
look-ups, then the write), the facts the simulated user knows, and the request text. Every
gold argument comes either from an earlier gold call's output, from a fact value, or from
a constant the policy defines (cancellation reasons). Requests never state identity facts:
the agent has to ask for them. Requests carry no greeting: the user simulator frames turns.

The skills live in one module per concern: :mod:`.orders` (cancel, addresses, payment),
:mod:`.items` (modify, exchange, return), :mod:`.information` (answers), over the helpers of
:mod:`.common`; :mod:`.drafts` assembles requests into tasks. This module lists them
(:data:`SKILLS`) with the domain's unrelated write and forbidden requests.
"""

from __future__ import annotations

import random

from environments.retail.schema import User
from environments.retail.skills.common import address_args, new_address, tool_call
from environments.retail.skills.drafts import multi_turn, single_request
from environments.retail.skills.information import order_info, product_info
from environments.retail.skills.items import exchange_items, modify_items, return_items
from environments.retail.skills.orders import (
    cancel_orders,
    modify_address,
    modify_payment,
    modify_user_address,
)
from environments.retail.tools import RetailTools
from rods_env.database import Database
from rods_env.domain import Skill
from rods_env.task import Task, ToolCall


def gold_replay(task: Task, db: Database) -> tuple[str, set[tuple[str, str]]]:
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
    user_id, touched = gold_replay(task, db)
    user: User = db.get("users", user_id)
    rng = random.Random(f"unrelated:{task.id}")
    address = new_address(rng)
    if ("users", user.user_id) not in touched and address != user.address:
        return tool_call("modify_user_address", user_id=user.user_id, **address_args(address))
    for order_id in user.orders:
        order = db.get("orders", order_id)
        if order is None or ("orders", order_id) in touched:
            continue
        if order.status == "pending" and address != order.address:
            return tool_call(
                "modify_pending_order_address", order_id=order_id, **address_args(address)
            )
        if order.status == "delivered":
            return tool_call(
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
        user_id, _ = gold_replay(task, db)
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
        single_request(cancel_orders),
        shape={"orders": 1},
        limits={"orders": (1, 2)},
    ),
    Skill(
        "modify_items",
        "Change items of a pending order to other variants, paying the difference.",
        single_request(modify_items),
        shape={"items": 1},
        limits={"items": (1, 3)},
    ),
    Skill(
        "modify_address",
        "Change the shipping address of one or two pending orders.",
        single_request(modify_address),
        shape={"orders": 1},
        limits={"orders": (1, 2)},
    ),
    Skill(
        "modify_payment",
        "Pay one or two pending orders with another payment method of the customer.",
        single_request(modify_payment),
        shape={"orders": 1},
        limits={"orders": (1, 2)},
    ),
    Skill(
        "return_items",
        "Return items of a delivered order to the original method or a gift card.",
        single_request(return_items),
        # more items is one longer list in the same call: the structure does not grow, so the
        # axis is not offered to *expand* (shape {"items": 2 or 3} still works when asked)
        shape={"items": 1},
    ),
    Skill(
        "exchange_items",
        "Exchange items of a delivered order for other variants of the same products.",
        single_request(exchange_items),
        shape={"items": 1},
        limits={"items": (1, 3)},
    ),
    Skill(
        "modify_user_address",
        "Change the customer's default address.",
        single_request(modify_user_address),
    ),
    Skill(
        "order_info",
        "Answer tracking numbers, refunds or amounts paid for one to three orders.",
        single_request(order_info),
        shape={"orders": 1},
        limits={"orders": (1, 3)},
        writes=False,
    ),
    Skill(
        "product_info",
        "Answer the price of one or two product variants.",
        single_request(product_info),
        shape={"products": 1},
        limits={"products": (1, 2)},
        writes=False,
    ),
    Skill(
        "multi_turn",
        "Two or three different requests of one customer, one per turn.",
        multi_turn,
        shape={"turns": 2},
        limits={"turns": (2, 3)},
    ),
)
