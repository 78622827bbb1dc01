"""The Airline write tools: every rule of ``policy.md`` a write can check, checked."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from environments.airline.generator import BAG_FEE, INSURANCE_FEE
from environments.airline.schema import (
    Cabin,
    Certificate,
    FlightType,
    Payment,
    Reservation,
    ReservedFlight,
    User,
    YesNo,
)
from environments.airline.tools.reads import AirlineReads
from environments.airline.tools.rules import (
    COMPENSATION,
    INSURED_REASONS,
    MAX_PAYMENTS,
    CancelReason,
    FlightLeg,
    PassengerInfo,
    PaymentSplit,
    _new_reservation_id,
    _short_hash,
)
from rods_env.errors import InvalidArgumentError, NotFoundError, RuleViolationError
from rods_env.tools import tool


class AirlineWrites(AirlineReads):
    """The Airline tools that write: bookings, cancellations, changes and compensation."""

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
