"""The Airline toolkit's foundation: identity per episode, look-ups and the checks and
money movements the tools share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from itertools import pairwise

from environments.airline.generator import FREE_BAGS
from environments.airline.schema import (
    CABINS,
    CLOCK_KEY,
    FLIGHT_STATUSES,
    MEMBERSHIPS,
    Flight,
    FlightDate,
    Passenger,
    Reservation,
    User,
)
from environments.airline.tools.rules import (
    _DATE,
    _DEPARTED,
    _USER_HINT,
    MAX_BAGS_PER_PASSENGER,
    MAX_PASSENGERS,
    MIN_CONNECTION_MINUTES,
    FlightLeg,
    PassengerInfo,
)
from rods_env.database import Database
from rods_env.errors import InvalidArgumentError, NotFoundError, RuleViolationError
from rods_env.tools import Toolkit


class AirlineBase(Toolkit):
    """What every Airline tool stands on: the episode's database, who was identified in it,
    and the look-ups and checks the tools share (no tool of its own).

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
