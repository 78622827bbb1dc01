"""Airline skills that cancel a reservation, or refuse to when the policy forbids it."""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import datetime, timedelta

from environments.airline.schema import Reservation
from environments.airline.skills.common import (
    _DEPARTED,
    REFUSAL_GROUNDS,
    _candidates,
    _draft,
    _Gold,
    _join,
    _now,
    _over_candidates,
    _say_date,
    _Skip,
    _statuses,
)
from rods_env.database import Database
from rods_env.domain import Draft
from rods_env.rewards import REFUSAL

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
