"""Deterministic generation of the Airline database from ``(seed, size)``.

Only :class:`random.Random` seeded with an integer (or a string) is used (its integer
methods are stable across Python versions), with the built-in lists of :mod:`.catalog`, so
a digest of the tables can be pinned.

Long-context sizes (``long-4k``, ``long-8k``, ``long-16k``, ``long-32k``) are the
``default`` world with long histories: every record of ``default`` is there with the same
key and content, except that each customer also has ~1,300 to ~10,000 past reservations
(one-way trips that have landed, listed before their own and built only when looked up:
see :mod:`rods_env.padding`). A customer's record is then about ``n`` thousand tokens (4
characters a token) of a ``long-<n>k`` world. Flights, prices and seats are untouched, so
every search and every price is the same as in ``default``.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from types import MappingProxyType
from typing import Any

from environments.airline.catalog import (
    AIRPORTS,
    CARD_BRANDS,
    CITIES,
    FIRST_NAMES,
    LAST_NAMES,
    STREETS,
)
from environments.airline.schema import (
    CABINS,
    CLOCK_KEY,
    Address,
    Airport,
    CabinValues,
    Certificate,
    CreditCard,
    Flight,
    FlightDate,
    GiftCard,
    Meta,
    Name,
    Passenger,
    Payment,
    Reservation,
    ReservedFlight,
    User,
    flight_table,
    reservation_table,
    user_table,
)
from rods_env.database import Record, record_digest
from rods_env.errors import ConfigError
from rods_env.padding import DerivedTable, KeyCodec, long_size_tokens

NOW = datetime(2024, 5, 15, 15, 0, 0)
"""The fixed current time of every generated world."""

FREE_BAGS: dict[str, dict[str, int]] = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
"""Free checked bags per passenger, by membership tier and cabin (policy constants)."""

BAG_FEE = 50
"""Dollars per checked bag beyond the free allowance."""

INSURANCE_FEE = 30
"""Dollars of travel insurance per passenger."""

_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


@dataclass(frozen=True)
class SizeSpec:
    """Counts of one size preset.

    Attributes:
        users: Customers.
        airports: Airports served (at most ``len(AIRPORTS)``).
        flights: Daily flights.
        dates: Scheduled dates; ``days_before`` of them lie before the current date.
        reservations: Reservations.
        max_saved: Most saved passengers a user has.
        max_gift_cards: Most gift cards a user has.
        max_cards: Most credit cards a user has.
    """

    users: int
    airports: int
    flights: int
    dates: int
    days_before: int
    reservations: int
    max_saved: int = 4
    max_gift_cards: int = 2
    max_cards: int = 2


SIZES: dict[str, SizeSpec] = {
    "tiny": SizeSpec(users=30, airports=8, flights=60, dates=16, days_before=6, reservations=120),
    "default": SizeSpec(
        users=500, airports=20, flights=300, dates=30, days_before=14, reservations=2000
    ),
}
"""Size presets: ``tiny`` for tests, ``default`` comparable to τ-bench airline (long-context
sizes derive from ``default``: see the module docstring)."""

LONG_SIZES: tuple[str, ...] = ("long-4k", "long-8k", "long-16k", "long-32k")
"""Long-context worlds (the ``default`` world with long histories), by padding size."""

RESERVATION_CHARS = 10
"""Characters a reservation id takes in a customer's record (``"ABC123", ``)."""

MAX_PAST_RESERVATIONS = 13_000
"""Most past reservations a customer gets (the id space reserved per customer)."""

_PAST_IDS = KeyCodec(_ID_CHARS, 6, MAX_PAST_RESERVATIONS)


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def _minutes(hhmmss: str) -> int:
    h, m, _ = hhmmss.split(":")
    return int(h) * 60 + int(m)


class _World:
    """Mutable scratch state of one generation run."""

    def __init__(self, seed: int, spec: SizeSpec) -> None:
        self.rng = random.Random(seed)
        self.spec = spec
        self.today = NOW.date()
        start = self.today - timedelta(days=spec.days_before)
        self.dates = [(start + timedelta(days=i)).isoformat() for i in range(spec.dates)]
        self.airports = AIRPORTS[: spec.airports]
        self.flights: dict[str, Flight] = {}
        self.by_origin: dict[str, list[Flight]] = {}
        self.users: dict[str, User] = {}
        self.reservations: dict[str, Reservation] = {}
        self.taken_ids: set[str] = set()

    # -- flights ---------------------------------------------------------------------------
    def _status(self, day: date, dep: int, arr: int) -> str:
        rng = self.rng
        now_min = NOW.hour * 60 + NOW.minute
        if day < self.today:
            return "cancelled" if rng.random() < 0.05 else "landed"
        if day == self.today:
            if dep <= now_min:
                if rng.random() < 0.04:
                    return "cancelled"
                return "landed" if arr <= now_min else "flying"
            r = rng.random()
            return "cancelled" if r < 0.1 else "delayed" if r < 0.35 else "on time"
        if day == self.today + timedelta(days=1):
            r = rng.random()
            return "cancelled" if r < 0.08 else "delayed" if r < 0.2 else "available"
        return "cancelled" if rng.random() < 0.03 else "available"

    def make_flights(self) -> None:
        rng = self.rng
        codes = [a for a, _ in self.airports]
        durations: dict[tuple[str, str], int] = {}
        for k in range(self.spec.flights):
            origin = codes[k % len(codes)]
            destination = rng.choice([c for c in codes if c != origin])
            pair = (min(origin, destination), max(origin, destination))
            if pair not in durations:
                durations[pair] = rng.randint(2, 10) * 30  # 1 to 5 hours, both directions
            duration = durations[pair]
            dep = rng.randint(10, (23 * 60 + 30 - duration) // 30) * 30
            arr = dep + duration
            base_be = 40 + duration // 4
            dates: dict[str, FlightDate] = {}
            for d in self.dates:
                day = date.fromisoformat(d)
                be = base_be + rng.randint(0, 60)
                eco = be + rng.randint(40, 120)
                bus = eco + rng.randint(150, 400)
                dates[d] = FlightDate(
                    status=self._status(day, dep, arr),
                    available_seats=CabinValues(
                        basic_economy=rng.randint(0, 20),
                        economy=rng.randint(0, 20),
                        business=rng.randint(0, 10),
                    ),
                    prices=CabinValues(basic_economy=be, economy=eco, business=bus),
                )
            number = f"RD{100 + k}"
            flight = Flight(
                flight_number=number,
                origin=origin,
                destination=destination,
                scheduled_departure_time=_hhmm(dep),
                scheduled_arrival_time=_hhmm(arr),
                dates=dates,
            )
            self.flights[number] = flight
            self.by_origin.setdefault(origin, []).append(flight)

    # -- users -----------------------------------------------------------------------------
    def _person(self) -> tuple[str, str, str]:
        rng = self.rng
        dob = date(1950, 1, 1) + timedelta(days=rng.randint(0, 55 * 365))
        return rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES), dob.isoformat()

    def _payment_id(self, kind: str) -> str:
        while True:
            pid = f"{kind}_{self.rng.randint(1000000, 9999999)}"
            if pid not in self.taken_ids:
                self.taken_ids.add(pid)
                return pid

    def make_users(self) -> None:
        rng, spec = self.rng, self.spec
        for _ in range(spec.users):
            first, last, dob = self._person()
            while True:
                user_id = f"{first.lower()}_{last.lower()}_{rng.randint(1000, 9999)}"
                if user_id not in self.users:
                    break
            methods: dict[str, CreditCard | GiftCard | Certificate] = {}
            for _ in range(rng.randint(1, spec.max_cards)):
                pid = self._payment_id("credit_card")
                methods[pid] = CreditCard(
                    id=pid, brand=rng.choice(CARD_BRANDS), last_four=f"{rng.randint(0, 9999):04d}"
                )
            for _ in range(rng.randint(0, spec.max_gift_cards)):
                pid = self._payment_id("gift_card")
                methods[pid] = GiftCard(id=pid, amount=rng.randint(0, 600))
            if rng.random() < 0.4:
                pid = self._payment_id("certificate")
                methods[pid] = Certificate(id=pid, amount=rng.randint(2, 10) * 50)
            saved = tuple(
                Passenger(first_name=f, last_name=ln, dob=d)
                for f, ln, d in (self._person() for _ in range(rng.randint(0, spec.max_saved)))
            )
            city, state, zip3 = rng.choice(CITIES)
            r = rng.random()
            self.users[user_id] = User(
                user_id=user_id,
                name=Name(first_name=first, last_name=last),
                address=Address(
                    address1=f"{rng.randint(1, 999)} {rng.choice(STREETS)}",
                    city=city,
                    state=state,
                    zip=f"{zip3}{rng.randint(0, 99):02d}",
                ),
                email=f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com",
                dob=dob,
                membership="gold" if r < 0.2 else "silver" if r < 0.5 else "regular",
                payment_methods=methods,
                saved_passengers=saved,
            )

    # -- reservations ----------------------------------------------------------------------
    def _reservation_id(self) -> str:
        while True:
            rid = "".join(self.rng.choice(_ID_CHARS) for _ in range(6))
            if rid not in self.taken_ids:
                self.taken_ids.add(rid)
                return rid

    def _path(self, origin: str, stops: int) -> list[Flight] | None:
        """A direct or one-stop path from ``origin``; None when no flight leaves it."""
        rng = self.rng
        outs = self.by_origin.get(origin, [])
        if not outs:
            return None
        first = rng.choice(outs)
        if stops == 0:
            return [first]
        arrive = _minutes(first.scheduled_arrival_time)
        nexts = [
            f
            for f in self.by_origin.get(first.destination, [])
            if f.destination != origin and _minutes(f.scheduled_departure_time) >= arrive + 60
        ]
        if not nexts:
            return [first]
        return [first, rng.choice(nexts)]

    def _return_path(self, origin: str, destination: str, stops: int) -> list[Flight] | None:
        """A direct or one-stop path from ``destination`` back to ``origin``."""
        direct = [f for f in self.by_origin.get(destination, []) if f.destination == origin]
        if stops == 0 or not direct:
            if direct:
                return [self.rng.choice(direct)]
            for f in self.by_origin.get(destination, []):
                arrive = _minutes(f.scheduled_arrival_time)
                for g in self.by_origin.get(f.destination, []):
                    if (
                        g.destination == origin
                        and _minutes(g.scheduled_departure_time) >= arrive + 60
                    ):
                        return [f, g]
            return None
        return [self.rng.choice(direct)]

    def make_reservations(self) -> None:
        rng, spec = self.rng, self.spec
        user_ids = list(self.users)
        owned: dict[str, list[str]] = {u: [] for u in user_ids}
        codes = [a for a, _ in self.airports]
        made = 0
        while made < spec.reservations:
            user = self.users[rng.choice(user_ids)]
            origin = rng.choice(codes)
            stops = 1 if rng.random() < 0.3 else 0
            out_index = rng.randrange(0, len(self.dates) - 1)
            out_day = self.dates[out_index]
            outbound = self._path(origin, stops)
            if not outbound:
                continue
            destination = outbound[-1].destination
            legs: list[tuple[Flight, str]] = [(f, out_day) for f in outbound]
            flight_type = "one_way"
            if rng.random() < 0.5:
                back_index = min(len(self.dates) - 1, out_index + rng.randint(1, 5))
                back = self._return_path(origin, destination, stops)
                if back:
                    flight_type = "round_trip"
                    legs += [(f, self.dates[back_index]) for f in back]
            r = rng.random()
            cabin = "basic_economy" if r < 0.3 else "economy" if r < 0.75 else "business"
            n = 1 + min(4, int(rng.expovariate(1.2)))
            people = [
                Passenger(
                    first_name=user.name.first_name, last_name=user.name.last_name, dob=user.dob
                )
            ]
            people += list(user.saved_passengers)
            while len(people) < n:
                f, ln, d = self._person()
                people.append(Passenger(first_name=f, last_name=ln, dob=d))
            if rng.random() < 0.2 and len(people) > 1:
                passengers = tuple(rng.sample(people[1:], min(n, len(people) - 1)))
            else:
                passengers = tuple(people[:n])
            n = len(passengers)
            flights = tuple(
                ReservedFlight(
                    flight_number=f.flight_number,
                    origin=f.origin,
                    destination=f.destination,
                    date=d,
                    price=f.dates[d].prices.of(cabin),
                )
                for f, d in legs
            )
            first_dep = datetime.fromisoformat(f"{out_day}T{outbound[0].scheduled_departure_time}")
            latest = min(first_dep - timedelta(hours=2), NOW)
            if first_dep > NOW and rng.random() < 0.12:
                created = NOW - timedelta(minutes=rng.randint(30, 23 * 60))
            else:
                created = latest - timedelta(minutes=rng.randint(60, 40 * 24 * 60))
            insurance = "yes" if rng.random() < 0.35 else "no"
            total_bags = rng.randint(0, 2 * n)
            free = FREE_BAGS[user.membership][cabin] * n
            nonfree = max(0, total_bags - free)
            amount = sum(f.price for f in flights) * n + nonfree * BAG_FEE
            amount += INSURANCE_FEE * n if insurance == "yes" else 0
            cards = [m for m in user.payment_methods.values() if m.source == "credit_card"]
            gifts = [m for m in user.payment_methods.values() if m.source == "gift_card"]
            pay_with = rng.choice(gifts) if gifts and rng.random() < 0.3 else rng.choice(cards)
            history = [Payment(payment_id=pay_with.id, amount=amount)]
            status = "active"
            if rng.random() < 0.05:
                status = "cancelled"
                history.append(Payment(payment_id=pay_with.id, amount=-amount))
            rid = self._reservation_id()
            self.reservations[rid] = Reservation(
                reservation_id=rid,
                user_id=user.user_id,
                origin=origin,
                destination=destination,
                flight_type=flight_type,
                cabin=cabin,
                flights=flights,
                passengers=passengers,
                payment_history=tuple(history),
                created_at=created.isoformat(timespec="seconds"),
                total_baggages=total_bags,
                nonfree_baggages=nonfree,
                insurance=insurance,
                status=status,
            )
            owned[user.user_id].append(rid)
            made += 1
        for uid, rids in owned.items():
            rids.sort(key=lambda r: self.reservations[r].created_at)
            self.users[uid] = self.users[uid].model_copy(update={"reservations": tuple(rids)})


def generate(seed: int, size: str) -> dict[str, dict[str, Record]]:
    """Generate the Airline tables for ``(seed, size)``.

    Args:
        seed: Random seed; equal seeds give equal tables.
        size: ``"tiny"``, ``"default"`` (see :data:`SIZES`) or a long size (see the module
            docstring).

    Returns:
        Table name to (key to record): ``meta``, ``airports``, ``flights``, ``users``,
        ``reservations``.

    Raises:
        ConfigError: for an unknown size.
    """
    tokens = long_size_tokens(size)
    if tokens is not None and size in LONG_SIZES:
        return _long_world(seed, tokens)
    spec = SIZES.get(size)
    if spec is None:
        raise ConfigError(
            f"unknown airline size '{size}'; sizes: {', '.join((*SIZES, *LONG_SIZES))}"
        )
    world = _World(seed, spec)
    world.make_flights()
    world.make_users()
    world.make_reservations()
    return {
        "meta": {CLOCK_KEY: Meta(now=NOW.isoformat(timespec="seconds"))},
        "airports": {code: Airport(iata=code, city=city) for code, city in world.airports},
        "flights": dict(world.flights),
        "users": dict(world.users),
        "reservations": dict(world.reservations),
    }


@functools.lru_cache(maxsize=2)
def _default_tables(seed: int) -> dict[str, dict[str, Record]]:
    return generate(seed, "default")


def _long_world(seed: int, tokens: int) -> dict[str, Any]:
    """The ``default`` world of ``seed`` with long histories (see the module docstring)."""
    base = _default_tables(seed)
    users, reservations = user_table(base), reservation_table(base)
    flights = sorted(flight_table(base).values(), key=lambda f: f.flight_number)
    past = min(MAX_PAST_RESERVATIONS, tokens * 4 * 4 // (5 * RESERVATION_CHARS))
    owners = list(users)
    owner_index = {uid: i for i, uid in enumerate(owners)}
    today = NOW.date().isoformat()

    def past_ids(user: User) -> list[str]:
        index = owner_index[user.user_id]
        return [rid for rid in _PAST_IDS.encode_range(index, past) if rid not in reservations]

    def longer_history(record: Record) -> Record:
        assert isinstance(record, User)
        return record.model_copy(update={"reservations": (*past_ids(record), *record.reservations)})

    def past_trip(rid: str) -> Reservation | None:
        decoded = _PAST_IDS.decode(rid)
        if decoded is None or rid in reservations:
            return None
        index, i = decoded
        if index >= len(owners) or i >= past:
            return None
        user = users[owners[index]]
        rng = random.Random(f"airline-past-trip:{seed}:{rid}")
        flight = rng.choice(flights)
        day = rng.choice([d for d in flight.dates if d < today])
        cabin = rng.choice(CABINS)
        price = flight.dates[day].prices.of(cabin)
        card = sorted(m for m, v in user.payment_methods.items() if v.source == "credit_card")[0]
        created = datetime.fromisoformat(f"{day}T{flight.scheduled_departure_time}")
        created -= timedelta(days=rng.randint(3, 60))
        me = Passenger(first_name=user.name.first_name, last_name=user.name.last_name, dob=user.dob)
        return Reservation(
            reservation_id=rid,
            user_id=user.user_id,
            origin=flight.origin,
            destination=flight.destination,
            flight_type="one_way",
            cabin=cabin,
            flights=(
                ReservedFlight(
                    flight_number=flight.flight_number,
                    origin=flight.origin,
                    destination=flight.destination,
                    date=day,
                    price=price,
                ),
            ),
            passengers=(me,),
            payment_history=(Payment(payment_id=card, amount=price),),
            created_at=created.isoformat(timespec="seconds"),
            total_baggages=0,
            nonfree_baggages=0,
            insurance="no",
        )

    tables: dict[str, Any] = dict(base)
    tables["users"] = MappingProxyType(
        DerivedTable(users, transform=longer_history, cache_size=max(16, 400_000 // past))
    )
    tables["reservations"] = MappingProxyType(
        DerivedTable(reservations, virtual=past_trip, cache_size=256)
    )
    return tables


def tables_digest(tables: Mapping[str, Mapping[str, Record]]) -> str:
    """Canonical sha256 of whole tables (used to pin the generated data in tests)."""
    h = hashlib.sha256()
    for table in sorted(tables):
        for key in sorted(tables[table]):
            h.update(f"{table}\x1f{key}\x1f{record_digest(tables[table][key])}\x1e".encode())
    return h.hexdigest()


__all__ = [
    "BAG_FEE",
    "CABINS",
    "FREE_BAGS",
    "INSURANCE_FEE",
    "NOW",
    "SIZES",
    "generate",
    "tables_digest",
]
