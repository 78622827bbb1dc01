"""The Retail toolkit's shared words: the hints its errors give, the payment method
types, and the keys of the customer look-ups."""

from __future__ import annotations

from environments.retail.schema import CreditCard, GiftCard, PayPal, User

FIND_USER = "Find the user id with find_user_id_by_email or find_user_id_by_name_zip."
FIND_ORDER = "The customer's order ids are listed by get_user_details."
FIND_PRODUCT = (
    "list_all_product_types gives every product id; each item of get_order_details "
    "carries its product_id."
)

STATUS_HINTS = {
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


def describe_method(method: PaymentMethod) -> str:
    """A payment method as the error messages name it."""
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
