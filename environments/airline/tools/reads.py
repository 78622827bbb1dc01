"""The Airline read tools."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from environments.airline.schema import Flight, Reservation, User
from environments.airline.tools.base import AirlineBase
from environments.airline.tools.rules import MIN_CONNECTION_MINUTES
from rods_env.errors import RuleViolationError
from rods_env.tools import tool


class AirlineReads(AirlineBase):
    """The Airline tools that read: users, reservations, airports, flights and their status."""

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
