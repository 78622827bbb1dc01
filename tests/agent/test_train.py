"""``rods train`` on the simulated learner: the run directory, checkpoints, kill -9 and
resume, refusals, and ``rods report``."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rods_agent import cli
from rods_agent.rollouts.batch import EpisodeRecord
from rods_agent.training.config import load_config
from rods_agent.training.loop import train
from rods_agent.training.metrics import TIMING_FIELDS
from rods_agent.training.run_dir import checkpoint_dirs
from rods_env.errors import ConfigError
from rods_env.fileio import read_jsonl
from rods_env.task import load_tasks

ROOT = Path(__file__).resolve().parents[2]
SIMULATED = ROOT / "configs" / "train" / "simulated.yaml"
SMALL = [
    "env=[retail]",
    "rollout.tasks_per_step=4",
    "rollout.group_size=4",
    "data.capacity=24",
    "data.admit_per_step=2",
    "data.max_candidates=4",
    "data.synth_per_boundary=1",
    "data.synth_augment=[]",
    "log.checkpoint_every=5",
    "log.keep_checkpoints=2",
    "log.eval_every=4",
    "log.eval_tasks=10",
    "log.progress=false",
]


def small(out: Path, *extra: str) -> list[str]:
    return ["mode=rods", "steps=14", f"out={out}", *SMALL, *extra]


def untimed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in rows]


def rods_train(*args: str, kill_at: tuple[str, int] | None = None) -> subprocess.CompletedProcess:
    """``rods train`` in a subprocess; ``kill_at=(where, step)`` SIGKILLs it there (see
    ``kill_train.py``)."""
    if kill_at is None:
        command = [sys.executable, "-m", "rods_agent.cli", "train", *args]
    else:
        script = Path(__file__).with_name("kill_train.py")
        command = [sys.executable, str(script), kill_at[0], str(kill_at[1]), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)


def test_a_run_writes_every_output(tmp_path):
    out = tmp_path / "run"
    train(load_config(SIMULATED, small(out, "steps=10")))
    assert (out / "config.yaml").exists()
    today = f"rollout.template_date={datetime.date.today()}"  # settled at the start
    assert load_config(out / "config.yaml") == load_config(SIMULATED, small(out, "steps=10", today))
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(10))
    for row in rows:
        for key in (
            "reward",
            "progress",
            "success",
            "effective_group_ratio",
            "tokens_per_s",
            "update",
        ):
            assert key in row
        assert set(row["zones"]) == {"mastered", "boundary", "hard"}
        assert {"seed", "synthesized", "parked"} <= set(row["pool"])
        assert {"accepted", "rejected"} <= set(row["synthesized"])
        assert {"generate", "env", "update", "synthesis"} <= set(row["time"])
        assert row["policy"] == "simulated"
        assert row["mode"] == "rods" and row["synth_modes"] == ["resample"]
        assert sum(row["zones"].values()) == row["groups"] == 4
    # one update rule for every mode: a step without a non-zero advantage takes none
    totals = [r["optimizer_steps_total"] for r in rows]
    assert totals == [sum(r["optimizer_steps"] for r in rows[: i + 1]) for i in range(10)]
    for row in rows:
        assert row["optimizer_steps"] == int(row["kept_groups"] > 0)
    assert [r["step"] for r in rows if "eval" in r] == [3, 7, 9]
    assert all(r["eval"]["simulated"] for r in rows if "eval" in r)
    assert any(r["synthesized"]["accepted"] for r in rows)
    assert [n for n, _ in checkpoint_dirs(out)] == [5, 10]
    assert list((out / "tb").glob("events.out.tfevents.*"))
    pool = read_jsonl(out / "pool.jsonl")
    assert len(pool) == rows[-1]["pool"]["active"]

    # transcripts for rods view: per group the best, worst and middle episode, in the record
    # shape of rods eval's episodes.jsonl, with the task's zone and variance at that step
    shape = set(EpisodeRecord(task_id="x").to_dict(tokens=False))
    tasks = {t.id for t in load_tasks(out / "rollouts" / "tasks.jsonl")}
    for row in rows:
        records = read_jsonl(out / "rollouts" / f"step-{row['step']:06d}.jsonl")
        assert len(records) == 3 * row["groups"]
        assert all(shape <= set(r) and r["step"] == row["step"] for r in records)
        assert {r["task_id"] for r in records} <= tasks
        zones = Counter(r["zone"] for r in records if r["pick"] == "best")
        assert {z: zones.get(z, 0) for z in row["zones"]} == row["zones"]
        for r in records:
            rewards = r["group"]["rewards"]
            if r["pick"] in ("best", "worst"):
                assert r["reward"] == (max if r["pick"] == "best" else min)(rewards)
            mean = sum(rewards) / len(rewards)
            assert r["group"]["variance"] == pytest.approx(
                sum((x - mean) ** 2 for x in rewards) / len(rewards)
            )
            assert r["kept"] == (r["group"]["variance"] > 0)  # rods keeps groups with signal
    events = read_jsonl(out / "pool_events.jsonl")
    made = [t for e in events for t in e["synthesized"]]
    assert len(made) == sum(r["synthesized"]["accepted"] for r in rows)
    assert all(t["parent"] and t["generation"] >= 1 for t in made)


def test_a_run_dir_holding_a_run_is_refused(tmp_path):
    out = tmp_path / "run"
    train(load_config(SIMULATED, small(out, "steps=2")))
    before = (out / "metrics.jsonl").read_bytes()
    with pytest.raises(ConfigError, match="already holds a run; pass --resume"):
        train(load_config(SIMULATED, small(out, "steps=2")))
    assert (out / "metrics.jsonl").read_bytes() == before
    with pytest.raises(ConfigError, match=r"differs from .*config\.yaml in seed"):
        train(load_config(SIMULATED, small(out, "steps=2", "seed=5")), resume=True)


def test_a_model_that_fails_to_load_leaves_nothing_and_blocks_no_resume(tmp_path):
    out = tmp_path / "run"
    typo = ["policy=model", f"model.path={tmp_path / 'no-such-model'}", "warm_start.enabled=false"]
    with pytest.raises(ConfigError, match="no model folder"):
        train(load_config(SIMULATED, small(out, *typo)))
    assert not out.exists()  # no config.yaml of a run that never started
    out.mkdir()
    (out / "config.yaml").write_text("seed: 5\n")  # left by an older version, say
    train(load_config(SIMULATED, small(out, "steps=2")), resume=True)  # nothing to resume
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == [0, 1]
    assert load_config(out / "config.yaml").steps == 2


def test_resume_continues_with_more_steps(tmp_path):
    unbroken, extended = tmp_path / "a", tmp_path / "b"
    train(load_config(SIMULATED, small(unbroken, "steps=12")))
    train(load_config(SIMULATED, small(extended, "steps=8")))  # its last eval is on schedule
    train(load_config(SIMULATED, small(extended, "steps=12")), resume=True)
    a, b = read_jsonl(unbroken / "metrics.jsonl"), read_jsonl(extended / "metrics.jsonl")
    assert untimed(a) == untimed(b)


def test_a_resume_on_a_later_day_keeps_the_runs_template_date(tmp_path, monkeypatch):
    """gpt-oss's template prints today's date: a run keeps the day it started, so a resume
    tomorrow renders the same prompts (and is not refused as a changed configuration)."""
    from rods_agent.training import run_dir

    out = tmp_path / "r"
    train(load_config(SIMULATED, small(out, "steps=4")))
    started = load_config(out / "config.yaml").rollout.template_date
    assert started == datetime.date.today()

    class Tomorrow(datetime.date):
        @classmethod
        def today(cls) -> datetime.date:
            return datetime.date(2099, 1, 1)

    monkeypatch.setattr(run_dir.datetime, "date", Tomorrow)
    train(load_config(SIMULATED, small(out, "steps=6")), resume=True)
    assert load_config(out / "config.yaml").rollout.template_date == started
    fresh = tmp_path / "fresh"
    train(load_config(SIMULATED, small(fresh, "steps=1")))
    assert load_config(fresh / "config.yaml").rollout.template_date == datetime.date(2099, 1, 1)
    with pytest.raises(ConfigError, match=r"differs from .* in rollout\.template_date"):
        train(
            load_config(SIMULATED, small(out, "steps=8", "rollout.template_date=2030-05-05")),
            resume=True,
        )


def test_the_simulated_policy_has_no_warm_start(tmp_path):
    with pytest.raises(ConfigError, match=r"warm_start\.enabled: the simulated policy"):
        train(load_config(SIMULATED, small(tmp_path / "r", "warm_start.enabled=true")))


def test_show_config_prints_the_resolved_values(capsys):
    assert cli.main(["train", "--config", str(SIMULATED), "steps=7", "--show-config"]) == 0
    out = capsys.readouterr().out
    assert "steps: 7  # GRPO steps." in out
    assert "policy: 'simulated'" in out


def test_a_bad_override_is_one_line(capsys):
    assert cli.main(["train", "--config", str(SIMULATED), "data.capacty=3"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "rods train: error: data.capacty: unknown key (did you mean 'data.capacity'?)"
    )


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory) -> Path:
    """A 14-step run that nothing interrupted."""
    out = tmp_path_factory.mktemp("unbroken") / "run"
    train(load_config(SIMULATED, small(out)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "kill_at", [("rollouts", 12), ("save", 10)], ids=["mid-step", "mid-checkpoint"]
)
def test_kill_9_then_resume_gives_the_unbroken_metrics(tmp_path, unbroken, kill_at):
    killed = tmp_path / "killed"
    dead = rods_train("--config", str(SIMULATED), *small(killed), kill_at=kill_at)
    assert dead.returncode == -signal.SIGKILL, dead.stderr
    rows = read_jsonl(killed / "metrics.jsonl")
    if kill_at[0] == "rollouts":  # died mid-step 12, two steps after the last checkpoint
        assert [r["step"] for r in rows] == list(range(12))
        assert [n for n, _ in checkpoint_dirs(killed)] == [5, 10]
    else:  # died while writing the checkpoint of step 10: the one of step 5 is the newest
        assert [r["step"] for r in rows] == list(range(10))
        assert [n for n, _ in checkpoint_dirs(killed)] == [5]
        assert (killed / "checkpoints" / ".step-000010.tmp" / "policy").is_dir()
    again = rods_train("--resume", f"out={killed}")
    assert again.returncode == 0, again.stderr
    assert untimed(read_jsonl(killed / "metrics.jsonl")) == untimed(
        read_jsonl(unbroken / "metrics.jsonl")
    )
    for name in ("pool_events.jsonl", *(f"rollouts/step-{i:06d}.jsonl" for i in range(14))):
        assert read_jsonl(killed / name) == read_jsonl(unbroken / name), name
    assert not (killed / "rollouts" / "step-000014.jsonl").exists()
    final = json.loads((checkpoint_dirs(killed)[-1][1] / "engine.json").read_text())
    expected = json.loads((checkpoint_dirs(unbroken)[-1][1] / "engine.json").read_text())
    assert final == expected
    assert not list((killed / "checkpoints").glob(".step-*"))
    if kill_at[0] != "rollouts":
        return
    report = subprocess.run(
        [sys.executable, "-m", "rods_agent.cli", "report", str(killed)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert report.returncode == 0, report.stderr
    for name in ("reward", "effective_group_ratio", "zones", "pool", "variance"):
        png = killed / "report" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "simulated learner" in (killed / "report" / "report.md").read_text()


def test_an_exhausted_pool_stops_the_run_early(tmp_path, capsys):
    out = tmp_path / "run"
    mastered_from_the_start = [
        "steps=60",
        "simulated.initial_logit=12",
        "simulated.unit_spread=0",
        "data.mastered_k=1",
        "data.expand_mastered=false",
    ]
    train(load_config(SIMULATED, small(out, *mastered_from_the_start)))
    assert "the pool is exhausted" in capsys.readouterr().err
    rows = read_jsonl(out / "metrics.jsonl")
    assert 30 < len(rows) < 60  # 150 retail seeds, 4 a step, each retired on its first visit
    assert all(r["effective_group_ratio"] == 0.0 for r in rows)
    assert checkpoint_dirs(out)[-1][0] == len(rows)
    assert read_jsonl(out / "pool.jsonl") == []
    from rods_agent.training.report import load_run, report_markdown

    assert f"stopped at step {len(rows)} of 60" in report_markdown([load_run(out)])


def test_the_last_words_say_what_the_run_did(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--config", str(SIMULATED), *small(out, "steps=4")]
    assert cli.main(args) == 0
    assert capsys.readouterr().out.startswith("rods train: trained 4 steps, mode rods (resample)")
    assert cli.main([*args, "--resume"]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"rods train: nothing to do: {out} has done its 4 of 4 steps already")
    assert "trained" not in said
    assert cli.main(["train", "--resume", f"out={out}", "steps=6"]) == 0
    assert capsys.readouterr().out.startswith(
        "rods train: trained steps 4-5 (2 steps, resumed at 4), mode rods"
    )
    dry = tmp_path / "dry"
    mastered = ["steps=60", "simulated.initial_logit=12", "simulated.unit_spread=0",
                "data.mastered_k=1", "data.expand_mastered=false"]  # fmt: skip
    assert cli.main(["train", "--config", str(SIMULATED), *small(dry, *mastered)]) == 0
    done = len(read_jsonl(dry / "metrics.jsonl"))
    assert capsys.readouterr().out.startswith(
        f"rods train: trained {done} steps, then stopped early at step {done} of 60: "
        "the pool was exhausted"
    )
