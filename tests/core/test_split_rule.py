"""One split rule everywhere: a task without a split is a train task (:mod:`rods_env.splits`)."""

from __future__ import annotations

import pytest

from rods_env.env import ToolEnv
from rods_env.errors import ConfigError
from rods_env.splits import in_split, split_of
from rods_env.task import Task
from tests.core.toy_domain import TOY


@pytest.fixture
def mixed(toy_tasks: list[Task]) -> list[Task]:
    """Two train tasks, two test tasks and two without a split (a synthesized pool's)."""
    test = [t.model_copy(update={"split": "test"}) for t in toy_tasks[2:4]]
    unlabelled = [t.model_copy(update={"split": None}) for t in toy_tasks[4:6]]
    return [*toy_tasks[:2], *test, *unlabelled]


def test_a_task_without_a_split_is_a_train_task(mixed: list[Task]) -> None:
    assert [split_of(t) for t in mixed] == ["train", "train", "test", "test", "train", "train"]
    assert in_split(mixed, "train") == [mixed[0], mixed[1], mixed[4], mixed[5]]
    assert in_split(mixed, "test") == mixed[2:4]
    assert in_split(mixed, None) == mixed
    with pytest.raises(ConfigError, match="split must be 'train', 'test' or None"):
        in_split(mixed, "all")


def test_reset_and_options_split_follow_the_rule(mixed: list[Task]) -> None:
    train_ids = {t.id for t in in_split(mixed, "train")}
    test_ids = {t.id for t in in_split(mixed, "test")}
    drawn = {
        split: {
            ToolEnv(TOY, tasks=mixed, split=split).reset(seed=s)[1]["task_id"] for s in range(40)
        }
        for split in ("train", "test")
    }
    assert drawn == {"train": train_ids, "test": test_ids}
    env = ToolEnv(TOY, tasks=mixed, split=None)
    by_option = {
        split: {env.reset(seed=s, options={"split": split})[1]["task_id"] for s in range(40)}
        for split in ("train", "test")
    }
    assert by_option == {"train": train_ids, "test": test_ids}


def test_a_pool_without_test_tasks_has_nothing_to_draw_for_test(mixed: list[Task]) -> None:
    env = ToolEnv(TOY, tasks=[t for t in mixed if t.split != "test"], split="test")
    assert env.tasks == []
    with pytest.raises(ConfigError, match="no tasks to sample"):
        env.reset(seed=0)
