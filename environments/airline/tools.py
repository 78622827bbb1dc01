"""The Airline toolkit: look-ups, bookings, changes, cancellations and compensation.

Every rule of ``policy.md`` that a tool can check is checked here, and a violation is a
:class:`~rods_env.errors.RuleViolationError` that names the rule. Writes only touch, and
``get_reservation_details`` only shows, reservations of a user whose details were looked up
in the current episode. Money goes back where it came from: a refund of a price difference
goes to a card that paid the reservation at least that much (net of earlier refunds), and a
cancellation refunds what each card paid, net; so refunds never exceed payments, per
reservation and payment method. Counts stay within the policy's bounds (passengers, bags).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from itertools import pairwise
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from environments.airline.generator import BAG_FEE, FREE_BAGS, INSURANCE_FEE
from environments.airline.schema import (
    CABINS,
    CLOCK_KEY,
    FLIGHT_STATUSES,
    MEMBERSHIPS,
    Cabin,
    Certificate,
    Flight,
    FlightDate,
    FlightType,
    GiftCard,
    Passenger,
    Payment,
    Reservation,
    ReservedFlight,
    User,
    YesNo,
    flight_table,
    reservation_table,
    user_table,
)
from rods_env.calculator import evaluate_arithmetic
from rods_env.database import Database
from rods_env.errors import InvalidArgumentError, NotFoundError, RuleViolationError
from rods_env.tools import Toolkit, tool

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


class AirlineTools(Toolkit):
    """Tools of the Airline domain, bound to one episode's database.

    Args:
        db: The episode's database state.
    """

    vocabularies = (FLIGHT_STATUSES, CABINS, MEMBERSHIPS)

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._identified: set[str] = set()

    def on_reset(self) -> None:
        """Forget which users were identified: identity is per episode."""
        self._identified = set()

    # -- helpers -----------------------------------------------------------------------------
    def _now(self) -> datetime:
        return datetime.fromisoformat(self.db.require("meta", CLOCK_KEY).now)

    def _user(self, user_id: str) -> User:
        return self.db.require("users", user_id, what="user", hint=_USER_HINT)

    def _identified_user(self, user_id: str) -> User:
        user = self._user(user_id)
        if user_id not in self._identified:
            raise RuleViolationError(
                f"User '{user_id}' has not been identified in this conversation.",
                "Call get_user_details with the customer's user id before changing anything.",
            )
        return user

    def _reservation(self, reservation_id: str) -> Reservation:
        return self.db.require(
            "reservations",
            reservation_id,
            what="reservation",
            hint="Reservation ids are six letters and digits; get_user_details lists the user's.",
        )

    def _flight(self, flight_number: str) -> Flight:
        return self.db.require(
            "flights",
            flight_number,
            what="flight",
            hint="Use search_direct_flight or search_onestop_flight to find flight numbers.",
        )

    def _check_date(self, value: str, name: str = "date") -> str:
        if not _DATE.match(value):
            raise InvalidArgumentError(
                f"'{name}' = '{value}' is not a date.", "Use the form YYYY-MM-DD."
            )
        try:
            date.fromisoformat(value)
        except ValueError:
            raise InvalidArgumentError(
                f"'{name}' = '{value}' is not a valid calendar date.", "Use the form YYYY-MM-DD."
            ) from None
        return value

    def _flight_date(self, flight: Flight, day: str) -> FlightDate:
        self._check_date(day)
        instance = flight.dates.get(day)
        if instance is None:
            days = sorted(flight.dates)
            raise NotFoundError(
                f"Flight {flight.flight_number} is not scheduled on {day}.",
                f"It flies daily from {days[0]} to {days[-1]}.",
            )
        return instance

    def _airport(self, code: str, name: str) -> str:
        if ("airports", code) not in self.db:
            raise NotFoundError(
                f"No airport with code '{code}' ({name}).", "Call list_all_airports."
            )
        return code

    def _owned(self, reservation_id: str) -> tuple[Reservation, User]:
        """An active reservation of an identified user, with that user."""
        res = self._reservation(reservation_id)
        if res.user_id not in self._identified:
            raise RuleViolationError(
                f"Reservation {reservation_id} belongs to a user who has not been identified in "
                "this conversation.",
                "Only the identified customer's reservations can be changed; call "
                "get_user_details with the customer's user id first.",
            )
        if res.status == "cancelled":
            raise RuleViolationError(f"Reservation {reservation_id} is already cancelled.", None)
        return res, self._user(res.user_id)

    def _statuses(self, res: Reservation) -> list[str]:
        return [
            self.db.require("flights", f.flight_number).dates[f.date].status for f in res.flights
        ]

    def _not_departed(self, res: Reservation) -> None:
        statuses = self._statuses(res)
        for f, status in zip(res.flights, statuses, strict=True):
            if status in _DEPARTED:
                raise RuleViolationError(
                    f"Reservation {res.reservation_id} cannot be changed: flight "
                    f"{f.flight_number} on {f.date} has already departed (status '{status}').",
                    "Reservations are changed or cancelled only before any of their flights "
                    "departs; transfer to a human agent if the customer insists.",
                )

    def _passengers(self, passengers: Sequence[PassengerInfo]) -> tuple[Passenger, ...]:
        if not 1 <= len(passengers) <= MAX_PASSENGERS:
            raise RuleViolationError(
                f"A reservation has 1 to {MAX_PASSENGERS} passengers, got {len(passengers)}.",
                f"Book larger groups as several reservations of at most {MAX_PASSENGERS}.",
            )
        out = []
        for i, p in enumerate(passengers):
            if not p.first_name.strip() or not p.last_name.strip():
                raise InvalidArgumentError(
                    f"Passenger {i + 1} needs a first and a last name.", "Ask the customer."
                )
            self._check_date(p.dob, f"passengers[{i}].dob")
            out.append(
                Passenger(first_name=p.first_name.strip(), last_name=p.last_name.strip(), dob=p.dob)
            )
        return tuple(out)

    def _itinerary(
        self, legs: Sequence[FlightLeg], origin: str, destination: str, flight_type: str
    ) -> list[tuple[Flight, str]]:
        """Check that ``legs`` go from origin to destination (and back for a round trip)."""
        if not legs:
            raise InvalidArgumentError("'flights' is empty.", "Give at least one flight and date.")
        if len(legs) > 4:
            raise InvalidArgumentError(
                f"'flights' has {len(legs)} flights; at most 4 (one stop each way).", None
            )
        flights = [(self._flight(leg.flight_number), self._check_date(leg.date)) for leg in legs]
        for flight, day in flights:
            self._flight_date(flight, day)
        if flights[0][0].origin != origin:
            raise InvalidArgumentError(
                f"The first flight leaves from {flights[0][0].origin}, not from {origin}.", None
            )
        for (a, a_day), (b, b_day) in pairwise(flights):
            if a.destination != b.origin:
                raise InvalidArgumentError(
                    f"Flight {a.flight_number} arrives at {a.destination} but the next flight "
                    f"{b.flight_number} leaves from {b.origin}.",
                    "List the flights in travel order, each leaving from where the last arrived.",
                )
            arrive = datetime.fromisoformat(f"{a_day}T{a.scheduled_arrival_time}")
            leave = datetime.fromisoformat(f"{b_day}T{b.scheduled_departure_time}")
            if leave < arrive + timedelta(minutes=MIN_CONNECTION_MINUTES):
                raise InvalidArgumentError(
                    f"Flight {b.flight_number} on {b_day} leaves before flight {a.flight_number} "
                    f"on {a_day} has arrived (connections need {MIN_CONNECTION_MINUTES} minutes).",
                    None,
                )
        stops = [f.destination for f, _ in flights]
        if flight_type == "one_way":
            if stops[-1] != destination or destination in stops[:-1] or origin in stops:
                raise InvalidArgumentError(
                    f"These flights do not make a one-way trip from {origin} to {destination}.",
                    "A one-way trip ends at the destination and passes through it only once.",
                )
        else:
            if stops[-1] != origin or destination not in stops[:-1] or origin in stops[:-1]:
                raise InvalidArgumentError(
                    f"These flights do not make a round trip {origin}-{destination}-{origin}.",
                    "A round trip goes to the destination and back to the origin.",
                )
            turn = stops.index(destination)
            if len(flights) > 2 and max(turn + 1, len(flights) - turn - 1) > 2:
                raise InvalidArgumentError("Each direction has at most one stop.", None)
        return flights

    def _bookable(self, flight: Flight, day: str, cabin: str, seats: int) -> FlightDate:
        instance = self._flight_date(flight, day)
        if instance.status != "available":
            raise RuleViolationError(
                f"Flight {flight.flight_number} on {day} cannot be booked (status "
                f"'{instance.status}').",
                "Only flights with status 'available' can be booked; search another date or flight.",
            )
        left = instance.available_seats.of(cabin)
        if left < seats:
            raise RuleViolationError(
                f"Flight {flight.flight_number} on {day} has {left} {cabin} seats left, "
                f"{seats} are needed.",
                "Choose another flight or cabin.",
            )
        return instance

    def _move_seats(self, legs: Iterable[tuple[str, str]], cabin: str, delta: int) -> None:
        """Add ``delta`` seats of ``cabin`` to each ``(flight_number, date)``."""
        for number, day in legs:
            flight = self.db.require("flights", number)
            instance = flight.dates[day]
            seats = instance.available_seats
            seats = seats.model_copy(update={cabin: seats.of(cabin) + delta})
            dates = dict(flight.dates)
            dates[day] = instance.model_copy(update={"available_seats": seats})
            self.db.put("flights", number, flight.model_copy(update={"dates": dates}))

    def _check_bags(self, total: int, passengers: int) -> None:
        limit = MAX_BAGS_PER_PASSENGER * passengers
        if not 0 <= total <= limit:
            raise RuleViolationError(
                f"'total_baggages' = {total}: a reservation of {passengers} passenger(s) has 0 to "
                f"{limit} checked bags.",
                f"At most {MAX_BAGS_PER_PASSENGER} checked bags per passenger.",
            )

    @staticmethod
    def _net_paid(res: Reservation) -> dict[str, int]:
        """What each payment method has paid for the reservation, net of refunds to it."""
        net: dict[str, int] = {}
        for p in res.payment_history:
            net[p.payment_id] = net.get(p.payment_id, 0) + p.amount
        return net

    def _settle(self, user: User, res: Reservation, payment_id: str, diff: int) -> User:
        """Charge a price difference (``diff`` > 0) or refund it (< 0) to ``payment_id``.

        A refund goes only to a method that paid the reservation at least that much.
        """
        method = user.payment_methods.get(payment_id)
        if diff < 0 and method is not None and method.source != "certificate":
            net = self._net_paid(res)
            if net.get(payment_id, 0) < -diff:
                payers = [
                    f"{pid} ({amount})"
                    for pid, amount in net.items()
                    if amount > 0 and not pid.startswith("certificate")
                ]
                raise RuleViolationError(
                    f"A refund of {-diff} cannot go to '{payment_id}': it paid "
                    f"{max(net.get(payment_id, 0), 0)} for reservation {res.reservation_id}. "
                    "Refunds go back to a card that paid the reservation.",
                    f"Cards that paid this reservation (net): {', '.join(payers) or 'none'}.",
                )
        return self._charge_one(user, payment_id, diff)

    def _charge_one(self, user: User, payment_id: str, amount: int) -> User:
        """Charge (amount > 0) or refund (amount < 0) one credit or gift card; new user record."""
        method = user.payment_methods.get(payment_id)
        if method is None:
            raise NotFoundError(
                f"Payment method '{payment_id}' is not in the profile of user {user.user_id}.",
                f"The user's payment methods: {', '.join(user.payment_methods) or 'none'}.",
            )
        if method.source == "certificate":
            raise RuleViolationError(
                f"Travel certificate '{payment_id}' can only be used when booking.",
                "Pay changes with a credit card or a gift card from the profile.",
            )
        if method.source == "gift_card":
            if amount > method.amount:
                raise RuleViolationError(
                    f"Gift card '{payment_id}' has a balance of {method.amount}, less than {amount}.",
                    "Use another gift card or a credit card.",
                )
            methods = dict(user.payment_methods)
            methods[payment_id] = method.model_copy(update={"amount": method.amount - amount})
            return user.model_copy(update={"payment_methods": methods})
        return user

    def _free_bags(self, user: User, cabin: str, passengers: int) -> int:
        return FREE_BAGS[user.membership][cabin] * passengers

    # -- read tools ----------------------------------------------------------------------------
    @tool
    def get_user_details(self, user_id: str) -> User:
        """Get a user's profile: name, membership, payment methods, saved passengers and reservation ids.

        Looking a user up identifies them for this conversation: only an identified user's
        reservations can be booked, changed or cancelled.

        Args:
            user_id: The user id, such as 'sara_doe_4096'.
        """
        user = self._user(user_id)
        self._identified.add(user_id)
        return user

    @tool
    def get_reservation_details(self, reservation_id: str) -> Reservation:
        """Get a reservation: flights with prices paid, passengers, cabin, bags, insurance and payments.

        Only reservations of a user identified in this conversation (``get_user_details``)
        are shown.

        Args:
            reservation_id: The reservation id, such as 'ZFA04Y'.
        """
        res = self._reservation(reservation_id)
        if res.user_id not in self._identified:
            raise RuleViolationError(
                f"Reservation {reservation_id} belongs to a user who has not been identified in "
                "this conversation.",
                "Ask the customer for their user id and call get_user_details first; only "
                "their own reservations are shown.",
            )
        return res

    @tool
    def list_all_airports(self) -> list[dict[str, str]]:
        """List every airport the airline serves, with its IATA code and city."""
        return [{"iata": a.iata, "city": a.city} for a in self.db.values("airports")]

    @tool
    def search_direct_flight(
        self, origin: str, destination: str, date: str
    ) -> list[dict[str, Any]]:
        """Search direct flights between two airports on a date that can still be booked.

        Args:
            origin: IATA code of the departure airport, such as 'JFK'.
            destination: IATA code of the arrival airport, such as 'LAX'.
            date: Date of the flight, YYYY-MM-DD.
        """
        self._airport(origin, "origin")
        self._airport(destination, "destination")
        self._check_date(date)
        out = []
        for flight in self.db.values("flights"):
            if flight.origin == origin and flight.destination == destination:
                out.extend(self._offer(flight, date))
        return out

    def _offer(self, flight: Flight, day: str) -> list[dict[str, Any]]:
        instance = flight.dates.get(day)
        if instance is None or instance.status != "available":
            return []
        return [
            {
                "flight_number": flight.flight_number,
                "origin": flight.origin,
                "destination": flight.destination,
                "date": day,
                "scheduled_departure_time": flight.scheduled_departure_time,
                "scheduled_arrival_time": flight.scheduled_arrival_time,
                "status": instance.status,
                "available_seats": instance.available_seats,
                "prices": instance.prices,
            }
        ]

    @tool
    def search_onestop_flight(
        self, origin: str, destination: str, date: str
    ) -> list[list[dict[str, Any]]]:
        """Search one-stop itineraries on a date: pairs of bookable flights with a connection of an hour or more.

        Args:
            origin: IATA code of the departure airport, such as 'JFK'.
            destination: IATA code of the arrival airport, such as 'LAX'.
            date: Date of travel, YYYY-MM-DD (both flights fly that day).
        """
        self._airport(origin, "origin")
        self._airport(destination, "destination")
        self._check_date(date)
        firsts: list[Flight] = []
        seconds: dict[str, list[Flight]] = {}
        for flight in self.db.values("flights"):
            if flight.origin == origin and flight.destination != destination:
                firsts.append(flight)
            elif flight.destination == destination and flight.origin != origin:
                seconds.setdefault(flight.origin, []).append(flight)
        out = []
        for a in firsts:
            first = self._offer(a, date)
            if not first:
                continue
            arrive = datetime.fromisoformat(f"{date}T{a.scheduled_arrival_time}")
            for b in seconds.get(a.destination, []):
                leave = datetime.fromisoformat(f"{date}T{b.scheduled_departure_time}")
                if leave < arrive + timedelta(minutes=MIN_CONNECTION_MINUTES):
                    continue
                second = self._offer(b, date)
                if second:
                    out.append([first[0], second[0]])
        return out

    @tool
    def get_flight_status(self, flight_number: str, date: str) -> dict[str, str]:
        """Get the status of a flight on a date: available, delayed, on time, flying, landed or cancelled.

        Args:
            flight_number: The flight number, such as 'RD123'.
            date: Date of the flight, YYYY-MM-DD.
        """
        flight = self._flight(flight_number)
        instance = self._flight_date(flight, date)
        return {"flight_number": flight_number, "date": date, "status": instance.status}

    # -- write tools ---------------------------------------------------------------------------
    @tool(writes=True, operation=("book",))
    def book_reservation(
        self,
        user_id: str,
        origin: str,
        destination: str,
        flight_type: FlightType,
        cabin: Cabin,
        flights: list[FlightLeg],
        passengers: list[PassengerInfo],
        payment_methods: list[PaymentSplit],
        total_baggages: int,
        insurance: YesNo,
    ) -> Reservation:
        """Book a reservation for the identified user and charge its full price.

        The price is, per passenger, the sum of the flights' prices in the cabin, plus
        30 for insurance when chosen, plus 50 per checked bag beyond the free allowance.

        Args:
            user_id: The identified user who books and pays.
            origin: IATA code where the trip starts.
            destination: IATA code of the destination (the turnaround of a round trip).
            flight_type: 'one_way' or 'round_trip'.
            cabin: Cabin for every flight: 'basic_economy', 'economy' or 'business'.
            flights: Flights in travel order, each {"flight_number", "date"}.
            passengers: One to five passengers, each {"first_name", "last_name", "dob"}.
            payment_methods: Payment ids from the user's profile with the amount to charge to
                each, {"payment_id", "amount"}; they must add up to the total price. At most
                one certificate, one credit card and three gift cards.
            total_baggages: Checked bags for the whole reservation.
            insurance: 'yes' or 'no' for travel insurance.
        """
        user = self._identified_user(user_id)
        self._airport(origin, "origin")
        self._airport(destination, "destination")
        people = self._passengers(passengers)
        n = len(people)
        legs = self._itinerary(flights, origin, destination, flight_type)
        seen: set[tuple[str, str]] = set()
        reserved = []
        for flight, day in legs:
            if (flight.flight_number, day) in seen:
                raise InvalidArgumentError(
                    f"Flight {flight.flight_number} on {day} is listed twice.", None
                )
            seen.add((flight.flight_number, day))
            instance = self._bookable(flight, day, cabin, n)
            reserved.append(
                ReservedFlight(
                    flight_number=flight.flight_number,
                    origin=flight.origin,
                    destination=flight.destination,
                    date=day,
                    price=instance.prices.of(cabin),
                )
            )
        self._check_bags(total_baggages, n)
        nonfree = max(0, total_baggages - self._free_bags(user, cabin, n))
        fare = sum(f.price for f in reserved) * n
        total = fare + nonfree * BAG_FEE + (INSURANCE_FEE * n if insurance == "yes" else 0)
        user = self._pay_booking(user, payment_methods, total, fare, nonfree, insurance, n)
        content = [
            user_id,
            [f.model_dump() for f in reserved],
            [p.model_dump() for p in people],
            cabin,
        ]
        rid = _new_reservation_id(self.db, content)
        reservation = Reservation(
            reservation_id=rid,
            user_id=user_id,
            origin=origin,
            destination=destination,
            flight_type=flight_type,
            cabin=cabin,
            flights=tuple(reserved),
            passengers=people,
            payment_history=tuple(
                Payment(payment_id=p.payment_id, amount=p.amount) for p in payment_methods
            ),
            created_at=self._now().isoformat(timespec="seconds"),
            total_baggages=total_baggages,
            nonfree_baggages=nonfree,
            insurance=insurance,
        )
        self._move_seats(((f.flight_number, f.date) for f in reserved), cabin, -n)
        self.db.put("reservations", rid, reservation)
        self.db.put(
            "users", user_id, user.model_copy(update={"reservations": (*user.reservations, rid)})
        )
        return reservation

    def _pay_booking(
        self,
        user: User,
        payments: Sequence[PaymentSplit],
        total: int,
        fare: int,
        nonfree: int,
        insurance: str,
        n: int,
    ) -> User:
        if not payments:
            raise InvalidArgumentError(
                "'payment_methods' is empty.", "Give at least one payment method."
            )
        counts: dict[str, int] = {}
        ids = [p.payment_id for p in payments]
        if len(set(ids)) != len(ids):
            raise InvalidArgumentError("A payment method is listed twice.", "List each one once.")
        methods = dict(user.payment_methods)
        for p in payments:
            method = methods.get(p.payment_id)
            if method is None:
                raise NotFoundError(
                    f"Payment method '{p.payment_id}' is not in the profile of user {user.user_id}.",
                    f"The user's payment methods: {', '.join(user.payment_methods) or 'none'}.",
                )
            if p.amount <= 0:
                raise InvalidArgumentError(
                    f"The amount for '{p.payment_id}' is {p.amount}; amounts must be positive.",
                    None,
                )
            counts[method.source] = counts.get(method.source, 0) + 1
            if counts[method.source] > MAX_PAYMENTS[method.source]:
                raise RuleViolationError(
                    f"Too many payment methods of kind {method.source} ({counts[method.source]}).",
                    "A booking uses at most one certificate, one credit card and three gift cards.",
                )
            if method.source == "gift_card":
                if p.amount > method.amount:
                    raise RuleViolationError(
                        f"Gift card '{p.payment_id}' has a balance of {method.amount}, less than "
                        f"{p.amount}.",
                        "Charge less to it and the rest to another method.",
                    )
                methods[p.payment_id] = method.model_copy(
                    update={"amount": method.amount - p.amount}
                )
            elif method.source == "certificate":
                if p.amount > method.amount:
                    raise RuleViolationError(
                        f"Certificate '{p.payment_id}' is worth {method.amount}, less than {p.amount}.",
                        "Charge at most its value to it and the rest to another method.",
                    )
                # A certificate is used once; any value left on it is forfeited.
                del methods[p.payment_id]
        paid = sum(p.amount for p in payments)
        if paid != total:
            extras = f"{nonfree} extra bags at {BAG_FEE}" if nonfree else "no extra bags"
            cover = f"insurance {INSURANCE_FEE} x {n}" if insurance == "yes" else "no insurance"
            raise InvalidArgumentError(
                f"The payments add up to {paid} but the total price is {total}.",
                f"Total = flight prices x {n} passengers ({fare}) + {extras} + {cover}.",
            )
        return user.model_copy(update={"payment_methods": methods})

    @tool(writes=True, operation=("cancel",))
    def cancel_reservation(self, reservation_id: str, reason: CancelReason) -> Reservation:
        """Cancel a whole reservation and refund its payments, when the policy allows it.

        Args:
            reservation_id: The reservation to cancel.
            reason: Why the customer cancels: 'change of plan', 'airline cancelled flight',
                'health', 'weather' or 'other'.
        """
        res, user = self._owned(reservation_id)
        self._not_departed(res)
        statuses = self._statuses(res)
        airline_cancelled = "cancelled" in statuses
        if reason == "airline cancelled flight" and not airline_cancelled:
            raise RuleViolationError(
                f"No flight of reservation {reservation_id} has been cancelled by the airline.",
                "Check each flight with get_flight_status; use the customer's actual reason.",
            )
        created = datetime.fromisoformat(res.created_at)
        allowed = (
            self._now() - created <= timedelta(hours=24)
            or reason == "airline cancelled flight"
            or res.cabin == "business"
            or (res.insurance == "yes" and reason in INSURED_REASONS)
        )
        if not allowed:
            raise RuleViolationError(
                f"Reservation {reservation_id} cannot be cancelled for the reason '{reason}': it "
                f"was booked more than 24 hours ago, no flight was cancelled by the airline, the "
                f"cabin is {res.cabin} and {'insurance does not cover this reason' if res.insurance == 'yes' else 'it has no travel insurance'}.",
                "Explain the cancellation rules to the customer; do not cancel.",
            )
        net: dict[str, int] = {}
        for p in res.payment_history:
            net[p.payment_id] = net.get(p.payment_id, 0) + p.amount
        methods = dict(user.payment_methods)
        refunds = []
        for pid, amount in net.items():
            if amount <= 0 or pid.startswith("certificate"):
                continue  # certificates are not refunded
            refunds.append(Payment(payment_id=pid, amount=-amount))
            method = methods.get(pid)
            if method is not None and method.source == "gift_card":
                methods[pid] = method.model_copy(update={"amount": method.amount + amount})
        res = res.model_copy(
            update={"status": "cancelled", "payment_history": (*res.payment_history, *refunds)}
        )
        self._move_seats(
            ((f.flight_number, f.date) for f in res.flights), res.cabin, len(res.passengers)
        )
        self.db.put("reservations", reservation_id, res)
        if methods != user.payment_methods:
            self.db.put("users", user.user_id, user.model_copy(update={"payment_methods": methods}))
        return res

    @tool(writes=True, operation=("chang", "modif", "mov", "reschedul", "switch", "flight", "date"))
    def update_reservation_flights(
        self, reservation_id: str, flights: list[FlightLeg], payment_id: str
    ) -> Reservation:
        """Replace the flights of a reservation, keeping its origin, destination, trip type and cabin.

        Flights kept unchanged keep the price paid; new flights cost today's price. The
        difference for all passengers is charged to, or refunded to, the payment method.

        Args:
            reservation_id: The reservation to change.
            flights: The complete new list of flights in travel order, each {"flight_number", "date"}.
            payment_id: Credit card or gift card id from the profile for the price difference.
        """
        res, user = self._owned(reservation_id)
        if res.cabin == "basic_economy":
            raise RuleViolationError(
                f"Reservation {reservation_id} is in basic economy, whose flights cannot be changed.",
                "The customer may first change the cabin with update_reservation_cabin.",
            )
        self._not_departed(res)
        legs = self._itinerary(flights, res.origin, res.destination, res.flight_type)
        n = len(res.passengers)
        old = {(f.flight_number, f.date): f for f in res.flights}
        new_keys = [(f.flight_number, day) for f, day in legs]
        if len(set(new_keys)) != len(new_keys):
            raise InvalidArgumentError("A flight is listed twice.", None)
        if new_keys == list(old):
            raise InvalidArgumentError(
                f"These are already the flights of reservation {reservation_id}.",
                "Nothing to change.",
            )
        reserved = []
        for flight, day in legs:
            kept = old.get((flight.flight_number, day))
            if kept is not None:
                reserved.append(kept)
                continue
            instance = self._bookable(flight, day, res.cabin, n)
            reserved.append(
                ReservedFlight(
                    flight_number=flight.flight_number,
                    origin=flight.origin,
                    destination=flight.destination,
                    date=day,
                    price=instance.prices.of(res.cabin),
                )
            )
        diff = (sum(f.price for f in reserved) - sum(f.price for f in res.flights)) * n
        user = self._settle(user, res, payment_id, diff)
        history = res.payment_history + (
            (Payment(payment_id=payment_id, amount=diff),) if diff else ()
        )
        self._move_seats((k for k in old if k not in new_keys), res.cabin, n)
        self._move_seats((k for k in new_keys if k not in old), res.cabin, -n)
        res = res.model_copy(update={"flights": tuple(reserved), "payment_history": history})
        self.db.put("reservations", reservation_id, res)
        self.db.put("users", user.user_id, user)
        return res

    @tool(
        writes=True,
        operation=("upgrad", "downgrad", "cabin", "class", "chang", "modif", "mov", "switch"),
    )
    def update_reservation_cabin(
        self, reservation_id: str, cabin: Cabin, payment_id: str
    ) -> Reservation:
        """Move every flight of a reservation to another cabin at today's prices.

        The difference for all passengers is charged to, or refunded to, the payment method.
        Bag fees already paid do not change.

        Args:
            reservation_id: The reservation to change.
            cabin: The new cabin: 'basic_economy', 'economy' or 'business'.
            payment_id: Credit card or gift card id from the profile for the price difference.
        """
        res, user = self._owned(reservation_id)
        if cabin == res.cabin:
            raise InvalidArgumentError(f"Reservation {reservation_id} is already in {cabin}.", None)
        self._not_departed(res)
        n = len(res.passengers)
        reserved = []
        for f in res.flights:
            instance = self._bookable(self._flight(f.flight_number), f.date, cabin, n)
            reserved.append(f.model_copy(update={"price": instance.prices.of(cabin)}))
        diff = (sum(f.price for f in reserved) - sum(f.price for f in res.flights)) * n
        user = self._settle(user, res, payment_id, diff)
        history = res.payment_history + (
            (Payment(payment_id=payment_id, amount=diff),) if diff else ()
        )
        keys = [(f.flight_number, f.date) for f in res.flights]
        self._move_seats(keys, res.cabin, n)
        self._move_seats(keys, cabin, -n)
        res = res.model_copy(
            update={"cabin": cabin, "flights": tuple(reserved), "payment_history": history}
        )
        self.db.put("reservations", reservation_id, res)
        self.db.put("users", user.user_id, user)
        return res

    @tool(writes=True, operation=("bag", "luggage", "suitcase", "add", "chang"))
    def update_reservation_baggages(
        self, reservation_id: str, total_baggages: int, payment_id: str | None = None
    ) -> Reservation:
        """Raise the number of checked bags of a reservation; bags cannot be removed.

        Bags within the free allowance cost nothing; each bag beyond it costs 50.

        Args:
            reservation_id: The reservation to change.
            total_baggages: The new total number of checked bags (more than now).
            payment_id: Credit card or gift card id from the profile; needed only when a fee is due.
        """
        res, user = self._owned(reservation_id)
        self._not_departed(res)
        if total_baggages <= res.total_baggages:
            raise RuleViolationError(
                f"Reservation {reservation_id} has {res.total_baggages} checked bags; the new total "
                f"{total_baggages} must be higher.",
                "Checked bags can be added but not removed.",
            )
        n = len(res.passengers)
        self._check_bags(total_baggages, n)
        allowance = self._free_bags(user, res.cabin, n)
        free_used = res.total_baggages - res.nonfree_baggages
        added = total_baggages - res.total_baggages
        extra = max(0, added - max(0, allowance - free_used))
        fee = extra * BAG_FEE
        history = res.payment_history
        if fee:
            if payment_id is None:
                raise InvalidArgumentError(
                    f"{extra} of the added bags are beyond the free allowance and cost {fee}; "
                    "'payment_id' is required.",
                    "Ask which credit card or gift card from the profile to use.",
                )
            user = self._charge_one(user, payment_id, fee)
            history = (*history, Payment(payment_id=payment_id, amount=fee))
            self.db.put("users", user.user_id, user)
        res = res.model_copy(
            update={
                "total_baggages": total_baggages,
                "nonfree_baggages": res.nonfree_baggages + extra,
                "payment_history": history,
            }
        )
        self.db.put("reservations", reservation_id, res)
        return res

    @tool(
        writes=True,
        operation=("passenger", "traveler", "traveller", "name", "chang", "modif", "replac"),
    )
    def update_reservation_passengers(
        self, reservation_id: str, passengers: list[PassengerInfo]
    ) -> Reservation:
        """Replace the passengers' details of a reservation; the number of passengers cannot change.

        Args:
            reservation_id: The reservation to change.
            passengers: The complete new list, each {"first_name", "last_name", "dob"}.
        """
        res, _ = self._owned(reservation_id)
        self._not_departed(res)
        people = self._passengers(passengers)
        if len(people) != len(res.passengers):
            raise RuleViolationError(
                f"Reservation {reservation_id} has {len(res.passengers)} passengers; got "
                f"{len(people)}.",
                "The number of passengers cannot change; give the full list with changed details.",
            )
        if people == res.passengers:
            raise InvalidArgumentError("These are already the passengers of the reservation.", None)
        res = res.model_copy(update={"passengers": people})
        self.db.put("reservations", reservation_id, res)
        return res

    @tool(writes=True, operation=("compensat", "certificate", "voucher"))
    def send_certificate(self, user_id: str, reservation_id: str, amount: int) -> Certificate:
        """Send a travel certificate as compensation for a delayed or cancelled flight of a reservation.

        Only when the customer asks and the policy allows it; the amount must follow the policy.

        Args:
            user_id: The identified user who receives the certificate.
            reservation_id: The user's reservation with the delayed or cancelled flight.
            amount: Certificate value in dollars.
        """
        user = self._identified_user(user_id)
        res = self._reservation(reservation_id)
        if res.user_id != user_id:
            raise RuleViolationError(
                f"Reservation {reservation_id} does not belong to user {user_id}.",
                f"The user's reservations: {', '.join(user.reservations) or 'none'}.",
            )
        statuses = self._statuses(res)
        kind = (
            "cancelled" if "cancelled" in statuses else "delayed" if "delayed" in statuses else None
        )
        if kind is None:
            raise RuleViolationError(
                f"No flight of reservation {reservation_id} is delayed or cancelled.",
                "Compensation is only for delayed or cancelled flights; check get_flight_status.",
            )
        if user.membership == "regular" and res.insurance == "no" and res.cabin != "business":
            raise RuleViolationError(
                f"User {user_id} is not eligible for compensation on reservation {reservation_id}.",
                "Only silver or gold members, insured reservations or business cabin are compensated.",
            )
        if any(
            m.source == "certificate" and m.issued_for == reservation_id
            for m in user.payment_methods.values()
        ):
            raise RuleViolationError(
                f"A compensation certificate was already sent for reservation {reservation_id}.",
                "Compensation is given once per reservation.",
            )
        n = len(res.passengers)
        if amount != COMPENSATION[kind] * n:
            raise RuleViolationError(
                f"{amount} is not the compensation the policy sets for this reservation.",
                f"A certificate is {COMPENSATION['cancelled']} per passenger for a cancelled flight "
                f"and {COMPENSATION['delayed']} per passenger for a delayed one.",
            )
        pid = f"certificate_{_short_hash([user_id, reservation_id], 7):07d}"
        certificate = Certificate(id=pid, amount=amount, issued_for=reservation_id)
        methods = {**user.payment_methods, pid: certificate}
        self.db.put("users", user_id, user.model_copy(update={"payment_methods": methods}))
        return certificate

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
    "AirlineTools",
]


# -- invariants ------------------------------------------------------------------------------
def _legs(res: Reservation | None) -> dict[tuple[str, str, str], int]:
    """Seats a reservation holds: (flight number, date, cabin) -> passengers (0 when
    cancelled or absent)."""
    if res is None or res.status != "active":
        return {}
    return {(f.flight_number, f.date, res.cabin): len(res.passengers) for f in res.flights}


def _net(res: Reservation | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in res.payment_history if res is not None else ():
        out[p.payment_id] = out.get(p.payment_id, 0) + p.amount
    return out


def invariant_violations(db: Database, everything: bool = False) -> list[str]:
    """The money and count rules of the Airline domain that ``db`` breaks (empty when sound).

    Invariants (docs/reward-design.md lists them):

    * per reservation and payment method, refunds never exceed payments;
    * a cancelled reservation has refunded every card what it paid (certificates are not
      refunded);
    * 1 to :data:`MAX_PASSENGERS` passengers; 0 <= non-free bags <= bags <=
      :data:`MAX_BAGS_PER_PASSENGER` per passenger;
    * gift card and certificate amounts are never negative; seats left are never negative;
    * seats move exactly with the reservations (a flight's seats left change by the
      passengers that reservations added or released on it since the base);
    * a gift card's balance moves exactly as the payments written on it since the base.

    Args:
        db: The state.
        everything: Check every record (slow); by default only records that differ from the
            base, which is checked once (the generator's output).
    """
    bad: list[str] = []
    changes = db.changes()

    def keys(table: str) -> list[str]:
        return list(db.keys(table)) if everything else [k for t, k in changes if t == table]

    seat_flow: dict[tuple[str, str, str], int] = {}
    card_flow: dict[str, int] = {}
    for rid in keys("reservations"):
        res = db.get("reservations", rid)
        if res is None:
            continue
        pays: dict[str, tuple[int, int]] = {}
        for p in res.payment_history:
            paid, refunded = pays.get(p.payment_id, (0, 0))
            pays[p.payment_id] = (paid + max(p.amount, 0), refunded + max(-p.amount, 0))
        for pid, (paid, refunded) in pays.items():
            if refunded > paid:
                bad.append(f"reservation {rid}: {pid} refunded {refunded} but paid {paid}")
            if res.status == "cancelled" and not pid.startswith("certificate") and paid != refunded:
                bad.append(f"reservation {rid}: cancelled, {pid} paid {paid}, got {refunded} back")
        n = len(res.passengers)
        if not 1 <= n <= MAX_PASSENGERS:
            bad.append(f"reservation {rid}: {n} passengers")
        if not 0 <= res.nonfree_baggages <= res.total_baggages <= MAX_BAGS_PER_PASSENGER * n:
            bad.append(
                f"reservation {rid}: {res.total_baggages} bags, {res.nonfree_baggages} non-free, "
                f"{n} passengers"
            )
        if not everything:
            before = reservation_table(db.base).get(rid)
            now_legs, old_legs = _legs(res), _legs(before)
            for leg in set(now_legs) | set(old_legs):
                held = now_legs.get(leg, 0) - old_legs.get(leg, 0)
                seat_flow[leg] = seat_flow.get(leg, 0) + held
            now_net, old_net = _net(res), _net(before)
            for pid in set(now_net) | set(old_net):
                card_flow[pid] = card_flow.get(pid, 0) + now_net.get(pid, 0) - old_net.get(pid, 0)
    for uid in keys("users"):
        user = db.get("users", uid)
        if user is None:
            continue
        base = None if everything else user_table(db.base).get(uid)
        for pid, method in user.payment_methods.items():
            if isinstance(method, GiftCard | Certificate) and method.amount < 0:
                bad.append(f"user {uid}: {pid} has {method.amount}")
            if not isinstance(method, GiftCard) or base is None:
                continue
            old = base.payment_methods.get(pid)
            moved = method.amount - (old.amount if isinstance(old, GiftCard) else 0)
            if moved != -card_flow.get(pid, 0):
                bad.append(
                    f"user {uid}: gift card {pid} moved by {moved}, its payments by "
                    f"{-card_flow.get(pid, 0)}"
                )
    for number in keys("flights"):
        flight = db.get("flights", number)
        base_flight = None if everything else flight_table(db.base).get(number)
        for day, instance in flight.dates.items():
            for cabin in CABINS:
                left = instance.available_seats.of(cabin)
                if left < 0:
                    bad.append(f"flight {number} {day}: {left} {cabin} seats left")
                if base_flight is None:
                    continue
                moved = left - base_flight.dates[day].available_seats.of(cabin)
                if moved != -seat_flow.get((number, day, cabin), 0):
                    bad.append(
                        f"flight {number} {day}: {cabin} seats moved by {moved}, reservations "
                        f"by {-seat_flow.get((number, day, cabin), 0)}"
                    )
    if not everything:  # a leg whose flight record never changed must have no seat flow
        for (number, day, cabin), held in seat_flow.items():
            if held and ("flights", number) not in changes:
                bad.append(f"flight {number} {day}: reservations hold {held} more {cabin} seats")
    return bad
