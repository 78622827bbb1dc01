"""The Airline skill that answers questions about flights and reservations."""

from __future__ import annotations

import random
from collections.abc import Mapping

from environments.airline.schema import CABINS
from environments.airline.skills.common import (
    CABIN_WORDS,
    _cheapest,
    _draft,
    _future_dates,
    _Gold,
    _over_candidates,
    _place,
    _say_date,
    _Skip,
    _statuses,
)
from rods_env.database import Database
from rods_env.domain import Draft, SkillUnavailable


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
