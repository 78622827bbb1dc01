"""The Retail toolkit: look-ups, order and account changes, and utilities.

Rules the tools enforce (the policy in ``policy.md`` states them for the agent):

* Reading or writing an account or an order needs the customer verified in this episode:
  found with ``find_user_id_by_email`` or ``find_user_id_by_name_zip``; only that
  customer's own account and orders are shown or changed. Only one customer per episode.
  The product catalog is public.
* Order statuses gate actions (see the table in the policy).
* Payment methods must belong to the customer; a gift card must cover any charge. Money
  goes back where it came from: a refund goes to a method that paid the order at least that
  much (net of earlier refunds), so refunds never exceed payments, per order and method.
* Items are only replaced by available variants of the same product.

Writes never mutate a record: they build a new one with ``model_copy(update=...)`` and
``db.put`` it. Item lists are stored in the order's own item order, so the resulting state
does not depend on the order in which the agent listed the items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from environments.retail.schema import (
    ORDER_STATUSES,
    Address,
    CancelReason,
    CreditCard,
    GiftCard,
    Order,
    OrderItem,
    PayPal,
    Product,
    Transaction,
    User,
    Variant,
    money,
    order_table,
    user_table,
)
from rods_env.calculator import evaluate_arithmetic
from rods_env.database import Database
from rods_env.errors import InvalidArgumentError, NotFoundError, RuleViolationError
from rods_env.tools import Toolkit, tool

_FIND_USER = "Find the user id with find_user_id_by_email or find_user_id_by_name_zip."
_FIND_ORDER = "The customer's order ids are listed by get_user_details."
_FIND_PRODUCT = (
    "list_all_product_types gives every product id; each item of get_order_details "
    "carries its product_id."
)

_STATUS_HINTS = {
    "pending (item modified)": (
        "Its items were already modified once, so it can no longer be changed or cancelled."
    ),
    "processed": "Processed orders are being shipped and can no longer be changed or cancelled.",
    "delivered": (
        "For delivered orders use return_delivered_order_items or exchange_delivered_order_items."
    ),
    "pending": "Pending orders can be cancelled or modified with the cancel_/modify_pending_ tools.",
    "cancelled": "Cancelled orders allow no further action.",
    "return requested": "A return was already requested; no further action is possible.",
    "exchange requested": "An exchange was already requested; no further action is possible.",
}

PaymentMethod = CreditCard | GiftCard | PayPal


def _describe_method(method: PaymentMethod) -> str:
    if isinstance(method, CreditCard):
        return f"{method.id} ({method.brand} card ending in {method.last_four})"
    if isinstance(method, GiftCard):
        return f"{method.id} (gift card, balance {method.balance:.2f})"
    return f"{method.id} (PayPal)"


def email_key(user: User) -> str:
    """Index key of the email look-up (case-insensitive)."""
    return user.email.lower()


def name_zip_key(user: User) -> tuple[str, str, str]:
    """Index key of the name-and-zip look-up (names case-insensitive)."""
    return (user.name.first_name.lower(), user.name.last_name.lower(), user.address.zip)


class RetailTools(Toolkit):
    """Tools of the Retail domain, bound to one episode's database.

    Args:
        db: The episode's database state.
    """

    vocabularies = (ORDER_STATUSES,)

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.verified_user_id: str | None = None

    def on_reset(self) -> None:
        """Forget the verified customer: a new episode is a new conversation."""
        self.verified_user_id = None

    # -- helpers -------------------------------------------------------------------------
    def _verify(self, user_id: str) -> str:
        if self.verified_user_id is not None and self.verified_user_id != user_id:
            raise RuleViolationError(
                f"This conversation is already with customer '{self.verified_user_id}'; "
                "only one customer can be helped per conversation.",
                "Keep helping the verified customer; another person must contact us separately.",
            )
        self.verified_user_id = user_id
        return user_id

    def _account(self, user_id: str) -> User:
        """The verified customer's record; raises unless ``user_id`` is that customer."""
        if self.verified_user_id is None:
            raise RuleViolationError(
                "The customer's identity has not been verified in this conversation.",
                "Ask for their email (find_user_id_by_email) or their first name, last name "
                "and zip code (find_user_id_by_name_zip) before looking up or changing their "
                "account or orders.",
            )
        if user_id != self.verified_user_id:
            raise RuleViolationError(
                f"The account '{user_id}' is not the verified customer's account "
                f"('{self.verified_user_id}').",
                "Only the verified customer's own account and orders can be shown or changed.",
            )
        return self.db.require("users", user_id, what="user", hint=_FIND_USER)

    def _visible_order(self, order_id: str) -> Order:
        """An order of the verified customer (private records are shown to no one else)."""
        order = self._order(order_id)
        self._account(order.user_id)
        return order

    def _order(self, order_id: str) -> Order:
        order = self.db.get("orders", order_id)
        if order is None:
            hint = _FIND_ORDER
            if not order_id.startswith("#"):
                hint = f"Order ids start with '#', e.g. '#{order_id.lstrip()}'. {hint}"
            raise NotFoundError(f"No order with id '{order_id}'.", hint)
        return order

    def _own_order(self, order_id: str, allowed: str, action: str) -> tuple[Order, User]:
        order = self._order(order_id)
        user = self._account(order.user_id)
        if order.status != allowed:
            raise RuleViolationError(
                f"Order '{order_id}' is '{order.status}'; only '{allowed}' orders can {action}.",
                _STATUS_HINTS.get(order.status),
            )
        return order, user

    def _method(self, user: User, payment_method_id: str) -> PaymentMethod:
        method = user.payment_method(payment_method_id)
        if method is None:
            own = ", ".join(_describe_method(m) for m in user.payment_methods)
            raise NotFoundError(
                f"The customer has no payment method '{payment_method_id}'.",
                f"Their payment methods are: {own}.",
            )
        return method

    def _product(self, product_id: str) -> Product:
        product = self.db.get("products", product_id)
        if product is None:
            hint = _FIND_PRODUCT
            for other in self.db.values("products"):
                if other.variant(product_id) is not None:
                    hint = (
                        f"'{product_id}' is an item id of '{other.name}', whose product id is "
                        f"'{other.product_id}'."
                    )
                    break
            raise NotFoundError(f"No product with id '{product_id}'.", hint)
        return product

    def _items(self, order: Order, item_ids: Sequence[str]) -> list[OrderItem]:
        if not item_ids:
            raise InvalidArgumentError("'item_ids' is empty.", "List at least one item id.")
        seen: set[str] = set()
        items = []
        for item_id in item_ids:
            if item_id in seen:
                raise InvalidArgumentError(
                    f"Item '{item_id}' is listed twice.", "List each item of the order once."
                )
            seen.add(item_id)
            item = order.item(item_id)
            if item is None:
                valid = ", ".join(f"{i.item_id} ({i.name})" for i in order.items)
                raise NotFoundError(
                    f"Order '{order.order_id}' has no item '{item_id}'.",
                    f"Its items are: {valid}.",
                )
            items.append(item)
        return items

    def _replacements(
        self, order: Order, item_ids: Sequence[str], new_item_ids: Sequence[str]
    ) -> dict[str, tuple[OrderItem, Variant]]:
        """Check item -> new variant pairs; returns old item id -> (old item, new variant)."""
        items = self._items(order, item_ids)
        if len(new_item_ids) != len(items):
            raise InvalidArgumentError(
                f"'item_ids' has {len(items)} ids but 'new_item_ids' has {len(new_item_ids)}.",
                "Give exactly one new item id for each item id, in the same order.",
            )
        pairs: dict[str, tuple[OrderItem, Variant]] = {}
        for item, new_id in zip(items, new_item_ids, strict=True):
            product = self._product(item.product_id)
            variant = product.variant(new_id)
            if variant is None:
                where = ""
                for other in self.db.values("products"):
                    if other.variant(new_id) is not None:
                        where = f" It is a variant of '{other.name}'."
                        break
                raise RuleViolationError(
                    f"'{new_id}' is not a variant of '{product.name}' (item '{item.item_id}')."
                    f"{where} Items can only be replaced by a variant of the same product.",
                    f"get_product_details('{product.product_id}') lists the valid item ids.",
                )
            if new_id == item.item_id:
                raise InvalidArgumentError(
                    f"New item '{new_id}' is the same as the current item.",
                    "Pick a variant with different options, or leave this item out.",
                )
            if not variant.available:
                raise RuleViolationError(
                    f"Variant '{new_id}' of '{product.name}' is not available.",
                    f"get_product_details('{product.product_id}') shows which variants are "
                    "available.",
                )
            pairs[item.item_id] = (item, variant)
        return pairs

    @staticmethod
    def _net_paid(order: Order) -> dict[str, float]:
        """What each payment method has paid for the order, net of refunds to it."""
        net: dict[str, float] = {}
        for t in order.payment_history:
            sign = 1 if t.transaction_type == "payment" else -1
            net[t.payment_method_id] = money(net.get(t.payment_method_id, 0.0) + sign * t.amount)
        return net

    def _refundable(self, order: Order, method: PaymentMethod, amount: float) -> None:
        """Raise unless ``method`` paid the order at least ``amount`` (net of refunds)."""
        net = self._net_paid(order)
        if net.get(method.id, 0.0) + 0.005 < amount:
            payers = [f"{m} ({v:.2f})" for m, v in net.items() if v > 0]
            raise RuleViolationError(
                f"A refund of {amount:.2f} cannot go to '{method.id}': it paid "
                f"{net.get(method.id, 0.0):.2f} for order '{order.order_id}'. Refunds go back "
                "to a payment method that paid the order.",
                f"Methods that paid this order (net): {', '.join(payers) or 'none'}.",
            )

    def _charge(self, user: User, method: PaymentMethod, amount: float) -> User:
        """Apply a charge (amount > 0) or credit (< 0) to a gift card; other methods: no-op."""
        if not isinstance(method, GiftCard) or amount == 0:
            return user
        if amount > 0 and method.balance < amount:
            raise RuleViolationError(
                f"Gift card '{method.id}' has a balance of {method.balance:.2f}, less than "
                f"the {amount:.2f} to pay.",
                "Use another payment method of the customer.",
            )
        new_card = method.model_copy(update={"balance": money(method.balance - amount)})
        methods = tuple(new_card if m.id == method.id else m for m in user.payment_methods)
        return user.model_copy(update={"payment_methods": methods})

    def _in_order(self, order: Order, item_ids: Sequence[str]) -> tuple[str, ...]:
        wanted = set(item_ids)
        return tuple(i.item_id for i in order.items if i.item_id in wanted)

    @staticmethod
    def _new_address(
        address1: str, address2: str, city: str, state: str, country: str, zip: str
    ) -> Address:
        fields = {
            "address1": address1,
            "address2": address2,
            "city": city,
            "state": state,
            "country": country,
            "zip": zip,
        }
        for name, value in fields.items():
            if name != "address2" and not value.strip():
                raise InvalidArgumentError(
                    f"'{name}' is empty.", "Give the complete address; only address2 may be empty."
                )
        return Address(**{k: v.strip() for k, v in fields.items()})

    # -- look-ups ------------------------------------------------------------------------
    @tool
    def find_user_id_by_email(self, email: str) -> str:
        """Find a customer's user id from their email address; this verifies the customer.

        Args:
            email: The customer's email address, such as 'jane.doe1234@example.com'.
        """
        wanted = email.strip().lower()
        for user in self.db.find("users", "email", wanted, key=email_key):
            return self._verify(user.user_id)
        raise NotFoundError(
            f"No user with email '{email}'.",
            "Check the spelling with the customer, or use find_user_id_by_name_zip.",
        )

    @tool
    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        """Find a customer's user id from their name and zip code; this verifies the customer.

        Args:
            first_name: The customer's first name, such as 'Jane'.
            last_name: The customer's last name, such as 'Doe'.
            zip: The zip code of the customer's default address, such as '12345'.
        """
        wanted = (first_name.strip().lower(), last_name.strip().lower(), zip.strip())
        for user in self.db.find("users", "name_zip", wanted, key=name_zip_key):
            return self._verify(user.user_id)
        raise NotFoundError(
            f"No user named '{first_name} {last_name}' with zip code '{zip}'.",
            "Check the spelling with the customer, or use find_user_id_by_email.",
        )

    @tool
    def get_user_details(self, user_id: str) -> User:
        """Get the verified customer's profile: name, email, default address, payment methods and order ids.

        Args:
            user_id: The user id, such as 'jane_doe_1234'.
        """
        return self._account(user_id)

    @tool
    def get_order_details(self, order_id: str) -> Order:
        """Get an order of the verified customer: status, items, shipping address, fulfilments and payment history.

        Args:
            order_id: The order id, such as '#W0000123' (with the leading '#').
        """
        return self._visible_order(order_id)

    @tool
    def get_product_details(self, product_id: str) -> Product:
        """Get a product type with all its variants: item id, options, price and availability.

        Args:
            product_id: The product id (not an item id), such as '6086499569'.
        """
        return self._product(product_id)

    @tool
    def list_all_product_types(self) -> dict[str, str]:
        """List every product type of the store as a map from product name to product id."""
        return {
            p.name: p.product_id for p in sorted(self.db.values("products"), key=lambda p: p.name)
        }

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

    # -- utilities -----------------------------------------------------------------------
    @tool(terminal=True)
    def transfer_to_human_agents(self, summary: str) -> str:
        """Transfer the customer to a human agent; this ends the conversation.

        Only when the customer asks for a human or the request cannot be handled within the
        policy with the available tools.

        Args:
            summary: A short summary of the customer's issue for the human agent.
        """
        if not summary.strip():
            raise InvalidArgumentError("'summary' is empty.", "Summarize the customer's issue.")
        return "Transfer successful."

    @tool
    def calculate(self, expression: str) -> Any:
        """Evaluate an arithmetic expression; the result is rounded to 2 decimals.

        Args:
            expression: Numbers with + - * / // % ** and parentheses, such as '(12.5 + 7.25) * 2'.
        """
        return evaluate_arithmetic(expression, ndigits=2)

    @tool
    def think(self, thought: str) -> str:
        """Write down a thought to plan the next steps; it changes nothing and fetches nothing.

        Args:
            thought: The thought.
        """
        return "OK."


# -- invariants ------------------------------------------------------------------------------
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
