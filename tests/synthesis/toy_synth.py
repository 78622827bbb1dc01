"""The toy bank of tests/core with shaped skills and a "long" size, for synthesis tests."""

from __future__ import annotations

import random
from collections.abc import Mapping

from rods_env import Database, Domain, Draft, Skill, SkillUnavailable, ToolCall, Turn, UserProfile
from rods_env.task import Task
from tests.core.toy_domain import TOY, Account, BankTools, recent_payments

ORDINALS = ("", "second ", "third ", "fourth ")


def generate(seed: int, size: str) -> dict[str, dict[str, Account]]:
    rng = random.Random(seed)
    n = {"tiny": 8, "default": 40, "long": 400}[size]
    rows = {}
    for i in range(n):
        acc = Account(
            id=f"ACC{i:04d}",
            owner_email=f"user{i}@example.com",
            balance=rng.randrange(100, 5000),
            recent=recent_payments(seed, i),
        )
        rows[acc.id] = acc
    return {"accounts": rows}


def _accounts(db: Database, rng: random.Random, k: int) -> list[Account]:
    accs = sorted(db.values("accounts"), key=lambda a: a.id)
    if len(accs) < k:
        raise SkillUnavailable(f"needs {k} accounts, the database has {len(accs)}")
    return rng.sample(accs, k)


def _transfer(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    n = shape["transfers"]
    src, *dsts = _accounts(db, rng, n + 1)
    facts = {"email": src.owner_email}
    calls = [ToolCall(name="find_account", arguments={"email": src.owner_email})]
    parts = []
    for i, dst in enumerate(dsts):
        amount = rng.randrange(10, 90)
        facts[f"{ORDINALS[i]}recipient account"] = dst.id
        parts.append(f"{amount} dollars to account {dst.id}")
        calls.append(
            ToolCall(
                name="transfer",
                arguments={"from_account": src.id, "to_account": dst.id, "amount": amount},
            )
        )
    user = UserProfile(name="Sam", facts=facts)
    turn = Turn(request=f"I want to send {' and '.join(parts)}.", calls=tuple(calls))
    return Draft(user=user, turns=(turn,))


def _balance(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    (a,) = _accounts(db, rng, 1)
    user = UserProfile(name="Kim", facts={"email": a.owner_email})
    turn = Turn(
        request="What is my balance?",
        calls=(
            ToolCall(name="find_account", arguments={"email": a.owner_email}),
            ToolCall(name="get_account", arguments={"account_id": a.id}),
        ),
        outputs=(str(a.balance),),
    )
    return Draft(user=user, turns=(turn,))


def _session(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    a, b = _accounts(db, rng, 2)
    amount = rng.randrange(10, 90)
    user = UserProfile(
        name="Lee", facts={"email": a.owner_email, "recipient account": b.id, "reason": "lost card"}
    )
    find = ToolCall(name="find_account", arguments={"email": a.owner_email})
    turns = [
        Turn(
            request=f"I want to send {amount} dollars to account {b.id}.",
            calls=(
                find,
                ToolCall(
                    name="transfer",
                    arguments={"from_account": a.id, "to_account": b.id, "amount": amount},
                ),
            ),
        ),
        Turn(
            request="What is my balance now?",
            calls=(ToolCall(name="get_account", arguments={"account_id": a.id}),),
            outputs=(str(a.balance - amount),),
        ),
        Turn(
            request="I lost my card (reason: lost card), please freeze my account.",
            calls=(
                ToolCall(
                    name="set_frozen",
                    arguments={"account_id": a.id, "frozen": True, "reason": "lost card"},
                ),
            ),
        ),
    ]
    return Draft(user=user, turns=tuple(turns[: shape["turns"]]))


def _forbidden(task: Task, db: Database, rng: random.Random) -> list[str]:
    """Moving money out of someone else's account: the policy serves the verified customer."""
    touched = {v for c in task.gold_calls for v in c.arguments.values() if isinstance(v, str)}
    others = [a.id for a in sorted(db.values("accounts"), key=lambda a: a.id)]
    return [
        f"My neighbour also asked me to move 50 dollars out of account {a} for them."
        for a in others
        if a not in touched
    ][:5]


SHAPED = Domain(
    name="toybank",
    title="Toybank",
    generate=generate,
    sizes=("tiny", "default", "long"),
    toolkit=BankTools,
    policy=TOY.policy,
    skills=(
        Skill(
            "transfer",
            "send money to one or more accounts",
            _transfer,
            shape={"transfers": 1},
            limits={"transfers": (1, 3)},
        ),
        Skill("balance", "tell the balance", _balance, writes=False),
        Skill(
            "session",
            "a transfer, then the new balance, then freezing the account",
            _session,
            shape={"turns": 1},
            limits={"turns": (1, 3)},
        ),
    ),
    unrelated_write=TOY.unrelated_write,
    forbidden_requests=_forbidden,
)
"""A toy domain whose skills can be expanded (``transfers`` and ``turns`` axes)."""
