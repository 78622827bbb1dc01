"""A small bank domain used to test rods_env without depending on the real domains."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Literal

from rods_env import (
    Database,
    Domain,
    Draft,
    Record,
    Skill,
    SkillUnavailable,
    ToolCall,
    Toolkit,
    Turn,
    UserProfile,
    tool,
)
from rods_env.errors import InvalidArgumentError, RuleViolationError
from rods_env.task import Task


class Account(Record):
    id: str
    owner_email: str
    balance: int
    frozen: bool = False
    recent: tuple[int, ...] = ()
    """Amounts of recent card payments: a record with many values, as real ones have (an
    agent that states every value it read must not pass for one that answers)."""


def recent_payments(seed: int, i: int) -> tuple[int, ...]:
    """The recent payments of account ``i`` (their own generator: balances stay as they were)."""
    rng = random.Random(f"recent:{seed}:{i}")
    return tuple(rng.randrange(10, 500) for _ in range(10))


def generate(seed: int, size: str) -> dict[str, dict[str, Record]]:
    rng = random.Random(seed)
    n = {"tiny": 6, "default": 40}[size]
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


class BankTools(Toolkit):
    """Tools of the toy bank."""

    @tool
    def find_account(self, email: str) -> str:
        """Find the account id of a customer.

        Args:
            email: The customer's email address.
        """
        for acc in self.db.values("accounts"):
            if acc.owner_email == email:
                return acc.id
        raise InvalidArgumentError(
            f"No account for email '{email}'.", "Ask the customer to check the email."
        )

    @tool
    def get_account(self, account_id: str) -> Account:
        """Get an account's details.

        Args:
            account_id: The account id, such as 'ACC0001'.
        """
        return self.db.require("accounts", account_id, what="account", hint="Use find_account.")

    @tool(writes=True)
    def transfer(self, from_account: str, to_account: str, amount: int) -> str:
        """Move money between two accounts.

        Args:
            from_account: Account to debit.
            to_account: Account to credit.
            amount: Whole dollars, positive.
        """
        src = self.db.require("accounts", from_account, what="account")
        self.db.put("accounts", src.id, src.model_copy(update={"balance": src.balance - amount}))
        dst = self.db.require("accounts", to_account, what="account")
        if amount <= 0:
            raise InvalidArgumentError(f"amount must be positive, got {amount}.")
        if src.frozen:
            raise RuleViolationError(f"Account '{src.id}' is frozen.")
        if src.balance < amount:
            raise RuleViolationError(
                f"Balance {src.balance} is below {amount}.", "Offer a smaller amount."
            )
        self.db.put("accounts", dst.id, dst.model_copy(update={"balance": dst.balance + amount}))
        return f"Transferred {amount}. New balance: {src.balance - amount}."

    @tool(writes=True)
    def set_frozen(
        self, account_id: str, frozen: bool, reason: Literal["lost card", "fraud"]
    ) -> str:
        """Freeze or unfreeze an account.

        Args:
            account_id: The account id.
            frozen: True to freeze.
            reason: Why.
        """
        acc = self.db.require("accounts", account_id, what="account")
        self.db.put("accounts", acc.id, acc.model_copy(update={"frozen": frozen}))
        return "ok"

    @tool(terminal=True)
    def transfer_to_human(self, summary: str) -> str:
        """Hand the conversation to a human.

        Args:
            summary: What the customer needs.
        """
        return "Transferred."


def _pick(db: Database, rng: random.Random, k: int) -> list[Account]:
    accs = sorted(db.values("accounts"), key=lambda a: a.id)
    if len(accs) < k:
        raise SkillUnavailable("not enough accounts")
    return rng.sample(accs, k)


def _transfer(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    a, b = _pick(db, rng, 2)
    amount = rng.randrange(10, 90)
    user = UserProfile(
        name="Sam", facts={"email": a.owner_email, "recipient account": b.id, "amount": str(amount)}
    )
    turn = Turn(
        request=f"I want to send {amount} dollars to account {b.id}.",
        calls=(
            ToolCall(name="find_account", arguments={"email": a.owner_email}),
            ToolCall(
                name="transfer",
                arguments={"from_account": a.id, "to_account": b.id, "amount": amount},
            ),
        ),
    )
    return Draft(user=user, turns=(turn,))


def _balance(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    (a,) = _pick(db, rng, 1)
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


def _freeze_then_balance(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    (a,) = _pick(db, rng, 1)
    user = UserProfile(name="Lee", facts={"email": a.owner_email, "reason": "lost card"})
    t1 = Turn(
        request="I lost my card (reason: lost card), please freeze my account.",
        calls=(
            ToolCall(name="find_account", arguments={"email": a.owner_email}),
            ToolCall(
                name="set_frozen",
                arguments={"account_id": a.id, "frozen": True, "reason": "lost card"},
            ),
        ),
    )
    t2 = Turn(
        request="Also, what is my balance now?",
        calls=(ToolCall(name="get_account", arguments={"account_id": a.id}),),
        outputs=(str(a.balance),),
    )
    return Draft(user=user, turns=(t1, t2))


def _unrelated_write(task: Task, db: Database) -> ToolCall:
    touched = {v for c in task.gold_calls for v in c.arguments.values() if isinstance(v, str)}
    acc = next(
        a for a in db.values("accounts") if a.id not in touched and a.owner_email not in touched
    )
    return ToolCall(
        name="set_frozen",
        arguments={"account_id": acc.id, "frozen": not acc.frozen, "reason": "fraud"},
    )


TOY = Domain(
    name="toybank",
    title="Toybank",
    generate=generate,
    sizes=("tiny", "default"),
    toolkit=BankTools,
    policy="You are a bank agent. Verify the customer by email. Confirm before any write.",
    skills=(
        Skill("transfer", "send money", _transfer),
        Skill("balance", "tell the balance", _balance, writes=False),
        Skill("freeze_then_balance", "two turns", _freeze_then_balance),
    ),
    unrelated_write=_unrelated_write,
)
