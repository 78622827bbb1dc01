"""The Retail toolkit's write tools: a pending order cancelled or modified (items,
address, payment), a delivered order's items returned or exchanged, the default address
changed. Each runs atomically; a rule it breaks is an error that names the rule."""

from __future__ import annotations

from typing import Literal

from environments.retail.schema import CancelReason, GiftCard, Order, Transaction, User, money
from environments.retail.tools.reads import RetailReads
from rods_env.errors import InvalidArgumentError, RuleViolationError
from rods_env.tools import tool


class RetailWrites(RetailReads):
    """The write tools of the Retail domain.

    Args:
        db: The episode's database state.
    """

    # -- order changes -------------------------------------------------------------------
    @tool(writes=True, operation=("cancel",))
    def cancel_pending_order(self, order_id: str, reason: CancelReason) -> Order:
        """Cancel a pending order; every payment is refunded to the method it came from.

        Gift card refunds are credited at once; card and PayPal refunds take 5-7 business
        days. Only for the verified customer, after their explicit confirmation.

        Args:
            order_id: The order id, such as '#W0000123'.
            reason: The customer's reason: 'no longer needed' or 'ordered by mistake'.
        """
        order, user = self._own_order(order_id, "pending", "be cancelled")
        refunds = []
        # what each method paid net of earlier refunds (a payment method change refunded
        # the old method already): refunding every payment again would pay it twice
        for method_id, amount in self._net_paid(order).items():
            if amount <= 0:
                continue
            refunds.append(
                Transaction(transaction_type="refund", amount=amount, payment_method_id=method_id)
            )
            method = user.payment_method(method_id)
            if method is not None:
                user = self._charge(user, method, -amount)
        self.db.put("users", user.user_id, user)
        new = order.model_copy(
            update={
                "status": "cancelled",
                "cancel_reason": reason,
                "payment_history": order.payment_history + tuple(refunds),
            }
        )
        self.db.put("orders", order_id, new)
        return new

    @tool(writes=True, operation=("modif", "chang", "swap", "replac", "switch", "item", "variant"))
    def modify_pending_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> Order:
        """Replace items of a pending order by other variants of the same products.

        Possible once per order: the status becomes 'pending (item modified)' and the order
        can no longer be changed or cancelled. The price difference is charged to (or
        refunded to) the given payment method. Only after the customer's explicit confirmation.

        Args:
            order_id: The order id, such as '#W0000123'.
            item_ids: Item ids of the order to replace, such as ['1008292230'].
            new_item_ids: The new item id for each item, in the same order; each must be an
                available variant of the same product.
            payment_method_id: The customer's payment method that pays or receives the price
                difference, such as 'gift_card_0000000' or 'credit_card_0000000'.
        """
        order, user = self._own_order(order_id, "pending", "have their items modified")
        pairs = self._replacements(order, item_ids, new_item_ids)
        method = self._method(user, payment_method_id)
        diff = money(sum(v.price - item.price for item, v in pairs.values()))
        if diff < 0:
            self._refundable(order, method, -diff)
        user = self._charge(user, method, diff)
        history = order.payment_history
        if diff != 0:
            kind: Literal["payment", "refund"] = "payment" if diff > 0 else "refund"
            history += (
                Transaction(transaction_type=kind, amount=abs(diff), payment_method_id=method.id),
            )
        items = tuple(
            item.model_copy(
                update={
                    "item_id": pairs[item.item_id][1].item_id,
                    "options": dict(pairs[item.item_id][1].options),
                    "price": pairs[item.item_id][1].price,
                }
            )
            if item.item_id in pairs
            else item
            for item in order.items
        )
        new = order.model_copy(
            update={"items": items, "status": "pending (item modified)", "payment_history": history}
        )
        self.db.put("users", user.user_id, user)
        self.db.put("orders", order_id, new)
        return new

    @tool(writes=True, operation=("address", "ship", "modif", "chang", "updat"))
    def modify_pending_order_address(
        self,
        order_id: str,
        address1: str,
        address2: str,
        city: str,
        state: str,
        country: str,
        zip: str,
    ) -> Order:
        """Change the shipping address of a pending order.

        Only after the customer's explicit confirmation.

        Args:
            order_id: The order id, such as '#W0000123'.
            address1: Street address, such as '123 Main St'.
            address2: Apartment, suite or unit, such as 'Apt 4' ('' when there is none).
            city: City, such as 'Springfield'.
            state: Two-letter state code, such as 'IL'.
            country: Country, such as 'USA'.
            zip: Zip code, such as '62704'.
        """
        order, _ = self._own_order(order_id, "pending", "have their address changed")
        address = self._new_address(address1, address2, city, state, country, zip)
        if address == order.address:
            raise InvalidArgumentError(
                f"Order '{order_id}' already ships to this address.",
                "Ask the customer for the new address.",
            )
        new = order.model_copy(update={"address": address})
        self.db.put("orders", order_id, new)
        return new

    @tool(writes=True, operation=("pay", "modif", "chang", "switch", "method"))
    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> Order:
        """Pay a pending order with another of the customer's payment methods.

        The new method is charged the order total and the old one refunded. Only for orders
        paid with a single payment; a gift card must cover the total. Only after the
        customer's explicit confirmation.

        Args:
            order_id: The order id, such as '#W0000123'.
            payment_method_id: The new payment method, such as 'paypal_0000000'.
        """
        order, user = self._own_order(order_id, "pending", "change their payment method")
        payments = [p for p in order.payment_history if p.transaction_type == "payment"]
        if len(order.payment_history) != 1 or len(payments) != 1:
            raise RuleViolationError(
                f"Order '{order_id}' has {len(order.payment_history)} transactions; the payment "
                "method can only be changed for an order paid with a single payment.",
                "Transfer to a human agent if the customer insists.",
            )
        old = payments[0]
        method = self._method(user, payment_method_id)
        if method.id == old.payment_method_id:
            raise InvalidArgumentError(
                f"Order '{order_id}' is already paid with '{method.id}'.",
                "Choose a different payment method of the customer.",
            )
        user = self._charge(user, method, old.amount)
        old_method = user.payment_method(old.payment_method_id)
        if old_method is not None:
            user = self._charge(user, old_method, -old.amount)
        history = (
            *order.payment_history,
            Transaction(transaction_type="payment", amount=old.amount, payment_method_id=method.id),
            old.model_copy(update={"transaction_type": "refund"}),
        )
        new = order.model_copy(update={"payment_history": history})
        self.db.put("users", user.user_id, user)
        self.db.put("orders", order_id, new)
        return new

    @tool(writes=True, operation=("return", "refund", "send back"))
    def return_delivered_order_items(
        self, order_id: str, item_ids: list[str], payment_method_id: str
    ) -> Order:
        """Request the return of items of a delivered order; the status becomes 'return requested'.

        The refund goes to the order's original payment method or to a gift card of the
        customer. One return or exchange per order. Only after explicit confirmation.

        Args:
            order_id: The order id, such as '#W0000123'.
            item_ids: Item ids of the order to return, such as ['1008292230', '8920458606'].
            payment_method_id: Where the refund goes: the order's original payment method or
                one of the customer's gift cards.
        """
        order, user = self._own_order(order_id, "delivered", "have items returned")
        self._items(order, item_ids)
        method = self._method(user, payment_method_id)
        original = {p.payment_method_id for p in order.payment_history}
        if method.id not in original and not isinstance(method, GiftCard):
            raise RuleViolationError(
                f"Refunds cannot go to '{method.id}': it is neither the original payment method "
                "of the order nor a gift card.",
                f"Use {' or '.join(sorted(original))}, or one of the customer's gift cards.",
            )
        new = order.model_copy(
            update={
                "status": "return requested",
                "return_items": self._in_order(order, item_ids),
                "return_payment_method_id": method.id,
            }
        )
        self.db.put("orders", order_id, new)
        return new

    @tool(writes=True, operation=("exchang", "swap", "replac", "switch"))
    def exchange_delivered_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> Order:
        """Exchange items of a delivered order for other variants of the same products.

        The status becomes 'exchange requested'; the price difference is settled with the
        given payment method when the exchange is processed (a gift card must cover a
        charge). One return or exchange per order. Only after explicit confirmation.

        Args:
            order_id: The order id, such as '#W0000123'.
            item_ids: Item ids of the order to exchange, such as ['1008292230'].
            new_item_ids: The new item id for each item, in the same order; each must be an
                available variant of the same product.
            payment_method_id: The customer's payment method that pays or receives the price
                difference.
        """
        order, user = self._own_order(order_id, "delivered", "have items exchanged")
        pairs = self._replacements(order, item_ids, new_item_ids)
        method = self._method(user, payment_method_id)
        diff = money(sum(v.price - item.price for item, v in pairs.values()))
        self._charge(user, method, diff)  # checks a gift card covers it; settled later
        olds = self._in_order(order, item_ids)
        new = order.model_copy(
            update={
                "status": "exchange requested",
                "exchange_items": olds,
                "exchange_new_items": tuple(pairs[i][1].item_id for i in olds),
                "exchange_payment_method_id": method.id,
                "exchange_price_difference": diff,
            }
        )
        self.db.put("orders", order_id, new)
        return new

    # -- account -------------------------------------------------------------------------
    @tool(writes=True, operation=("address", "modif", "chang", "updat"))
    def modify_user_address(
        self,
        user_id: str,
        address1: str,
        address2: str,
        city: str,
        state: str,
        country: str,
        zip: str,
    ) -> User:
        """Change the default address of the verified customer (existing orders keep theirs).

        Only after the customer's explicit confirmation.

        Args:
            user_id: The user id, such as 'jane_doe_1234'.
            address1: Street address, such as '123 Main St'.
            address2: Apartment, suite or unit, such as 'Apt 4' ('' when there is none).
            city: City, such as 'Springfield'.
            state: Two-letter state code, such as 'IL'.
            country: Country, such as 'USA'.
            zip: Zip code, such as '62704'.
        """
        user = self._account(user_id)
        address = self._new_address(address1, address2, city, state, country, zip)
        if address == user.address:
            raise InvalidArgumentError(
                f"'{user_id}' already has this default address.",
                "Ask the customer for the new address.",
            )
        new = user.model_copy(update={"address": address})
        self.db.put("users", user_id, new)
        return new
