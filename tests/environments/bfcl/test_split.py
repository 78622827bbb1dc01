"""The paper's split of BFCL multi-turn: 100 train and 100 test tasks per category, drawn by
index, committed as paper_split.json; the environments and domains take split=."""

from __future__ import annotations

import json

import pytest

from rods_env.errors import ConfigError
from tests.requires import require


@pytest.fixture(scope="module")
def bfcl():
    from environments.bfcl.apis import bfcl_missing

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")


def test_the_committed_split_is_a_fresh_draw(bfcl):
    from environments.bfcl.split import SPLIT_FILE, draw_installed, split_document

    committed = json.loads(SPLIT_FILE.read_text())
    assert committed == json.loads(json.dumps(split_document(draw_installed())))


def test_half_of_each_category_by_index_with_bfcls_ids(bfcl):
    from environments.bfcl.split import paper_split
    from environments.bfcl.tasks import CATEGORIES, category_tasks, load_tasks

    split = paper_split()
    assert len(split) == 800
    train_indices = None
    for cat in CATEGORIES:
        tasks = category_tasks(cat)
        assert {t.id for t in tasks} == {i for i in split if i.startswith(f"multi_turn_{cat}_")}
        train = load_tasks(cat, "train")
        test = load_tasks(cat, "test")
        assert len(train) == len(test) == 100
        assert {t.split for t in train} == {"train"} and {t.split for t in test} == {"test"}
        indices = {int(t.id.rsplit("_", 1)[1]) for t in train}
        # the four tasks of one index (same classes, mostly the same initial state and first
        # question) are on one side
        assert train_indices is None or indices == train_indices
        train_indices = indices
    assert len(load_tasks(None, "train")) == len(load_tasks(None, "test")) == 400
    assert len(load_tasks()) == len(load_tasks(None, "all")) == 800


def test_tasks_sharing_an_initial_state_are_on_one_side(bfcl):
    from environments.bfcl.tasks import CATEGORIES, load_tasks

    sides: dict[str, set[str]] = {}
    for task in load_tasks():
        sides.setdefault(task.config_key, set()).add(task.split)
    assert all(len(s) == 1 for s in sides.values())
    # and index k of every category shares its classes with base's index k
    by_index: dict[int, set[tuple[str, ...]]] = {}
    for cat in CATEGORIES:
        for task in load_tasks(cat):
            by_index.setdefault(int(task.id.rsplit("_", 1)[1]), set()).add(
                tuple(sorted(task.classes))
            )
    assert all(len(s) == 1 for s in by_index.values())


def test_the_draw_is_stratified_and_seeded(bfcl):
    from environments.bfcl.split import draw_split
    from environments.bfcl.tasks import CATEGORIES, category_tasks

    tasks = {c: category_tasks(c) for c in CATEGORIES}
    assert draw_split(tasks) == draw_split(tasks)
    other = draw_split(tasks, seed="another seed")
    assert other != draw_split(tasks)
    for cat in CATEGORIES:
        assert len(other[cat]["train"]) == 100
    # every class set of two or more indices is on both sides
    split = draw_split(tasks)["base"]
    train = set(split["train"])
    per: dict[tuple[str, ...], set[bool]] = {}
    for task in tasks["base"]:
        per.setdefault(tuple(sorted(task.classes)), set()).add(task.id in train)
    assert all(sides == {True, False} for sides in per.values())


def test_domains_and_envs_take_the_split(bfcl):
    from environments.bfcl import BASE, BFCL
    from environments.bfcl.env import BFCLEnv

    assert len(BFCL.seed_tasks()) == len(BFCL.seed_tasks("all")) == 800
    train, test = BFCL.seed_tasks("train"), BFCL.seed_tasks("test")
    assert len(train) == len(test) == 400
    assert {t.split for t in train} == {"train"} and {t.split for t in test} == {"test"}
    assert [t.id for t in BFCL.training_tasks()] == [t.id for t in train]
    assert len(BASE.seed_tasks("train")) == 100
    with pytest.raises(ConfigError, match="unknown BFCL split 'dev'"):
        BFCL.seed_tasks("dev")
    BFCL.check_training_pool(train)
    with pytest.raises(ConfigError, match="a test task of bfcl"):
        BFCL.check_training_pool(test[:1])
    env = BFCLEnv("base", split="train")
    _, info = env.reset(seed=0)
    assert info["task_id"] in {t.id for t in BASE.seed_tasks("train")}
    for seed in range(5):
        _, info = BFCLEnv(split="test").reset(seed=seed)
        assert info["task_id"] in {t.id for t in test}
    _, info = BFCLEnv().reset(seed=1, options={"split": "train"})
    assert info["task_id"] in {t.id for t in train}


def test_the_leaderboard_of_the_test_half(bfcl):
    """All 800: BFCL's own numbers; the 400 test tasks: per category over its 100, the
    overall their unweighted mean; split="test" ignores train tasks."""
    from environments.bfcl.tasks import CATEGORIES, leaderboard, load_tasks

    everything = {t.id: [t.split == "test" or t.category == "base"] for t in load_tasks()}
    full = leaderboard(everything)
    assert full["base"] == 1.0 and full["miss_param"] == 0.5
    assert full["overall"] == pytest.approx((1 + 0.5 * 3) / 4)
    test = leaderboard(everything, split="test")
    assert all(test[c] == 1.0 for c in CATEGORIES) and test["overall"] == 1.0
    test_ids = {t.id for t in load_tasks(None, "test")}
    only_test = {k: v for k, v in everything.items() if k in test_ids}
    only_test[next(iter(only_test))] = [False]
    auto = leaderboard(only_test)  # the test half only: its own overall
    assert auto["overall"] == pytest.approx((0.99 + 3) / 4)
    partial = leaderboard(dict(list(only_test.items())[:50]))
    assert partial["overall"] is None
    with pytest.raises(ConfigError, match="unknown BFCL split"):
        leaderboard(everything, split="dev")
