"""Airline tools: schemas, look-ups, every write's happy path and each rule it enforces.

Every rejected write is checked to leave the database fingerprint unchanged, every read to
change nothing, and the shared base to stay untouched by writes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from environments.airline import DOMAIN
from environments.airline.generator import BAG_FEE, FREE_BAGS, INSURANCE_FEE, tables_digest
from environments.airline.schema import (
    CLOCK_KEY,
    Certificate,
    GiftCard,
    Payment,
    Reservation,
    User,
)
from environments.airline.tools import (
    COMPENSATION,
    MAX_BAGS_PER_PASSENGER,
    AirlineTools,
    invariant_violations,
)
from rods_env.database import Database
from tests.environments.toolcheck import fail, ok

NOW = datetime(2024, 5, 15, 15, 0, 0)


@pytest.fixture
def db() -> Database:
    return DOMAIN.database(0, "default")


@pytest.fixture
def tools(db) -> AirlineTools:
    t = AirlineTools(db)
    t.on_reset()
    return t


# -- helpers -------------------------------------------------------------------------------
def statuses(db, res: Reservation) -> list[str]:
    return [db.get("flights", f.flight_number).dates[f.date].status for f in res.flights]


def find(db, keep: Callable[[Reservation], bool]) -> Reservation:
    for res in db.values("reservations"):
        if keep(res):
            return res
    raise AssertionError("no reservation fits the test's preconditions")


def open_res(db, res) -> bool:
    return res.status == "active" and all(s == "available" for s in statuses(db, res))


def recent(res) -> bool:
    return NOW - datetime.fromisoformat(res.created_at) <= timedelta(hours=24)


def plain(db, res) -> bool:
    """Open, economy, uninsured, old: nothing allows cancelling it."""
    return (
        open_res(db, res) and res.cabin == "economy" and res.insurance == "no" and not recent(res)
    )


def identify(tools, user_id) -> User:
    return ok(tools, "get_user_details", user_id=user_id)


def card_of(user: User) -> str:
    return next(m.id for m in user.payment_methods.values() if m.source == "credit_card")


def with_methods(db, user: User, **methods) -> User:
    """Give a user extra payment methods (written into the episode state)."""
    new = user.model_copy(update={"payment_methods": {**user.payment_methods, **methods}})
    db.put("users", user.user_id, new)
    return new


def paid_by(db, res: Reservation, payment_id: str) -> Reservation:
    """Make the reservation paid in one payment by ``payment_id`` (test setup)."""
    total = sum(p.amount for p in res.payment_history)
    new = res.model_copy(
        update={"payment_history": (Payment(payment_id=payment_id, amount=total),)}
    )
    db.put("reservations", res.reservation_id, new)
    return new


def direct_offer(tools, cabin="economy", seats=1, day="2024-05-25"):
    """A bookable direct flight with seats, as (flight record, offer dict)."""
    for flight in tools.db.values("flights"):
        inst = flight.dates[day]
        if inst.status == "available" and inst.available_seats.of(cabin) >= seats:
            return flight, inst
    raise AssertionError("no bookable flight")


def booking_args(user: User, flight, inst, cabin="economy", n=1, bags=0, insurance="no", pay=None):
    people = [
        {"first_name": user.name.first_name, "last_name": user.name.last_name, "dob": user.dob}
    ]
    people += [
        {"first_name": f"P{i}", "last_name": "Test", "dob": "1990-01-01"} for i in range(n - 1)
    ]
    nonfree = max(0, bags - FREE_BAGS[user.membership][cabin] * n)
    total = (
        inst.prices.of(cabin) * n
        + nonfree * BAG_FEE
        + (INSURANCE_FEE * n if insurance == "yes" else 0)
    )
    return {
        "user_id": user.user_id,
        "origin": flight.origin,
        "destination": flight.destination,
        "flight_type": "one_way",
        "cabin": cabin,
        "flights": [{"flight_number": flight.flight_number, "date": "2024-05-25"}],
        "passengers": people,
        "payment_methods": pay
        if pay is not None
        else [{"payment_id": card_of(user), "amount": total}],
        "total_baggages": bags,
        "insurance": insurance,
    }, total


# -- the toolkit -------------------------------------------------------------------------------
def test_toolkit_has_the_issue_tools_with_documented_schemas():
    names = set(AirlineTools.names())
    expected = {
        "get_user_details",
        "get_reservation_details",
        "list_all_airports",
        "search_direct_flight",
        "search_onestop_flight",
        "get_flight_status",
        "book_reservation",
        "cancel_reservation",
        "update_reservation_flights",
        "update_reservation_cabin",
        "update_reservation_baggages",
        "update_reservation_passengers",
        "send_certificate",
        "calculate",
        "think",
        "transfer_to_human_agents",
    }
    assert expected <= names and len(names) >= 13
    assert AirlineTools.write_names() == {
        "book_reservation",
        "cancel_reservation",
        "update_reservation_flights",
        "update_reservation_cabin",
        "update_reservation_baggages",
        "update_reservation_passengers",
        "send_certificate",
    }
    for spec in AirlineTools.specs().values():
        fn = spec.schema["function"]
        assert fn["description"]
        assert all(p.get("description") for p in fn["parameters"]["properties"].values())
    reason = AirlineTools.specs()["cancel_reservation"].schema["function"]["parameters"]
    assert set(reason["properties"]["reason"]["enum"]) == {
        "change of plan",
        "airline cancelled flight",
        "health",
        "weather",
        "other",
    }
    assert AirlineTools.specs()["transfer_to_human_agents"].terminal


def test_policy_states_the_constants_the_tools_enforce():
    policy = " ".join(DOMAIN.policy.split())
    for needle in (
        "24 hours",
        "at most 5 passengers",
        "at most one travel certificate",
        "at most one credit card",
        "at most three gift cards",
        "basic economy reservation cannot change its flights",
        "100 per passenger",
        "50 per passenger",
        "plus 30",
        "costs 50",
        f"at most {MAX_BAGS_PER_PASSENGER} checked bags per passenger",
    ):
        assert needle in policy, needle
    assert COMPENSATION == {"cancelled": 100, "delayed": 50}
    assert FREE_BAGS["regular"]["basic_economy"] == 0 and FREE_BAGS["gold"]["business"] == 4


# -- reads ---------------------------------------------------------------------------------------
def test_reads_return_records_and_change_nothing(tools, db):
    res = find(db, lambda r: r.status == "active")
    before = db.fingerprint()
    user = identify(tools, res.user_id)  # reservation details are shown to their owner only
    assert user.user_id == res.user_id and res.reservation_id in user.reservations
    assert ok(tools, "get_reservation_details", reservation_id=res.reservation_id) == res
    airports = ok(tools, "list_all_airports")
    assert len(airports) == 20 and {"iata", "city"} <= set(airports[0])
    f = res.flights[0]
    status = ok(tools, "get_flight_status", flight_number=f.flight_number, date=f.date)
    assert status == {
        "flight_number": f.flight_number,
        "date": f.date,
        "status": statuses(db, res)[0],
    }
    assert ok(tools, "calculate", expression="(120 + 80) * 2 + 30 * 2") == 460
    assert ok(tools, "think", thought="the customer wants the cheapest flight") == ""
    direct = ok(
        tools,
        "search_direct_flight",
        origin="JFK",
        destination=db.get("flights", "RD100").destination,
        date="2024-05-25",
    )
    assert direct and all(o["status"] == "available" and o["origin"] == "JFK" for o in direct)
    pairs = ok(tools, "search_onestop_flight", origin="JFK", destination="LAX", date="2024-05-25")
    assert pairs
    for a, b in pairs:
        assert (
            a["origin"] == "JFK" and a["destination"] == b["origin"] and b["destination"] == "LAX"
        )
        assert b["scheduled_departure_time"] >= a["scheduled_arrival_time"]
    assert db.fingerprint() == before


@pytest.mark.parametrize(
    ("name", "args", "error", "needle"),
    [
        ("get_user_details", {"user_id": "nobody_0000"}, "NotFoundError", "user id"),
        ("get_reservation_details", {"reservation_id": "ZZZZZZ"}, "NotFoundError", "six letters"),
        (
            "search_direct_flight",
            {"origin": "XXX", "destination": "LAX", "date": "2024-05-20"},
            "NotFoundError",
            "list_all_airports",
        ),
        (
            "search_direct_flight",
            {"origin": "JFK", "destination": "LAX", "date": "May 20"},
            "InvalidArgumentError",
            "YYYY-MM-DD",
        ),
        (
            "search_onestop_flight",
            {"origin": "JFK", "destination": "LAX", "date": "2024-02-30"},
            "InvalidArgumentError",
            "calendar",
        ),
        (
            "get_flight_status",
            {"flight_number": "XX1", "date": "2024-05-20"},
            "NotFoundError",
            "search_direct_flight",
        ),
        (
            "get_flight_status",
            {"flight_number": "RD100", "date": "2025-01-01"},
            "NotFoundError",
            "flies daily",
        ),
        ("calculate", {"expression": "__import__('os')"}, "InvalidArgumentError", "Hint"),
    ],
)
def test_bad_reads_are_error_observations(tools, name, args, error, needle):
    fail(tools, name, error, needle, **args)


def test_transfer_is_terminal(tools):
    result = tools.call("transfer_to_human_agents", {"summary": "wants a refund outside policy"})
    assert result.ok and result.terminal and result.output == "Transfer successful."
    fail(tools, "transfer_to_human_agents", "InvalidArgumentError", "empty", summary="  ")


def test_reservations_are_shown_only_to_their_identified_owner(tools, db):
    """Verification before disclosure: a reservation's details need its owner identified."""
    res = find(db, lambda r: r.status == "active")
    fail(
        tools,
        "get_reservation_details",
        "RuleViolationError",
        "get_user_details",
        reservation_id=res.reservation_id,
    )
    other = next(u for u in db.keys("users") if u != res.user_id)
    identify(tools, other)
    fail(
        tools,
        "get_reservation_details",
        "RuleViolationError",
        "not been identified",
        reservation_id=res.reservation_id,
    )
    identify(tools, res.user_id)
    assert ok(tools, "get_reservation_details", reservation_id=res.reservation_id) == res


# -- identity -------------------------------------------------------------------------------------
def test_writes_need_the_owner_identified_in_this_episode(tools, db):
    res = find(db, lambda r: open_res(db, r) and r.cabin == "business")
    fail(
        tools,
        "cancel_reservation",
        "RuleViolationError",
        "get_user_details",
        reservation_id=res.reservation_id,
        reason="change of plan",
    )
    other = next(u for u in db.keys("users") if u != res.user_id)
    identify(tools, other)
    fail(
        tools,
        "cancel_reservation",
        "RuleViolationError",
        "not been identified",
        reservation_id=res.reservation_id,
        reason="change of plan",
    )
    identify(tools, res.user_id)
    tools.on_reset()  # a new episode forgets who was identified
    fail(
        tools,
        "cancel_reservation",
        "RuleViolationError",
        reservation_id=res.reservation_id,
        reason="change of plan",
    )
    user = db.get("users", res.user_id)
    flight, inst = direct_offer(tools)
    args, _ = booking_args(user, flight, inst)
    fail(tools, "book_reservation", "RuleViolationError", "not been identified", **args)
    fail(
        tools,
        "send_certificate",
        "RuleViolationError",
        "not been identified",
        user_id=res.user_id,
        reservation_id=res.reservation_id,
        amount=100,
    )


# -- booking -------------------------------------------------------------------------------------
def test_book_happy_path_charges_and_takes_seats(tools, db):
    user = db.get("users", "mia_patel_3171") or next(iter(db.values("users")))
    identify(tools, user.user_id)
    flight, inst = direct_offer(tools, seats=2)
    user = with_methods(db, user, gift_card_0000001=GiftCard(id="gift_card_0000001", amount=2000))
    args, total = booking_args(user, flight, inst, n=2, bags=5, insurance="yes")
    args["payment_methods"] = [{"payment_id": "gift_card_0000001", "amount": total}]
    res = ok(tools, "book_reservation", **args)
    assert res.status == "active" and res.created_at == "2024-05-15T15:00:00"
    assert res.nonfree_baggages == max(0, 5 - FREE_BAGS[user.membership]["economy"] * 2)
    assert res.payment_history[0].amount == total
    after = db.get("users", user.user_id)
    assert after.reservations[-1] == res.reservation_id
    assert after.payment_methods["gift_card_0000001"].amount == 2000 - total
    seats = db.get("flights", flight.flight_number).dates["2024-05-25"].available_seats
    assert seats.economy == inst.available_seats.economy - 2
    assert seats.business == inst.available_seats.business
    # equal bookings get equal ids in any episode: the id is derived from the content
    other = Database(db.base)
    t2 = AirlineTools(other)
    identify(t2, user.user_id)
    with_methods(other, user, gift_card_0000001=GiftCard(id="gift_card_0000001", amount=2000))
    assert ok(t2, "book_reservation", **args).reservation_id == res.reservation_id


def test_book_with_certificate_and_card_uses_up_the_certificate(tools, db):
    user = next(iter(db.values("users")))
    identify(tools, user.user_id)
    user = with_methods(
        db, user, certificate_0000001=Certificate(id="certificate_0000001", amount=500)
    )
    flight, inst = direct_offer(tools)
    args, total = booking_args(user, flight, inst)
    part = min(total - 1, 40)
    args["payment_methods"] = [
        {"payment_id": "certificate_0000001", "amount": part},
        {"payment_id": card_of(user), "amount": total - part},
    ]
    ok(tools, "book_reservation", **args)
    assert "certificate_0000001" not in db.get("users", user.user_id).payment_methods


def _rich_user(db, tools) -> User:
    user = next(iter(db.values("users")))
    identify(tools, user.user_id)
    from environments.airline.schema import CreditCard

    extra = {
        f"gift_card_000000{i}": GiftCard(id=f"gift_card_000000{i}", amount=10) for i in range(1, 5)
    }
    extra["credit_card_0000009"] = CreditCard(
        id="credit_card_0000009", brand="visa", last_four="0009"
    )
    extra["certificate_0000001"] = Certificate(id="certificate_0000001", amount=20)
    extra["certificate_0000002"] = Certificate(id="certificate_0000002", amount=20)
    return with_methods(db, user, **extra)


@pytest.mark.parametrize(
    ("case", "error", "needle"),
    [
        ("six passengers", "RuleViolationError", "1 to 5 passengers"),
        ("no passengers", "RuleViolationError", "1 to 5 passengers"),
        ("sum too low", "InvalidArgumentError", "total price is"),
        ("two credit cards", "RuleViolationError", "three gift cards"),
        ("four gift cards", "RuleViolationError", "Too many payment methods of kind gift_card"),
        ("two certificates", "RuleViolationError", "kind certificate"),
        ("gift card over balance", "RuleViolationError", "balance of 10"),
        ("certificate over value", "RuleViolationError", "worth 20"),
        ("not in profile", "NotFoundError", "not in the profile"),
        ("flight not bookable", "RuleViolationError", "status"),
        ("no seats", "RuleViolationError", "seats left"),
        ("wrong origin", "InvalidArgumentError", "first flight leaves"),
        ("not a round trip", "InvalidArgumentError", "round trip"),
        ("bad dob", "InvalidArgumentError", "YYYY-MM-DD"),
    ],
)
def test_book_rules(tools, db, case, error, needle):
    user = _rich_user(db, tools)
    flight, inst = direct_offer(tools, seats=1)
    args, total = booking_args(user, flight, inst)
    card = card_of(user)
    if case == "six passengers":
        args["passengers"] = args["passengers"] * 6
    elif case == "no passengers":
        args["passengers"] = []
    elif case == "sum too low":
        args["payment_methods"] = [{"payment_id": card, "amount": total - 1}]
    elif case == "two credit cards":
        args["payment_methods"] = [
            {"payment_id": card, "amount": total - 1},
            {"payment_id": "credit_card_0000009", "amount": 1},
        ]
    elif case == "four gift cards":
        gifts = [{"payment_id": f"gift_card_000000{i}", "amount": 1} for i in range(1, 5)]
        args["payment_methods"] = [*gifts, {"payment_id": card, "amount": total - 4}]
    elif case == "two certificates":
        args["payment_methods"] = [
            {"payment_id": "certificate_0000001", "amount": 1},
            {"payment_id": "certificate_0000002", "amount": 1},
            {"payment_id": card, "amount": total - 2},
        ]
    elif case == "gift card over balance":
        args["payment_methods"] = [
            {"payment_id": "gift_card_0000001", "amount": 11},
            {"payment_id": card, "amount": total - 11},
        ]
    elif case == "certificate over value":
        args["payment_methods"] = [
            {"payment_id": "certificate_0000001", "amount": 21},
            {"payment_id": card, "amount": total - 21},
        ]
    elif case == "not in profile":
        args["payment_methods"] = [{"payment_id": "credit_card_9999999", "amount": total}]
    elif case == "flight not bookable":
        args["flights"] = [{"flight_number": flight.flight_number, "date": "2024-05-10"}]
    elif case == "no seats":
        full = next(
            (f, d)
            for f in db.values("flights")
            for d, i in f.dates.items()
            if i.status == "available" and i.available_seats.business == 0
        )
        args.update(
            origin=full[0].origin,
            destination=full[0].destination,
            cabin="business",
            flights=[{"flight_number": full[0].flight_number, "date": full[1]}],
        )
    elif case == "wrong origin":
        args["origin"] = next(a for a in db.keys("airports") if a != flight.origin)
    elif case == "not a round trip":
        args["flight_type"] = "round_trip"
    elif case == "bad dob":
        args["passengers"] = [{**args["passengers"][0], "dob": "01/02/1990"}]
    fail(tools, "book_reservation", error, needle, **args)


# -- cancelling -----------------------------------------------------------------------------------
def _cancel(tools, db, res, reason):
    identify(tools, res.user_id)
    return ok(tools, "cancel_reservation", reservation_id=res.reservation_id, reason=reason)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("booked within 24 hours", "change of plan"),
        ("business cabin", "other"),
        ("insured, health", "health"),
        ("insured, weather", "weather"),
    ],
)
def test_cancel_allowed(tools, db, case, reason):
    keep = {
        "booked within 24 hours": lambda r: (
            open_res(db, r) and recent(r) and r.cabin != "business" and r.insurance == "no"
        ),
        "business cabin": lambda r: open_res(db, r) and r.cabin == "business" and not recent(r),
        "insured, health": lambda r: plain_but_insured(db, r),
        "insured, weather": lambda r: plain_but_insured(db, r),
    }[case]
    res = find(db, keep)
    done = _cancel(tools, db, res, reason)
    assert done.status == "cancelled"
    refunds = [p for p in done.payment_history if p.amount < 0]
    assert sum(p.amount for p in refunds) == -sum(
        p.amount for p in res.payment_history if not p.payment_id.startswith("certificate")
    )


def plain_but_insured(db, r) -> bool:
    return open_res(db, r) and r.cabin == "economy" and r.insurance == "yes" and not recent(r)


def test_cancel_allowed_when_the_airline_cancelled_a_flight(tools, db):
    res = find(
        db,
        lambda r: (
            r.status == "active"
            and r.cabin != "business"
            and not recent(r)
            and "cancelled" in statuses(db, r)
            and not {"flying", "landed"} & set(statuses(db, r))
        ),
    )
    identify(tools, res.user_id)
    fail(
        tools,
        "cancel_reservation",
        "RuleViolationError",
        "24 hours",
        reservation_id=res.reservation_id,
        reason="change of plan",
    ) if res.insurance == "no" else None
    assert (
        ok(
            tools,
            "cancel_reservation",
            reservation_id=res.reservation_id,
            reason="airline cancelled flight",
        ).status
        == "cancelled"
    )


def test_cancel_refunds_gift_cards(tools, db):
    res = find(
        db,
        lambda r: (
            open_res(db, r)
            and r.cabin == "business"
            and r.payment_history[0].payment_id.startswith("gift_card")
        ),
    )
    gift = res.payment_history[0].payment_id
    before = db.get("users", res.user_id).payment_methods[gift].amount
    _cancel(tools, db, res, "other")
    assert (
        db.get("users", res.user_id).payment_methods[gift].amount
        == before + res.payment_history[0].amount
    )
    seats = (
        db.get("flights", res.flights[0].flight_number).dates[res.flights[0].date].available_seats
    )
    base_seats = (
        db.base["flights"][res.flights[0].flight_number].dates[res.flights[0].date].available_seats
    )
    assert seats.business == base_seats.business + len(res.passengers)


@pytest.mark.parametrize(
    ("case", "reason", "needle"),
    [
        ("plain", "change of plan", "cannot be cancelled"),
        ("insured, reason not covered", "change of plan", "insurance does not cover"),
        ("plain, health without insurance", "health", "no travel insurance"),
        ("plain, airline did not cancel", "airline cancelled flight", "No flight"),
        ("departed", "other", "already departed"),
        ("already cancelled", "other", "already cancelled"),
    ],
)
def test_cancel_refused(tools, db, case, reason, needle):
    keep = {
        "plain": lambda r: plain(db, r),
        "insured, reason not covered": lambda r: plain_but_insured(db, r),
        "plain, health without insurance": lambda r: plain(db, r),
        "plain, airline did not cancel": lambda r: plain(db, r),
        "departed": lambda r: (
            r.status == "active" and r.cabin == "business" and "landed" in statuses(db, r)
        ),
        "already cancelled": lambda r: r.status == "cancelled",
    }[case]
    res = find(db, keep)
    identify(tools, res.user_id)
    fail(
        tools,
        "cancel_reservation",
        "RuleViolationError",
        needle,
        reservation_id=res.reservation_id,
        reason=reason,
    )


# -- changing flights and cabin ----------------------------------------------------------------
def _direct_open(db, r, cabin=None):
    return (
        open_res(db, r)
        and r.flight_type == "one_way"
        and len(r.flights) == 1
        and (cabin is None or r.cabin == cabin)
    )


def _alternative(db, res, day="2024-05-27"):
    f = res.flights[0]
    for flight in db.values("flights"):
        inst = flight.dates[day]
        if (
            (flight.origin, flight.destination) == (f.origin, f.destination)
            and inst.status == "available"
            and inst.available_seats.of(res.cabin) >= len(res.passengers)
            and day != f.date
        ):
            return flight, inst
    return None


def test_update_flights_charges_the_difference(tools, db):
    res = find(db, lambda r: _direct_open(db, r, "economy") and _alternative(db, r) is not None)
    flight, inst = _alternative(db, res)
    user = identify(tools, res.user_id)
    card = card_of(user)
    done = ok(
        tools,
        "update_reservation_flights",
        reservation_id=res.reservation_id,
        flights=[{"flight_number": flight.flight_number, "date": "2024-05-27"}],
        payment_id=card,
    )
    n = len(res.passengers)
    diff = (inst.prices.economy - res.flights[0].price) * n
    assert done.flights[0].price == inst.prices.economy
    assert done.payment_history[-1].amount == diff or diff == 0
    old = res.flights[0]
    assert (
        db.get("flights", old.flight_number).dates[old.date].available_seats.economy
        == db.base["flights"][old.flight_number].dates[old.date].available_seats.economy + n
    )


@pytest.mark.parametrize(
    ("case", "error", "needle"),
    [
        ("basic economy", "RuleViolationError", "basic economy"),
        ("other destination", "InvalidArgumentError", "one-way trip"),
        ("same flights", "InvalidArgumentError", "already the flights"),
        ("certificate pays", "RuleViolationError", "only be used when booking"),
        ("departed", "RuleViolationError", "already departed"),
    ],
)
def test_update_flights_rules(tools, db, case, error, needle):
    cabin = "basic_economy" if case == "basic economy" else "economy"
    if case == "departed":
        res = find(
            db,
            lambda r: r.status == "active" and r.cabin == "economy" and "flying" in statuses(db, r),
        )
    else:
        res = find(db, lambda r: _direct_open(db, r, cabin) and _alternative(db, r) is not None)
    user = identify(tools, res.user_id)
    pay = card_of(user)
    alt = _alternative(db, res)
    legs = (
        [{"flight_number": alt[0].flight_number, "date": "2024-05-27"}]
        if alt
        else [{"flight_number": f.flight_number, "date": "2024-05-27"} for f in res.flights]
    )
    if case == "other destination":
        wrong = next(
            f
            for f in db.values("flights")
            if f.origin == res.origin and f.destination != res.destination
        )
        legs = [{"flight_number": wrong.flight_number, "date": "2024-05-27"}]
    elif case == "same flights":
        legs = [{"flight_number": f.flight_number, "date": f.date} for f in res.flights]
    elif case == "certificate pays":
        with_methods(
            db, user, certificate_0000001=Certificate(id="certificate_0000001", amount=900)
        )
        pay = "certificate_0000001"
    fail(
        tools,
        "update_reservation_flights",
        error,
        needle,
        reservation_id=res.reservation_id,
        flights=legs,
        payment_id=pay,
    )


def test_update_cabin_reprices_every_flight(tools, db):
    res = find(
        db,
        lambda r: (
            open_res(db, r)
            and r.cabin == "basic_economy"
            and all(
                db.get("flights", f.flight_number).dates[f.date].available_seats.business
                >= len(r.passengers)
                for f in r.flights
            )
        ),
    )
    user = identify(tools, res.user_id)
    done = ok(
        tools,
        "update_reservation_cabin",
        reservation_id=res.reservation_id,
        cabin="business",
        payment_id=card_of(user),
    )
    prices = [
        db.base["flights"][f.flight_number].dates[f.date].prices.business for f in res.flights
    ]
    assert done.cabin == "business" and [f.price for f in done.flights] == prices
    assert done.payment_history[-1].amount == (
        sum(prices) - sum(f.price for f in res.flights)
    ) * len(res.passengers)
    fail(
        tools,
        "update_reservation_cabin",
        "InvalidArgumentError",
        "already in business",
        reservation_id=res.reservation_id,
        cabin="business",
        payment_id=card_of(user),
    )


def test_update_cabin_needs_bookable_flights(tools, db):
    res = find(
        db,
        lambda r: (
            r.status == "active"
            and "delayed" in statuses(db, r)
            and r.cabin != "business"
            and not {"flying", "landed"} & set(statuses(db, r))
        ),
    )
    user = identify(tools, res.user_id)
    fail(
        tools,
        "update_reservation_cabin",
        "RuleViolationError",
        "status 'delayed'",
        reservation_id=res.reservation_id,
        cabin="business",
        payment_id=card_of(user),
    )


def test_gift_card_refund_and_overdraw_on_changes(tools, db):
    res = find(db, lambda r: open_res(db, r) and r.cabin == "business")
    user = identify(tools, res.user_id)
    with_methods(db, user, gift_card_0000001=GiftCard(id="gift_card_0000001", amount=0))
    paid_by(db, res, "gift_card_0000001")  # a refund goes back to a card that paid
    done = ok(
        tools,
        "update_reservation_cabin",
        reservation_id=res.reservation_id,
        cabin="economy",
        payment_id="gift_card_0000001",
    )
    refund = -done.payment_history[-1].amount
    assert refund > 0
    assert db.get("users", res.user_id).payment_methods["gift_card_0000001"].amount == refund
    with_methods(db, user, gift_card_0000001=GiftCard(id="gift_card_0000001", amount=1))
    fail(
        tools,
        "update_reservation_cabin",
        "RuleViolationError",
        "balance of 1,",
        reservation_id=res.reservation_id,
        cabin="business",
        payment_id="gift_card_0000001",
    )


def test_refunds_go_back_to_a_card_that_paid_and_never_exceed_payments(tools, db):
    """Regression: a downgrade refunded to another card, then a cancellation, refunded more
    than was paid. A refund now goes only to a card that paid the reservation, and a
    cancellation refunds what each card paid, net."""

    def fits(r: Reservation) -> bool:
        cards = [m for m in db.get("users", r.user_id).payment_methods.values()]
        return (
            open_res(db, r)
            and r.cabin == "economy"
            and (recent(r) or r.insurance == "yes")
            and len(r.payment_history) == 1
            and sum(m.source == "credit_card" for m in cards) >= 2
            and all(
                db.get("flights", f.flight_number).dates[f.date].available_seats.basic_economy
                >= len(r.passengers)
                for f in r.flights
            )
        )

    res = find(db, fits)
    user = identify(tools, res.user_id)
    (payment,) = res.payment_history
    other = next(
        pid for pid, m in user.payment_methods.items()
        if m.source == "credit_card" and pid != payment.payment_id
    )  # fmt: skip
    args = {"reservation_id": res.reservation_id, "cabin": "basic_economy"}
    fail(tools, "update_reservation_cabin", "RuleViolationError", "Refunds go back",
         payment.payment_id, payment_id=other, **args)  # fmt: skip
    down = ok(tools, "update_reservation_cabin", payment_id=payment.payment_id, **args)
    assert down.payment_history[-1].amount < 0  # a refund of the difference
    reason = "change of plan" if recent(res) else "health"
    done = ok(tools, "cancel_reservation", reservation_id=res.reservation_id, reason=reason)
    paid = sum(p.amount for p in done.payment_history if p.amount > 0)
    refunded = -sum(p.amount for p in done.payment_history if p.amount < 0)
    assert paid == refunded == payment.amount
    assert invariant_violations(db) == []


def test_bag_counts_stay_within_the_policy(tools, db):
    """Regression: any number of bags was accepted (a 4,000-digit count was charged to a
    card, and the state could no longer be fingerprinted)."""
    res = find(db, lambda r: open_res(db, r) and len(r.passengers) == 1)
    user = identify(tools, res.user_id)
    for total in (6, 10**17):
        fail(
            tools,
            "update_reservation_baggages",
            "RuleViolationError",
            "5 checked bags per passenger",
            reservation_id=res.reservation_id,
            total_baggages=total,
            payment_id=card_of(user),
        )
    flight, offer = direct_offer(tools)
    args, _ = booking_args(user, flight, offer, bags=MAX_BAGS_PER_PASSENGER + 1)
    fail(tools, "book_reservation", "RuleViolationError", "checked bags", **args)
    assert db.fingerprint() and invariant_violations(db) == []


# -- bags and passengers -------------------------------------------------------------------------
def test_bags_free_then_paid(tools, db):
    res = find(db, lambda r: open_res(db, r) and r.total_baggages == 0 and len(r.passengers) == 1)
    user = identify(tools, res.user_id)
    free = FREE_BAGS[user.membership][res.cabin]
    done = (
        ok(
            tools,
            "update_reservation_baggages",
            reservation_id=res.reservation_id,
            total_baggages=free,
        )
        if free
        else res
    )
    assert done.nonfree_baggages == 0 and len(done.payment_history) == len(res.payment_history)
    fail(
        tools,
        "update_reservation_baggages",
        "InvalidArgumentError",
        "'payment_id' is required",
        reservation_id=res.reservation_id,
        total_baggages=free + 2,
    )
    done = ok(
        tools,
        "update_reservation_baggages",
        reservation_id=res.reservation_id,
        total_baggages=free + 2,
        payment_id=card_of(user),
    )
    assert done.nonfree_baggages == 2 and done.payment_history[-1].amount == 2 * BAG_FEE
    fail(
        tools,
        "update_reservation_baggages",
        "RuleViolationError",
        "can be added but not removed",
        reservation_id=res.reservation_id,
        total_baggages=free + 1,
        payment_id=card_of(user),
    )


def test_passengers_change_but_not_their_number(tools, db):
    res = find(db, lambda r: open_res(db, r) and len(r.passengers) == 2)
    identify(tools, res.user_id)
    people = [p.model_dump() for p in res.passengers]
    fail(
        tools,
        "update_reservation_passengers",
        "RuleViolationError",
        "cannot change",
        reservation_id=res.reservation_id,
        passengers=people[:1],
    )
    fail(
        tools,
        "update_reservation_passengers",
        "InvalidArgumentError",
        "already",
        reservation_id=res.reservation_id,
        passengers=people,
    )
    people[1] = {"first_name": "Nora", "last_name": "Young", "dob": "1988-03-04"}
    done = ok(
        tools, "update_reservation_passengers", reservation_id=res.reservation_id, passengers=people
    )
    assert done.passengers[1].first_name == "Nora" and done.passengers[0] == res.passengers[0]


# -- compensation ----------------------------------------------------------------------------------
def _eligible(db, r) -> bool:
    return (
        db.get("users", r.user_id).membership != "regular"
        or r.insurance == "yes"
        or r.cabin == "business"
    )


def test_compensation_amounts_once_per_reservation(tools, db):
    for kind in ("cancelled", "delayed"):
        res = find(
            db,
            lambda r, k=kind: (
                r.status == "active"
                and _eligible(db, r)
                and k in statuses(db, r)
                and (k == "cancelled" or "cancelled" not in statuses(db, r))
            ),
        )
        identify(tools, res.user_id)
        n = len(res.passengers)
        fail(
            tools,
            "send_certificate",
            "RuleViolationError",
            "per passenger",
            user_id=res.user_id,
            reservation_id=res.reservation_id,
            amount=COMPENSATION[kind] * n + 1,
        )
        cert = ok(
            tools,
            "send_certificate",
            user_id=res.user_id,
            reservation_id=res.reservation_id,
            amount=COMPENSATION[kind] * n,
        )
        assert cert.amount == COMPENSATION[kind] * n and cert.issued_for == res.reservation_id
        assert db.get("users", res.user_id).payment_methods[cert.id] == cert
        fail(
            tools,
            "send_certificate",
            "RuleViolationError",
            "already sent",
            user_id=res.user_id,
            reservation_id=res.reservation_id,
            amount=cert.amount,
        )


def test_compensation_refusals(tools, db):
    bad = find(
        db,
        lambda r: r.status == "active" and not _eligible(db, r) and "cancelled" in statuses(db, r),
    )
    identify(tools, bad.user_id)
    fail(
        tools,
        "send_certificate",
        "RuleViolationError",
        "not eligible",
        user_id=bad.user_id,
        reservation_id=bad.reservation_id,
        amount=100 * len(bad.passengers),
    )
    fine = find(db, lambda r: open_res(db, r) and _eligible(db, r))
    identify(tools, fine.user_id)
    fail(
        tools,
        "send_certificate",
        "RuleViolationError",
        "delayed or cancelled",
        user_id=fine.user_id,
        reservation_id=fine.reservation_id,
        amount=100,
    )
    fail(
        tools,
        "send_certificate",
        "RuleViolationError",
        "does not belong",
        user_id=fine.user_id,
        reservation_id=bad.reservation_id,
        amount=100,
    )


# -- the state ---------------------------------------------------------------------------------------
def test_writes_never_touch_the_shared_base(db):
    digest = tables_digest(db.base)
    tools = AirlineTools(db)
    res = find(db, lambda r: open_res(db, r) and r.cabin == "business")
    identify(tools, res.user_id)
    res = paid_by(db, res, card_of(db.get("users", res.user_id)))
    ok(
        tools,
        "update_reservation_baggages",
        reservation_id=res.reservation_id,
        total_baggages=res.total_baggages + 1,
        payment_id=card_of(db.get("users", res.user_id)),
    )
    ok(
        tools,
        "update_reservation_cabin",
        reservation_id=res.reservation_id,
        cabin="economy",
        payment_id=card_of(db.get("users", res.user_id)),
    )
    ok(
        tools, "cancel_reservation", reservation_id=res.reservation_id, reason="health"
    ) if res.insurance == "yes" else None
    assert db.changes()
    assert tables_digest(db.base) == digest
    assert db.get("meta", CLOCK_KEY).now == "2024-05-15T15:00:00"
