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

The toolkit is one class built in layers, one module each: :mod:`.rules` (hints, payment
method types, look-up keys), :mod:`.base` (identity, shared look-ups and checks),
:mod:`.reads`, :mod:`.writes`, then the utilities here; :mod:`.invariants` states what no
write may break. Tools are listed in that order.
"""

from __future__ import annotations

from typing import Any

from environments.retail.schema import ORDER_STATUSES
from environments.retail.tools.invariants import invariant_violations
from environments.retail.tools.rules import email_key, name_zip_key
from environments.retail.tools.writes import RetailWrites
from rods_env.calculator import evaluate_arithmetic
from rods_env.errors import InvalidArgumentError
from rods_env.tools import tool


class RetailTools(RetailWrites):
    """Tools of the Retail domain, bound to one episode's database (the read tools of
    :class:`RetailReads`, the write tools of :class:`RetailWrites`, then these).

    Args:
        db: The episode's database state.
    """

    vocabularies = (ORDER_STATUSES,)

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


__all__ = ["RetailTools", "email_key", "invariant_violations", "name_zip_key"]
