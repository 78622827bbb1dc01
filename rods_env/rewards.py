"""Rewards: pure functions over (task gold, state, what the agent said).

A user turn passes when (1) every record the turn's gold calls change holds its gold value,
(2) no other record changed during the turn, and (3) every output the turn requires appears
in the agent's messages of that turn as a whole token. ``progress`` is the share of passed
turns; ``success`` is strict: the final state equals the gold final state and every turn's
outputs were communicated. The step reward is the increase of progress.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from rods_env.database import DELETED, Checkpoint, Database
from rods_env.gold import Gold, TurnGold

_NUMBER_OUTPUT = re.compile(r"^[$€£]?\s*-?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?%?$")
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.:/-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w]|\.\d)")


def _as_decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def mentions(text: str, output: str) -> bool:
    """Whether ``output`` appears in ``text`` as a whole token.

    Numbers compare by value ("1,234.5" matches "1234.50"; "10" never matches "100" or
    "10.5"); other outputs match case-insensitively with word boundaries ("W12" does not
    match "W123"). An output with ``|`` is satisfied by any of its alternatives
    (``"cannot|unable"``).

    Args:
        text: What the agent said.
        output: A required output value.
    """
    if "|" in output:
        return any(mentions(text, alternative) for alternative in output.split("|"))
    out = output.strip()
    if not out:
        return True
    if _NUMBER_OUTPUT.match(out):
        target = _as_decimal(re.sub(r"[$€£%\s]", "", out))
        if target is not None:
            for m in _NUMBER_IN_TEXT.finditer(text):
                value = _as_decimal(m.group(1) + (m.group(2) or ""))
                if value == target:
                    return True
            return False
    token, haystack = out.lower(), text.lower()
    if token not in haystack:  # cheap and common: no need to build a pattern
        return False
    return _token_pattern(token).search(haystack) is not None


@lru_cache(maxsize=65536)
def _token_pattern(token: str) -> re.Pattern[str]:
    return re.compile(r"(?<![0-9a-z_])" + re.escape(token) + r"(?![0-9a-z_])")


@dataclass(frozen=True)
class TurnResult:
    """How one user turn went.

    Attributes:
        index: Turn index.
        passed: Effect present, no collateral change, every output communicated.
        effect_ok: Every record the gold changes holds the gold value.
        collateral: ``table/key`` of records changed during the turn that the gold leaves alone.
        missing_outputs: Required outputs the agent did not communicate.
    """

    index: int
    passed: bool
    effect_ok: bool
    collateral: tuple[str, ...]
    missing_outputs: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for ``info`` and logs."""
        return {
            "turn": self.index,
            "passed": self.passed,
            "effect_ok": self.effect_ok,
            "collateral": list(self.collateral),
            "missing_outputs": list(self.missing_outputs),
        }


def effect_present(turn: TurnGold, db: Database) -> bool:
    """Whether every record the turn's gold changes holds its gold value in ``db``."""
    for (table, key), value in turn.effect.items():
        current = db.get(table, key, DELETED)
        if current is DELETED or value is DELETED:
            if current is not value:
                return False
        elif current != value:
            return False
    return True


def missing_outputs(turn: TurnGold, agent_text: str) -> tuple[str, ...]:
    """Required outputs of the turn not found in ``agent_text``."""
    return tuple(o for o in turn.outputs if not mentions(agent_text, o))


def evaluate_turn(
    index: int, turn: TurnGold, db: Database, turn_start: Checkpoint, agent_text: str
) -> TurnResult:
    """Evaluate one user turn at its end.

    Args:
        index: Turn index.
        turn: The turn's gold.
        db: The state at the end of the turn.
        turn_start: Checkpoint taken when the turn began.
        agent_text: Everything the agent wrote during the turn.
    """
    ok = effect_present(turn, db)
    collateral = tuple(
        sorted(f"{t}/{k}" for t, k in db.changed_since(turn_start) if (t, k) not in turn.effect)
    )
    missing = missing_outputs(turn, agent_text)
    return TurnResult(
        index=index,
        passed=ok and not collateral and not missing,
        effect_ok=ok,
        collateral=collateral,
        missing_outputs=missing,
    )


def progress(results: list[TurnResult], n_turns: int) -> float:
    """Share of the task's turns that passed, in [0, 1]."""
    if n_turns <= 0:
        return 0.0
    return sum(1 for r in results if r.passed) / n_turns


def success(gold: Gold, db: Database, results: list[TurnResult]) -> bool:
    """Strict success: final state equals the gold final state, every output communicated."""
    if len(results) != len(gold.turns) or any(r.missing_outputs for r in results):
        return False
    return db.changes() == gold.final
