"""The Retail toolkit's base: who is verified in the episode, and the look-ups and checks
the tools share (an account, an order and its status, a payment method, a product, items
and their replacements, refunds and charges, a new address)."""

from __future__ import annotations

from collections.abc import Sequence

from environments.retail.schema import (
    Address,
    GiftCard,
    Order,
    OrderItem,
    Product,
    User,
    Variant,
    money,
)
from environments.retail.tools.rules import (
    FIND_ORDER,
    FIND_PRODUCT,
    FIND_USER,
    STATUS_HINTS,
    PaymentMethod,
    describe_method,
)
from rods_env.database import Database
from rods_env.errors import InvalidArgumentError, NotFoundError, RuleViolationError
from rods_env.tools import Toolkit


class RetailBase(Toolkit):
    """The Retail toolkit's per-episode state and shared checks (no tools).

    Args:
        db: The episode's database state.
    """

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
        return self.db.require("users", user_id, what="user", hint=FIND_USER)

    def _visible_order(self, order_id: str) -> Order:
        """An order of the verified customer (private records are shown to no one else)."""
        order = self._order(order_id)
        self._account(order.user_id)
        return order

    def _order(self, order_id: str) -> Order:
        order = self.db.get("orders", order_id)
        if order is None:
            hint = FIND_ORDER
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
                STATUS_HINTS.get(order.status),
            )
        return order, user

    def _method(self, user: User, payment_method_id: str) -> PaymentMethod:
        method = user.payment_method(payment_method_id)
        if method is None:
            own = ", ".join(describe_method(m) for m in user.payment_methods)
            raise NotFoundError(
                f"The customer has no payment method '{payment_method_id}'.",
                f"Their payment methods are: {own}.",
            )
        return method

    def _product(self, product_id: str) -> Product:
        product = self.db.get("products", product_id)
        if product is None:
            hint = FIND_PRODUCT
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
