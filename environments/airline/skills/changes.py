"""Airline skills that change a reservation (flights, cabin, bags, passengers), or refuse
to; the operations are also the turns of the multi-turn skill."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from environments.airline.generator import FREE_BAGS
from environments.airline.schema import CABINS, Reservation
from environments.airline.skills.common import (
    CABIN_WORDS,
    REFUSAL_GROUNDS,
    _bookable_now,
    _candidates,
    _card_for,
    _cheapest,
    _describe_method,
    _direct_legs,
    _draft,
    _full_name,
    _future_dates,
    _Gold,
    _join,
    _leg,
    _method_words,
    _not_departed,
    _over_candidates,
    _pay_options,
    _pick_payment,
    _say_date,
    _Skip,
)
from rods_env.database import Database
from rods_env.domain import Draft, scattered
from rods_env.rewards import REFUSAL


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
