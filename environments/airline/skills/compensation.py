"""Airline skills of compensation: a certificate for a disrupted trip, or a refusal."""

from __future__ import annotations

import random
from collections.abc import Mapping

from environments.airline.schema import Reservation
from environments.airline.skills.common import (
    REFUSAL_GROUNDS,
    _candidates,
    _draft,
    _Gold,
    _over_candidates,
    _say_date,
    _statuses,
)
from environments.airline.tools import COMPENSATION
from rods_env.database import Database
from rods_env.domain import Draft
from rods_env.rewards import REFUSAL


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
