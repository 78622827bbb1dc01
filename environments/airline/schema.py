"""Records of the Airline domain.

Tables (record key in brackets):

- ``meta`` [``"clock"``]: :class:`Meta`, the fixed current time of the world.
- ``airports`` [IATA code]: :class:`Airport`.
- ``flights`` [flight number]: :class:`Flight`, a daily flight with one :class:`FlightDate`
  (status, seats left and prices per cabin) per scheduled date.
- ``users`` [user id]: :class:`User`, with saved passengers and payment methods.
- ``reservations`` [reservation id]: :class:`Reservation`.

Money is whole US dollars (``int``) everywhere, so sums are exact and outputs have one
spelling. Times are ISO 8601 without a zone (``"2024-05-15T15:00:00"``), dates ``YYYY-MM-DD``.
Records are frozen; tools replace a record with an updated copy, never mutate one in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, cast

from pydantic import Field

from rods_env.database import Record, Tables

Cabin = Literal["basic_economy", "economy", "business"]
CABINS: tuple[str, ...] = ("basic_economy", "economy", "business")
"""Cabins from cheapest to dearest."""

Membership = Literal["regular", "silver", "gold"]
MEMBERSHIPS: tuple[str, ...] = ("regular", "silver", "gold")

FlightStatus = Literal["available", "delayed", "on time", "flying", "landed", "cancelled"]
FLIGHT_STATUSES: tuple[str, ...] = (
    "available",
    "delayed",
    "on time",
    "flying",
    "landed",
    "cancelled",
)

FlightType = Literal["one_way", "round_trip"]
YesNo = Literal["yes", "no"]

CLOCK_KEY = "clock"
"""Key of the single record of the ``meta`` table."""


class Meta(Record):
    """Facts about the world as a whole.

    Attributes:
        now: The current time; the 24-hour cancellation rule and flight statuses use it.
        airline: Airline name used in texts.
    """

    now: str
    airline: str = "Rods Air"


class Airport(Record):
    """An airport served by the airline."""

    iata: str
    city: str


class CabinValues(Record):
    """One integer per cabin (seats left, or a price in dollars)."""

    basic_economy: int
    economy: int
    business: int

    def of(self, cabin: str) -> int:
        """The value for ``cabin``."""
        return int(getattr(self, cabin))


class FlightDate(Record):
    """One scheduled instance of a flight."""

    status: FlightStatus
    available_seats: CabinValues
    prices: CabinValues


class Flight(Record):
    """A daily flight between two airports (departure and arrival on the same day)."""

    flight_number: str
    origin: str
    destination: str
    scheduled_departure_time: str
    scheduled_arrival_time: str
    dates: dict[str, FlightDate]


class Name(Record):
    """A person's name."""

    first_name: str
    last_name: str


class Address(Record):
    """A postal address."""

    address1: str
    city: str
    state: str
    zip: str
    country: str = "USA"


class Passenger(Record):
    """A traveller on a reservation, or one saved in a user's profile."""

    first_name: str
    last_name: str
    dob: str


class CreditCard(Record):
    """A credit card on file (no balance is tracked)."""

    source: Literal["credit_card"] = "credit_card"
    id: str
    brand: str
    last_four: str


class GiftCard(Record):
    """A gift card with a remaining balance in dollars."""

    source: Literal["gift_card"] = "gift_card"
    id: str
    amount: int


class Certificate(Record):
    """A travel certificate worth ``amount`` dollars, usable once.

    Attributes:
        issued_for: The reservation it was issued as compensation for (None when bought or
            given otherwise).
    """

    source: Literal["certificate"] = "certificate"
    id: str
    amount: int
    issued_for: str | None = None


PaymentMethod = Annotated[CreditCard | GiftCard | Certificate, Field(discriminator="source")]


class User(Record):
    """A customer."""

    user_id: str
    name: Name
    address: Address
    email: str
    dob: str
    membership: Membership
    payment_methods: dict[str, PaymentMethod]
    saved_passengers: tuple[Passenger, ...] = ()
    reservations: tuple[str, ...] = ()


class ReservedFlight(Record):
    """One flight of a reservation, with the per-passenger price paid for it."""

    flight_number: str
    origin: str
    destination: str
    date: str
    price: int


class Payment(Record):
    """One entry of a payment history: a charge (positive) or a refund (negative)."""

    payment_id: str
    amount: int


class Reservation(Record):
    """A booking: flights in one cabin for one to five passengers."""

    reservation_id: str
    user_id: str
    origin: str
    destination: str
    flight_type: FlightType
    cabin: Cabin
    flights: tuple[ReservedFlight, ...]
    passengers: tuple[Passenger, ...]
    payment_history: tuple[Payment, ...]
    created_at: str
    total_baggages: int
    nonfree_baggages: int
    insurance: YesNo
    status: Literal["active", "cancelled"] = "active"


def clock(tables: Tables) -> Meta:
    """The ``meta`` record of an Airline database (key :data:`CLOCK_KEY`), typed.

    This and the typed table views below are the one place where a table's name meets its
    record class, so code reading a database (checks, tools, long worlds) gets typed records
    without a cast at each lookup. They return what is stored: no copy, no per-record check.

    Args:
        tables: The tables of an Airline database (a base or a generated world).
    """
    return cast(Meta, tables["meta"][CLOCK_KEY])


def flight_table(tables: Tables) -> Mapping[str, Flight]:
    """The ``flights`` table of an Airline database, typed (see :func:`clock`).

    Args:
        tables: The tables of an Airline database.
    """
    return cast("Mapping[str, Flight]", tables["flights"])


def user_table(tables: Tables) -> Mapping[str, User]:
    """The ``users`` table of an Airline database, typed (see :func:`clock`).

    Args:
        tables: The tables of an Airline database.
    """
    return cast("Mapping[str, User]", tables["users"])


def reservation_table(tables: Tables) -> Mapping[str, Reservation]:
    """The ``reservations`` table of an Airline database, typed (see :func:`clock`).

    Args:
        tables: The tables of an Airline database.
    """
    return cast("Mapping[str, Reservation]", tables["reservations"])
