"""Money and count invariants of both domains, under random sequences of write calls.

Hypothesis drives a verified customer through random writes, valid and invalid, on random
entities (their orders or reservations, items, variants, flights, payment methods, plus
other customers' records and junk values); after every step the domain's
``invariant_violations`` must be empty. The bases themselves and every seed task's gold
are checked too. Kept to a few seconds: small example counts on the tiny databases.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import rods_env
from environments.airline import DOMAIN as AIRLINE
from environments.airline.schema import CABINS
from environments.airline.tools import AirlineTools
from environments.airline.tools import invariant_violations as airline_violations
from environments.retail import DOMAIN as RETAIL
from environments.retail.schema import CANCEL_REASONS
from environments.retail.tools import RetailTools
from environments.retail.tools import invariant_violations as retail_violations
from rods_env.database import Database

CHECKERS = {"retail": retail_violations, "airline": airline_violations}
STATEFUL = settings(
    max_examples=30,
    stateful_step_count=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
JUNK = ["", "#W0000000", "ZZZZZZ", "credit_card_0000000"]


def pick(pool: list[str]) -> st.SearchStrategy[str]:
    """Mostly the customer's own entities (so writes go through), sometimes junk."""
    return st.sampled_from(pool * 8 + JUNK)


@pytest.mark.parametrize("name", ["retail", "airline"])
@pytest.mark.parametrize("size", ["tiny", "default"])
def test_generated_bases_satisfy_the_invariants(name, size):
    db = rods_env.load_domain(name).database(0, size)
    assert CHECKERS[name](db, everything=True) == []


@pytest.mark.parametrize("name", ["retail", "airline"])
def test_every_seed_gold_keeps_the_invariants(name):
    domain = rods_env.load_domain(name)
    for task in domain.seed_tasks():
        db = domain.database(task.db_seed, task.db_size)
        tools = domain.tools(db)
        for call in task.gold_calls:
            assert tools.call(call.name, call.arguments).ok, (task.id, call)
            assert CHECKERS[name](db) == [], (task.id, call)


# -- Retail ------------------------------------------------------------------------------------
ADDRESS = {
    "address1": "1 Main St",
    "address2": "",
    "city": "Austin",
    "state": "TX",
    "country": "USA",
    "zip": "73301",
}


class RetailWrites(RuleBasedStateMachine):
    """A verified customer, random write calls, the money invariants after every one."""

    def __init__(self) -> None:
        super().__init__()
        self.db = Database(RETAIL.base(0, "tiny"))
        self.tools = RetailTools(self.db)
        self.steps: list[str] = []

    @initialize(data=st.data())
    def verify(self, data: st.DataObject) -> None:
        users = sorted(self.db.keys("users"))
        self.user_id = data.draw(st.sampled_from(users), label="user")
        self.other_id = users[(users.index(self.user_id) + 1) % len(users)]
        email = self.db.get("users", self.user_id).email
        assert self.tools.call("find_user_id_by_email", {"email": email}).ok

    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        user = self.db.get("users", self.user_id)
        other = self.db.get("users", self.other_id)
        name = data.draw(st.sampled_from(sorted(RetailTools.write_names())), label="tool")
        wanted = "delivered" if name.endswith("delivered_order_items") else "pending"
        mine = [self.db.get("orders", o) for o in user.orders]
        fitting = [o.order_id for o in mine if o.status == wanted] or [o.order_id for o in mine]
        order_id = data.draw(pick([*fitting, *other.orders[:1]]), label="order")
        order = self.db.get("orders", order_id)
        items = [i.item_id for i in order.items] if order is not None else ["0000000000"]
        chosen = data.draw(st.lists(st.sampled_from(items), min_size=1, max_size=3), label="items")
        news = []
        for item_id in chosen:
            item = order.item(item_id) if order is not None else None
            variants = (
                [v.item_id for v in self.db.get("products", item.product_id).variants]
                if item is not None
                else ["0000000000"]
            )
            news.append(data.draw(st.sampled_from(variants), label="new item"))
        method = data.draw(
            pick([m.id for m in user.payment_methods] + [other.payment_methods[0].id]),
            label="method",
        )
        args: dict[str, object] = {
            "cancel_pending_order": {
                "order_id": order_id,
                "reason": data.draw(st.sampled_from([*CANCEL_REASONS, "because"])),
            },
            "modify_pending_order_items": {
                "order_id": order_id,
                "item_ids": chosen,
                "new_item_ids": news,
                "payment_method_id": method,
            },
            "modify_pending_order_payment": {"order_id": order_id, "payment_method_id": method},
            "modify_pending_order_address": {"order_id": order_id, **ADDRESS},
            "return_delivered_order_items": {
                "order_id": order_id,
                "item_ids": chosen,
                "payment_method_id": method,
            },
            "exchange_delivered_order_items": {
                "order_id": order_id,
                "item_ids": chosen,
                "new_item_ids": news,
                "payment_method_id": method,
            },
            "modify_user_address": {
                "user_id": data.draw(st.sampled_from([self.user_id] * 4 + [self.other_id])),
                **ADDRESS,
            },
        }[name]
        result = self.tools.call(name, args)
        assert result.error != "InternalToolError", result.output
        self.steps.append(f"{name} {'ok' if result.ok else 'rejected'}")

    @invariant()
    def money_is_sound(self) -> None:
        assert retail_violations(self.db) == [], self.steps


TestRetailWrites = RetailWrites.TestCase
TestRetailWrites.settings = STATEFUL


# -- Airline -----------------------------------------------------------------------------------
class AirlineWrites(RuleBasedStateMachine):
    """An identified customer, random write calls, the money and count invariants after
    every one."""

    def __init__(self) -> None:
        super().__init__()
        self.db = Database(AIRLINE.base(0, "tiny"))
        self.tools = AirlineTools(self.db)
        self.steps: list[str] = []
        self.flights = sorted(self.db.values("flights"), key=lambda f: f.flight_number)
        first = self.flights[0]
        self.days = sorted(first.dates)[-10:]

    @initialize(data=st.data())
    def identify(self, data: st.DataObject) -> None:
        users = sorted(self.db.keys("users"))
        self.user_id = data.draw(st.sampled_from(users), label="user")
        self.other_id = users[(users.index(self.user_id) + 1) % len(users)]
        assert self.tools.call("get_user_details", {"user_id": self.user_id}).ok

    def _legs(self, data: st.DataObject, origin: str, destination: str) -> list[dict[str, str]]:
        """A direct flight on the route (or any flight), on a late date."""
        fits = [f for f in self.flights if f.origin == origin and f.destination == destination]
        flight = data.draw(st.sampled_from(fits or self.flights), label="flight")
        day = data.draw(st.sampled_from(self.days), label="day")
        return [{"flight_number": flight.flight_number, "date": day}]

    def _booking(self, data: st.DataObject, user: object) -> dict[str, object]:
        flight = data.draw(st.sampled_from(self.flights), label="book flight")
        day = data.draw(st.sampled_from(self.days), label="book day")
        cabin = data.draw(st.sampled_from(CABINS), label="cabin")
        me = {"first_name": user.name.first_name, "last_name": user.name.last_name,
              "dob": user.dob}  # fmt: skip
        people = [me, *(p.model_dump() for p in user.saved_passengers[:2])]
        n = data.draw(st.integers(1, len(people)), label="passengers")
        bags = data.draw(st.integers(0, 3), label="bags")
        price = flight.dates[day].prices.of(cabin) * n
        free = {"regular": (0, 1, 2), "silver": (1, 2, 3), "gold": (2, 3, 4)}[user.membership]
        total = price + 50 * max(0, bags - free[CABINS.index(cabin)] * n)
        card = next(m.id for m in user.payment_methods.values() if m.source == "credit_card")
        amount = data.draw(st.sampled_from([total, total + 1]), label="amount")
        return {
            "user_id": self.user_id, "origin": flight.origin, "destination": flight.destination,
            "flight_type": "one_way", "cabin": cabin,
            "flights": [{"flight_number": flight.flight_number, "date": day}],
            "passengers": people[:n], "payment_methods": [{"payment_id": card, "amount": amount}],
            "total_baggages": bags, "insurance": "no",
        }  # fmt: skip

    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        user = self.db.get("users", self.user_id)
        other = self.db.get("users", self.other_id)
        rids = list(user.reservations) + list(other.reservations[:1])
        rid = data.draw(pick(rids), label="reservation")
        res = self.db.get("reservations", rid)
        methods = [*user.payment_methods, "credit_card_0000000"]
        pay = data.draw(st.sampled_from(methods), label="payment")
        n = len(res.passengers) if res is not None else 1
        legs = self._legs(data, res.origin, res.destination) if res is not None else []
        people = [p.model_dump() for p in user.saved_passengers] or [
            {"first_name": "A", "last_name": "B", "dob": "1990-01-01"}
        ]
        calls = [
            ("cancel_reservation", {"reservation_id": rid, "reason": data.draw(st.sampled_from(
                ["change of plan", "airline cancelled flight", "health", "weather", "other"]))}),
            ("update_reservation_cabin", {"reservation_id": rid, "cabin": data.draw(
                st.sampled_from(CABINS)), "payment_id": pay}),
            ("update_reservation_flights", {"reservation_id": rid, "flights": legs,
                                            "payment_id": pay}),
            ("update_reservation_baggages", {"reservation_id": rid, "payment_id": pay,
                "total_baggages": data.draw(st.integers(-2, 40) | st.just(10**17))}),
            ("update_reservation_passengers", {"reservation_id": rid, "passengers": data.draw(
                st.lists(st.sampled_from(people), min_size=n, max_size=n))}),
            ("send_certificate", {"user_id": self.user_id, "reservation_id": rid,
                "amount": data.draw(st.sampled_from([50 * n, 100 * n, 10**9]))}),
            ("book_reservation", self._booking(data, user)),
        ]  # fmt: skip
        name, args = data.draw(st.sampled_from(calls), label="call")
        result = self.tools.call(name, args)
        assert result.error != "InternalToolError", result.output
        self.steps.append(f"{name} {'ok' if result.ok else 'rejected'}")

    @invariant()
    def money_and_counts_are_sound(self) -> None:
        assert airline_violations(self.db) == [], self.steps


TestAirlineWrites = AirlineWrites.TestCase
TestAirlineWrites.settings = STATEFUL
