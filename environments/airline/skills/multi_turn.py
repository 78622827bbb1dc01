"""The Airline skill of several turns: changes to one reservation, one per turn."""

from __future__ import annotations

import random
from collections.abc import Mapping

from environments.airline.schema import Reservation
from environments.airline.skills.changes import _op_bags, _op_change, _op_upgrade
from environments.airline.skills.common import (
    _bookable_now,
    _candidates,
    _draft,
    _Gold,
    _over_candidates,
    _pay_options,
)
from rods_env.database import Database
from rods_env.domain import Draft, SkillUnavailable

# -- several turns -----------------------------------------------------------------------------
MULTI_TURN_PLAN: tuple[str, ...] = ("upgrade", "change", "bags")
"""The turns of :func:`multi_turn`, in order (``turns`` takes the first two or all three)."""


def multi_turn(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Upgrade the cabin of a one-way reservation, then move its flight (basic economy flights
    can only change after the upgrade), then add bags: each request its own turn."""
    turns = int(shape.get("turns", 2))
    if not 1 <= turns <= len(MULTI_TURN_PLAN):
        raise SkillUnavailable(f"multi_turn has 1 to {len(MULTI_TURN_PLAN)} turns, not {turns}")

    def keep(res: Reservation) -> bool:
        return (
            res.cabin != "business"
            and res.flight_type == "one_way"
            and len(res.flights) == 1
            and _bookable_now(db, res)
        )

    def build(res: Reservation) -> Draft:
        g = _Gold(db)
        user = g.call("get_user_details", user_id=res.user_id)
        rid = res.reservation_id
        pay = _pay_options(user, rng, cards_only=True)[0]
        facts = {"user id": res.user_id, "reservation id": rid}
        for op in MULTI_TURN_PLAN[:turns]:
            if op == "upgrade":
                request = _op_upgrade(g, rng, user, rid, facts, pay)
            elif op == "change":
                request = _op_change(g, rng, user, rid, facts, pay, fresh=False)
            else:
                request = _op_bags(g, rng, user, rid, facts, pay, rng.randint(1, 2), fresh=False)
            g.end_turn(request)
        return _draft(g, user, rng, facts)

    return _over_candidates(_candidates(db, rng, keep), build, f"multi-turn {dict(shape)}")
