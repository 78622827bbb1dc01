"""Skills of the Airline domain: task generators with preconditions, gold calls and user facts.

Conventions every skill follows:

* The user is identified first: the first gold call is ``get_user_details``. Requests never
  state the user id; it is the fact ``"user id"``, which the agent has to ask for.
* Gold calls run on a private fork of the database while the task is built, so every value
  a later call uses (flight numbers, prices, totals) is read from an earlier call's output,
  stated in a fact, or is a policy constant, and a task whose gold call fails is never made.
* Refusals: the gold has look-ups and no write, and the turn's only required output is the
  id of the reservation the request was about (the policy tells the agent to name it).
* Information requests: the outputs are values exactly as the tools print them (a flight
  number, a status, a whole-dollar amount).
* Facts hold values exactly as tools expect them (``"basic_economy"``, ``"2024-05-20"``);
  the request text words them naturally.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from environments.airline.generator import BAG_FEE, FREE_BAGS, INSURANCE_FEE
from environments.airline.schema import CABINS, CLOCK_KEY, Reservation
from environments.airline.tools import COMPENSATION, AirlineTools
from rods_env.database import Database
from rods_env.domain import Draft, Skill, SkillUnavailable
from rods_env.task import Task, ToolCall, Turn, UserProfile
from rods_env.tools import to_jsonable

PERSONAS: tuple[str, ...] = (
    "polite and brief",
    "chatty and friendly",
    "in a hurry, short answers",
    "a little anxious, wants reassurance",
    "formal and precise",
    "frustrated but cooperative",
)
CABIN_WORDS = {"basic_economy": "basic economy", "economy": "economy", "business": "business"}
_DEPARTED = ("flying", "landed")
_ATTEMPTS = 300


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
        result = self.tools.call(name, arguments)
        if not result.ok:
            raise _Skip(f"{name}: {result.output}")
        self.calls.append(ToolCall(name=name, arguments=arguments))
        return to_jsonable(result.value)

    def probe(self, name: str, **arguments: Any) -> bool:
        """Whether a call would succeed now (nothing is recorded or changed)."""
        saved = self.db.checkpoint()
        result = self.tools.call(name, arguments)
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


def _describe_method(method: Mapping[str, Any]) -> str:
    if method["source"] == "credit_card":
        brand = _BRANDS.get(method["brand"], method["brand"])
        return f"my {brand} ending in {method['last_four']}"
    if method["source"] == "gift_card":
        return "my gift card"
    return "my travel certificate"


def _statuses(db: Database, res: Reservation) -> list[str]:
    return [db.require("flights", f.flight_number).dates[f.date].status for f in res.flights]


def _candidates(
    db: Database, rng: random.Random, keep: Callable[[Reservation], bool]
) -> list[Reservation]:
    out = [r for r in db.values("reservations") if keep(r)]
    rng.shuffle(out)
    return out


def _bookable_now(db: Database, res: Reservation) -> bool:
    return res.status == "active" and all(s == "available" for s in _statuses(db, res))


def _not_departed(db: Database, res: Reservation) -> bool:
    return res.status == "active" and not any(s in _DEPARTED for s in _statuses(db, res))


def _direct_legs(res: Reservation) -> bool:
    """One flight per direction."""
    return len(res.flights) == (1 if res.flight_type == "one_way" else 2)


def _profile(user: Mapping[str, Any], rng: random.Random, facts: dict[str, str]) -> UserProfile:
    return UserProfile(name=_full_name(user["name"]), persona=rng.choice(PERSONAS), facts=facts)


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
    g: _Gold, rng: random.Random, user: Mapping[str, Any], name: str, **args: Any
) -> str:
    for pid in _pay_options(user, rng):
        if g.probe(name, **args, payment_id=pid):
            return pid
    raise _Skip("no payment method works")


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


def _over_candidates(items: Sequence[Any], build: Callable[[Any], Draft], what: str) -> Draft:
    for item in items[:_ATTEMPTS]:
        try:
            return build(item)
        except _Skip:
            continue
    raise SkillUnavailable(f"no entities fit {what}")


# -- booking ---------------------------------------------------------------------------------
def _book(db: Database, rng: random.Random, shape: Mapping[str, int], stops: int) -> Draft:
    n = int(shape.get("passengers", 1))
    round_trip = int(shape.get("legs", 1)) >= 2
    future = _future_dates(db)
    users = sorted(u.user_id for u in db.values("users") if len(u.saved_passengers) >= n - 1)
    codes = sorted(db.keys("airports"))
    flights = list(db.values("flights"))
    if not users:
        raise SkillUnavailable(f"no user has {n - 1} saved passengers")
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
        chosen = _cheapest(
            g.call(search, origin=origin, destination=destination, date=day), cabin, n, after
        )
        if back is not None:
            chosen += _cheapest(
                g.call(search, origin=destination, destination=origin, date=back), cabin, n
            )
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
        options: list[list[tuple[str, int]]] = []
        cards = sorted(m["id"] for m in methods.values() if m["source"] == "credit_card")
        for m in sorted(methods.values(), key=lambda m: m["id"]):
            enough = m["source"] == "gift_card" and m["amount"] >= total
            if m["source"] == "credit_card" or enough:
                options.append([(m["id"], total)])
            elif m["source"] == "certificate" and 0 < m["amount"] < total and cards:
                options.append([(m["id"], m["amount"]), (rng.choice(cards), -1)])
        split = rng.choice(options)
        if len(split) == 2:
            rest = g.call("calculate", expression=f"{total} - {split[0][1]}")
            split = [split[0], (split[1][0], rest)]
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
        bag_words = (
            "no checked bags"
            if bags == 0
            else f"{bags} checked bag{'s' if bags > 1 else ''} in total"
        )
        ins_words = "with travel insurance" if insurance == "yes" else "without travel insurance"
        pay_words = _join([_describe_method(methods[pid]) for pid, _ in split])
        if len(split) == 2:
            pay_words = f"{_describe_method(methods[split[0][0]])} first and the rest on {_describe_method(methods[split[1][0]])}"
        o, d = _place(db, origin), _place(db, destination)
        cab = CABIN_WORDS[cabin]
        request = rng.choice(
            [
                f"I'd like to book {trip} from {o} to {d} {when}, in {cab}, for {who}. Please take "
                f"the cheapest {kind}{limit}. We'll have {bag_words}, {ins_words}, and I'll pay "
                f"with {pay_words}.",
                f"Can you book {cab} seats for {who} from {o} to {d} {when}? {trip.capitalize()}, "
                f"the cheapest {kind}{limit} please. {bag_words.capitalize()}, {ins_words}; pay "
                f"with {pay_words}.",
                f"I need to fly {'round trip' if round_trip else 'one way'} from {o} to {d} {when}. It's for {who}, "
                f"{cab} cabin, cheapest {kind}{limit}. Put {bag_words} on it, {ins_words}, and "
                f"charge {pay_words}.",
            ]
        )
        facts = {
            "user id": uid,
            "origin": origin,
            "destination": destination,
            "date": day,
            **({"return date": back} if back else {}),
            "trip type": flight_type,
            "cabin": cabin,
            "passengers": ", ".join(_full_name(p) for p in people),
            "checked bags": str(bags),
            "insurance": insurance,
            "payment method": " and ".join(pid for pid, _ in split),
        }
        g.end_turn(request)
        return Draft(user=_profile(user, rng, facts), turns=tuple(g.turns))

    return _attempts(rng, build, f"booking {shape}")


def book_direct(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Book the cheapest direct flight(s) for the user and some saved passengers."""
    return _book(db, rng, shape, stops=0)


def book_onestop(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Book the cheapest one-stop itinerary (each direction) for the user."""
    return _book(db, rng, shape, stops=1)


# -- cancelling ------------------------------------------------------------------------------
def _allowed_reason(db: Database, res: Reservation, rng: random.Random) -> str | None:
    """A cancellation reason that the policy accepts for ``res``, or None."""
    statuses = _statuses(db, res)
    if any(s in _DEPARTED for s in statuses):
        return None
    if "cancelled" in statuses:
        return "airline cancelled flight"
    if res.insurance == "yes" and rng.random() < 0.6:
        return rng.choice(["health", "weather"])
    recent = _now(db) - datetime.fromisoformat(res.created_at) <= timedelta(hours=24)
    if recent or res.cabin == "business":
        return rng.choice(["change of plan", "change of plan", "other"])
    return None


_REASON_WORDS = {
    "change of plan": "my plans changed",
    "other": "of something personal",
    "health": "I'm sick and can't travel",
    "weather": "a storm is forecast where I'm going",
    "airline cancelled flight": "you cancelled one of my flights",
}


def cancel(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Cancel one or more reservations that the policy allows to cancel, for one reason."""
    k = int(shape.get("reservations", 1))
    users = sorted(db.keys("users"))
    rng.shuffle(users)

    def build(uid: str) -> Draft:
        user = db.require("users", uid)
        by_reason: dict[str, list[str]] = {}
        for rid in user.reservations:
            res = db.require("reservations", rid)
            if res.status != "active":
                continue
            reason = _allowed_reason(db, res, rng)
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
            res = g.call("get_reservation_details", reservation_id=rid)
            if reason == "airline cancelled flight":
                for f in res["flights"]:
                    g.call("get_flight_status", flight_number=f["flight_number"], date=f["date"])
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
        return Draft(user=_profile(profile, rng, facts), turns=tuple(g.turns))

    return _over_candidates(users, build, f"cancel {shape}")


def cancel_refused(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """A cancellation the policy forbids: look-ups, no write, name the reservation."""

    def keep(res: Reservation) -> bool:
        return res.status == "active"

    def build(res: Reservation) -> Draft:
        reason = rng.choice(["change of plan", "other", "health", "weather"])
        g = _Gold(db)
        profile = g.call("get_user_details", user_id=res.user_id)
        if g.probe("cancel_reservation", reservation_id=res.reservation_id, reason=reason):
            raise _Skip("this cancellation is allowed")
        if "cancelled" in _statuses(db, res):
            raise _Skip("airline cancelled a flight: the user could cancel with that reason")
        detail = g.call("get_reservation_details", reservation_id=res.reservation_id)
        for f in detail["flights"]:
            g.call("get_flight_status", flight_number=f["flight_number"], date=f["date"])
        rid = res.reservation_id
        request = rng.choice(
            [
                f"I want to cancel my reservation {rid}, {_REASON_WORDS[reason]}. Full refund please.",
                f"Please cancel booking {rid} for me; {_REASON_WORDS[reason]}.",
                f"Hello, {_REASON_WORDS[reason]} and I'd like to cancel reservation {rid}.",
            ]
        )
        facts = {"user id": res.user_id, "reservation id": rid, "reason": reason}
        g.end_turn(request, outputs=(rid,))
        return Draft(user=_profile(profile, rng, facts), turns=tuple(g.turns))

    return _over_candidates(_candidates(db, rng, keep), build, "a refused cancellation")


# -- reservation changes (reused by the multi-turn skill) -------------------------------------
def _op_upgrade(
    g: _Gold,
    rng: random.Random,
    user: Mapping[str, Any],
    rid: str,
    facts: dict[str, str],
    pay: str | None,
) -> str:
    res = g.call("get_reservation_details", reservation_id=rid)
    higher = [c for c in CABINS if CABINS.index(c) > CABINS.index(res["cabin"])]
    if not higher:
        raise _Skip("already in business")
    cabin = rng.choice(higher)
    if pay is None:
        pay = _pick_payment(
            g, rng, user, "update_reservation_cabin", reservation_id=rid, cabin=cabin
        )
    g.call("update_reservation_cabin", reservation_id=rid, cabin=cabin, payment_id=pay)
    facts["cabin"] = cabin
    facts["payment method"] = pay
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
) -> str:
    res = g.call("get_reservation_details", reservation_id=rid)
    total = res["total_baggages"] + added
    args: dict[str, Any] = {"reservation_id": rid, "total_baggages": total}
    if not g.probe("update_reservation_baggages", **args):
        if pay is None:
            pay = _pick_payment(g, rng, user, "update_reservation_baggages", **args)
        args["payment_id"] = pay
        facts["payment method"] = pay
    g.call("update_reservation_baggages", **args)
    facts["total checked bags"] = str(total)
    pay_words = (
        f" If there is a fee, use {_describe_method(user['payment_methods'][pay])}." if pay else ""
    )
    return rng.choice(
        [
            f"I want {total} checked bags in total on reservation {rid}.{pay_words}",
            f"Please add bags to booking {rid} so that we have {total} checked bags altogether.{pay_words}",
            f"We are bringing more luggage: make it {total} checked bags on reservation {rid}.{pay_words}",
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
    res = g.call("get_reservation_details", reservation_id=rid)
    people = [dict(p) for p in res["passengers"]]
    if len(people) < changes:
        raise _Skip("too few passengers")
    on_board = {_full_name(p) for p in people}
    spare = [p for p in user["saved_passengers"] if _full_name(p) not in on_board]
    rng.shuffle(spare)
    asks = []
    for i in sorted(rng.sample(range(len(people)), changes)):
        old = _full_name(people[i])
        if spare:
            new = dict(spare.pop())
            people[i] = new
            asks.append(f"replace {old} with {_full_name(new)} (saved in my profile)")
        else:
            dob = date.fromisoformat(people[i]["dob"]) + timedelta(
                days=rng.choice([-1, 1]) * rng.randint(1, 400)
            )
            people[i] = {**people[i], "dob": dob.isoformat()}
            label = "correct date of birth" if changes == 1 else f"correct date of birth of {old}"
            facts[label.lower()] = dob.isoformat()
            asks.append(f"fix the date of birth of {old}: it should be {dob.isoformat()}")
    g.call("update_reservation_passengers", reservation_id=rid, passengers=people)
    what = _join(asks)
    return rng.choice(
        [
            f"On reservation {rid}, please {what}.",
            f"I need to update the travellers on booking {rid}: {what}.",
            f"Could you {what} on my reservation {rid}?",
        ]
    )


def _op_change(
    g: _Gold,
    rng: random.Random,
    user: Mapping[str, Any],
    rid: str,
    facts: dict[str, str],
    pay: str | None,
    moved: int,
) -> str:
    res = g.call("get_reservation_details", reservation_id=rid)
    flights = list(res["flights"])
    future = _future_dates(g.db)
    if res["flight_type"] == "one_way":
        if moved != 1:
            raise _Skip("a one-way trip has one leg")
        which = [0]
    else:
        which = [0, 1] if moved == 2 else [rng.choice([0, 1])]
    new_dates = {i: flights[i]["date"] for i in range(len(flights))}
    for i in which:
        new_dates[i] = rng.choice([d for d in future if d != flights[i]["date"]])
    if len(flights) == 2 and new_dates[0] >= new_dates[1]:
        raise _Skip("the return would come before the outbound flight")
    new_legs = []
    for i, f in enumerate(flights):
        if i in which:
            offers = g.call(
                "search_direct_flight",
                origin=f["origin"],
                destination=f["destination"],
                date=new_dates[i],
            )
            new_legs.append(_leg(_cheapest(offers, res["cabin"], len(res["passengers"]))[0]))
        else:
            new_legs.append(_leg(f))
    if pay is None:
        pay = _pick_payment(
            g, rng, user, "update_reservation_flights", reservation_id=rid, flights=new_legs
        )
    g.call("update_reservation_flights", reservation_id=rid, flights=new_legs, payment_id=pay)
    facts["payment method"] = pay
    labels = ["new date"] if len(which) == 1 else ["new date", "new return date"]
    for label, i in zip(labels, which, strict=True):
        facts[label] = new_dates[i]
    method = _describe_method(user["payment_methods"][pay])
    if len(which) == 2:
        what = f"fly out on {_say_date(new_dates[0])} and back on {_say_date(new_dates[1])}"
    elif res["flight_type"] == "round_trip":
        what = f"move my {'outbound' if which[0] == 0 else 'return'} flight to {_say_date(new_dates[which[0]])}"
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


def _single_change(
    db: Database,
    rng: random.Random,
    keep: Callable[[Reservation], bool],
    op: Callable[[_Gold, dict[str, Any], str, dict[str, str]], str],
    what: str,
) -> Draft:
    def build(res: Reservation) -> Draft:
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        facts = {"user id": res.user_id, "reservation id": res.reservation_id}
        request = op(g, user, res.reservation_id, facts)
        g.end_turn(request)
        return Draft(user=_profile(user, rng, facts), turns=tuple(g.turns))

    return _over_candidates(_candidates(db, rng, keep), build, what)


def change_flights(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Move a non-basic-economy reservation to the cheapest direct flights on new dates."""
    moved = int(shape.get("legs", 1))

    def keep(res: Reservation) -> bool:
        return (
            res.cabin != "basic_economy"
            and _direct_legs(res)
            and (moved == 1 or res.flight_type == "round_trip")
            and _bookable_now(db, res)
        )

    return _single_change(
        db,
        rng,
        keep,
        lambda g, u, rid, facts: _op_change(g, rng, u, rid, facts, None, moved),
        f"change {shape}",
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
        g.end_turn(request, outputs=(rid,))
        return Draft(user=_profile(user, rng, facts), turns=tuple(g.turns))

    return _over_candidates(_candidates(db, rng, keep), build, "a refused flight change")


def upgrade_cabin(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Move every flight of a reservation to a higher cabin and pay the difference."""
    n = int(shape.get("passengers", 1))

    def keep(res: Reservation) -> bool:
        return res.cabin != "business" and len(res.passengers) == n and _bookable_now(db, res)

    return _single_change(
        db,
        rng,
        keep,
        lambda g, u, rid, facts: _op_upgrade(g, rng, u, rid, facts, None),
        f"upgrade {shape}",
    )


def add_bags(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Add checked bags to a reservation, paying for those beyond the free allowance."""
    added = int(shape.get("bags", 1))

    def keep(res: Reservation) -> bool:
        return _not_departed(db, res)

    return _single_change(
        db,
        rng,
        keep,
        lambda g, u, rid, facts: _op_bags(g, rng, u, rid, facts, None, added),
        f"bags {shape}",
    )


def update_passengers(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Replace passengers with saved ones, or correct a date of birth; the count stays."""
    changes = int(shape.get("passengers", 1))

    def keep(res: Reservation) -> bool:
        return len(res.passengers) >= changes and _not_departed(db, res)

    return _single_change(
        db,
        rng,
        keep,
        lambda g, u, rid, facts: _op_passengers(g, rng, u, rid, facts, changes),
        f"passengers {shape}",
    )


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


def _complaint(rng: random.Random, res: Reservation, db: Database, kind: str) -> str:
    bad = next(
        f
        for f in res.flights
        if db.require("flights", f.flight_number).dates[f.date].status == kind
    )
    trip = f"flight {bad.flight_number} on {_say_date(bad.date)}"
    return rng.choice(
        [
            f"My {trip} on reservation {res.reservation_id} was {kind}. This is really "
            "inconvenient; I'd like some compensation.",
            f"Your airline {kind} my {trip} (booking {res.reservation_id}). What compensation can "
            "you give me?",
            f"I'm upset: {trip} of my reservation {res.reservation_id} is {kind}. I want to be "
            "compensated.",
        ]
    )


def _status_lookups(g: _Gold, rid: str) -> dict[str, Any]:
    res = g.call("get_reservation_details", reservation_id=rid)
    for f in res["flights"]:
        g.call("get_flight_status", flight_number=f["flight_number"], date=f["date"])
    return res


def compensation(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Send the policy's certificate for a delayed or cancelled flight when asked."""
    n = int(shape.get("passengers", 1))

    def keep(res: Reservation) -> bool:
        return (
            res.status == "active"
            and len(res.passengers) == n
            and _disrupted(db, res) is not None
            and _eligible(db, res)
        )

    def build(res: Reservation) -> Draft:
        kind = _disrupted(db, res)
        assert kind is not None
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        _status_lookups(g, res.reservation_id)
        amount = g.call("calculate", expression=f"{COMPENSATION[kind]} * {n}")
        g.call(
            "send_certificate",
            user_id=res.user_id,
            reservation_id=res.reservation_id,
            amount=amount,
        )
        facts = {"user id": res.user_id, "reservation id": res.reservation_id}
        g.end_turn(_complaint(rng, res, db, kind))
        return Draft(user=_profile(user, rng, facts), turns=tuple(g.turns))

    return _over_candidates(_candidates(db, rng, keep), build, f"compensation {shape}")


def compensation_refused(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """A compensation request the policy refuses (regular member, no insurance, not business)."""

    def keep(res: Reservation) -> bool:
        return res.status == "active" and _disrupted(db, res) is not None and not _eligible(db, res)

    def build(res: Reservation) -> Draft:
        kind = _disrupted(db, res)
        assert kind is not None
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        _status_lookups(g, res.reservation_id)
        facts = {"user id": res.user_id, "reservation id": res.reservation_id}
        g.end_turn(_complaint(rng, res, db, kind), outputs=(res.reservation_id,))
        return Draft(user=_profile(user, rng, facts), turns=tuple(g.turns))

    return _over_candidates(_candidates(db, rng, keep), build, "a refused compensation")


# -- information -------------------------------------------------------------------------------
def flight_info(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Answer one to three questions (flight status, gift card balance, cheapest fare)."""
    k = int(shape.get("questions", 1))
    users = sorted(db.keys("users"))
    rng.shuffle(users)
    future = _future_dates(db)
    flights = list(db.values("flights"))

    def build(uid: str) -> Draft:
        user_rec = db.require("users", uid)
        kinds = ["status", "gift", "fare"]
        gifts = [m for m in user_rec.payment_methods.values() if m.source == "gift_card"]
        if not gifts or any(m.amount < 10 for m in gifts):
            kinds.remove("gift")
        disrupted = [
            rid
            for rid in user_rec.reservations
            if db.require("reservations", rid).status == "active"
            and any(
                s in ("delayed", "cancelled", "on time", "flying")
                for s in _statuses(db, db.require("reservations", rid))
            )
        ]
        if not disrupted:
            kinds.remove("status")
        if len(kinds) < k:
            raise _Skip("not enough to ask about")
        asked = rng.sample(kinds, k)
        g = _Gold(db)
        user = g.call("get_user_details", user_id=uid)
        facts = {"user id": uid}
        questions: list[str] = []
        outputs: list[str] = []
        for kind in asked:
            if kind == "status":
                rid = rng.choice(disrupted)
                res = g.call("get_reservation_details", reservation_id=rid)
                f = next(
                    f for f in res["flights"] if g.status(f["flight_number"], f["date"]) != "landed"
                )
                status = g.call(
                    "get_flight_status", flight_number=f["flight_number"], date=f["date"]
                )["status"]
                facts["reservation id"] = rid
                questions.append(
                    f"what is the status of my flight from {_place(db, f['origin'])} to "
                    f"{_place(db, f['destination'])} on {_say_date(f['date'])} (reservation {rid})?"
                )
                outputs.append(status)
            elif kind == "gift":
                amounts = [
                    user["payment_methods"][m.id]["amount"]
                    for m in sorted(gifts, key=lambda m: m.id)
                ]
                if len(amounts) == 1:
                    total = amounts[0]
                    questions.append("how much is left on my gift card?")
                else:
                    total = g.call("calculate", expression=" + ".join(str(a) for a in amounts))
                    questions.append("what is the total balance left on all my gift cards?")
                outputs.append(str(total))
            else:
                f = rng.choice(flights)
                day = rng.choice(future)
                cabin = rng.choice(CABINS)
                offers = g.call(
                    "search_direct_flight", origin=f.origin, destination=f.destination, date=day
                )
                best = _cheapest(offers, cabin, 1)[0]
                facts.update(
                    {"origin": f.origin, "destination": f.destination, "date": day, "cabin": cabin}
                )
                questions.append(
                    f"which direct flight from {_place(db, f.origin)} to {_place(db, f.destination)} "
                    f"on {_say_date(day)} is the cheapest in {CABIN_WORDS[cabin]}, and what does it cost?"
                )
                outputs += [best["flight_number"], str(best["prices"][cabin])]
        lead = rng.choice(
            ["I have a few questions.", "Quick question.", "Could you help me with something?"]
        )
        body = " Also, ".join(q[0].upper() + q[1:] for q in questions)
        g.end_turn(f"{lead} {body}", outputs=tuple(outputs))
        return Draft(user=_profile(user, rng, facts), turns=tuple(g.turns))

    return _over_candidates(users, build, f"questions {shape}")


# -- several turns -----------------------------------------------------------------------------
def multi_turn(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Two or three requests on one reservation, each its own turn; later turns build on earlier ones.

    A basic economy reservation is upgraded before its flights change (the policy forbids
    changing basic economy flights), so the order of the turns matters.
    """
    turns = int(shape.get("turns", 2))

    def keep(res: Reservation) -> bool:
        return res.cabin != "business" and _direct_legs(res) and _bookable_now(db, res)

    def build(res: Reservation) -> Draft:
        ops = ["upgrade", "bags", "passengers", "change"]
        plan = rng.sample(ops, turns)
        if res.cabin == "basic_economy" and "change" in plan and "upgrade" in plan:
            plan.remove("upgrade")
            plan.insert(plan.index("change"), "upgrade")
        elif res.cabin == "basic_economy" and "change" in plan:
            raise _Skip("basic economy flights cannot change")
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        rid = res.reservation_id
        pay = _pay_options(user, rng, cards_only=True)[0]
        facts = {"user id": res.user_id, "reservation id": rid}
        for op in plan:
            if op == "upgrade":
                request = _op_upgrade(g, rng, user, rid, facts, pay)
            elif op == "bags":
                request = _op_bags(g, rng, user, rid, facts, pay, rng.randint(1, 2))
            elif op == "passengers":
                request = _op_passengers(g, rng, user, rid, facts, 1)
            else:
                request = _op_change(g, rng, user, rid, facts, pay, 1)
            g.end_turn(request)
        return Draft(user=_profile(user, rng, facts), turns=tuple(g.turns))

    return _over_candidates(_candidates(db, rng, keep), build, f"multi-turn {shape}")


SKILLS: tuple[Skill, ...] = (
    Skill(
        "book_direct",
        "Book the cheapest direct flight(s) for the user and saved passengers.",
        book_direct,
        shape={"passengers": 1, "legs": 1},
        limits={"passengers": (1, 5), "legs": (1, 2)},
    ),
    Skill(
        "book_onestop",
        "Book the cheapest one-stop itinerary.",
        book_onestop,
        shape={"passengers": 1, "legs": 1},
        limits={"passengers": (1, 5), "legs": (1, 2)},
    ),
    Skill(
        "cancel",
        "Cancel reservations that the policy allows to cancel.",
        cancel,
        shape={"reservations": 1},
        limits={"reservations": (1, 2)},
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
        "Move a reservation to a higher cabin and pay the difference.",
        upgrade_cabin,
        shape={"passengers": 1},
        limits={"passengers": (1, 3)},
    ),
    Skill(
        "add_bags",
        "Add checked bags, paying those beyond the free allowance.",
        add_bags,
        shape={"bags": 1},
        limits={"bags": (1, 3)},
    ),
    Skill(
        "update_passengers",
        "Replace passengers or correct their details.",
        update_passengers,
        shape={"passengers": 1},
        limits={"passengers": (1, 2)},
    ),
    Skill(
        "compensation",
        "Send the policy's certificate for a delayed or cancelled flight.",
        compensation,
        shape={"passengers": 1},
        limits={"passengers": (1, 3)},
    ),
    Skill(
        "compensation_refused",
        "Refuse compensation to an ineligible customer.",
        compensation_refused,
        writes=False,
    ),
    Skill(
        "flight_info",
        "Answer questions: flight status, gift card balance, cheapest fare.",
        flight_info,
        shape={"questions": 1},
        limits={"questions": (1, 3)},
        writes=False,
    ),
    Skill(
        "multi_turn",
        "Two or three dependent requests on one reservation.",
        multi_turn,
        shape={"turns": 2},
        limits={"turns": (2, 3)},
    ),
)
"""The Airline skills."""


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


__all__ = ["SKILLS", "unrelated_write"]
