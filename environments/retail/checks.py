"""The Retail policy (``policy.md``) as checks over a task's gold run.

Each check takes ``(domain, task, gold)`` and returns what breaks the policy, or None.
Synthesis applies them to every candidate (``policy_violation``); the tools enforce some of
the same rules at run time, the checks state them over the whole gold run, including rules
no tool can see (the order of the calls).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from environments.retail.schema import CANCEL_REASONS, order_table, product_table
from rods_env.domain import Domain
from rods_env.gold import Gold
from rods_env.task import Task, ToolCall

_FIND_USER = ("find_user_id_by_email", "find_user_id_by_name_zip")
_ORDER_WRITES = {
    "cancel_pending_order": "pending",
    "modify_pending_order_items": "pending",
    "modify_pending_order_address": "pending",
    "modify_pending_order_payment": "pending",
    "return_delivered_order_items": "delivered",
    "exchange_delivered_order_items": "delivered",
}
"""Write tools on an order and the status the order must have (the policy's table)."""


def _calls(task: Task, gold: Gold) -> Iterator[tuple[int, ToolCall, Any]]:
    for k, (call, out) in enumerate(zip(task.gold_calls, gold.call_outputs, strict=True)):
        yield k, call, out


def verify_first(domain: Domain, task: Task, gold: Gold) -> str | None:
    """ "Verify the customer first": the first gold call finds the customer's user id."""
    calls = task.gold_calls
    if not calls or calls[0].name not in _FIND_USER:
        first = calls[0].name if calls else "nothing"
        return f"the gold starts with {first}, not with the customer's verification"
    return None


def one_customer(domain: Domain, task: Task, gold: Gold) -> str | None:
    """ "One customer per conversation": every account and order used is the verified
    customer's."""
    if not task.gold_calls or task.gold_calls[0].name not in _FIND_USER:
        return None  # verify_first reports it
    customer = gold.call_outputs[0]
    orders = order_table(domain.base(task.db_seed, task.db_size))
    for _, call, _ in _calls(task, gold):
        user_id = call.arguments.get("user_id")
        if user_id is not None and user_id != customer:
            return f"{call.name} acts on account {user_id}, not the verified {customer}"
        order_id = call.arguments.get("order_id")
        order = orders.get(order_id) if isinstance(order_id, str) else None
        if order is not None and order.user_id != customer:
            return f"{call.name} acts on order {order_id} of {order.user_id}, not of {customer}"
    return None


def status_checked_first(domain: Domain, task: Task, gold: Gold) -> str | None:
    """ "Always check the status with get_order_details before you offer an action", and the
    status allows the action (the policy's table of statuses)."""
    orders = order_table(domain.base(task.db_seed, task.db_size))
    latest: dict[str, Any] = {}
    for _, call, out in _calls(task, gold):
        order_id = call.arguments.get("order_id")
        if call.name == "get_order_details" and isinstance(out, dict):
            latest[str(order_id)] = out
            continue
        wanted = _ORDER_WRITES.get(call.name)
        if wanted is None:
            continue
        seen = latest.get(str(order_id))
        if seen is None:
            return f"{call.name} on order {order_id} without looking the order up first"
        if seen.get("status") != wanted:
            return f"{call.name} on order {order_id} whose status is '{seen.get('status')}'"
        if isinstance(out, dict):
            latest[str(order_id)] = out
        if orders.get(str(order_id)) is None:
            return f"{call.name} on an order that does not exist: {order_id}"
    return None


def cancel_reason_allowed(domain: Domain, task: Task, gold: Gold) -> str | None:
    """A cancellation gives one of the policy's reasons."""
    for _, call, _ in _calls(task, gold):
        if call.name == "cancel_pending_order" and call.arguments.get("reason") not in (
            CANCEL_REASONS
        ):
            return f"cancellation reason {call.arguments.get('reason')!r} is not in the policy"
    return None


def same_product_swaps(domain: Domain, task: Task, gold: Gold) -> str | None:
    """ "A product cannot be swapped for a different product": every new item of a
    modification or exchange is a variant of the product it replaces."""
    base = domain.base(task.db_seed, task.db_size)
    orders, products = order_table(base), product_table(base)
    for _, call, _ in _calls(task, gold):
        if call.name not in ("modify_pending_order_items", "exchange_delivered_order_items"):
            continue
        order = orders.get(str(call.arguments.get("order_id")))
        if order is None:
            continue
        olds = call.arguments.get("item_ids", [])
        news = call.arguments.get("new_item_ids", [])
        for old, new in zip(olds, news, strict=False):
            item = order.item(old)
            product = products.get(item.product_id) if item is not None else None
            if product is None or product.variant(new) is None:
                return f"{call.name} swaps item {old} for {new}, not a variant of the same product"
    return None


POLICY_CHECKS = (
    verify_first,
    one_customer,
    status_checked_first,
    cancel_reason_allowed,
    same_product_swaps,
)
"""Every check of the Retail policy, in the policy's order."""
