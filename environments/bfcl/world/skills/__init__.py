"""Skills of the BFCL API world: multi-turn tasks over one to three API classes.

A skill drafts a task turn by turn. Each turn is one *action* (posting a tweet, moving a
file into a new folder, booking a flight, starting the car...), drawn from the skill's
pool for that turn; the action picks entities of the world that fit, words the request
with one of several phrasings, and runs its gold calls at once on a live copy of the
world (:class:`Session`), so later calls can use what earlier ones returned (a booking id,
a file's content, a stock's price, an access token).

Every structural choice is in the task's shape, so a resample with the same shape on a
fresh world has the same calls: ``turns``, ``items`` (entities of an action that takes
several: files moved, contacts messaged, symbols watched), ``a<t>`` (the action of turn
``t`` in its pool) and ``l<t>`` (whether turn ``t`` logs in to its service: where it does
not, the world must have the user logged in already).

Every task changes the state in at least one turn, and a turn that changes nothing asks
for a value the agent must say (the exploit panel then passes nothing).

The package, by concern: :mod:`~.session` (the live world a draft runs in, and wording),
:mod:`~.logins` (one log-in helper for every API), one module of actions per API family
(:mod:`~.files`, :mod:`~.twitter`, :mod:`~.messages`, :mod:`~.tickets`, :mod:`~.trading`,
:mod:`~.travel`, :mod:`~.car`), :mod:`~.recipes` (the skills and request skills) and
:mod:`~.decoys` (the tools a task offers).
"""

from __future__ import annotations

from environments.bfcl.world.skills.decoys import (
    DECOYS,
    decoy,
    needed_classes,
    task_tools,
    unrelated_write,
)
from environments.bfcl.world.skills.recipes import (
    ACTIONS,
    FOLLOW_UPS,
    READS,
    RECIPE_BY_NAME,
    RECIPES,
    REQUEST_SKILLS,
    SEVERAL,
    SKILLS,
    Recipe,
)
from environments.bfcl.world.skills.session import Act, Action, Session

__all__ = [
    "ACTIONS",
    "DECOYS",
    "FOLLOW_UPS",
    "READS",
    "RECIPES",
    "RECIPE_BY_NAME",
    "REQUEST_SKILLS",
    "SEVERAL",
    "SKILLS",
    "Act",
    "Action",
    "Recipe",
    "Session",
    "decoy",
    "needed_classes",
    "task_tools",
    "unrelated_write",
]
