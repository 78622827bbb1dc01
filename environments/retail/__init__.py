"""The Retail domain: an online store's customers, products and orders.

The package exposes one :class:`~rods_env.domain.Domain`, ``DOMAIN``, found through the
``rods.domains`` entry point ``retail = "environments.retail:DOMAIN"``.
"""

from __future__ import annotations

from pathlib import Path

from environments.retail.checks import POLICY_CHECKS
from environments.retail.generator import LONG_SIZES, generate
from environments.retail.skills import SKILLS, forbidden_requests, unrelated_write
from environments.retail.tools import RetailTools, invariant_violations
from rods_env.domain import Domain

_HERE = Path(__file__).parent

DOMAIN = Domain(
    name="retail",
    title="Retail",
    generate=generate,
    sizes=("tiny", "default", *LONG_SIZES),
    toolkit=RetailTools,
    policy=(_HERE / "policy.md").read_text(encoding="utf-8"),
    brief_policy=(_HERE / "policy_brief.md").read_text(encoding="utf-8"),
    brief_tools=(
        "find_user_id_by_email",
        "find_user_id_by_name_zip",
        "get_user_details",
        "get_order_details",
    ),
    skills=SKILLS,
    seeds_path=_HERE / "seeds.jsonl",
    unrelated_write=unrelated_write,
    policy_checks=POLICY_CHECKS,
    forbidden_requests=forbidden_requests,
    invariants=invariant_violations,
    customers={"users": "user_id", "orders": "user_id"},
)

__all__ = ["DOMAIN", "RetailTools", "generate"]
