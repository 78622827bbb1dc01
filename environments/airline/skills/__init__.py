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

The skills live in one module per family: :mod:`.booking`, :mod:`.cancelling`,
:mod:`.changes`, :mod:`.compensation`, :mod:`.information`, :mod:`.multi_turn`, over
the helpers of :mod:`.common`; this module lists them (:data:`SKILLS`) with the
domain's unrelated write and forbidden requests."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from environments.airline.skills.booking import book_direct, book_onestop
from environments.airline.skills.cancelling import (
    cancel,
    cancel_after_flight_cancelled,
    cancel_refused,
)
from environments.airline.skills.changes import (
    add_bags,
    change_flights,
    change_refused,
    update_passengers,
    upgrade_cabin,
)
from environments.airline.skills.common import (
    _DEPARTED,
    _future_dates,
    _not_departed,
    _now,
    _statuses,
)
from environments.airline.skills.compensation import compensation, compensation_refused
from environments.airline.skills.information import flight_info
from environments.airline.skills.multi_turn import multi_turn
from rods_env.database import Database
from rods_env.domain import Skill, SkillUnavailable
from rods_env.task import Task, ToolCall

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
