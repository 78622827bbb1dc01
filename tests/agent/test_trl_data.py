"""Datasets for TRL and the data engine's view: late binding, gathering, replicas, callback."""

from __future__ import annotations

import json
from types import SimpleNamespace

import gymnasium as gym
import pytest

from rods_agent.data import DataEngine
from rods_agent.integrations.trl import environment_factory, task_dataset, train_test_datasets
from rods_agent.training.config import DataConfig
from rods_env import load_domain
from rods_env.errors import ConfigError, RodsError
from rods_env.synthesis import TaskPool
from rods_env.task import dump_tasks

pytest.importorskip("datasets")
pytest.importorskip("trl")

from rods_agent.integrations.trl import engine as engine_mod
from rods_agent.integrations.trl.engine import (
    ENGINE_STATE,
    METRICS,
    EngineDataset,
    RodsCallback,
    state_fingerprint,
)

B = 3  # tasks per round


@pytest.fixture(scope="module")
def retail():
    return load_domain("retail")


def make_view(retail, mode="rods", **data):
    engine = DataEngine(
        DataConfig(**data),
        mode=mode,
        tasks=retail.seed_tasks("train"),
        reserved=retail.seed_tasks("test"),
        seed=7,
    )
    return EngineDataset(engine, retail, tasks_per_round=B, reserved=retail.seed_tasks("test"))


def play_round(view, r, rewards_of):
    """Reset and score every slot of round ``r`` twice (G = 2) through the TRL environment."""
    env = environment_factory(view.domain, source=view)()
    for slot in range(B):
        for g in range(2):
            env.reset(prompt=[], task_id="", rods_round=r, rods_slot=slot)
            # score as the model would have: the reward comes from the episode, here forced
            view.record({"rods_round": r, "rods_slot": slot}, env.env.task, rewards_of(slot, g))


# -- fixed datasets -------------------------------------------------------------------------
def test_seed_splits_become_train_and_test_datasets(retail):
    ds = train_test_datasets("rods/Retail-v0")
    assert (len(ds["train"]), len(ds["test"])) == (150, 50)
    row = ds["train"][0]
    assert row["prompt"][0] == {"role": "system", "content": retail.policy}
    assert row["prompt"][-1] == {"role": "user", "content": ""}
    assert row["task_id"] == retail.seed_tasks("train")[0].id
    first, _ = gym.make("rods/Retail-v0").reset(options={"task": row["task_id"]})
    assert environment_factory("rods/Retail-v0")().reset(**row) == first


def test_a_pool_file_without_splits_trains_and_the_seed_test_split_tests(retail, tmp_path):
    pool = [
        t.model_copy(update={"id": t.id + "-p", "split": None})
        for t in retail.seed_tasks("train")[:5]
    ]
    path = tmp_path / "pool.jsonl"
    dump_tasks(pool, path)
    ds = train_test_datasets("rods/Retail-v0", train=path)
    assert ds["train"]["task_id"] == [t.id for t in pool]
    assert len(ds["test"]) == 50
    from_pool = task_dataset("rods/Retail-v0", TaskPool(pool, dedupe=False))
    assert from_pool["task_id"] == [t.id for t in pool]


def test_train_and_test_sharing_a_task_is_refused():
    relabelled = [
        t.model_copy(update={"split": "test"})
        for t in load_domain("retail").seed_tasks("train")[:3]
    ]
    with pytest.raises(ConfigError, match="3 task ids are in both the train and the test"):
        train_test_datasets("rods/Retail-v0", test=relabelled)


def test_an_empty_dataset_is_refused():
    with pytest.raises(ConfigError, match="no airline tasks"):
        task_dataset("rods/Airline-v0", load_domain("retail").seed_tasks())
    with pytest.raises(ConfigError, match="split"):
        task_dataset("rods/Retail-v0", split="dev")


# -- the engine's view ----------------------------------------------------------------------
def test_rows_name_slots_of_rounds_in_order(retail):
    view = make_view(retail)
    rows = [row for row, _ in zip(view.rows(), range(2 * B), strict=False)]
    assert [(r["rods_round"], r["rods_slot"]) for r in rows] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    assert all(r["task_id"] == "" and r["prompt"][0]["content"] == retail.policy for r in rows)
    first = next(iter(view.dataset()))
    assert (first["rods_round"], first["rods_slot"]) == (0, 0)


def test_a_round_is_sampled_when_first_reset_and_only_after_the_last_one_was_observed(retail):
    view = make_view(retail)
    twin = make_view(retail)
    assert view.tasks_for_round(0) == twin.engine.sample(B, step=0)
    with pytest.raises(RodsError, match="round 1 was asked for before round 0 was observed"):
        view.tasks_for_round(1)
    play_round(view, 0, lambda slot, g: float(g))
    view.gather()
    (report,) = view.observe()
    assert report["round"] == 0 and report["groups"] == B and report["kept_groups"] == B
    assert report["zones"]["boundary"] == B
    # the twin observes the same groups itself: the next round is what it samples
    play_round(twin, 0, lambda slot, g: float(g))
    twin.gather()
    twin.observe()
    assert [t.id for t in view.tasks_for_round(1)] == [t.id for t in twin.engine.sample(B, step=1)]


def test_evaluation_rows_resolve_test_tasks_and_record_nothing(retail):
    view = make_view(retail)
    env = environment_factory(retail, source=view)()
    test_task = retail.seed_tasks("test")[0]
    env.reset(task_id=test_task.id, prompt=[])
    assert env.env.task == test_task
    env.get_reward()
    assert view.gather() == {}
    with pytest.raises(ConfigError, match="holds no task 'nope'"):
        env.reset(task_id="nope")
    with pytest.raises(ConfigError, match="rods_slot"):
        env.reset(rods_round=0, rods_slot=B)


def test_get_reward_records_each_training_episode_once(retail):
    view = make_view(retail)
    env = environment_factory(retail, source=view)()
    env.reset(rods_round=0, rods_slot=1)
    assert env.get_reward() == env.get_reward() == 0.0
    groups = view.gather()
    assert [(g.task_id, g.rewards) for g in groups[0]] == [(view.tasks_for_round(0)[1].id, (0.0,))]


def test_a_group_split_across_processes_is_merged_in_a_fixed_order(retail, monkeypatch):
    """Two ranks hold one rollout each of every task; every rank sees the same groups."""
    views = [make_view(retail), make_view(retail)]
    for rank, view in enumerate(views):
        for slot in range(B):
            task = view.tasks_for_round(0)[slot]
            view.record({"rods_round": 0, "rods_slot": slot}, task, 0.25 * (rank + slot))
    mine = [list(v._records) for v in views]
    gathered = []
    for view in views:
        monkeypatch.setattr(engine_mod, "all_gather", lambda obj: [mine[0], mine[1]])
        gathered.append(view.gather())
    assert gathered[0] == gathered[1]
    assert [g.rewards for g in gathered[0][0]] == [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75)]


def test_replicas_fed_the_same_groups_stay_identical_through_synthesis(retail, monkeypatch):
    """The claim behind running one engine per process: deterministic given its inputs."""
    views = [make_view(retail, synth_per_boundary=1), make_view(retail, synth_per_boundary=1)]
    accepted = 0
    for r in range(3):
        records = []
        for rank, view in enumerate(views):
            for slot, task in enumerate(view.tasks_for_round(r)):
                reward = 1.0 if (slot + rank) % 2 else 0.0  # each group: one success, one failure
                view.record({"rods_round": r, "rods_slot": slot}, task, reward)
            records.append(list(view._records))
        for view in views:
            monkeypatch.setattr(engine_mod, "all_gather", lambda obj, rec=records: rec)
            view.gather()
            (report,) = view.observe()
        accepted += report["synthesized"]["accepted"]
        assert state_fingerprint(views[0].engine) == state_fingerprint(views[1].engine)
    assert accepted > 0
    assert views[0].engine.state_dict() == views[1].engine.state_dict()


def test_keep_follows_the_engine_mode(retail):
    for mode, expected in (("static", True), ("filter", False), ("rods", False)):
        view = make_view(retail, mode=mode)
        play_round(view, 0, lambda slot, g: 1.0)
        view.gather()
        task = view.tasks_for_round(0)[0]
        assert view.keep(0, task.id) is expected
    with pytest.raises(RodsError, match="no rewards"):
        view.keep(5, task.id)


# -- the callback ------------------------------------------------------------------------------
def trl_args(tmp_path, **kw):
    values = {
        "output_dir": str(tmp_path),
        "shuffle_dataset": False,
        "generation_batch_size": 2 * B,
        "num_generations": 2,
    }
    values.update(kw)
    return SimpleNamespace(**values)


def test_the_callback_refuses_settings_that_break_late_binding(retail, tmp_path):
    callback = RodsCallback(make_view(retail))
    state = SimpleNamespace(global_step=0)
    with pytest.raises(ConfigError, match="shuffle_dataset=False"):
        callback.on_train_begin(trl_args(tmp_path, shuffle_dataset=True), state, None)
    with pytest.raises(ConfigError, match="3 tasks per round, but the trainer generates 4"):
        callback.on_train_begin(trl_args(tmp_path, generation_batch_size=8), state, None)
    callback.on_train_begin(trl_args(tmp_path), state, None)


def test_the_callback_observes_logs_saves_and_resumes(retail, tmp_path):
    view = make_view(retail)
    callback = RodsCallback(view)
    args = trl_args(tmp_path)
    for step in (1, 2):
        play_round(view, step - 1, lambda slot, g: float(g))
        callback.on_step_end(args, SimpleNamespace(global_step=step), None)
    lines = [json.loads(x) for x in (tmp_path / METRICS).read_text().splitlines()]
    assert [(x["step"], x["round"], x["groups"]) for x in lines] == [(1, 0, B), (2, 1, B)]
    assert len(callback.fingerprints) == 2
    callback.on_save(args, SimpleNamespace(global_step=2), None)
    assert (tmp_path / "checkpoint-2" / ENGINE_STATE).is_file()
    saved = state_fingerprint(view.engine)

    # a round logged after the checkpoint, by the run that was killed, is dropped on resume
    play_round(view, 2, lambda slot, g: float(g))
    callback.on_step_end(args, SimpleNamespace(global_step=3), None)
    assert len((tmp_path / METRICS).read_text().splitlines()) == 3

    resumed = make_view(retail)
    RodsCallback(resumed).on_train_begin(args, SimpleNamespace(global_step=2), None)
    assert [json.loads(x)["round"] for x in (tmp_path / METRICS).read_text().splitlines()] == [0, 1]
    assert resumed.observed_through == 1
    assert state_fingerprint(resumed.engine) == saved
    # the trainer may restart its rows at round 0: they still continue at the engine's step 2
    twin = make_view(retail)
    twin.load_state_dict(json.loads((tmp_path / "checkpoint-2" / ENGINE_STATE).read_text()))
    assert resumed.tasks_for_round(0) == twin.engine.sample(B, step=2)
    elsewhere = make_view(retail)
    RodsCallback(elsewhere, resume_from=tmp_path / "checkpoint-2").on_train_begin(
        trl_args(tmp_path / "other"), SimpleNamespace(global_step=2), None
    )
    assert state_fingerprint(elsewhere.engine) == saved
    with pytest.raises(ConfigError, match="no data engine state"):
        RodsCallback(make_view(retail)).on_train_begin(args, SimpleNamespace(global_step=5), None)
    callback.on_train_end(args, SimpleNamespace(global_step=3), None)
    assert json.loads((tmp_path / ENGINE_STATE).read_text())["observed_through"] == 2


def test_differing_replicas_stop_the_run(retail, monkeypatch):
    callback = RodsCallback(make_view(retail))
    monkeypatch.setattr(engine_mod, "all_gather", lambda obj: [obj, "0000"])
    with pytest.raises(RodsError, match="differs across processes after round 4"):
        callback._check_same_state(4)


# -- modes: envtuning is static for data, with actionable hints in its training episodes ------
@pytest.mark.parametrize(
    ("mode", "filters"),
    [
        ("static", False),
        ("envtuning", False),
        ("filter", True),
        ("rods", True),
        ("rods-expand", True),
    ],
)
def test_only_the_filtering_modes_leave_groups_out(retail, mode, filters):
    view = make_view(retail, mode=mode)
    assert view.filters_groups is filters
    hints = {"actionable_hints": True} if mode == "envtuning" else {}
    assert view.env_kwargs({"rods_round": 0, "rods_slot": 1}) == hints
    assert view.env_kwargs({"task_id": retail.seed_tasks("test")[0].id}) == {}


def test_envtuning_trains_with_hints_and_evaluates_without(retail):
    """As `rods train` does it: the training rows' episodes get Environment Tuning's
    actionable hints; an evaluation row's episode (a test task by id) never does."""
    view = make_view(retail, mode="envtuning")
    env = environment_factory(retail, source=view)()
    bad = {"user_id": 12}
    env.reset(rods_round=0, rods_slot=0, task_id="", prompt=[])
    train_task = env.task
    assert env.env.actionable_hints is True
    hinted = gym.make("rods/Retail-v0", split=None, actionable_hints=True)
    hinted.reset(options={"task": train_task})
    call = {
        "role": "assistant",
        "tool_calls": [{"function": {"name": "get_user_details", "arguments": bad}}],
    }
    assert env.get_user_details(**bad) == hinted.step(call)[0]
    env.get_reward()
    env.reset(task_id=retail.seed_tasks("test")[0].id)
    assert env.env.actionable_hints is False
    with pytest.raises(ConfigError, match="per row"):
        environment_factory(retail, source=view, actionable_hints=True)


@pytest.mark.parametrize("mode", ["static", "envtuning"])
def test_the_trainer_leaves_a_keep_every_group_batch_as_trl_made_it(retail, mode, monkeypatch):
    """The group filter is skipped for static and envtuning (no gathering, no mask)."""
    torch = pytest.importorskip("torch")
    from trl import GRPOTrainer

    from rods_agent.integrations.trl.trainer import RodsGRPOTrainer

    view = make_view(retail, mode=mode)
    monkeypatch.setattr(view, "gather", lambda: pytest.fail("gathered in a keep-every-group mode"))
    made = {"completion_mask": torch.ones(2, 3)}
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", lambda self, inputs: made)
    trainer = RodsGRPOTrainer.__new__(RodsGRPOTrainer)
    trainer.rods_view, trainer.rods_dropped = view, 0
    trainer.rods_seconds = {"rollout": 0.0, "env": 0.0}
    trainer.model = SimpleNamespace(training=True)
    trainer.environments = []
    rows = [{"rods_round": 0, "rods_slot": 0}, {"rods_round": 0, "rods_slot": 1}]
    assert trainer._generate_and_score_completions(rows) is made
    assert trainer.rods_dropped == 0
