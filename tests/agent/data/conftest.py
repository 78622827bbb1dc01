"""Tasks for the data-engine tests: retail seeds, and copies posing as synthesized tasks."""

from __future__ import annotations

import pytest

from rods_env.task import Provenance, Task


@pytest.fixture(scope="session")
def retail_train() -> list[Task]:
    """The retail train seeds."""
    from rods_env.registry import load_domain

    return load_domain("retail").seed_tasks("train")


@pytest.fixture(scope="session")
def retail_test() -> list[Task]:
    """The retail test seeds."""
    from rods_env.registry import load_domain

    return load_domain("retail").seed_tasks("test")


def synthetic(task: Task, n: int, generation: int = 1) -> Task:
    """A copy of ``task`` with a new id, labelled as synthesized from it."""
    prov = Provenance(
        origin="synthesized", parent_id=task.id, generation=generation, mode="resample"
    )
    return task.model_copy(update={"id": f"{task.id}-syn{n}", "provenance": prov, "split": None})
