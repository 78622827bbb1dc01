"""Skills of the Airline domain: task generators with preconditions, gold calls and user facts.

Conventions every skill follows:

* The user is identified first: the first gold call is ``get_user_details``. Requests never
  state the user id; it is the fact ``"user id"``, which the agent has to ask for.
* Gold calls run on a private fork of the database while the task is built, so every value
  a later call uses (flight numbers, prices, totals) is read from an earlier call's output,
  stated in a fact, or is a policy constant, and a task whose gold call fails is never made.
* Refusals: the gold has look-ups and no write; the turn requires the id of the reservation
  the request was about (the policy tells the agent to name it), a refusal
  (:data:`rods_env.rewards.REFUSAL`) and the rule that applies (:data:`REFUSAL_GROUNDS`), so
  echoing the customer's request, which names the reservation, passes nothing.
* Information requests: the outputs are values exactly as the tools print them (a flight
  number, a status, a whole-dollar amount).
* Facts hold what a customer knows, as a customer says it: their user id, reservation
  ids, dates (``"2024-05-20"``), airport codes, names; a cabin in words (``"basic
  economy"``) and a payment method by its brand and last digits (``"Visa card ending in
  4081"``), never an internal id such as ``credit_card_4274081`` (the agent finds that in
  the profile). Fact labels are lower case (the scripted user matches them against the
  agent's lower-cased question). Numbers the user knows (bags) are also stated in the
  request.
* Structure follows the shape: a skill at a given shape always yields the same signature
  (synthesis "resample"), and growing any axis of ``limits`` by one adds gold calls
  (synthesis "expand"). Quantities that add no call (passengers, bags added) are drawn
  freely and are not shape axes.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from environments.airline.generator import BAG_FEE, FREE_BAGS, INSURANCE_FEE
from environments.airline.schema import CABINS, CLOCK_KEY, Reservation
from environments.airline.tools import COMPENSATION, AirlineTools
from rods_env.database import Database
from rods_env.domain import Draft, Skill, SkillUnavailable, scattered
from rods_env.rewards import REFUSAL
from rods_env.task import Task, ToolCall, Turn, UserProfile
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
        if all(f["available_seats"][cabin] >= n for f in legs(o))
        and (after is None or dep_minutes(o) >= after)
    ]
    if not fit:
        raise _Skip("no flight fits")
    fit.sort(key=lambda o: sum(f["prices"][cabin] for f in legs(o)))
    prices = [sum(f["prices"][cabin] for f in legs(o)) for o in fit[:2]]
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


# -- booking ---------------------------------------------------------------------------------
def _book(db: Database, rng: random.Random, shape: Mapping[str, int], stops: int) -> Draft:
    """Shape: ``legs`` 1 (one way) or 2 (round trip); ``payments`` 1 (one method) or 2 (a
    travel certificate first, the rest on a credit card: one more calculation). The number of
    passengers (1 to 4 unless ``shape["passengers"]`` fixes it) changes no call."""
    n = int(shape["passengers"]) if "passengers" in shape else rng.choice([1, 1, 2, 2, 3, 4])
    round_trip = int(shape.get("legs", 1)) >= 2
    split_pay = int(shape.get("payments", 1)) >= 2
    future = _future_dates(db)
    users = sorted(
        u.user_id
        for u in db.values("users")
        if len(u.saved_passengers) >= n - 1
        and (not split_pay or any(m.source == "certificate" for m in u.payment_methods.values()))
    )
    codes = sorted(db.keys("airports"))
    flights = list(db.values("flights"))
    if not users:
        raise SkillUnavailable(f"no user fits a booking of shape {dict(shape)}")
    search = "search_direct_flight" if stops == 0 else "search_onestop_flight"

    def build() -> Draft:
        uid = rng.choice(users)
        cabin = rng.choice(CABINS)
        if stops == 0:
            f = rng.choice(flights)
            origin, destination = f.origin, f.destination
        else:
            origin, destination = rng.sample(codes, 2)
        i = rng.randrange(0, len(future) - (1 if round_trip else 0))
        day = future[i]
        back = future[min(len(future) - 1, i + rng.randint(1, 4))] if round_trip else None
        after = rng.choice([None, None, 8 * 60, 12 * 60])
        g = _Gold(db)
        user = g.call("get_user_details", user_id=uid)
        offers = g.call(search, origin=origin, destination=destination, date=day)
        chosen = _cheapest(offers, cabin, n, after)
        if back is not None:
            offers = g.call(search, origin=destination, destination=origin, date=back)
            chosen += _cheapest(offers, cabin, n)
        me = {
            "first_name": user["name"]["first_name"],
            "last_name": user["name"]["last_name"],
            "dob": user["dob"],
        }
        saved = list(user["saved_passengers"])
        if len(saved) >= n and rng.random() < 0.2:
            people = rng.sample(saved, n)
            who = _join([_full_name(p) for p in people])
        else:
            people = [me, *rng.sample(saved, n - 1)]
            who = "just me" if n == 1 else "me, " + _join([_full_name(p) for p in people[1:]])
            if n == 2:
                who = f"me and {_full_name(people[1])}"
        bags = rng.randint(0, n + 1)
        insurance = rng.choice(["yes", "no"])
        nonfree = max(0, bags - FREE_BAGS[user["membership"]][cabin] * n)
        prices = [f["prices"][cabin] for f in chosen]
        fare = " + ".join(str(p) for p in prices)
        expr = f"({fare}) * {n}" if len(prices) > 1 else f"{fare} * {n}"
        if insurance == "yes":
            expr += f" + {INSURANCE_FEE} * {n}"
        if nonfree:
            expr += f" + {BAG_FEE} * {nonfree}"
        total = g.call("calculate", expression=expr)
        methods = user["payment_methods"]
        ordered = sorted(methods.values(), key=lambda m: m["id"])
        cards = [m["id"] for m in ordered if m["source"] == "credit_card"]
        if split_pay:
            # the rest is at least 10 so that it is traced as a value (see rods_env.signature)
            certs = [
                m for m in ordered if m["source"] == "certificate" and m["amount"] <= total - 10
            ]
            if not certs:
                raise _Skip("no certificate worth less than the total")
            cert = rng.choice(certs)
            rest = g.call("calculate", expression=f"{total} - {cert['amount']}")
            split = [(cert["id"], cert["amount"]), (rng.choice(cards), rest)]
            pay_words = (
                f"{_describe_method(cert)} first and the rest on "
                f"{_describe_method(methods[split[1][0]])}"
            )
        else:
            single = [
                m["id"]
                for m in ordered
                if m["source"] == "credit_card"
                or (m["source"] == "gift_card" and m["amount"] >= total)
            ]
            pid = rng.choice(single)
            split = [(pid, total)]
            pay_words = _describe_method(methods[pid])
        flight_type = "round_trip" if round_trip else "one_way"
        g.call(
            "book_reservation",
            user_id=uid,
            origin=origin,
            destination=destination,
            flight_type=flight_type,
            cabin=cabin,
            flights=[_leg(f) for f in chosen],
            passengers=people,
            payment_methods=[{"payment_id": pid, "amount": amount} for pid, amount in split],
            total_baggages=bags,
            insurance=insurance,
        )
        kind = "direct flight" if stops == 0 else "one-stop itinerary"
        trip = "a round trip" if round_trip else "a one-way trip"
        when = f"on {_say_date(day)}" + (f", coming back on {_say_date(back)}" if back else "")
        limit = f" leaving at {after // 60}:00 or later" if after else ""
        plural = "s" if bags > 1 else ""
        bag_words = "no checked bags" if bags == 0 else f"{bags} checked bag{plural} in total"
        ins_words = "with travel insurance" if insurance == "yes" else "without travel insurance"
        o, d = _place(db, origin), _place(db, destination)
        cab = CABIN_WORDS[cabin]
        how = "round trip" if round_trip else "one way"
        request = rng.choice(
            [
                f"I'd like to book {trip} from {o} to {d} {when}, in {cab}, for {who}. Please "
                f"take the cheapest {kind}{limit}. We'll have {bag_words}, {ins_words}, and "
                f"I'll pay with {pay_words}.",
                f"Can you book {cab} seats for {who} from {o} to {d} {when}? "
                f"{trip.capitalize()}, the cheapest {kind}{limit} please. "
                f"{bag_words.capitalize()}, {ins_words}; pay with {pay_words}.",
                f"I need to fly {how} from {o} to {d} {when}. It's for {who}, {cab} cabin, "
                f"cheapest {kind}{limit}. Put {bag_words} on it, {ins_words}, and charge "
                f"{pay_words}.",
            ]
        )
        facts = {
            "user id": uid,
            "origin": origin,
            "destination": destination,
            "date": day,
            **({"return date": back} if back else {}),
            "trip type": flight_type.replace("_", " "),
            "cabin": CABIN_WORDS[cabin],
            "passengers": ", ".join(_full_name(p) for p in people),
            "checked bags": str(bags),
            "insurance": insurance,
            "payment method": " and ".join(_method_words(methods[pid]) for pid, _ in split),
        }
        g.end_turn(request)
        return _draft(g, user, rng, facts)

    return _attempts(rng, build, f"booking {dict(shape)}")


def book_direct(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Book the cheapest direct flight(s) for the user and some saved passengers."""
    return _book(db, rng, shape, stops=0)


def book_onestop(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Book the cheapest one-stop itinerary (each direction) for the user."""
    return _book(db, rng, shape, stops=1)


# -- cancelling ------------------------------------------------------------------------------
_REASON_WORDS = {
    "change of plan": "my plans changed",
    "other": "of something personal",
    "health": "I'm sick and can't travel",
    "weather": "a storm is forecast where I'm going",
    "airline cancelled flight": "you cancelled one of my flights",
}


def _allowed_reason(db: Database, res: Reservation, rng: random.Random) -> str | None:
    """A reason the policy accepts for cancelling ``res`` (none of its flights being
    cancelled by the airline; that case is its own skill), or None."""
    statuses = _statuses(db, res)
    if res.status != "active" or any(s in (*_DEPARTED, "cancelled") for s in statuses):
        return None
    if res.insurance == "yes" and rng.random() < 0.6:
        return rng.choice(["health", "weather"])
    recent = _now(db) - datetime.fromisoformat(res.created_at) <= timedelta(hours=24)
    if recent or res.cabin == "business":
        return rng.choice(["change of plan", "change of plan", "other"])
    return None


def cancel(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Cancel ``reservations`` reservations that the policy allows to cancel, for one reason
    (booked within 24 hours, business cabin, or insured and a covered reason)."""
    k = int(shape.get("reservations", 1))
    users = sorted(db.keys("users"))
    rng.shuffle(users)

    def build(uid: str) -> Draft:
        user = db.require("users", uid)
        by_reason: dict[str, list[str]] = {}
        for rid in user.reservations:
            reason = _allowed_reason(db, db.require("reservations", rid), rng)
            if reason is not None:
                by_reason.setdefault(reason, []).append(rid)
        groups = sorted((r, ids) for r, ids in by_reason.items() if len(ids) >= k)
        if not groups:
            raise _Skip("nothing to cancel")
        reason, ids = rng.choice(groups)
        chosen = rng.sample(ids, k)
        g = _Gold(db)
        profile = g.call("get_user_details", user_id=uid)
        for rid in chosen:
            g.call("get_reservation_details", reservation_id=rid)
            g.call("cancel_reservation", reservation_id=rid, reason=reason)
        which = _join(chosen)
        word = "reservation" if k == 1 else "reservations"
        request = rng.choice(
            [
                f"I need to cancel my {word} {which} because {_REASON_WORDS[reason]}.",
                f"Please cancel {word} {which}; {_REASON_WORDS[reason]}.",
                f"Hi, {_REASON_WORDS[reason]}, so I want to cancel my {word} and get a refund.",
            ]
        )
        facts = {"user id": uid, "reservation id": ", ".join(chosen), "reason": reason}
        g.end_turn(request)
        return _draft(g, profile, rng, facts)

    return _over_candidates(users, build, f"cancel {dict(shape)}")


def cancel_after_flight_cancelled(
    db: Database, rng: random.Random, shape: Mapping[str, int]
) -> Draft:
    """Cancel a reservation one of whose flights the airline cancelled (checked first)."""

    def keep(res: Reservation) -> bool:
        statuses = _statuses(db, res)
        return (
            res.status == "active"
            and "cancelled" in statuses
            and not any(s in _DEPARTED for s in statuses)
        )

    def build(res: Reservation) -> Draft:
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        g.call("get_reservation_details", reservation_id=res.reservation_id)
        bad = next(f for f in res.flights if g.status(f.flight_number, f.date) == "cancelled")
        g.call("get_flight_status", flight_number=bad.flight_number, date=bad.date)
        rid = res.reservation_id
        g.call("cancel_reservation", reservation_id=rid, reason="airline cancelled flight")
        trip = f"flight {bad.flight_number} on {_say_date(bad.date)}"
        request = rng.choice(
            [
                f"You cancelled my {trip}, so I want to cancel my whole reservation {rid} and "
                "get my money back.",
                f"My {trip} was cancelled by the airline. Please cancel reservation {rid}.",
                f"Since {trip} was cancelled, I no longer need booking {rid}. Cancel it please.",
            ]
        )
        facts = {
            "user id": res.user_id,
            "reservation id": rid,
            "reason": "airline cancelled flight",
        }
        g.end_turn(request)
        return _draft(g, user, rng, facts)

    what = "cancelling after an airline cancellation"
    return _over_candidates(_candidates(db, rng, keep), build, what)


def cancel_refused(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """A cancellation the policy forbids: look-ups, no write, name the reservation."""

    def keep(res: Reservation) -> bool:
        return res.status == "active" and "cancelled" not in _statuses(db, res)

    def build(res: Reservation) -> Draft:
        reason = rng.choice(["change of plan", "other", "health", "weather"])
        g = _Gold(db)
        profile = g.call("get_user_details", user_id=res.user_id)
        if g.probe("cancel_reservation", reservation_id=res.reservation_id, reason=reason):
            raise _Skip("this cancellation is allowed")
        g.call("get_reservation_details", reservation_id=res.reservation_id)
        rid = res.reservation_id
        why = _REASON_WORDS[reason]
        request = rng.choice(
            [
                f"I want to cancel my reservation {rid}, {why}. Full refund please.",
                f"Please cancel booking {rid} for me; {why}.",
                f"Hello, {why} and I'd like to cancel reservation {rid}.",
            ]
        )
        facts = {"user id": res.user_id, "reservation id": rid, "reason": reason}
        rule = "departed" if any(s in _DEPARTED for s in _statuses(db, res)) else "cancel_rules"
        g.end_turn(request, outputs=(rid, REFUSAL, *REFUSAL_GROUNDS[rule]))
        return _draft(g, profile, rng, facts)

    return _over_candidates(_candidates(db, rng, keep), build, "a refused cancellation")


# -- reservation changes (also the turns of the multi-turn skill) ------------------------------
def _op_upgrade(
    g: _Gold,
    rng: random.Random,
    user: Mapping[str, Any],
    rid: str,
    facts: dict[str, str],
    pay: str | None,
    cabin: str | None = None,
    fresh: bool = True,
) -> str:
    res = g.call("get_reservation_details", reservation_id=rid)
    avoid = _card_for(res, pay, fresh)
    higher = [c for c in CABINS if CABINS.index(c) > CABINS.index(res["cabin"])]
    if not higher or (cabin is not None and cabin not in higher):
        raise _Skip("no higher cabin")
    cabin = cabin or rng.choice(higher)
    if pay is None:
        pay = _pick_payment(
            g, rng, user, "update_reservation_cabin", avoid, reservation_id=rid, cabin=cabin
        )
    g.call("update_reservation_cabin", reservation_id=rid, cabin=cabin, payment_id=pay)
    facts["cabin"] = CABIN_WORDS[cabin]
    facts["payment method"] = _method_words(user["payment_methods"][pay])
    method = _describe_method(user["payment_methods"][pay])
    return rng.choice(
        [
            f"I'd like to upgrade my reservation {rid} to {CABIN_WORDS[cabin]} for all flights, "
            f"paying the difference with {method}.",
            f"Can you move everyone on booking {rid} up to {CABIN_WORDS[cabin]}? Charge {method}.",
            f"Please change the cabin of reservation {rid} to {CABIN_WORDS[cabin]}; use {method} "
            "for any difference.",
        ]
    )


def _op_bags(
    g: _Gold,
    rng: random.Random,
    user: Mapping[str, Any],
    rid: str,
    facts: dict[str, str],
    pay: str | None,
    added: int,
    label: str = "total checked bags",
    fresh: bool = True,
) -> str:
    """Bring the reservation to ``added`` bags beyond its free allowance (or beyond its bags,
    when it already has more): always a fee, so always a payment (a fixed structure)."""
    res = g.call("get_reservation_details", reservation_id=rid)
    avoid = _card_for(res, pay, fresh)
    free = FREE_BAGS[user["membership"]][res["cabin"]] * len(res["passengers"])
    total = max(res["total_baggages"], free) + added
    args: dict[str, Any] = {"reservation_id": rid, "total_baggages": total}
    if g.probe("update_reservation_baggages", **args):
        raise _Skip("these bags need no payment")
    if pay is None:
        pay = _pick_payment(g, rng, user, "update_reservation_baggages", avoid, **args)
    args["payment_id"] = pay
    facts["payment method"] = _method_words(user["payment_methods"][pay])
    g.call("update_reservation_baggages", **args)
    facts[label] = str(total)
    fee = f" If there is a fee, use {_describe_method(user['payment_methods'][pay])}."
    return rng.choice(
        [
            f"I want {total} checked bags in total on reservation {rid}.{fee}",
            f"Please add bags to booking {rid} so that we have {total} checked bags "
            f"altogether.{fee}",
            f"We are bringing more luggage: make it {total} checked bags on reservation "
            f"{rid}.{fee}",
        ]
    )


def _op_passengers(
    g: _Gold,
    rng: random.Random,
    user: Mapping[str, Any],
    rid: str,
    facts: dict[str, str],
    changes: int,
) -> str:
    """Replace ``changes`` passengers with saved passengers; at least one passenger stays."""
    res = g.call("get_reservation_details", reservation_id=rid)
    people = [dict(p) for p in res["passengers"]]
    on_board = {_full_name(p) for p in people}
    spare = [p for p in user["saved_passengers"] if _full_name(p) not in on_board]
    if len(people) <= changes or len(spare) < changes:
        raise _Skip("not enough passengers to keep or to add")
    dobs = {p["dob"] for p in people}
    spare = [p for p in spare if p["dob"] not in dobs]  # keeps the value flow unambiguous
    if len(spare) < changes:
        raise _Skip("no saved passenger to add")
    rng.shuffle(spare)
    asks = []
    for i in sorted(rng.sample(range(len(people)), changes)):
        new = dict(spare.pop())
        asks.append(f"replace {_full_name(people[i])} with {_full_name(new)}")
        people[i] = new
    g.call("update_reservation_passengers", reservation_id=rid, passengers=people)
    what = _join(asks)
    facts["new passengers"] = ", ".join(a.split(" with ")[1] for a in asks)
    return rng.choice(
        [
            f"On reservation {rid}, please {what} (saved in my profile).",
            f"I need to update the travellers on booking {rid}: {what}; their details are in "
            "my profile.",
            f"Could you {what} on my reservation {rid}? They are saved passengers of mine.",
        ]
    )


def _op_change(
    g: _Gold,
    rng: random.Random,
    user: Mapping[str, Any],
    rid: str,
    facts: dict[str, str],
    pay: str | None,
    fresh: bool = True,
) -> str:
    """Move a direct one-way trip, or both flights of a direct round trip, to new dates."""
    res = g.call("get_reservation_details", reservation_id=rid)
    avoid = _card_for(res, pay, fresh)
    flights = list(res["flights"])
    future = _future_dates(g.db)
    new_dates = [rng.choice([d for d in future if d != f["date"]]) for f in flights]
    if len(flights) == 2 and new_dates[0] >= new_dates[1]:
        raise _Skip("the return would come before the outbound flight")
    new_legs = []
    for f, day in zip(flights, new_dates, strict=True):
        offers = g.call(
            "search_direct_flight", origin=f["origin"], destination=f["destination"], date=day
        )
        new_legs.append(_leg(_cheapest(offers, res["cabin"], len(res["passengers"]))[0]))
    if pay is None:
        pay = _pick_payment(
            g, rng, user, "update_reservation_flights", avoid, reservation_id=rid, flights=new_legs
        )
    g.call("update_reservation_flights", reservation_id=rid, flights=new_legs, payment_id=pay)
    facts["payment method"] = _method_words(user["payment_methods"][pay])
    for label, day in zip(["new date", "new return date"], new_dates, strict=False):
        facts[label] = day
    method = _describe_method(user["payment_methods"][pay])
    if len(flights) == 2:
        what = f"fly out on {_say_date(new_dates[0])} and back on {_say_date(new_dates[1])}"
    else:
        what = f"move my flight to {_say_date(new_dates[0])}"
    return rng.choice(
        [
            f"On reservation {rid} I need to {what}, on the cheapest direct flight, same cabin. "
            f"Any difference goes on {method}.",
            f"Could you change booking {rid}? I want to {what}; cheapest direct option please, "
            f"and use {method}.",
            f"My dates changed: for reservation {rid}, {what} (cheapest direct flight). Pay or "
            f"refund with {method}.",
        ]
    )


def _on_reservations(
    db: Database,
    rng: random.Random,
    k: int,
    keep: Callable[[Reservation], bool],
    op: Callable[[_Gold, Mapping[str, Any], str, dict[str, str], str | None], str],
    what: str,
) -> Draft:
    """One turn applying ``op`` to ``k`` reservations of one user (one payment method)."""
    if k == 1:
        candidates: Iterable[list[Reservation]] = ([r] for r in _candidates(db, rng, keep))
    else:

        def groups() -> Iterator[list[Reservation]]:
            # users in a random order, lazily: testing every reservation on every draw
            # dominated synthesis time
            for user in scattered(list(db.values("users")), rng):
                mine = [db.get("reservations", rid) for rid in user.reservations]
                fitting = [r for r in mine if r is not None and keep(r)]
                if len(fitting) >= k:
                    yield rng.sample(fitting, k)

        candidates = groups()

    def build(group: list[Reservation]) -> Draft:
        uid = group[0].user_id
        g = _Gold(db)
        user = g.call("get_user_details", user_id=uid)
        pay = None if k == 1 else _pay_options(user, rng, cards_only=True)[0]
        facts = {"user id": uid, "reservation id": ", ".join(r.reservation_id for r in group)}
        asks = [op(g, user, r.reservation_id, facts, pay) for r in group]
        request = " Also, ".join(a[0].lower() + a[1:] if i else a for i, a in enumerate(asks))
        g.end_turn(request)
        return _draft(g, user, rng, facts)

    return _over_candidates(candidates, build, what)


def change_flights(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Move a direct reservation (not basic economy) to the cheapest direct flights on new
    dates: ``legs`` 1 is a one-way trip, 2 a round trip with both flights moved."""
    legs = int(shape.get("legs", 1))

    def keep(res: Reservation) -> bool:
        return (
            res.cabin != "basic_economy"
            and _direct_legs(res)
            and len(res.flights) == legs
            and _bookable_now(db, res)
        )

    return _on_reservations(
        db,
        rng,
        1,
        keep,
        lambda g, u, rid, facts, pay: _op_change(g, rng, u, rid, facts, pay),
        f"change {dict(shape)}",
    )


def change_refused(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """A flight change on a basic economy reservation: refused, name the reservation."""

    def keep(res: Reservation) -> bool:
        return res.cabin == "basic_economy" and _direct_legs(res) and _bookable_now(db, res)

    def build(res: Reservation) -> Draft:
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        g.call("get_reservation_details", reservation_id=res.reservation_id)
        rid = res.reservation_id
        day = _say_date(rng.choice([d for d in _future_dates(db) if d != res.flights[0].date]))
        request = rng.choice(
            [
                f"I need to move my flight on reservation {rid} to {day}. Can you change it?",
                f"Please switch booking {rid} to a flight on {day} instead.",
                f"Can I change the date of reservation {rid}? {day} would suit me better.",
            ]
        )
        facts = {"user id": res.user_id, "reservation id": rid}
        g.end_turn(request, outputs=(rid, REFUSAL, *REFUSAL_GROUNDS["basic_economy"]))
        return _draft(g, user, rng, facts)

    return _over_candidates(_candidates(db, rng, keep), build, "a refused flight change")


def upgrade_cabin(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Move every flight of ``reservations`` reservations to a higher cabin, paying the
    difference (several reservations all go to business)."""
    k = int(shape.get("reservations", 1))

    def keep(res: Reservation) -> bool:
        return res.cabin != "business" and _bookable_now(db, res)

    cabin = None if k == 1 else "business"
    return _on_reservations(
        db,
        rng,
        k,
        keep,
        lambda g, u, rid, facts, pay: _op_upgrade(g, rng, u, rid, facts, pay, cabin),
        f"upgrade {dict(shape)}",
    )


def add_bags(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Add one to three checked bags to ``reservations`` reservations, paying for those
    beyond the free allowance."""
    k = int(shape.get("reservations", 1))

    def keep(res: Reservation) -> bool:
        return _not_departed(db, res)

    def op(g: _Gold, u: Mapping[str, Any], rid: str, facts: dict[str, str], pay: str | None) -> str:
        label = "total checked bags" if k == 1 else f"total checked bags on {rid.lower()}"
        return _op_bags(g, rng, u, rid, facts, pay, rng.randint(1, 3), label)

    return _on_reservations(db, rng, k, keep, op, f"bags {dict(shape)}")


def update_passengers(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Replace one or two passengers of a reservation with saved passengers; the count stays."""

    def keep(res: Reservation) -> bool:
        return len(res.passengers) >= 2 and _not_departed(db, res)

    def op(g: _Gold, u: Mapping[str, Any], rid: str, facts: dict[str, str], pay: str | None) -> str:
        return _op_passengers(g, rng, u, rid, facts, rng.choice([1, 1, 2]))

    return _on_reservations(db, rng, 1, keep, op, "passenger change")


# -- compensation ------------------------------------------------------------------------------
def _disrupted(db: Database, res: Reservation) -> str | None:
    statuses = _statuses(db, res)
    if "cancelled" in statuses:
        return "cancelled"
    if "delayed" in statuses:
        return "delayed"
    return None


def _eligible(db: Database, res: Reservation) -> bool:
    user = db.require("users", res.user_id)
    return user.membership != "regular" or res.insurance == "yes" or res.cabin == "business"


def _complaint(g: _Gold, rng: random.Random, res: Reservation, kind: str) -> str:
    """Look the reservation and the disrupted flight up; the customer's complaint."""
    g.call("get_reservation_details", reservation_id=res.reservation_id)
    bad = next(f for f in res.flights if g.status(f.flight_number, f.date) == kind)
    g.call("get_flight_status", flight_number=bad.flight_number, date=bad.date)
    trip = f"flight {bad.flight_number} on {_say_date(bad.date)}"
    rid = res.reservation_id
    return rng.choice(
        [
            f"My {trip} on reservation {rid} was {kind}. This is really inconvenient; I'd like "
            "some compensation.",
            f"Your airline {kind} my {trip} (booking {rid}). What compensation can you give me?",
            f"I'm upset: {trip} of my reservation {rid} is {kind}. I want to be compensated.",
        ]
    )


def compensation(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Send the policy's certificate for a delayed or cancelled flight when asked."""

    def keep(res: Reservation) -> bool:
        return res.status == "active" and _disrupted(db, res) is not None and _eligible(db, res)

    def build(res: Reservation) -> Draft:
        kind = _disrupted(db, res)
        assert kind is not None
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        request = _complaint(g, rng, res, kind)
        n = len(res.passengers)
        amount = g.call("calculate", expression=f"{COMPENSATION[kind]} * {n}")
        g.call(
            "send_certificate",
            user_id=res.user_id,
            reservation_id=res.reservation_id,
            amount=amount,
        )
        facts = {"user id": res.user_id, "reservation id": res.reservation_id}
        g.end_turn(request)
        return _draft(g, user, rng, facts)

    return _over_candidates(_candidates(db, rng, keep), build, "compensation")


def compensation_refused(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """A compensation request the policy refuses (regular member, no insurance, not business)."""

    def keep(res: Reservation) -> bool:
        return res.status == "active" and _disrupted(db, res) is not None and not _eligible(db, res)

    def build(res: Reservation) -> Draft:
        kind = _disrupted(db, res)
        assert kind is not None
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        request = _complaint(g, rng, res, kind)
        facts = {"user id": res.user_id, "reservation id": res.reservation_id}
        outputs = (res.reservation_id, REFUSAL, *REFUSAL_GROUNDS["compensation"])
        g.end_turn(request, outputs=outputs)
        return _draft(g, user, rng, facts)

    return _over_candidates(_candidates(db, rng, keep), build, "a refused compensation")


# -- information -------------------------------------------------------------------------------
def flight_info(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Answer questions, asked in this order: the ``status`` of a flight of the user's
    reservation, the total ``balance`` of their gift cards, the cheapest direct ``fare`` on a
    route (each axis 0 or 1; at least one)."""
    asked = [q for q in ("status", "balance", "fare") if int(shape.get(q, 0)) > 0]
    if not asked:
        raise SkillUnavailable("flight_info needs at least one of status, balance, fare")
    users = sorted(db.keys("users"))
    rng.shuffle(users)
    future = _future_dates(db)
    flights = list(db.values("flights"))

    def build(uid: str) -> Draft:
        record = db.require("users", uid)
        gifts = sorted(
            (m for m in record.payment_methods.values() if m.source == "gift_card"),
            key=lambda m: m.id,
        )
        if "balance" in asked and (len(gifts) < 2 or any(m.amount < 10 for m in gifts)):
            raise _Skip("fewer than two gift cards")
        watched = [
            rid
            for rid in record.reservations
            if db.require("reservations", rid).status == "active"
            and any(
                s in ("delayed", "cancelled", "on time", "flying")
                for s in _statuses(db, db.require("reservations", rid))
            )
        ]
        if "status" in asked and not watched:
            raise _Skip("no flight worth asking about")
        g = _Gold(db)
        user = g.call("get_user_details", user_id=uid)
        facts = {"user id": uid}
        questions: list[str] = []
        outputs: list[str] = []
        if "status" in asked:
            rid = rng.choice(watched)
            res = g.call("get_reservation_details", reservation_id=rid)
            f = next(
                f for f in res["flights"] if g.status(f["flight_number"], f["date"]) != "landed"
            )
            status = g.call("get_flight_status", flight_number=f["flight_number"], date=f["date"])[
                "status"
            ]
            facts["reservation id"] = rid
            questions.append(
                f"what is the status of my flight from {_place(db, f['origin'])} to "
                f"{_place(db, f['destination'])} on {_say_date(f['date'])} (reservation {rid})?"
            )
            outputs.append(status)
        if "balance" in asked:
            amounts = [user["payment_methods"][m.id]["amount"] for m in gifts]
            total = g.call("calculate", expression=" + ".join(str(a) for a in amounts))
            questions.append("what is the total balance left on all my gift cards?")
            outputs.append(str(total))
        if "fare" in asked:
            f = rng.choice(flights)
            day = rng.choice(future)
            cabin = rng.choice(CABINS)
            offers = g.call(
                "search_direct_flight", origin=f.origin, destination=f.destination, date=day
            )
            best = _cheapest(offers, cabin, 1)[0]
            facts.update(
                {
                    "origin": f.origin,
                    "destination": f.destination,
                    "date": day,
                    "cabin": CABIN_WORDS[cabin],
                }
            )
            questions.append(
                f"which direct flight from {_place(db, f.origin)} to {_place(db, f.destination)} "
                f"on {_say_date(day)} is the cheapest in {CABIN_WORDS[cabin]}, and what does it "
                "cost?"
            )
            outputs += [best["flight_number"], str(best["prices"][cabin])]
        lead = rng.choice(
            ["I have a few questions.", "Quick question.", "Could you help me with something?"]
        )
        body = " Also, ".join(q[0].upper() + q[1:] for q in questions)
        g.end_turn(f"{lead} {body}", outputs=tuple(outputs))
        return _draft(g, user, rng, facts)

    return _over_candidates(users, build, f"questions {dict(shape)}")


# -- several turns -----------------------------------------------------------------------------
MULTI_TURN_PLAN: tuple[str, ...] = ("upgrade", "change", "bags")
"""The turns of :func:`multi_turn`, in order (``turns`` takes the first two or all three)."""


def multi_turn(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Upgrade the cabin of a one-way reservation, then move its flight (basic economy flights
    can only change after the upgrade), then add bags: each request its own turn."""
    turns = int(shape.get("turns", 2))
    if not 1 <= turns <= len(MULTI_TURN_PLAN):
        raise SkillUnavailable(f"multi_turn has 1 to {len(MULTI_TURN_PLAN)} turns, not {turns}")

    def keep(res: Reservation) -> bool:
        return (
            res.cabin != "business"
            and res.flight_type == "one_way"
            and len(res.flights) == 1
            and _bookable_now(db, res)
        )

    def build(res: Reservation) -> Draft:
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        rid = res.reservation_id
        pay = _pay_options(user, rng, cards_only=True)[0]
        facts = {"user id": res.user_id, "reservation id": rid}
        for op in MULTI_TURN_PLAN[:turns]:
            if op == "upgrade":
                request = _op_upgrade(g, rng, user, rid, facts, pay)
            elif op == "change":
                request = _op_change(g, rng, user, rid, facts, pay, fresh=False)
            else:
                request = _op_bags(g, rng, user, rid, facts, pay, rng.randint(1, 2), fresh=False)
            g.end_turn(request)
        return _draft(g, user, rng, facts)

    return _over_candidates(_candidates(db, rng, keep), build, f"multi-turn {dict(shape)}")


SKILLS: tuple[Skill, ...] = (
    Skill(
        "book_direct",
        "Book the cheapest direct flight(s) for the user and saved passengers.",
        book_direct,
        shape={"legs": 1, "payments": 1},
        limits={"legs": (1, 2), "payments": (1, 2)},
    ),
    Skill(
        "book_onestop",
        "Book the cheapest one-stop itinerary for the user and saved passengers.",
        book_onestop,
        shape={"legs": 1, "payments": 1},
        limits={"legs": (1, 2), "payments": (1, 2)},
    ),
    Skill(
        "cancel",
        "Cancel reservations booked within 24 hours, in business, or insured for the reason.",
        cancel,
        shape={"reservations": 1},
        limits={"reservations": (1, 2)},
    ),
    Skill(
        "cancel_after_flight_cancelled",
        "Cancel a reservation after checking that the airline cancelled one of its flights.",
        cancel_after_flight_cancelled,
    ),
    Skill(
        "cancel_refused",
        "Refuse a cancellation the policy forbids and name the reservation.",
        cancel_refused,
        writes=False,
    ),
    Skill(
        "change_flights",
        "Move a reservation to the cheapest direct flights on new dates.",
        change_flights,
        shape={"legs": 1},
        limits={"legs": (1, 2)},
    ),
    Skill(
        "change_refused",
        "Refuse a flight change on a basic economy reservation.",
        change_refused,
        writes=False,
    ),
    Skill(
        "upgrade_cabin",
        "Move reservations to a higher cabin and pay the difference.",
        upgrade_cabin,
        shape={"reservations": 1},
        limits={"reservations": (1, 2)},
    ),
    Skill(
        "add_bags",
        "Add checked bags to reservations, paying those beyond the free allowance.",
        add_bags,
        shape={"reservations": 1},
        limits={"reservations": (1, 2)},
    ),
    Skill(
        "update_passengers",
        "Replace passengers of a reservation with saved passengers.",
        update_passengers,
    ),
    Skill(
        "compensation",
        "Send the policy's certificate for a delayed or cancelled flight.",
        compensation,
    ),
    Skill(
        "compensation_refused",
        "Refuse compensation to an ineligible customer and name the reservation.",
        compensation_refused,
        writes=False,
    ),
    Skill(
        "flight_info",
        "Answer questions: flight status, gift card balance, cheapest fare.",
        flight_info,
        shape={"status": 1, "balance": 0, "fare": 0},
        limits={"status": (0, 1), "balance": (0, 1), "fare": (0, 1)},
        writes=False,
    ),
    Skill(
        "multi_turn",
        "Upgrade, then change flights, then add bags on one reservation, one turn each.",
        multi_turn,
        shape={"turns": 2},
        limits={"turns": (2, 3)},
    ),
)
"""The Airline skills. Every shape axis adds gold calls when it grows (what synthesis
"expand" requires), and a skill at a given shape always yields the same signature."""


def unrelated_write(task: Task, db: Database) -> ToolCall:
    """A valid write on the task's user that touches no record the task's gold calls touch.

    One more checked bag on a reservation of the user that the task does not mention (nor
    has changed or created so far) and that has not departed, paid with the user's credit card (so only that reservation
    changes); when the user has none, a basic economy booking of the first bookable flight
    for the user alone (a new reservation record).

    Args:
        task: The task (its ``"user id"`` fact names the user).
        db: The state during or after the task's gold calls.

    Raises:
        SkillUnavailable: when no such write exists (no bookable flight at all).
    """
    uid = task.user.facts["user id"]
    user = db.require("users", uid)
    card = sorted(m.id for m in user.payment_methods.values() if m.source == "credit_card")[0]
    mentioned = {c.arguments.get("reservation_id") for c in task.gold_calls}
    mentioned |= {key for table, key in db.changes() if table == "reservations"}  # e.g. booked
    for rid in sorted(user.reservations):
        res = db.get("reservations", rid)
        if rid not in mentioned and res is not None and _not_departed(db, res):
            return ToolCall(
                name="update_reservation_baggages",
                arguments={
                    "reservation_id": rid,
                    "total_baggages": res.total_baggages + 1,
                    "payment_id": card,
                },
            )
    me = {"first_name": user.name.first_name, "last_name": user.name.last_name, "dob": user.dob}
    for day in _future_dates(db):
        for flight in db.values("flights"):
            instance = flight.dates[day]
            if instance.status == "available" and instance.available_seats.basic_economy > 0:
                price = instance.prices.basic_economy
                return ToolCall(
                    name="book_reservation",
                    arguments={
                        "user_id": uid,
                        "origin": flight.origin,
                        "destination": flight.destination,
                        "flight_type": "one_way",
                        "cabin": "basic_economy",
                        "flights": [{"flight_number": flight.flight_number, "date": day}],
                        "passengers": [me],
                        "payment_methods": [{"payment_id": card, "amount": price}],
                        "total_baggages": 0,
                        "insurance": "no",
                    },
                )
    raise SkillUnavailable(f"no unrelated write possible for user {uid}")


def forbidden_requests(task: Task, db: Database, rng: random.Random) -> list[str]:
    """Requests of the task's customer that the policy forbids, about reservations the task
    does not touch: cancelling one whose flight has departed, changing the flights of a basic
    economy one, cancelling one no rule lets be cancelled for a change of plan. The right
    answer is to decline them (the distractor augmentation adds one to a request)."""
    user = db.get("users", task.user.facts.get("user id", ""))
    if user is None:
        return []
    used = {str(c.arguments.get("reservation_id")) for c in task.gold_calls}
    now = _now(db)
    out = []
    for rid in user.reservations:
        res = db.get("reservations", rid)
        if res is None or rid in used or res.status != "active":
            continue
        statuses = _statuses(db, res)
        if any(st in _DEPARTED for st in statuses):
            out.append(f"Also, please cancel my reservation {rid} and refund it.")
        elif res.cabin == "basic_economy":
            out.append(f"And could you move reservation {rid} to a flight one day later?")
        elif (
            now - datetime.fromisoformat(res.created_at) > timedelta(hours=24)
            and res.cabin != "business"
            and res.insurance == "no"
            and "cancelled" not in statuses
        ):
            out.append(f"Please also cancel reservation {rid}, since my plans changed.")
    return out


__all__ = ["SKILLS", "forbidden_requests", "unrelated_write"]
