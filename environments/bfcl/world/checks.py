"""The BFCL API world's policy checks (run by rods' synthesis critique as
``policy_violation``): gold calls that return errors, required values no result shows, and
anything shared with a BFCL test task (:mod:`~.contamination`)."""

from __future__ import annotations

import json
from typing import Any

from environments.bfcl.apis import ERROR_PREFIX
from rods_env.gold import Gold
from rods_env.rewards import Said, is_value
from rods_env.task import Task


def _error(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith(ERROR_PREFIX) or value.startswith("Error:")
    if isinstance(value, dict):
        return "error" in value or value.get("booking_status") is False
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return "error" in value[0]
    return False


def error_results(domain: Any, task: Task, gold: Gold) -> str | None:
    """A gold call whose result is an error (BFCL's functions report many errors as
    results, not exceptions): the task would teach a failing call."""
    for call, out in zip(task.gold_calls, gold.call_outputs, strict=True):
        if _error(out):
            return f"gold call {call.key()[:120]} returns an error"
    return None


def outputs_shown(domain: Any, task: Task, gold: Gold) -> str | None:
    """A value a turn requires that no gold result of that turn or an earlier one shows:
    the agent could only guess it (a long-context pair whose padding changed it, too)."""
    k = 0
    seen: list[str] = []
    for i, turn in enumerate(task.turns):
        n = len(turn.calls)
        seen.extend(json.dumps(v, default=str) for v in gold.call_outputs[k : k + n])
        k += n
        said = None  # the turn's results analysed once for all its outputs (a long-context
        for output in turn.outputs:  # turn's hold thousands of numbers)
            if not is_value(output):
                continue
            if said is None:
                said = Said("\n".join(seen))
            if not said.has(output):  # mentions(text, output)
                return f"turn {i} requires {output!r}, which no tool result shows"
    return None


def not_in_bfcl(domain: Any, task: Task, gold: Gold) -> str | None:
    """Anything the task shares with a BFCL test task (:func:`~.contamination.violations`)."""
    from environments.bfcl.world.contamination import violations

    found = violations(task)
    return "contamination: " + "; ".join(found[:2]) if found else None


POLICY_CHECKS = (error_results, outputs_shown, not_in_bfcl)
"""The domain's checks, cheapest first."""
