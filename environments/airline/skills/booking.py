"""Airline skills that book: a direct or one-stop itinerary, paid as the policy allows."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from environments.airline.generator import BAG_FEE, FREE_BAGS, INSURANCE_FEE
from environments.airline.schema import CABINS
from environments.airline.skills.common import (
    CABIN_WORDS,
    _attempts,
    _cheapest,
    _describe_method,
    _draft,
    _full_name,
    _future_dates,
    _Gold,
    _join,
    _leg,
    _method_words,
    _place,
    _say_date,
    _Skip,
)
from environments.airline.tools import AirlineTools
from rods_env.database import Database
from rods_env.domain import Draft, SkillUnavailable
from rods_env.tools import to_jsonable


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
    searched: dict[tuple[str, str, str], Any] = {}
    reader: list[AirlineTools] = []

    def offered(origin: str, destination: str, day: str) -> Any:
        """The search's value on ``db`` itself, remembered for this skill call: searches
        read only, so a gold fork (which has run only look-ups before them) finds the same."""
        key = (origin, destination, day)
        if key not in searched:
            if not reader:
                reader.append(AirlineTools(db))
            arguments = {"origin": origin, "destination": destination, "date": day}
            result = reader[0].call(search, arguments, render=False)
            searched[key] = result.value if result.ok else None
        return searched[key]

    def cheapest(
        origin: str, destination: str, day: str, cabin: str, after: int | None
    ) -> list[dict[str, Any]]:
        """The flights of the cheapest fitting offer, as JSON, or refused (as the gold
        search would be) before the fork and the user look-up, with no draw from ``rng``:
        the draws are those of the full attempt. ``_cheapest`` decides the same on the
        search's value as on its JSON (``tests/environments/test_airline_skills.py``)."""
        offers = offered(origin, destination, day)
        if offers is None:
            raise _Skip(f"{search} failed")
        chosen: list[dict[str, Any]] = to_jsonable(_cheapest(offers, cabin, n, after))
        return chosen

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
        chosen = cheapest(origin, destination, day, cabin, after)
        returning = [] if back is None else cheapest(destination, origin, back, cabin, None)
        g = _Gold(db)
        user = g.call("get_user_details", user_id=uid)
        # the searches ran on ``db`` above; this fork has only looked the user up since
        g.record(search, origin=origin, destination=destination, date=day)
        if back is not None:
            g.record(search, origin=destination, destination=origin, date=back)
            chosen += returning
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
