"""What every Airline skill draws on: the policy's words and constants, the gold run
(:class:`_Gold`: calls on a private fork), and small helpers (places, dates, payment
methods, the cheapest offer, retries over candidates)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from environments.airline.schema import CLOCK_KEY, Reservation
from environments.airline.tools import AirlineTools
from rods_env.database import Database
from rods_env.domain import Draft, SkillUnavailable, scattered
from rods_env.task import ToolCall, Turn, UserProfile
from rods_env.tools import to_jsonable
from rods_env.user import PERSONA_NAMES, persona_text

CABIN_WORDS = {"basic_economy": "basic economy", "economy": "economy", "business": "business"}
_DEPARTED = ("flying", "landed")
_ATTEMPTS = 300

_DEPARTED_WORDS = "departed|depart*|flying|landed|already left|took off|in the air"
_WINDOW = "24 hours|24-hour|24 hour|24h|one day|a day"
_BASIC = "basic economy|basic_economy|basic-economy"

REFUSAL_GROUNDS: dict[str, tuple[str, ...]] = {
    "departed": (_DEPARTED_WORDS, f"!{_BASIC}|member*"),
    "cancel_rules": (_WINDOW, "insurance|insur*", f"!depart*|flying|landed|{_BASIC}|member*"),
    "basic_economy": (_BASIC, "!24 hours|24-hour|24 hour|insur*|member*|depart*"),
    "compensation": (
        "membership|member*|regular|insurance|insur*|business",
        f"!24 hours|24-hour|24 hour|{_BASIC}|depart*",
    ),
}
"""What a refusal must name, by the rule that applies (required outputs with alternatives),
and the other rules' words it must not use (``!`` outputs: a reason that does not apply is
a wrong reason, and a template reciting every rule would otherwise pass every refusal): a
departed flight; the cancellation rules (booked more than 24 hours ago, and not insured or
insured for another reason); basic economy flights cannot change; compensation needs a
silver or gold membership, insurance or business."""


class _Skip(Exception):
    """The candidate entity does not fit; try another."""


class _Gold:
    """Builds gold turns by running the calls on a private fork of the database."""

    def __init__(self, db: Database) -> None:
        self.db = db.fork()
        self.tools = AirlineTools(self.db)
        self.tools.on_reset()
        self.calls: list[ToolCall] = []
        self.turns: list[Turn] = []

    def call(self, name: str, **arguments: Any) -> Any:
        """Run and record a gold call; its JSON output."""
        result = self.tools.call(name, arguments, render=False)
        if not result.ok:
            raise _Skip(f"{name}: {result.output}")
        self.calls.append(ToolCall(name=name, arguments=arguments))
        return to_jsonable(result.value)

    def record(self, name: str, **arguments: Any) -> None:
        """Record a read-only gold call already made, with what it answers used, on a
        state this fork equals for it (nothing is run or changed)."""
        self.calls.append(ToolCall(name=name, arguments=arguments))

    def probe(self, name: str, **arguments: Any) -> bool:
        """Whether a call would succeed now (nothing is recorded or changed)."""
        saved = self.db.checkpoint()
        result = self.tools.call(name, arguments, render=False)
        self.db.rollback(saved)
        return result.ok

    def end_turn(self, request: str, outputs: Sequence[str] = ()) -> None:
        """Close the current turn."""
        self.turns.append(Turn(request=request, calls=tuple(self.calls), outputs=tuple(outputs)))
        self.calls = []

    def status(self, flight_number: str, day: str) -> str:
        """Current status of a flight on a date."""
        return self.db.require("flights", flight_number).dates[day].status


# -- small helpers ---------------------------------------------------------------------------
def _now(db: Database) -> datetime:
    return datetime.fromisoformat(db.require("meta", CLOCK_KEY).now)


def _say_date(day: str) -> str:
    d = date.fromisoformat(day)
    return f"{d:%B} {d.day}"


def _place(db: Database, code: str) -> str:
    return f"{db.require('airports', code).city} ({code})"


def _full_name(p: Mapping[str, Any]) -> str:
    return f"{p['first_name']} {p['last_name']}"


def _join(words: Sequence[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


_BRANDS = {
    "visa": "Visa card",
    "mastercard": "Mastercard",
    "amex": "American Express card",
    "discover": "Discover card",
}


def _method_words(method: Mapping[str, Any]) -> str:
    """A payment method as the customer names it ("Visa card ending in 4081"), never by id."""
    if method["source"] == "credit_card":
        brand = _BRANDS.get(method["brand"], method["brand"])
        return f"{brand} ending in {method['last_four']}"
    if method["source"] == "gift_card":
        return "gift card"
    return "travel certificate"


def _describe_method(method: Mapping[str, Any]) -> str:
    return f"my {_method_words(method)}"


def _statuses(db: Database, res: Reservation) -> list[str]:
    return [db.require("flights", f.flight_number).dates[f.date].status for f in res.flights]


def _candidates(
    db: Database, rng: random.Random, keep: Callable[[Reservation], bool]
) -> Iterator[Reservation]:
    """Reservations that pass ``keep``, in a random order, filtered lazily."""
    return (r for r in scattered(list(db.values("reservations")), rng) if keep(r))


def _bookable_now(db: Database, res: Reservation) -> bool:
    return res.status == "active" and all(s == "available" for s in _statuses(db, res))


def _not_departed(db: Database, res: Reservation) -> bool:
    return res.status == "active" and not any(s in _DEPARTED for s in _statuses(db, res))


def _direct_legs(res: Reservation) -> bool:
    """One flight per direction."""
    return len(res.flights) == (1 if res.flight_type == "one_way" else 2)


def _profile(user: Mapping[str, Any], rng: random.Random, facts: dict[str, str]) -> UserProfile:
    persona = persona_text(rng.choice(PERSONA_NAMES))
    return UserProfile(name=_full_name(user["name"]), persona=persona, facts=facts)


def _draft(g: _Gold, user: Mapping[str, Any], rng: random.Random, facts: dict[str, str]) -> Draft:
    """The finished task, unless a traced number reads as part of a fact (a total of 202 would
    look user-given next to the date 2024-05-20, hiding the value flow from the signature)."""
    for call in (c for turn in g.turns for c in turn.calls):
        for value in _numbers(call.arguments):
            if value >= 10 and any(str(value) in fact for fact in facts.values()):
                raise _Skip(f"{value} is ambiguous with a fact")
    return Draft(user=_profile(user, rng, facts), turns=tuple(g.turns))


def _numbers(value: Any) -> list[int]:
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, int) and not isinstance(value, bool) else []


def _pay_options(
    user: Mapping[str, Any], rng: random.Random, *, cards_only: bool = False
) -> list[str]:
    """Credit cards and gift cards of the user, shuffled (credit cards first when cards_only)."""
    methods = list(user["payment_methods"].values())
    cards = [m["id"] for m in methods if m["source"] == "credit_card"]
    gifts = [m["id"] for m in methods if m["source"] == "gift_card"]
    rng.shuffle(cards)
    rng.shuffle(gifts)
    if cards_only:
        return cards
    both = cards + gifts
    rng.shuffle(both)
    return both


def _pick_payment(
    g: _Gold,
    rng: random.Random,
    user: Mapping[str, Any],
    name: str,
    avoid: frozenset[str] = frozenset(),
    **args: Any,
) -> str:
    for pid in _pay_options(user, rng):
        if pid not in avoid and g.probe(name, **args, payment_id=pid):
            return pid
    raise _Skip("no payment method works")


def _paid_with(res: Mapping[str, Any]) -> frozenset[str]:
    """Payment ids in a reservation's history."""
    return frozenset(p["payment_id"] for p in res["payment_history"])


def _card_for(res: Mapping[str, Any], pay: str | None, fresh: bool) -> frozenset[str]:
    """The payment ids a change of ``res`` must not use, so the value flow (hence the
    signature) is fixed: a *fresh* payment method is read from the customer's profile, never
    from the reservation's history (where the look-up just before would show it)."""
    paid = _paid_with(res)
    if pay is not None and fresh and pay in paid:
        raise _Skip("the payment method already paid this reservation")
    return paid if fresh else frozenset()


def _per_cabin(values: Any, cabin: str) -> int:
    """A cabin's seats or price from an offer's JSON (a dict) or from the search tool's own
    value (a :class:`CabinValues` record): :func:`_cheapest` decides the same on both."""
    return values[cabin] if isinstance(values, Mapping) else values.of(cabin)


def _cheapest(options: list[Any], cabin: str, n: int, after: int | None = None) -> Any:
    """The unique cheapest offer (a flight or a list of flights) with seats for ``n``."""

    def legs(o: Any) -> list[dict[str, Any]]:
        return o if isinstance(o, list) else [o]

    def dep_minutes(o: Any) -> int:
        h, m, _ = legs(o)[0]["scheduled_departure_time"].split(":")
        return int(h) * 60 + int(m)

    fit = [
        o
        for o in options
        if all(_per_cabin(f["available_seats"], cabin) >= n for f in legs(o))
        and (after is None or dep_minutes(o) >= after)
    ]
    if not fit:
        raise _Skip("no flight fits")
    fit.sort(key=lambda o: sum(_per_cabin(f["prices"], cabin) for f in legs(o)))
    prices = [sum(_per_cabin(f["prices"], cabin) for f in legs(o)) for o in fit[:2]]
    if len(prices) == 2 and prices[0] == prices[1]:
        raise _Skip("two cheapest flights cost the same")
    return legs(fit[0])


def _leg(f: Mapping[str, Any]) -> dict[str, str]:
    return {"flight_number": f["flight_number"], "date": f["date"]}


def _future_dates(db: Database) -> list[str]:
    """Dates from the day after tomorrow on (flights then are mostly bookable)."""
    first = next(iter(db.values("flights")))
    limit = (_now(db).date() + timedelta(days=2)).isoformat()
    return sorted(d for d in first.dates if d >= limit)


def _attempts(rng: random.Random, build: Callable[[], Draft], what: str) -> Draft:
    for _ in range(_ATTEMPTS):
        try:
            return build()
        except _Skip:
            continue
    raise SkillUnavailable(f"no entities fit {what}")


def _over_candidates(items: Iterable[Any], build: Callable[[Any], Draft], what: str) -> Draft:
    for item in itertools.islice(items, _ATTEMPTS):
        try:
            return build(item)
        except _Skip:
            continue
    raise SkillUnavailable(f"no entities fit {what}")
