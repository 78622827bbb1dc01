"""Skills assembled from requests: one request on one customer's account
(:func:`single_request`), or two or three requests of one customer, one per turn
(:func:`multi_turn`); the verifying look-up either way."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

from environments.retail.schema import (
    User,
)
from environments.retail.skills.common import (
    ORDINALS,
    Builder,
    tool_call,
)
from environments.retail.skills.information import order_info, product_info
from environments.retail.skills.items import exchange_items, modify_items, return_items
from environments.retail.skills.orders import (
    cancel_orders,
    modify_address,
    modify_payment,
    modify_user_address,
)
from environments.retail.tools import RetailTools, name_zip_key
from rods_env.database import Database
from rods_env.domain import Draft, SkillUnavailable, scattered
from rods_env.task import ToolCall, Turn, UserProfile
from rods_env.user import PERSONA_NAMES, persona_text


# -- assembling drafts ---------------------------------------------------------------------
def _name_zip_unique(db: Database, user: User) -> bool:
    key = name_zip_key(user)
    return len(db.find("users", "name_zip", key, key=name_zip_key)) == 1


_EMAIL, _NAME_ZIP = 0, 1


def _identity_choice(rng: random.Random, shape: Mapping[str, int]) -> int:
    """Which look-up verifies the customer: the shape's ``identity`` or a draw (60% email)."""
    if "identity" in shape:
        return int(shape["identity"])
    return _EMAIL if rng.random() < 0.6 else _NAME_ZIP


def _identity(
    db: Database, user: User, method: int
) -> tuple[list[ToolCall], dict[str, str]] | None:
    """The verifying look-up and the identity facts; None when ``method`` cannot single the
    customer out (another customer shares the name and zip code)."""
    names = {"first name": user.name.first_name, "last name": user.name.last_name}
    if method == _EMAIL:
        facts = {"email": user.email, **names, "zip code": user.address.zip}
        return [tool_call("find_user_id_by_email", email=user.email)], facts
    if not _name_zip_unique(db, user):
        return None
    call = tool_call(
        "find_user_id_by_name_zip",
        first_name=user.name.first_name,
        last_name=user.name.last_name,
        zip=user.address.zip,
    )
    return [call], {**names, "zip code": user.address.zip}


def _profile(rng: random.Random, user: User, facts: dict[str, str]) -> UserProfile:
    name = f"{user.name.first_name} {user.name.last_name}"
    return UserProfile(name=name, persona=persona_text(rng.choice(PERSONA_NAMES)), facts=facts)


def _users(db: Database, rng: random.Random) -> Iterator[User]:
    return scattered(list(db.values("users")), rng)


def _writes(calls: Sequence[ToolCall]) -> bool:
    writes = RetailTools.write_names()
    return any(c.name in writes for c in calls)


def _has_spare(db: Database, user: User, used: Collection[str]) -> bool:
    """Whether the customer has a pending or delivered order the task leaves alone, so a
    write unrelated to the task exists (see :func:`unrelated_write`)."""
    for order_id in user.orders:
        order = db.get("orders", order_id)
        if order_id not in used and order is not None and order.status in ("pending", "delivered"):
            return True
    return False


def single_request(
    builder: Builder,
) -> Callable[[Database, random.Random, Mapping[str, int]], Draft]:
    """A skill made of one request on one user's account."""

    def generate(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
        method = _identity_choice(rng, shape)
        for user in _users(db, rng):
            part = builder(db, rng, user, shape, frozenset())
            if part is None or (_writes(part.calls) and not _has_spare(db, user, part.orders)):
                continue
            identity = _identity(db, user, method)
            if identity is None:
                continue
            calls, facts = identity
            if part.needs_user_details:
                calls.append(tool_call("get_user_details", user_id=user.user_id))
            turn = Turn(
                request=part.request,
                calls=tuple(calls + part.calls),
                outputs=tuple(part.outputs),
            )
            return Draft(
                user=_profile(rng, user, {**facts, **part.facts}),
                turns=(turn,),
                shape={**shape, "identity": method, **part.choices},
            )
        raise SkillUnavailable(f"no user satisfies the preconditions for shape {dict(shape)}")

    return generate


_TURN_BUILDERS: tuple[Builder, ...] = (
    cancel_orders,
    modify_items,
    modify_address,
    modify_payment,
    return_items,
    exchange_items,
    order_info,
    product_info,
    modify_user_address,
)


_READ_BUILDERS = (order_info, product_info)


def _multi_turn_plan(count: int, plan: int) -> list[Builder]:
    """The requests of a multi-turn task, fixed by ``plan``: the first ``count`` builders of
    a plan-seeded shuffle, with at least one write among them. Growing ``count`` keeps the
    earlier turns, so *expand* adds exactly one request."""
    order = list(_TURN_BUILDERS)
    random.Random(f"retail-multi-turn:{plan}").shuffle(order)
    if all(b in _READ_BUILDERS for b in order[:count]):
        first_write = next(i for i, b in enumerate(order) if b not in _READ_BUILDERS)
        order.insert(0, order.pop(first_write))
    return order[:count]


def multi_turn(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Two or three requests of one customer; each turn is drawn on the state the previous
    turns' gold calls leave, so later turns stay valid. Which requests, in which order, is
    fixed by the shape's ``plan`` (drawn when absent), so a resample keeps the structure."""
    count = shape.get("turns", 2)
    method = _identity_choice(rng, shape)
    # a given plan is kept (resample, expand); otherwise draw plans until one is feasible
    plans = [int(shape["plan"])] if "plan" in shape else [rng.randrange(1_000) for _ in range(8)]
    for plan in plans:
        draft = _multi_turn_with_plan(db, rng, shape, count, plan, method)
        if draft is not None:
            return draft
    raise SkillUnavailable(f"no user supports the {count} requests of plans {plans}")


def _multi_turn_with_plan(
    db: Database, rng: random.Random, shape: Mapping[str, int], count: int, plan: int, method: int
) -> Draft | None:
    builders = _multi_turn_plan(count, plan)
    for user in itertools.islice(_users(db, rng), 100):
        identity = _identity(db, user, method)
        if identity is None:
            continue
        calls, facts = identity
        calls.append(tool_call("get_user_details", user_id=user.user_id))
        state = db.fork()
        tools = RetailTools(state)
        turns: list[Turn] = []
        used_orders: frozenset[str] = frozenset()
        choices: dict[str, int] = {}
        for index, builder in enumerate(builders):
            current = state.get("users", user.user_id)
            prefix = f"t{index}."
            sub = {k[len(prefix) :]: v for k, v in shape.items() if k.startswith(prefix)}
            part = builder(state, rng, current, sub, used_orders)
            if part is None:
                break
            turn_calls = calls + part.calls if index == 0 else part.calls
            for call in turn_calls:
                result = tools.call(call.name, call.arguments, render=False)
                if not result.ok:  # pragma: no cover - a bug in a builder
                    raise AssertionError(f"gold call failed: {call.key()}: {result.output}")
            for label, value in part.facts.items():
                key = label if label not in facts else f"{label} ({ORDINALS[index]} request)"
                facts[key] = value
            used_orders |= set(part.orders)
            choices.update({prefix + k: v for k, v in part.choices.items()})
            turns.append(
                Turn(request=part.request, calls=tuple(turn_calls), outputs=tuple(part.outputs))
            )
        if len(turns) == count and _has_spare(state, user, used_orders):
            return Draft(
                user=_profile(rng, user, facts),
                turns=tuple(turns),
                shape={**shape, "turns": count, "plan": plan, "identity": method, **choices},
            )
    return None
