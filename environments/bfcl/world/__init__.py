"""The BFCL API world: a rods domain over BFCL's eight API classes, for training.

BFCL multi-turn has no train split: its 800 tasks are its test set. This domain trains on
the same API classes with tasks of its own: worlds drawn by our generator
(:mod:`~.generator`), the 128 functions as tools with BFCL's schemas and result texts
(:mod:`~.tools`), multi-turn skills over one to three classes (:mod:`~.skills`), and rods'
synthesis, critique and exploit panel as for any domain. What makes it BFCL-like:

* the tools a task offers are the functions of its classes (:func:`task_tools`), with no
  system prompt, as BFCL's function-calling mode sends them;
* a reply without tool calls ends the turn (:class:`rods_env.user.TurnTakingUser`), and
  the agent never asks for confirmation;
* a turn is judged by BFCL's checker's rules and rods' on top (:class:`rods_env.domain.
  TurnRules`): the whole state equals the gold's after the turn, each gold result is among
  the agent's results, and a value the user asked for must be said;
* the seed set holds BFCL's four styles (base, missing parameter, missing function, long
  context) through rods' augmentations;
* every task is kept apart from BFCL's test tasks (:mod:`~.contamination`).

    import gymnasium, rods_env
    env = gymnasium.make("rods/BFCL-API-v0")
"""

from __future__ import annotations

from pathlib import Path

from environments.bfcl.world.checks import POLICY_CHECKS
from environments.bfcl.world.generator import SIZES
from environments.bfcl.world.layout import fresh_world, world_of_seed
from environments.bfcl.world.skills import REQUEST_SKILLS, SKILLS, task_tools, unrelated_write
from environments.bfcl.world.tools import toolkit_class
from rods_env.domain import Domain, TurnRules
from rods_env.user import TurnTakingUser

DOMAIN = Domain(
    name="bfcl-api",
    title="BFCL-API",
    generate=world_of_seed,
    sizes=SIZES,
    toolkit=toolkit_class(),
    policy="",
    skills=SKILLS,
    seeds_path=Path(__file__).parent / "seeds.jsonl",
    policy_checks=POLICY_CHECKS,
    unrelated_write=unrelated_write,
    task_tools=task_tools,
    user=TurnTakingUser,
    confirm_writes=False,
    rules=TurnRules(state="full", results="turn"),
    world_per_task=True,
    seed_augments=("missing_parameter", "missing_function", "long_context"),
    exploits=("read_only", "late", "early"),
    request_skills=REQUEST_SKILLS,
    fresh_world=fresh_world,
)
"""The BFCL API domain (entry point ``BFCL-API``, id ``rods/BFCL-API-v0``)."""

__all__ = ["DOMAIN"]
