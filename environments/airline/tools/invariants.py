"""The money and count invariants of an Airline database (the tests and the fuzzers check
them after every write).
"""

from __future__ import annotations

from environments.airline.schema import (
    CABINS,
    Certificate,
    GiftCard,
    Reservation,
    flight_table,
    reservation_table,
    user_table,
)
from environments.airline.tools.rules import MAX_BAGS_PER_PASSENGER, MAX_PASSENGERS
from rods_env.database import Database


# -- invariants ------------------------------------------------------------------------------
def _legs(res: Reservation | None) -> dict[tuple[str, str, str], int]:
    """Seats a reservation holds: (flight number, date, cabin) -> passengers (0 when
    cancelled or absent)."""
    if res is None or res.status != "active":
        return {}
    return {(f.flight_number, f.date, res.cabin): len(res.passengers) for f in res.flights}


def _net(res: Reservation | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in res.payment_history if res is not None else ():
        out[p.payment_id] = out.get(p.payment_id, 0) + p.amount
    return out


def invariant_violations(db: Database, everything: bool = False) -> list[str]:
    """The money and count rules of the Airline domain that ``db`` breaks (empty when sound).

    Invariants (docs/reward-design.md lists them):

    * per reservation and payment method, refunds never exceed payments;
    * a cancelled reservation has refunded every card what it paid (certificates are not
      refunded);
    * 1 to :data:`MAX_PASSENGERS` passengers; 0 <= non-free bags <= bags <=
      :data:`MAX_BAGS_PER_PASSENGER` per passenger;
    * gift card and certificate amounts are never negative; seats left are never negative;
    * seats move exactly with the reservations (a flight's seats left change by the
      passengers that reservations added or released on it since the base);
    * a gift card's balance moves exactly as the payments written on it since the base.

    Args:
        db: The state.
        everything: Check every record (slow); by default only records that differ from the
            base, which is checked once (the generator's output).
    """
    bad: list[str] = []
    changes = db.changes()

    def keys(table: str) -> list[str]:
        return list(db.keys(table)) if everything else [k for t, k in changes if t == table]

    seat_flow: dict[tuple[str, str, str], int] = {}
    card_flow: dict[str, int] = {}
    for rid in keys("reservations"):
        res = db.get("reservations", rid)
        if res is None:
            continue
        pays: dict[str, tuple[int, int]] = {}
        for p in res.payment_history:
            paid, refunded = pays.get(p.payment_id, (0, 0))
            pays[p.payment_id] = (paid + max(p.amount, 0), refunded + max(-p.amount, 0))
        for pid, (paid, refunded) in pays.items():
            if refunded > paid:
                bad.append(f"reservation {rid}: {pid} refunded {refunded} but paid {paid}")
            if res.status == "cancelled" and not pid.startswith("certificate") and paid != refunded:
                bad.append(f"reservation {rid}: cancelled, {pid} paid {paid}, got {refunded} back")
        n = len(res.passengers)
        if not 1 <= n <= MAX_PASSENGERS:
            bad.append(f"reservation {rid}: {n} passengers")
        if not 0 <= res.nonfree_baggages <= res.total_baggages <= MAX_BAGS_PER_PASSENGER * n:
            bad.append(
                f"reservation {rid}: {res.total_baggages} bags, {res.nonfree_baggages} non-free, "
                f"{n} passengers"
            )
        if not everything:
            before = reservation_table(db.base).get(rid)
            now_legs, old_legs = _legs(res), _legs(before)
            for leg in set(now_legs) | set(old_legs):
                held = now_legs.get(leg, 0) - old_legs.get(leg, 0)
                seat_flow[leg] = seat_flow.get(leg, 0) + held
            now_net, old_net = _net(res), _net(before)
            for pid in set(now_net) | set(old_net):
                card_flow[pid] = card_flow.get(pid, 0) + now_net.get(pid, 0) - old_net.get(pid, 0)
    for uid in keys("users"):
        user = db.get("users", uid)
        if user is None:
            continue
        base = None if everything else user_table(db.base).get(uid)
        for pid, method in user.payment_methods.items():
            if isinstance(method, GiftCard | Certificate) and method.amount < 0:
                bad.append(f"user {uid}: {pid} has {method.amount}")
            if not isinstance(method, GiftCard) or base is None:
                continue
            old = base.payment_methods.get(pid)
            moved = method.amount - (old.amount if isinstance(old, GiftCard) else 0)
            if moved != -card_flow.get(pid, 0):
                bad.append(
                    f"user {uid}: gift card {pid} moved by {moved}, its payments by "
                    f"{-card_flow.get(pid, 0)}"
                )
    for number in keys("flights"):
        flight = db.get("flights", number)
        base_flight = None if everything else flight_table(db.base).get(number)
        for day, instance in flight.dates.items():
            for cabin in CABINS:
                left = instance.available_seats.of(cabin)
                if left < 0:
                    bad.append(f"flight {number} {day}: {left} {cabin} seats left")
                if base_flight is None:
                    continue
                moved = left - base_flight.dates[day].available_seats.of(cabin)
                if moved != -seat_flow.get((number, day, cabin), 0):
                    bad.append(
                        f"flight {number} {day}: {cabin} seats moved by {moved}, reservations "
                        f"by {-seat_flow.get((number, day, cabin), 0)}"
                    )
    if not everything:  # a leg whose flight record never changed must have no seat flow
        for (number, day, cabin), held in seat_flow.items():
            if held and ("flights", number) not in changes:
                bad.append(f"flight {number} {day}: reservations hold {held} more {cabin} seats")
    return bad
