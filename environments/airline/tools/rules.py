"""The Airline policy's numbers (limits, compensation) and the tools' argument models."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from rods_env.database import Database

MAX_PASSENGERS = 5
"""Most passengers on one reservation."""

MAX_PAYMENTS = {"certificate": 1, "credit_card": 1, "gift_card": 3}
"""Most payment methods of each kind in one booking."""

COMPENSATION = {"cancelled": 100, "delayed": 50}
"""Certificate dollars per passenger, by what happened to the flight."""

INSURED_REASONS = ("health", "weather")
"""Cancellation reasons that travel insurance covers."""

MIN_CONNECTION_MINUTES = 60
"""Shortest connection between two flights of a one-stop itinerary."""

MAX_BAGS_PER_PASSENGER = 5
"""Most checked bags per passenger on a reservation."""

CancelReason = Literal["change of plan", "airline cancelled flight", "health", "weather", "other"]

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DEPARTED = ("flying", "landed")
_USER_HINT = "Ask the customer for their user id, then call get_user_details."


class FlightLeg(BaseModel):
    """A flight on a date, as the agent names it."""

    model_config = ConfigDict(extra="forbid")

    flight_number: str
    date: str


class PassengerInfo(BaseModel):
    """A passenger as the agent gives it."""

    model_config = ConfigDict(extra="forbid")

    first_name: str
    last_name: str
    dob: str


class PaymentSplit(BaseModel):
    """The amount to charge to one payment method."""

    model_config = ConfigDict(extra="forbid")

    payment_id: str
    amount: int


def _short_hash(parts: Iterable[Any], digits: int) -> int:
    text = json.dumps(list(parts), sort_keys=True, default=str)
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % (10**digits)


def _new_reservation_id(db: Database, content: Any) -> str:
    """A reservation id derived from the booking's content, so equal bookings get equal ids."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    salt = 0
    while True:
        value = _short_hash([content, salt], 30)
        rid = ""
        for _ in range(6):
            value, k = divmod(value, len(alphabet))
            rid += alphabet[k]
        if ("reservations", rid) not in db:
            return rid
        salt += 1
