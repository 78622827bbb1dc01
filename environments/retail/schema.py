"""Records of the Retail domain: users, products and orders.

Money is a ``float`` in US dollars rounded to 2 decimals (:func:`money`) everywhere: prices,
payment amounts, gift card balances and price differences. Every computation that produces
an amount goes through :func:`money`, so values compare equal and render as the same text
(``54.04``) in tool outputs. Generated prices always have a non-zero second decimal, so they
render with two decimals.

Tables (keyed by id strings): ``users`` (``user_id``), ``products`` (``product_id``),
``orders`` (``order_id`` such as ``'#W0000123'``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, cast

from pydantic import Field

from rods_env.database import Record, Tables

OrderStatus = Literal[
    "pending",
    "pending (item modified)",
    "processed",
    "delivered",
    "cancelled",
    "return requested",
    "exchange requested",
]
"""Order statuses. ``pending (item modified)``: the items of a pending order were changed
once; such an order can no longer be modified or cancelled (as in tau-bench)."""

ORDER_STATUSES: tuple[str, ...] = OrderStatus.__args__  # type: ignore[attr-defined]

CancelReason = Literal["no longer needed", "ordered by mistake"]
"""The reasons a customer may give to cancel an order (the policy defines them)."""

CANCEL_REASONS: tuple[str, ...] = CancelReason.__args__  # type: ignore[attr-defined]


def money(amount: float) -> float:
    """Round an amount in dollars to cents (the one rounding rule of the domain)."""
    return round(float(amount) + 0.0, 2) + 0.0


class Address(Record):
    """A postal address in the United States."""

    address1: str
    address2: str
    city: str
    state: str
    country: str
    zip: str

    def text(self) -> str:
        """One-line form, as a customer would say it."""
        return (
            f"{self.address1}, {self.address2}, {self.city}, {self.state} {self.zip}, "
            f"{self.country}"
        )


class Name(Record):
    """A person's name."""

    first_name: str
    last_name: str


class CreditCard(Record):
    """A credit card on file: only brand and last four digits are stored."""

    source: Literal["credit_card"] = "credit_card"
    id: str
    brand: str
    last_four: str


class GiftCard(Record):
    """A store gift card with a balance in dollars."""

    source: Literal["gift_card"] = "gift_card"
    id: str
    balance: float


class PayPal(Record):
    """A linked PayPal account."""

    source: Literal["paypal"] = "paypal"
    id: str


PaymentMethod = Annotated[CreditCard | GiftCard | PayPal, Field(discriminator="source")]


class User(Record):
    """A customer account."""

    user_id: str
    name: Name
    email: str
    address: Address
    payment_methods: tuple[PaymentMethod, ...]
    orders: tuple[str, ...] = ()

    def payment_method(self, payment_method_id: str) -> CreditCard | GiftCard | PayPal | None:
        """The payment method with this id, or None."""
        for method in self.payment_methods:
            if method.id == payment_method_id:
                return method
        return None


class Variant(Record):
    """One purchasable variant (item) of a product."""

    item_id: str
    options: dict[str, str]
    price: float
    available: bool


class Product(Record):
    """A product type and its variants."""

    product_id: str
    name: str
    variants: tuple[Variant, ...]

    def variant(self, item_id: str) -> Variant | None:
        """The variant with this item id, or None."""
        for variant in self.variants:
            if variant.item_id == item_id:
                return variant
        return None


class OrderItem(Record):
    """One item of an order (a copy of the variant at the time of purchase)."""

    item_id: str
    product_id: str
    name: str
    options: dict[str, str]
    price: float


class Fulfilment(Record):
    """A shipment: its tracking numbers and the items it carries."""

    tracking_ids: tuple[str, ...]
    item_ids: tuple[str, ...]


class Transaction(Record):
    """A payment or refund of an order."""

    transaction_type: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


class Order(Record):
    """A customer order and its history."""

    order_id: str
    user_id: str
    address: Address
    items: tuple[OrderItem, ...]
    status: OrderStatus
    fulfilments: tuple[Fulfilment, ...] = ()
    payment_history: tuple[Transaction, ...]
    cancel_reason: CancelReason | None = None
    return_items: tuple[str, ...] = ()
    return_payment_method_id: str | None = None
    exchange_items: tuple[str, ...] = ()
    exchange_new_items: tuple[str, ...] = ()
    exchange_payment_method_id: str | None = None
    exchange_price_difference: float | None = None

    def item(self, item_id: str) -> OrderItem | None:
        """The order item with this item id, or None."""
        for item in self.items:
            if item.item_id == item_id:
                return item
        return None


def user_table(tables: Tables) -> Mapping[str, User]:
    """The ``users`` table of a Retail database, typed as the generator fills it.

    The typed views below are the one place where a table's name meets its record class, so
    code reading a database (checks, tools, long worlds) gets typed records without a cast
    at each lookup. They return the table itself: no copy, no per-record check.

    Args:
        tables: The tables of a Retail database (a base or a generated world).
    """
    return cast("Mapping[str, User]", tables["users"])


def product_table(tables: Tables) -> Mapping[str, Product]:
    """The ``products`` table of a Retail database, typed (see :func:`user_table`).

    Args:
        tables: The tables of a Retail database.
    """
    return cast("Mapping[str, Product]", tables["products"])


def order_table(tables: Tables) -> Mapping[str, Order]:
    """The ``orders`` table of a Retail database, typed (see :func:`user_table`).

    Args:
        tables: The tables of a Retail database.
    """
    return cast("Mapping[str, Order]", tables["orders"])
