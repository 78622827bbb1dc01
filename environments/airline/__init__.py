"""The Airline domain: customers, flights over a month of dates, and reservations.

The package exposes one :class:`~rods_env.domain.Domain`, ``DOMAIN``, found through the
``rods.domains`` entry point ``airline = "environments.airline:DOMAIN"``.
"""

from __future__ import annotations

from pathlib import Path

from environments.airline.checks import POLICY_CHECKS
from environments.airline.generator import LONG_SIZES, generate
from environments.airline.skills import SKILLS, forbidden_requests, unrelated_write
from environments.airline.tools import AirlineTools, invariant_violations
from rods_env.domain import Domain

_HERE = Path(__file__).parent

DOMAIN = Domain(
    name="airline",
    title="Airline",
    generate=generate,
    sizes=("tiny", "default", *LONG_SIZES),
    toolkit=AirlineTools,
    policy=(_HERE / "policy.md").read_text(encoding="utf-8"),
    brief_policy=(_HERE / "policy_brief.md").read_text(encoding="utf-8"),
    brief_tools=("get_user_details", "get_reservation_details"),
    skills=SKILLS,
    seeds_path=_HERE / "seeds.jsonl",
    unrelated_write=unrelated_write,
    policy_checks=POLICY_CHECKS,
    forbidden_requests=forbidden_requests,
    invariants=invariant_violations,
    customers={"users": "user_id", "reservations": "user_id"},
)

__all__ = ["DOMAIN", "AirlineTools", "generate"]
