"""The Retail toolkit's read tools: finding and verifying the customer, their account and
orders, and the public catalog."""

from __future__ import annotations

from environments.retail.schema import Order, Product, User
from environments.retail.tools.base import RetailBase
from environments.retail.tools.rules import email_key, name_zip_key
from rods_env.errors import NotFoundError
from rods_env.tools import tool


class RetailReads(RetailBase):
    """The read tools of the Retail domain.

    Args:
        db: The episode's database state.
    """

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
