from __future__ import annotations

import random

import pytest

from rods_env.seeds import make_task
from tests.core.toy_domain import TOY


@pytest.fixture(scope="session")
def toy_tasks():
    """A few toy tasks of every skill, on the tiny database."""
    tasks = []
    for skill in TOY.skills:
        for i in range(3):
            rng = random.Random(f"toy:{skill.name}:{i}")
            tasks.append(
                make_task(
                    TOY, skill, rng, task_id=f"toy-{skill.name}-{i}", db_size="tiny", split="train"
                )
            )
    return tasks
