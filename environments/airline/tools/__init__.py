"""The Airline toolkit: look-ups, bookings, changes, cancellations and compensation.

Every rule of ``policy.md`` that a tool can check is checked here, and a violation is a
:class:`~rods_env.errors.RuleViolationError` that names the rule. Writes only touch, and
``get_reservation_details`` only shows, reservations of a user whose details were looked up
in the current episode. Money goes back where it came from: a refund of a price difference
goes to a card that paid the reservation at least that much (net of earlier refunds), and a
cancellation refunds what each card paid, net; so refunds never exceed payments, per
reservation and payment method. Counts stay within the policy's bounds (passengers, bags).

The toolkit is one class built in layers, one module each: :mod:`.rules` (the policy's
numbers, argument models), :mod:`.base` (identity, shared look-ups and checks),
:mod:`.reads`, :mod:`.writes`, then the tools here; :mod:`.invariants` states what no
write may break. Tools are listed in that order.
"""

from __future__ import annotations

from environments.airline.schema import CABINS
from environments.airline.tools.base import AirlineBase
from environments.airline.tools.invariants import invariant_violations
from environments.airline.tools.reads import AirlineReads
from environments.airline.tools.rules import (
    COMPENSATION,
    MAX_BAGS_PER_PASSENGER,
    MAX_PASSENGERS,
    MAX_PAYMENTS,
)
from environments.airline.tools.writes import AirlineWrites
from rods_env.calculator import evaluate_arithmetic
from rods_env.errors import InvalidArgumentError
from rods_env.tools import tool


class AirlineTools(AirlineWrites):
    """Tools of the Airline domain, bound to one episode's database (the read tools of
    :class:`AirlineReads`, the write tools of :class:`AirlineWrites`, then these).

    Args:
        db: The episode's database state.
    """

    # -- other tools ---------------------------------------------------------------------------
    @tool
    def calculate(self, expression: str) -> float | int:
        """Calculate an arithmetic expression: numbers, + - * / and parentheses.

        Args:
            expression: The expression, such as '(180 + 95) * 2 + 30 * 2'.
        """
        return evaluate_arithmetic(expression, ndigits=2)

    @tool
    def think(self, thought: str) -> str:
        """Think out loud; nothing changes and nothing is shown to the customer.

        Args:
            thought: The reasoning to write down.
        """
        return ""

    @tool(terminal=True)
    def transfer_to_human_agents(self, summary: str) -> str:
        """Transfer the customer to a human agent, ending this conversation.

        Use it only when the customer asks for a human, or the request is outside what the
        policy and tools allow.

        Args:
            summary: A short summary of the customer's issue for the human agent.
        """
        if not summary.strip():
            raise InvalidArgumentError("'summary' is empty.", "Summarize the customer's issue.")
        return "Transfer successful."


__all__ = [
    "CABINS",
    "COMPENSATION",
    "MAX_BAGS_PER_PASSENGER",
    "MAX_PASSENGERS",
    "MAX_PAYMENTS",
    "AirlineBase",
    "AirlineReads",
    "AirlineTools",
    "AirlineWrites",
    "invariant_violations",
]
