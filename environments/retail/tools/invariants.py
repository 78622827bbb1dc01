"""The Retail domain's money rules, checked after every write in the shared tests."""

from __future__ import annotations

from environments.retail.schema import GiftCard, Order, order_table, user_table
from rods_env.database import Database


def _ledger(order: Order | None) -> dict[str, tuple[float, float]]:
    """Payment method -> (paid, refunded) over an order's history."""
    out: dict[str, tuple[float, float]] = {}
    for t in order.payment_history if order is not None else ():
        paid, refunded = out.get(t.payment_method_id, (0.0, 0.0))
        if t.transaction_type == "payment":
            paid += t.amount
        else:
            refunded += t.amount
        out[t.payment_method_id] = (paid, refunded)
    return out


def invariant_violations(db: Database, everything: bool = False) -> list[str]:
    """The money rules of the Retail domain that ``db`` breaks (empty when it is sound).

    Invariants (docs/reward-design.md lists them):

    * every transaction amount is positive;
    * per order and payment method, refunds never exceed payments (to the cent);
    * a cancelled order has refunded every method what it paid;
    * gift card balances are never negative;
    * a gift card's balance moves exactly as the transactions written on it since the base
      (refunds add, payments subtract): money is neither created nor lost.

    Args:
        db: The state.
        everything: Check every record (slow); by default only records that differ from the
            base, which is checked once (the generator's output).
    """
    bad: list[str] = []
    changes = db.changes()
    order_ids = list(db.keys("orders")) if everything else [k for t, k in changes if t == "orders"]
    user_ids = list(db.keys("users")) if everything else [k for t, k in changes if t == "users"]
    card_flow: dict[str, float] = {}
    for order_id in order_ids:
        order = db.get("orders", order_id)
        if order is None:
            continue
        for t in order.payment_history:
            if t.amount <= 0:
                bad.append(f"order {order_id}: a {t.transaction_type} of {t.amount}")
        ledger = _ledger(order)
        for method_id, (paid, refunded) in ledger.items():
            if refunded > paid + 0.005:
                bad.append(
                    f"order {order_id}: {method_id} refunded {refunded:.2f} but paid {paid:.2f}"
                )
            if order.status == "cancelled" and abs(paid - refunded) > 0.005:
                bad.append(
                    f"order {order_id}: cancelled, {method_id} paid {paid:.2f} and got "
                    f"{refunded:.2f} back"
                )
        if not everything:
            before = _ledger(order_table(db.base).get(order_id))
            for method_id in set(ledger) | set(before):
                now_paid, now_refunded = ledger.get(method_id, (0.0, 0.0))
                was_paid, was_refunded = before.get(method_id, (0.0, 0.0))
                flow = (now_refunded - was_refunded) - (now_paid - was_paid)
                card_flow[method_id] = card_flow.get(method_id, 0.0) + flow
    for user_id in user_ids:
        user = db.get("users", user_id)
        if user is None:
            continue
        base = None if everything else user_table(db.base).get(user_id)
        for method in user.payment_methods:
            if not isinstance(method, GiftCard):
                continue
            if method.balance < 0:
                bad.append(f"user {user_id}: gift card {method.id} balance {method.balance}")
            if base is None:
                continue
            old = base.payment_method(method.id)
            moved = method.balance - (old.balance if isinstance(old, GiftCard) else 0.0)
            if abs(moved - card_flow.get(method.id, 0.0)) > 0.005:
                bad.append(
                    f"user {user_id}: gift card {method.id} moved by {moved:.2f}, its "
                    f"transactions by {card_flow.get(method.id, 0.0):.2f}"
                )
    return bad
