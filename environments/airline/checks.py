"""The Airline policy (``policy.md``) as checks over a task's gold run.

Each check takes ``(domain, task, gold)`` and returns what breaks the policy, or None.
Synthesis applies them to every candidate (``policy_violation``). The tools enforce some of
the same rules at run time; the checks state them over the whole gold run, including what
no single tool call can see (what was looked up before acting, what a reservation looked
like at the moment it was changed).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from environments.airline.schema import clock, flight_table, reservation_table, user_table
from environments.airline.tools import COMPENSATION
from rods_env.database import Tables
from rods_env.domain import Domain
from rods_env.gold import Gold
from rods_env.task import Task, ToolCall

_RESERVATION_WRITES = (
    "cancel_reservation",
    "update_reservation_flights",
    "update_reservation_cabin",
    "update_reservation_baggages",
    "update_reservation_passengers",
)
_DEPARTED = ("flying", "landed")


def _calls(task: Task, gold: Gold) -> Iterator[tuple[ToolCall, Any]]:
    yield from zip(task.gold_calls, gold.call_outputs, strict=True)


def _reservation_states(task: Task, gold: Gold, base: Tables) -> Iterator[tuple[ToolCall, Any]]:
    """Each gold call with the reservation it acts on as it was just before the call (from
    the latest output that showed it, else the base record); None for other calls."""
    reservations = reservation_table(base)
    latest: dict[str, Any] = {}
    for call, out in _calls(task, gold):
        rid = call.arguments.get("reservation_id")
        res = None
        if isinstance(rid, str):
            res = latest.get(rid)
            if res is None:
                record = reservations.get(rid)
                res = record.model_dump(mode="json") if record is not None else None
        yield call, res
        if isinstance(out, dict) and isinstance(out.get("reservation_id"), str):
            latest[out["reservation_id"]] = out


def _statuses(base: Tables, res: dict[str, Any]) -> list[str]:
    flights = flight_table(base)
    out: list[str] = []
    for f in res.get("flights", []):
        flight = flights.get(f["flight_number"])
        instance = flight.dates.get(f["date"]) if flight is not None else None
        out.append(instance.status if instance is not None else "unknown")
    return out


def identify_first(domain: Domain, task: Task, gold: Gold) -> str | None:
    """ "Identify the customer first": the first gold call is get_user_details, and every
    booking, change, cancellation or compensation is for that customer."""
    calls = task.gold_calls
    if not calls or calls[0].name != "get_user_details":
        return f"the gold starts with {calls[0].name if calls else 'nothing'}, not get_user_details"
    customer = calls[0].arguments.get("user_id")
    reservations = reservation_table(domain.base(task.db_seed, task.db_size))
    for call in calls:
        uid = call.arguments.get("user_id")
        if uid is not None and uid != customer:
            return f"{call.name} for user {uid}, not the identified {customer}"
        rid = call.arguments.get("reservation_id")
        res = reservations.get(rid) if isinstance(rid, str) else None
        if res is not None and res.user_id != customer and call.name in _RESERVATION_WRITES:
            return f"{call.name} on reservation {rid} of {res.user_id}, not of {customer}"
    return None


def looked_up_before_change(domain: Domain, task: Task, gold: Gold) -> str | None:
    """A reservation is looked up (get_reservation_details) before it is changed or
    cancelled, and a compensated flight's status is checked first."""
    looked: set[str] = set()
    checked = False
    for call in task.gold_calls:
        rid = call.arguments.get("reservation_id")
        if call.name == "get_reservation_details":
            looked.add(str(rid))
        elif call.name == "get_flight_status":
            checked = True
        elif call.name in _RESERVATION_WRITES and rid not in looked:
            return f"{call.name} on reservation {rid} without looking it up first"
        elif call.name == "send_certificate" and not checked:
            return "a compensation certificate sent without checking the flight's status"
    return None


def no_change_after_departure(domain: Domain, task: Task, gold: Gold) -> str | None:
    """ "Nothing can be changed or cancelled once any flight of the reservation has
    departed"."""
    base = domain.base(task.db_seed, task.db_size)
    for call, res in _reservation_states(task, gold, base):
        if (
            call.name in _RESERVATION_WRITES
            and res is not None
            and any(s in _DEPARTED for s in _statuses(base, res))
        ):
            return f"{call.name} on reservation {res['reservation_id']} after a flight departed"
    return None


def basic_economy_keeps_flights(domain: Domain, task: Task, gold: Gold) -> str | None:
    """ "A basic economy reservation cannot change its flights" (the cabin as it is at the
    moment of the change: an upgrade first lifts the rule)."""
    base = domain.base(task.db_seed, task.db_size)
    for call, res in _reservation_states(task, gold, base):
        if (
            call.name == "update_reservation_flights"
            and res is not None
            and res.get("cabin") == "basic_economy"
        ):
            return f"flights of basic economy reservation {res['reservation_id']} changed"
    return None


def cancellation_allowed(domain: Domain, task: Task, gold: Gold) -> str | None:
    """A cancellation meets one of the policy's four conditions (booked within 24 hours, a
    flight cancelled by the airline, business cabin, insured with a covered reason)."""
    base = domain.base(task.db_seed, task.db_size)
    now = datetime.fromisoformat(clock(base).now)
    for call, res in _reservation_states(task, gold, base):
        if call.name != "cancel_reservation" or res is None:
            continue
        reason = call.arguments.get("reason")
        statuses = _statuses(base, res)
        recent = now - datetime.fromisoformat(res["created_at"]) <= timedelta(hours=24)
        if reason == "airline cancelled flight" and "cancelled" not in statuses:
            return f"reservation {res['reservation_id']}: no flight was cancelled by the airline"
        if not (
            recent
            or reason == "airline cancelled flight"
            or res["cabin"] == "business"
            or (res["insurance"] == "yes" and reason in ("health", "weather"))
        ):
            return f"reservation {res['reservation_id']} cannot be cancelled for {reason!r}"
    return None


def compensation_by_the_rules(domain: Domain, task: Task, gold: Gold) -> str | None:
    """Compensation only for an eligible customer's delayed or cancelled flight, of the
    policy's amount per passenger, at most once per reservation."""
    base = domain.base(task.db_seed, task.db_size)
    users = user_table(base)
    sent: set[str] = set()
    for call, res in _reservation_states(task, gold, base):
        if call.name != "send_certificate" or res is None:
            continue
        rid = res["reservation_id"]
        if rid in sent:
            return f"reservation {rid} compensated twice"
        sent.add(rid)
        user = users.get(res["user_id"])
        eligible = user is not None and (
            user.membership != "regular" or res["insurance"] == "yes" or res["cabin"] == "business"
        )
        if not eligible:
            return f"compensation on reservation {rid} for an ineligible customer"
        statuses = _statuses(base, res)
        kind = (
            "cancelled" if "cancelled" in statuses else "delayed" if "delayed" in statuses else None
        )
        if kind is None:
            return f"compensation on reservation {rid}, none of whose flights is disrupted"
        if call.arguments.get("amount") != COMPENSATION[kind] * len(res["passengers"]):
            return f"compensation of {call.arguments.get('amount')} on reservation {rid}"
    return None


def certificates_only_for_bookings(domain: Domain, task: Task, gold: Gold) -> str | None:
    """ "Travel certificates cannot pay for changes"."""
    users = user_table(domain.base(task.db_seed, task.db_size))
    calls = task.gold_calls
    user = users.get(str(calls[0].arguments.get("user_id"))) if calls else None
    for call in calls:
        pid = call.arguments.get("payment_id")
        if call.name not in _RESERVATION_WRITES or not isinstance(pid, str):
            continue
        method = user.payment_methods.get(pid) if user is not None else None
        if method is not None and method.source == "certificate":
            return f"{call.name} paid with travel certificate {pid}"
    return None


POLICY_CHECKS = (
    identify_first,
    looked_up_before_change,
    no_change_after_departure,
    basic_economy_keeps_flights,
    cancellation_allowed,
    compensation_by_the_rules,
    certificates_only_for_bookings,
)
"""Every check of the Airline policy, in the policy's order."""
