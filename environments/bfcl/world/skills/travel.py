"""The travel actions (TravelAPI): book a flight, insure or cancel it, a budget in another
currency, a new card; the booking filed as a ticket or sent to a contact; a flight on the
conversation's new card."""

from __future__ import annotations

from collections.abc import Mapping

from environments.bfcl.world.skills.logins import log_in
from environments.bfcl.world.skills.messages import contacts, tell
from environments.bfcl.world.skills.session import Act, Session, led
from rods_env.domain import SkillUnavailable

ROUTES: frozenset[tuple[str, str]] = frozenset({
    ("SFO", "LAX"), ("SFO", "JFK"), ("SFO", "ORD"), ("SFO", "BOS"), ("LAX", "SFO"),
    ("LAX", "JFK"), ("LAX", "ORD"), ("LAX", "BOS"), ("JFK", "ORD"), ("JFK", "BOS"),
    ("JFK", "LAX"), ("ORD", "LAX"), ("ORD", "BOS"), ("RMS", "BOS"), ("RMS", "JFK"),
    ("SBK", "MPC"), ("SBK", "SVP"), ("MPC", "SVP"), ("SVP", "SHD"), ("SHD", "SSV"),
    ("SSV", "OKD"), ("OKD", "WLB"), ("WLB", "CRH"), ("CRH", "ATV"), ("ATV", "PHV"),
    ("PHV", "GFD"), ("CRH", "SFO"), ("OKD", "LAX"), ("BOS", "RMS"), ("ORD", "RMS"),
})  # fmt: skip
"""Routes the travel API prices (``get_flight_cost``'s table; a subset)."""


CITY_AIRPORT: Mapping[str, str] = {
    "Rivermist": "RMS", "Stonebrook": "SBK", "Maplecrest": "MPC", "Silverpine": "SVP",
    "Shadowridge": "SHD", "Sunset Valley": "SSV", "Oakendale": "OKD", "Willowbend": "WLB",
    "Crescent Hollow": "CRH", "Autumnville": "ATV", "Pinehaven": "PHV", "Greenfield": "GFD",
    "San Francisco": "SFO", "Los Angeles": "LAX", "New York": "JFK", "Chicago": "ORD",
    "Boston": "BOS",
}  # fmt: skip
AIRPORT_CITY: Mapping[str, str] = {v: k for k, v in CITY_AIRPORT.items()}


CURRENCIES = ("EUR", "GBP", "CAD", "AUD", "JPY")


def _card(s: Session, at_least: float) -> str:
    """A card with at least ``at_least`` on it whose last four digits name it alone."""
    tv = s.live("TravelAPI")
    ends = [str(d["card_number"])[-4:] for d in tv.credit_card_list.values()]
    cards = sorted(
        c for c, d in tv.credit_card_list.items()
        if d["balance"] >= at_least and ends.count(str(d["card_number"])[-4:]) == 1
    )  # fmt: skip
    if not cards:
        raise SkillUnavailable("no card with enough balance")
    return s.rng.choice(cards)


def _class_and_date(s: Session) -> tuple[str, str]:
    """A travel class and a date in 2025, drawn."""
    travel_class = s.rng.choice(("economy", "business"))
    date = f"2025-{s.rng.randint(1, 12):02d}-{s.rng.randint(1, 28):02d}"
    return travel_class, date


def _fly(s: Session, card: str, src: str, dst: str, date: str, travel_class: str) -> str:
    """Book a flight between the airports of cities ``src`` and ``dst`` (looked up) with
    ``card``, as the task's booking; returns the booking id."""
    a = s.call("get_nearest_airport_by_city", location=src)["nearest_airport"]
    b = s.call("get_nearest_airport_by_city", location=dst)["nearest_airport"]
    out = s.call("book_flight", access_token=s.token, card_id=card, travel_date=date,
                 travel_from=a, travel_to=b, travel_class=travel_class)  # fmt: skip
    booking_id: str = out["booking_id"]
    s.booking = (booking_id, card)
    return booking_id


def tv_book(s: Session, items: int) -> Act:
    route = s.rng.choice(
        sorted(r for r in ROUTES if r[0] in CITY_AIRPORT.values() and r[1] in CITY_AIRPORT.values())
    )
    src, dst = AIRPORT_CITY[route[0]], AIRPORT_CITY[route[1]]
    travel_class, date = _class_and_date(s)
    card = _card(s, 6000)
    digits = str(s.live("TravelAPI").credit_card_list[card]["card_number"])[-4:]
    lead = log_in(s, "TravelAPI")
    s.call("get_all_credit_cards")
    booking_id = _fly(s, card, src, dst, date, travel_class)
    body = s.pick((
        f"book a {travel_class} flight from {src} to {dst} on {date} with my card ending in "
        f"{digits}, and tell me the booking id.",
        f"I need a {travel_class} ticket {src} to {dst} for {date}; pay with the card that "
        f"ends in {digits} and give me the booking id.",
    ))  # fmt: skip
    facts = {"departure city": src, "destination city": dst, "travel date": date}
    return Act(led(lead, body), outputs=(booking_id,), facts=facts)


def _booking(s: Session) -> tuple[str, str]:
    """The flight booked in this task, or in the conversation this request is added to."""
    booking = s.booking
    if booking is None and not s.turns:  # an added request: the conversation's booking
        booking = s.booking = s.earlier_booking()
    if booking is None:
        raise SkillUnavailable("no booking made in this task yet")
    return booking


def tv_cancel(s: Session, items: int) -> Act:
    booking_id, _ = _booking(s)
    lead = log_in(s, "TravelAPI")  # a request added to a conversation logs in on its own
    s.call("cancel_booking", access_token=s.token, booking_id=booking_id)
    s.booking = None
    body = s.pick(
        ("actually, cancel that booking.", "plans changed: please cancel the flight I just booked.")
    )
    return Act(led(lead, body))


def tv_insure(s: Session, items: int) -> Act:
    booking_id, card = _booking(s)
    kind = s.rng.choice(("basic", "comprehensive"))
    cost = float(s.rng.choice((45, 60, 85, 120)))
    lead = log_in(s, "TravelAPI")
    s.call("purchase_insurance", access_token=s.token, insurance_type=kind,
           booking_id=booking_id, insurance_cost=cost, card_id=card)  # fmt: skip
    body = s.pick((
        f"add {kind} travel insurance to that booking for {int(cost)} dollars, same card.",
        f"insure that trip too: {kind} coverage, {int(cost)} dollars, on the card I used.",
    ))  # fmt: skip
    return Act(led(lead, body))


def tv_budget(s: Session, items: int) -> Act:
    currency = s.rng.choice(CURRENCIES)
    value = float(s.rng.choice((800, 1200, 1500, 2500, 4000)))
    lead = log_in(s, "TravelAPI")
    usd = s.call(
        "compute_exchange_rate", base_currency=currency, target_currency="USD", value=value
    )["exchanged_value"]
    s.call("set_budget_limit", access_token=s.token, budget_limit=usd)
    body = s.pick((
        f"my travel budget is {int(value)} {currency}: convert it to USD and set that as my "
        "budget limit.",
        f"set my budget limit to {int(value)} {currency}, converted to USD first.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"currency": currency})


def tv_card(s: Session, items: int) -> Act:
    p = s.person
    number = str(s.rng.randint(10**15, 10**16 - 1))
    exp = f"{s.rng.randint(1, 12):02d}/{s.rng.randint(2028, 2033)}"
    cvv = s.rng.randint(100, 999)
    lead = log_in(s, "TravelAPI")
    card = s.call("register_credit_card", access_token=s.token, card_number=number,
                  expiration_date=exp, cardholder_name=p.name, card_verification_number=cvv)["card_id"]  # fmt: skip
    body = s.pick((
        f"register my new card {number}, expiring {exp}, CVV {cvv}, in my name {p.name}, "
        "and tell me its card id.",
        f"add the card {number} (exp {exp}, security code {cvv}, holder {p.name}) and give me "
        "the new card id.",
    ))  # fmt: skip
    return Act(led(lead, body), outputs=(card,), facts={"card number": number})


def tv_ticket(s: Session, items: int) -> Act:
    booking_id, _ = _booking(s)
    title = "Trip expense claim"
    lead = log_in(s, "TicketAPI")
    s.call("create_ticket", title=title, description=booking_id, priority=2)
    body = s.pick((
        f"open a priority 2 ticket titled '{title}' with the booking id as its description.",
        f"file a ticket '{title}', priority 2, and put the booking id in the description.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"ticket title": title})


def tv_message(s: Session, items: int) -> Act:
    booking_id, _ = _booking(s)
    name = contacts(s, 1)[0]
    lead = log_in(s, "MessageAPI")
    tell(s, name, booking_id)
    body = s.pick(
        (f"send {name} the booking id in a message.", f"message {name} just the booking id.")
    )
    return Act(led(lead, body), facts={"recipient": name})


def tv_book_new_card(s: Session, items: int) -> Act:
    """Follow-up: book a flight with the card the conversation registered."""
    card = str(s.the_new("TravelAPI", "credit_card_list", "card"))
    src, dst = s.rng.choice(sorted((AIRPORT_CITY[a], AIRPORT_CITY[b]) for a, b in ROUTES
                                   if a in AIRPORT_CITY and b in AIRPORT_CITY))  # fmt: skip
    travel_class, date = _class_and_date(s)
    lead = log_in(s, "TravelAPI")
    booking_id = _fly(s, card, src, dst, date, travel_class)
    body = s.pick((
        f"book a {travel_class} flight from {src} to {dst} on {date} with the card I just "
        "registered, and tell me the booking id.",
        f"use my new card for a {travel_class} ticket {src} to {dst} on {date}; give me the "
        "booking id.",
    ))  # fmt: skip
    facts = {"departure city": src, "destination city": dst, "travel date": date}
    return Act(led(lead, body), outputs=(booking_id,), facts=facts)
