"""Retail tools: schemas, look-ups, every write's happy path and each rule it enforces.

Every failing write is checked to leave the database fingerprint unchanged, and every read
to change nothing.
"""

from __future__ import annotations

import pytest

from environments.retail import DOMAIN
from environments.retail.schema import (
    CANCEL_REASONS,
    CreditCard,
    GiftCard,
    Order,
    PayPal,
    Transaction,
    User,
)
from environments.retail.tools import RetailTools, invariant_violations
from rods_env.database import Database
from rods_env.errors import RuleViolationError
from tests.environments.toolcheck import fail, ok

ADDRESS = {
    "address1": "12 Elm Street",
    "address2": "Apt 3",
    "city": "Springfield",
    "state": "IL",
    "country": "USA",
    "zip": "62704",
}


@pytest.fixture
def db() -> Database:
    return DOMAIN.database(0, "tiny")


@pytest.fixture
def tools(db) -> RetailTools:
    return RetailTools(db)


# -- helpers -----------------------------------------------------------------------------
def verify(tools, user: User) -> None:
    assert ok(tools, "find_user_id_by_email", email=user.email) == user.user_id


def orders(db, status) -> list[Order]:
    return [o for o in db.values("orders") if o.status == status]


def owner(db, order) -> User:
    return db.get("users", order.user_id)


def alternative(db, order, item, available=True):
    """Another variant of the item's product (available or not), not already in the order."""
    taken = {i.item_id for i in order.items}
    for v in db.get("products", item.product_id).variants:
        if v.available == available and v.item_id not in taken:
            return v
    return None


def modifiable(db, status):
    for order in orders(db, status):
        for item in order.items:
            new = alternative(db, order, item)
            if new is not None:
                return order, item, new
    raise AssertionError(f"no {status} order with an alternative variant")


def give_methods(db, user, *methods) -> User:
    """Replace the user's payment methods (test setup)."""
    new = user.model_copy(update={"payment_methods": tuple(methods)})
    db.put("users", user.user_id, new)
    return new


def pay_with(db, order, method_id) -> Order:
    """Make the order paid by one payment of its total with ``method_id`` (test setup)."""
    total = round(sum(i.price for i in order.items), 2)
    payment = Transaction(transaction_type="payment", amount=total, payment_method_id=method_id)
    new = order.model_copy(update={"payment_history": (payment,)})
    db.put("orders", order.order_id, new)
    return new


def card(balance) -> GiftCard:
    return GiftCard(id="gift_card_0000001", balance=balance)


# -- schemas -------------------------------------------------------------------------------
def test_toolkit_has_the_tools_and_marks_writes():
    names = set(RetailTools.names())
    assert len(names) >= 14
    assert {
        "find_user_id_by_email",
        "find_user_id_by_name_zip",
        "get_user_details",
        "get_order_details",
        "get_product_details",
        "list_all_product_types",
        "calculate",
        "think",
    } <= names
    assert RetailTools.write_names() == {
        "cancel_pending_order",
        "modify_pending_order_items",
        "modify_pending_order_address",
        "modify_pending_order_payment",
        "modify_user_address",
        "return_delivered_order_items",
        "exchange_delivered_order_items",
    }
    specs = RetailTools.specs()
    assert specs["transfer_to_human_agents"].terminal
    assert not any(s.terminal for n, s in specs.items() if n != "transfer_to_human_agents")


def test_schemas_are_valid_openai_functions():
    for schema in RetailTools.schemas():
        assert schema["type"] == "function"
        fn = schema["function"]
        assert fn["description"] and fn["name"].isidentifier()
        params = fn["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) == set(params["properties"])
        for prop in params["properties"].values():
            assert prop["description"]
            assert "type" in prop or "enum" in prop
    cancel = RetailTools.specs()["cancel_pending_order"].schema["function"]["parameters"]
    assert cancel["properties"]["reason"]["enum"] == list(CANCEL_REASONS)
    items = RetailTools.specs()["modify_pending_order_items"].schema["function"]["parameters"]
    assert items["properties"]["item_ids"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": items["properties"]["item_ids"]["description"],
    }


# -- look-ups ------------------------------------------------------------------------------
def test_reads_change_nothing(db, tools):
    user = next(iter(db.values("users")))
    order = db.get("orders", user.orders[0])
    product = next(iter(db.values("products")))
    before = db.fingerprint()
    ok(tools, "find_user_id_by_email", email=user.email)
    ok(
        tools,
        "find_user_id_by_name_zip",
        first_name=user.name.first_name,
        last_name=user.name.last_name,
        zip=user.address.zip,
    )
    ok(tools, "get_user_details", user_id=user.user_id)
    ok(tools, "get_order_details", order_id=order.order_id)
    ok(tools, "get_product_details", product_id=product.product_id)
    ok(tools, "list_all_product_types")
    ok(tools, "calculate", expression="1 + 2")
    ok(tools, "think", thought="plan")
    assert db.fingerprint() == before and not db.changes()


def test_find_user_by_email_and_name_zip(db, tools):
    user = list(db.values("users"))[3]
    assert ok(tools, "find_user_id_by_email", email=f"  {user.email.upper()} ") == user.user_id
    found = ok(
        tools,
        "find_user_id_by_name_zip",
        first_name=user.name.first_name.lower(),
        last_name=user.name.last_name.upper(),
        zip=user.address.zip,
    )
    assert found == user.user_id
    fail(
        tools,
        "find_user_id_by_email",
        "NotFoundError",
        "nobody@example.com",
        "find_user_id_by_name_zip",
        email="nobody@example.com",
    )
    fail(
        tools,
        "find_user_id_by_name_zip",
        "NotFoundError",
        "find_user_id_by_email",
        first_name=user.name.first_name,
        last_name=user.name.last_name,
        zip="00000",
    )


def test_get_details_and_hints(db, tools):
    user = next(iter(db.values("users")))
    verify(tools, user)
    assert ok(tools, "get_user_details", user_id=user.user_id) == user
    fail(tools, "get_user_details", "RuleViolationError", "verified", user_id="nobody_1")
    order = db.get("orders", user.orders[0])
    assert ok(tools, "get_order_details", order_id=order.order_id) == order
    fail(
        tools,
        "get_order_details",
        "NotFoundError",
        f"'#{order.order_id[1:]}'",
        order_id=order.order_id[1:],
    )
    product = db.get("products", order.items[0].product_id)
    assert ok(tools, "get_product_details", product_id=product.product_id) == product
    hint = fail(
        tools,
        "get_product_details",
        "NotFoundError",
        product.product_id,
        product_id=order.items[0].item_id,
    )
    assert "item id" in hint
    listing = ok(tools, "list_all_product_types")
    assert list(listing) == sorted(listing)
    assert listing[product.name] == product.product_id


def test_private_records_are_shown_only_to_the_verified_customer(db, tools):
    """Verification before disclosure: accounts and orders need the customer verified, and
    only their own are shown; the public catalog needs nothing."""
    user, other = list(db.values("users"))[:2]
    order, others_order = user.orders[0], other.orders[0]
    for name, args in [
        ("get_user_details", {"user_id": user.user_id}),
        ("get_order_details", {"order_id": order}),
    ]:
        fail(tools, name, "RuleViolationError", "not been verified", **args)
    product = db.get("orders", order).items[0].product_id
    assert ok(tools, "get_product_details", product_id=product).product_id == product
    verify(tools, user)
    assert ok(tools, "get_order_details", order_id=order).order_id == order
    fail(tools, "get_user_details", "RuleViolationError", "not the verified", user_id=other.user_id)
    fail(
        tools, "get_order_details", "RuleViolationError", "not the verified", order_id=others_order
    )


def test_calculate_and_think(tools):
    assert ok(tools, "calculate", expression="19.99 * 3") == 59.97
    assert tools.call("calculate", {"expression": "19.99 * 3"}).output == "59.97"
    fail(tools, "calculate", "InvalidArgumentError", "Hint:", expression="__import__('os')")
    assert ok(tools, "think", thought="first verify the user") == "OK."


def test_transfer_is_terminal(tools):
    result = tools.call("transfer_to_human_agents", {"summary": "wants a refund to cash"})
    assert result.ok and result.terminal
    fail(tools, "transfer_to_human_agents", "InvalidArgumentError", summary="  ")


# -- identity ------------------------------------------------------------------------------
def test_writes_need_a_verified_customer(db, tools):
    order = orders(db, "pending")[0]
    fail(
        tools,
        "cancel_pending_order",
        "RuleViolationError",
        "not been verified",
        "find_user_id_by_email",
        order_id=order.order_id,
        reason="no longer needed",
    )
    fail(
        tools,
        "modify_user_address",
        "RuleViolationError",
        "not been verified",
        user_id=order.user_id,
        **ADDRESS,
    )


def test_one_customer_per_conversation(db, tools):
    first, second = list(db.values("users"))[:2]
    verify(tools, first)
    fail(
        tools,
        "find_user_id_by_email",
        "RuleViolationError",
        "one customer",
        email=second.email,
    )
    other = next(o for o in orders(db, "pending") if o.user_id != first.user_id)
    fail(
        tools,
        "cancel_pending_order",
        "RuleViolationError",
        "not the verified customer",
        order_id=other.order_id,
        reason="no longer needed",
    )
    fail(tools, "modify_user_address", "RuleViolationError", user_id=second.user_id, **ADDRESS)
    tools.on_reset()
    verify(tools, second)


# -- cancel --------------------------------------------------------------------------------
def test_cancel_refunds_every_payment_and_restores_gift_cards(db, tools):
    order = orders(db, "pending")[0]
    user = give_methods(db, owner(db, order), card(5.0))
    order = pay_with(db, order, "gift_card_0000001")
    total = order.payment_history[0].amount
    verify(tools, user)
    new = ok(tools, "cancel_pending_order", order_id=order.order_id, reason="ordered by mistake")
    assert new.status == "cancelled" and new.cancel_reason == "ordered by mistake"
    assert new.payment_history[-1] == Transaction(
        transaction_type="refund", amount=total, payment_method_id="gift_card_0000001"
    )
    assert db.get("orders", order.order_id) == new
    balance = db.get("users", user.user_id).payment_methods[0].balance
    assert balance == round(5.0 + total, 2)


def test_cancel_to_a_card_leaves_the_user_unchanged(db, tools):
    order = orders(db, "pending")[0]
    user = owner(db, order)
    verify(tools, user)
    before = db.get("users", user.user_id)
    ok(tools, "cancel_pending_order", order_id=order.order_id, reason="no longer needed")
    assert db.get("users", user.user_id) == before


def test_cancel_after_a_payment_change_refunds_once(db, tools):
    """Regression: a payment change then a cancellation refunded the original method twice
    (a gift card gained twice the order total). The refund is what each method paid, net."""
    for order in orders(db, "pending"):
        user = owner(db, order)
        (payment,) = order.payment_history
        gift = user.payment_method(payment.payment_method_id)
        others = [m for m in user.payment_methods if m.id != payment.payment_method_id]
        if isinstance(gift, GiftCard) and any(not isinstance(m, GiftCard) for m in others):
            break
    else:
        raise AssertionError("no pending order paid by a gift card")
    other = next(m for m in others if not isinstance(m, GiftCard))
    total = payment.amount
    verify(tools, user)
    ok(tools, "modify_pending_order_payment", order_id=order.order_id, payment_method_id=other.id)
    balance = db.get("users", user.user_id).payment_method(gift.id).balance
    assert balance == round(gift.balance + total, 2)  # refunded once
    new = ok(tools, "cancel_pending_order", order_id=order.order_id, reason="no longer needed")
    assert db.get("users", user.user_id).payment_method(gift.id).balance == balance  # not again
    refunds = [t for t in new.payment_history if t.transaction_type == "refund"]
    assert [(t.payment_method_id, t.amount) for t in refunds] == [
        (gift.id, total),
        (other.id, total),
    ]
    assert invariant_violations(db) == []


def test_refund_of_a_difference_goes_to_a_method_that_paid(db, tools):
    """A cheaper variant refunds the difference only to a method that paid the order."""
    for order in orders(db, "pending"):
        for item in order.items:
            cheaper = [
                v
                for v in db.get("products", item.product_id).variants
                if v.available and v.price < item.price and v.item_id != item.item_id
            ]
            if cheaper:
                break
        else:
            continue
        break
    user = owner(db, order)
    paid_by = order.payment_history[0].payment_method_id
    others = [m.id for m in user.payment_methods if m.id != paid_by]
    verify(tools, user)
    args = {
        "order_id": order.order_id,
        "item_ids": [item.item_id],
        "new_item_ids": [cheaper[0].item_id],
    }
    fail(
        tools,
        "modify_pending_order_items",
        "RuleViolationError",
        "Refunds go back",
        paid_by,
        payment_method_id=others[0],
        **args,
    )
    ok(tools, "modify_pending_order_items", payment_method_id=paid_by, **args)
    assert invariant_violations(db) == []


@pytest.mark.parametrize(
    ("status", "needle"),
    [
        ("delivered", "return_delivered_order_items"),
        ("processed", "being shipped"),
        ("pending (item modified)", "already modified"),
        ("cancelled", "no further action"),
    ],
)
def test_cancel_only_pending(db, tools, status, needle):
    order = orders(db, status)[0]
    verify(tools, owner(db, order))
    message = fail(
        tools,
        "cancel_pending_order",
        "RuleViolationError",
        f"is '{status}'",
        needle,
        order_id=order.order_id,
        reason="no longer needed",
    )
    assert "only 'pending' orders" in message


def test_cancel_reason_must_be_a_policy_reason(db, tools):
    order = orders(db, "pending")[0]
    verify(tools, owner(db, order))
    fail(
        tools,
        "cancel_pending_order",
        "InvalidArgumentError",
        "'no longer needed'",
        order_id=order.order_id,
        reason="too expensive",
    )
    fail(
        tools,
        "cancel_pending_order",
        "NotFoundError",
        "get_user_details",
        order_id="#W0000000",
        reason="no longer needed",
    )


# -- modify items --------------------------------------------------------------------------
def test_modify_items_charges_the_difference_once(db, tools):
    order, item, new = modifiable(db, "pending")
    user = give_methods(db, owner(db, order), card(10_000.0))
    order = pay_with(db, order, "gift_card_0000001")  # so a refund of the difference may go there
    verify(tools, user)
    result = ok(
        tools,
        "modify_pending_order_items",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[new.item_id],
        payment_method_id="gift_card_0000001",
    )
    diff = round(new.price - item.price, 2)
    assert result.status == "pending (item modified)"
    changed = result.item(new.item_id)
    assert (changed.price, changed.options, changed.product_id) == (
        new.price,
        new.options,
        item.product_id,
    )
    assert result.item(item.item_id) is None
    assert result.payment_history[-1] == Transaction(
        transaction_type="payment" if diff > 0 else "refund",
        amount=abs(diff),
        payment_method_id="gift_card_0000001",
    )
    assert db.get("users", user.user_id).payment_methods[0].balance == round(10_000.0 - diff, 2)
    # Allowed once: the order can no longer be modified (or cancelled).
    fail(
        tools,
        "modify_pending_order_items",
        "RuleViolationError",
        "already modified",
        order_id=order.order_id,
        item_ids=[new.item_id],
        new_item_ids=[item.item_id],
        payment_method_id="gift_card_0000001",
    )
    fail(
        tools,
        "modify_pending_order_address",
        "RuleViolationError",
        order_id=order.order_id,
        **ADDRESS,
    )


def test_modify_items_rules(db, tools):
    order, item, new = modifiable(db, "pending")
    user = owner(db, order)
    verify(tools, user)
    method = user.payment_methods[0].id
    base = {"order_id": order.order_id, "payment_method_id": method}
    other = next(p for p in db.values("products") if p.product_id != item.product_id)
    fail(
        tools,
        "modify_pending_order_items",
        "RuleViolationError",
        "same product",
        f"It is a variant of '{other.name}'",
        "get_product_details",
        item_ids=[item.item_id],
        new_item_ids=[other.variants[0].item_id],
        **base,
    )
    fail(
        tools,
        "modify_pending_order_items",
        "InvalidArgumentError",
        "same as the current",
        item_ids=[item.item_id],
        new_item_ids=[item.item_id],
        **base,
    )
    fail(
        tools,
        "modify_pending_order_items",
        "InvalidArgumentError",
        "same order",
        item_ids=[item.item_id],
        new_item_ids=[new.item_id, new.item_id],
        **base,
    )
    fail(
        tools,
        "modify_pending_order_items",
        "InvalidArgumentError",
        "listed twice",
        item_ids=[item.item_id, item.item_id],
        new_item_ids=[new.item_id, new.item_id],
        **base,
    )
    fail(
        tools,
        "modify_pending_order_items",
        "InvalidArgumentError",
        "empty",
        item_ids=[],
        new_item_ids=[],
        **base,
    )
    fail(
        tools,
        "modify_pending_order_items",
        "NotFoundError",
        "Its items are",
        item_ids=["0000000000"],
        new_item_ids=[new.item_id],
        **base,
    )
    fail(
        tools,
        "modify_pending_order_items",
        "NotFoundError",
        "Their payment methods are",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[new.item_id],
        payment_method_id="paypal_0000000",
    )


def test_modify_items_needs_an_available_variant(db, tools):
    for order in orders(db, "pending"):
        pair = next(
            (
                (i, alternative(db, order, i, available=False))
                for i in order.items
                if alternative(db, order, i, available=False)
            ),
            None,
        )
        if pair:
            break
    else:
        pytest.fail("no unavailable variant in tiny")
    item, gone = pair
    user = owner(db, order)
    verify(tools, user)
    fail(
        tools,
        "modify_pending_order_items",
        "RuleViolationError",
        "not available",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[gone.item_id],
        payment_method_id=user.payment_methods[0].id,
    )


def test_gift_card_must_cover_the_charge(db, tools):
    for order in orders(db, "pending"):
        pair = next(
            (
                (i, v)
                for i in order.items
                for v in db.get("products", i.product_id).variants
                if v.available and v.price > i.price and order.item(v.item_id) is None
            ),
            None,
        )
        if pair:
            break
    item, dearer = pair
    user = give_methods(db, owner(db, order), card(0.01))
    verify(tools, user)
    fail(
        tools,
        "modify_pending_order_items",
        "RuleViolationError",
        "balance of 0.01",
        "another payment method",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[dearer.item_id],
        payment_method_id="gift_card_0000001",
    )


# -- modify address / payment / user address -----------------------------------------------
def test_modify_order_address(db, tools):
    order = orders(db, "pending")[0]
    verify(tools, owner(db, order))
    new = ok(tools, "modify_pending_order_address", order_id=order.order_id, **ADDRESS)
    assert new.address.model_dump() == ADDRESS
    assert new.model_copy(update={"address": order.address}) == order
    fail(
        tools,
        "modify_pending_order_address",
        "InvalidArgumentError",
        "already ships",
        order_id=order.order_id,
        **ADDRESS,
    )
    fail(
        tools,
        "modify_pending_order_address",
        "InvalidArgumentError",
        "'city' is empty",
        order_id=order.order_id,
        **{**ADDRESS, "city": " "},
    )
    delivered = [o for o in orders(db, "delivered") if o.user_id == order.user_id]
    for other in delivered[:1]:
        fail(
            tools,
            "modify_pending_order_address",
            "RuleViolationError",
            order_id=other.order_id,
            **ADDRESS,
        )


def test_modify_order_address_only_pending(db, tools):
    order = orders(db, "processed")[0]
    verify(tools, owner(db, order))
    fail(
        tools,
        "modify_pending_order_address",
        "RuleViolationError",
        "is 'processed'",
        order_id=order.order_id,
        **ADDRESS,
    )


def test_modify_payment_moves_the_charge(db, tools):
    order = orders(db, "pending")[0]
    visa = CreditCard(id="credit_card_0000001", brand="visa", last_four="1234")
    user = give_methods(db, owner(db, order), visa, card(10_000.0))
    order = pay_with(db, order, visa.id)
    total = order.payment_history[0].amount
    verify(tools, user)
    new = ok(
        tools,
        "modify_pending_order_payment",
        order_id=order.order_id,
        payment_method_id="gift_card_0000001",
    )
    assert new.payment_history[1:] == (
        Transaction(
            transaction_type="payment", amount=total, payment_method_id="gift_card_0000001"
        ),
        Transaction(transaction_type="refund", amount=total, payment_method_id=visa.id),
    )
    assert db.get("users", user.user_id).payment_methods[1].balance == round(10_000.0 - total, 2)
    # Now two payments are on record: a second change is refused.
    fail(
        tools,
        "modify_pending_order_payment",
        "RuleViolationError",
        "single payment",
        order_id=order.order_id,
        payment_method_id=visa.id,
    )


def test_modify_payment_rules(db, tools):
    order = orders(db, "pending")[0]
    visa = CreditCard(id="credit_card_0000001", brand="visa", last_four="1234")
    user = give_methods(db, owner(db, order), visa, card(0.5), PayPal(id="paypal_0000001"))
    order = pay_with(db, order, visa.id)
    verify(tools, user)
    fail(
        tools,
        "modify_pending_order_payment",
        "InvalidArgumentError",
        "already paid with",
        order_id=order.order_id,
        payment_method_id=visa.id,
    )
    fail(
        tools,
        "modify_pending_order_payment",
        "RuleViolationError",
        "balance of 0.50",
        order_id=order.order_id,
        payment_method_id="gift_card_0000001",
    )
    fail(
        tools,
        "modify_pending_order_payment",
        "NotFoundError",
        "paypal_0000001 (PayPal)",
        order_id=order.order_id,
        payment_method_id="paypal_9999999",
    )
    assert (
        ok(
            tools,
            "modify_pending_order_payment",
            order_id=order.order_id,
            payment_method_id="paypal_0000001",
        )
        .payment_history[-1]
        .payment_method_id
        == visa.id
    )


def test_modify_user_address(db, tools):
    user = next(iter(db.values("users")))
    verify(tools, user)
    new = ok(tools, "modify_user_address", user_id=user.user_id, **ADDRESS)
    assert new.address.model_dump() == ADDRESS and db.get("users", user.user_id) == new
    for order_id in user.orders:
        assert db.get("orders", order_id) == db.base["orders"][order_id]
    fail(
        tools,
        "modify_user_address",
        "InvalidArgumentError",
        "already has",
        user_id=user.user_id,
        **ADDRESS,
    )
    fail(
        tools,
        "modify_user_address",
        "InvalidArgumentError",
        "'zip' is empty",
        user_id=user.user_id,
        **{**ADDRESS, "zip": ""},
    )


# -- returns and exchanges -----------------------------------------------------------------
def test_return_to_original_method_or_gift_card(db, tools):
    order = next(o for o in orders(db, "delivered") if len(o.items) >= 2)
    user = owner(db, order)
    original = order.payment_history[0].payment_method_id
    verify(tools, user)
    items = [order.items[1].item_id, order.items[0].item_id]  # listed out of order
    new = ok(
        tools,
        "return_delivered_order_items",
        order_id=order.order_id,
        item_ids=items,
        payment_method_id=original,
    )
    assert new.status == "return requested"
    assert new.return_items == (order.items[0].item_id, order.items[1].item_id)
    assert new.return_payment_method_id == original
    assert new.payment_history == order.payment_history
    fail(
        tools,
        "return_delivered_order_items",
        "RuleViolationError",
        "is 'return requested'",
        order_id=order.order_id,
        item_ids=items[:1],
        payment_method_id=original,
    )


def test_return_refund_method_rules(db, tools):
    order = orders(db, "delivered")[0]
    visa = CreditCard(id="credit_card_0000001", brand="visa", last_four="1234")
    other = CreditCard(id="credit_card_0000002", brand="amex", last_four="9876")
    user = give_methods(db, owner(db, order), visa, other, card(0.0))
    order = pay_with(db, order, visa.id)
    verify(tools, user)
    args = {"order_id": order.order_id, "item_ids": [order.items[0].item_id]}
    fail(
        tools,
        "return_delivered_order_items",
        "RuleViolationError",
        "neither the original",
        visa.id,
        payment_method_id=other.id,
        **args,
    )
    fail(
        tools,
        "return_delivered_order_items",
        "NotFoundError",
        "Its items are",
        order_id=order.order_id,
        item_ids=["0000000000"],
        payment_method_id=visa.id,
    )
    new = ok(tools, "return_delivered_order_items", payment_method_id="gift_card_0000001", **args)
    assert new.return_payment_method_id == "gift_card_0000001"


def test_return_only_delivered(db, tools):
    order = orders(db, "pending")[0]
    verify(tools, owner(db, order))
    fail(
        tools,
        "return_delivered_order_items",
        "RuleViolationError",
        "is 'pending'",
        "cancel_/modify_pending_",
        order_id=order.order_id,
        item_ids=[order.items[0].item_id],
        payment_method_id=order.payment_history[0].payment_method_id,
    )


def test_exchange(db, tools):
    order, item, new = modifiable(db, "delivered")
    user = owner(db, order)
    verify(tools, user)
    method = order.payment_history[0].payment_method_id
    result = ok(
        tools,
        "exchange_delivered_order_items",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[new.item_id],
        payment_method_id=method,
    )
    assert result.status == "exchange requested"
    assert (result.exchange_items, result.exchange_new_items) == ((item.item_id,), (new.item_id,))
    assert result.exchange_price_difference == round(new.price - item.price, 2)
    assert result.items == order.items and db.get("users", user.user_id) == user
    fail(
        tools,
        "exchange_delivered_order_items",
        "RuleViolationError",
        "is 'exchange requested'",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[new.item_id],
        payment_method_id=method,
    )


def test_exchange_rules(db, tools):
    order, item, _ = modifiable(db, "delivered")
    other = next(p for p in db.values("products") if p.product_id != item.product_id)
    verify(tools, owner(db, order))
    method = order.payment_history[0].payment_method_id
    fail(
        tools,
        "exchange_delivered_order_items",
        "RuleViolationError",
        "same product",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[other.variants[0].item_id],
        payment_method_id=method,
    )
    pending, p_item, p_new = modifiable(db, "pending")
    if pending.user_id == order.user_id:
        fail(
            tools,
            "exchange_delivered_order_items",
            "RuleViolationError",
            "is 'pending'",
            order_id=pending.order_id,
            item_ids=[p_item.item_id],
            new_item_ids=[p_new.item_id],
            payment_method_id=method,
        )


def test_exchange_gift_card_must_cover_the_difference(db, tools):
    for order in orders(db, "delivered"):
        pair = next(
            (
                (i, v)
                for i in order.items
                for v in db.get("products", i.product_id).variants
                if v.available and v.price > i.price
            ),
            None,
        )
        if pair:
            break
    item, dearer = pair
    user = give_methods(db, owner(db, order), card(0.0))
    verify(tools, user)
    fail(
        tools,
        "exchange_delivered_order_items",
        "RuleViolationError",
        "balance of 0.00",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[dearer.item_id],
        payment_method_id="gift_card_0000001",
    )


class _FailingOrders(Database):
    """A state whose writes to ``orders`` fail, to test atomicity."""

    fail_orders = False

    def put(self, table, key, record):
        if table == "orders" and self.fail_orders:
            raise RuleViolationError("simulated failure")
        super().put(table, key, record)


def test_write_failing_midway_leaves_no_trace():
    """modify_pending_order_items writes the user, then the order: a failure on the second
    write must undo the first."""
    db = _FailingOrders(DOMAIN.base(0, "tiny"))
    tools = RetailTools(db)
    order, item, new = modifiable(db, "pending")
    user = give_methods(db, owner(db, order), card(10_000.0))
    pay_with(db, order, "gift_card_0000001")
    verify(tools, user)
    db.fail_orders = True
    before = db.fingerprint()
    result = tools.call(
        "modify_pending_order_items",
        {
            "order_id": order.order_id,
            "item_ids": [item.item_id],
            "new_item_ids": [new.item_id],
            "payment_method_id": "gift_card_0000001",
        },
    )
    assert not result.ok and "simulated failure" in result.output
    assert db.fingerprint() == before
    assert db.get("users", user.user_id) == user
