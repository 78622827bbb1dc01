"""Long stages say how far they are, with estimates from measured rates only (issue 42).

A stage of ``rods experiment`` runs in a child process whose output goes to a log file; the
child's loops (SFT batches, evaluated episodes, a step's rollouts) report to a progress
file, and the experiment's own lines show what the child reports. No model runs here:
rates come from fake clocks.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rods_agent.console.progress import (
    PROGRESS_FILE,
    WRITE_EVERY,
    Progress,
    Snapshot,
    left_text,
    read_snapshot,
)
from rods_agent.experiment import stages
from rods_agent.experiment.config import load_experiment

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "experiment" / "quickstart.yaml"


class FakeClock:
    """Seconds that move only when told."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def tick(self, seconds: float) -> None:
        self.t += seconds


# -- the child's side: Progress and its file ---------------------------------------------------
def test_no_estimate_before_the_first_batch_then_the_measured_rate(tmp_path):
    clock, report = FakeClock(), tmp_path / "p.json"
    out = io.StringIO()
    bar = Progress(40, "warm start (SFT)", "batch", stream=out, file=report, clock=clock)
    first = read_snapshot(report)
    assert first is not None and (first.done, first.total, first.left) == (0, 40, None)
    assert "0 of 40 batches, time per batch not yet measured" in first.describe()
    clock.tick(120)  # the first batch is slow (a busy machine)
    bar.update(loss="2.500")
    assert bar.snapshot().left == 120 * 39
    for _ in range(9):
        clock.tick(40)
        bar.update(loss="1.000")
    snap = bar.snapshot()
    assert snap.done == 10 and snap.left == (120 + 9 * 40) / 10 * 30  # the mean of the ten
    assert snap.describe() == (
        "warm start (SFT): 10 of 40 batches, 48 s each, about 0:24:00 for the other 30 (loss 1.000)"
    )
    lines = out.getvalue().splitlines()  # off a terminal: a line every 2 batches, estimate in
    assert lines[-1] == "warm start (SFT): 10/40 batches, loss 1.000 (480 s, about 0:24:00 left)"


def _done(report: Path) -> int:
    snap = read_snapshot(report)
    assert snap is not None
    return snap.done


def test_quiet_on_stderr_but_the_file_is_written_and_at_most_once_a_second(tmp_path):
    clock, report, out = FakeClock(), tmp_path / "p.json", io.StringIO()
    bar = Progress(100, "rollouts", "episode", stream=out, show=False, file=report, clock=clock)
    clock.tick(WRITE_EVERY / 4)
    bar.update(3)
    assert _done(report) == 3  # the first estimate, at once
    clock.tick(WRITE_EVERY / 4)
    bar.update()
    assert _done(report) == 3  # too soon to write again
    clock.tick(WRITE_EVERY)
    bar.update()
    assert _done(report) == 5
    bar.update(95)  # the last one is always written
    bar.close()
    last = read_snapshot(report)
    assert last is not None and last.done == 100 and last.describe().endswith("all done")
    assert out.getvalue() == ""


def test_the_file_is_named_by_the_environment_and_absent_without_it(tmp_path, monkeypatch):
    report = tmp_path / "child.json"
    monkeypatch.delenv(PROGRESS_FILE, raising=False)
    Progress(3, "evaluation", "episode", show=False).update()
    assert not report.exists()
    monkeypatch.setenv(PROGRESS_FILE, str(report))
    Progress(3, "evaluation", "episode", show=False).update()
    assert read_snapshot(report) is not None


@given(
    per_unit=st.floats(1e-9, 1e4),
    done=st.integers(1, 500),
    remaining=st.integers(1, 500),
)
def test_never_0_left_while_work_remains(per_unit, done, remaining):
    clock = FakeClock()
    bar = Progress(done + remaining, "evaluation", "episode", show=False, file=None, clock=clock)
    clock.tick(per_unit * done)
    bar.update(done)
    snap = bar.snapshot()
    assert snap.left is not None and snap.left > 0
    for text in (snap.describe(), left_text(snap.left, remaining)):
        assert not re.search(r"(?<![0-9])0:00:00", text)


def test_unreadable_reports_are_none(tmp_path):
    assert read_snapshot(tmp_path / "missing.json") is None
    (tmp_path / "cut.json").write_text('{"what": "evaluation", "do')
    assert read_snapshot(tmp_path / "cut.json") is None


def test_the_evaluation_reports_its_episodes_to_the_file(retail_tasks, tmp_path, monkeypatch):
    from rods_agent.engines import oracle_engine
    from rods_agent.evaluation.evaluate import evaluate

    report = tmp_path / "eval.json"
    monkeypatch.setenv(PROGRESS_FILE, str(report))
    tasks = retail_tasks[:3]
    evaluate(oracle_engine(tasks), tasks, k=2)
    last = read_snapshot(report)
    assert last is not None and (last.what, last.done, last.total) == ("evaluation", 6, 6)


# -- the experiment's side: Clock and the watchers ---------------------------------------------
def _clock(tmp_path: Path, timings: dict[str, list[float]], lines: list[str]) -> stages.Clock:
    tmp_path.mkdir(parents=True, exist_ok=True)
    if timings:
        (tmp_path / "timings.json").write_text(json.dumps(timings))
    config = load_experiment(CONFIG, [f"out={tmp_path}"])
    return stages.Clock(tmp_path / "timings.json", config, lines.append)


def test_the_time_left_names_what_is_not_yet_measured_and_is_never_0(tmp_path):
    lines: list[str] = []
    fresh = _clock(tmp_path / "a", {}, lines)
    assert fresh.left(epochs=1, evals=3, steps=6) == "time left not yet measured"
    # the first GRPO step of a fresh experiment (issue 42: "about 0:00:00 left")
    assert fresh.left(epochs=0, evals=0, steps=6) == "time left not yet measured"
    some = _clock(tmp_path / "b", {"eval": [60.0, 120.0]}, lines)
    assert some.left(epochs=1, evals=3, steps=6) == (
        "about 0:04:30 left, more for the warm-start epochs and GRPO steps (not yet measured)"
    )
    # the epoch under way counts what its child measured instead
    assert some.left(epochs=1, evals=3, steps=0, now="epoch", now_left=600.0) == (
        "about 0:14:30 left"
    )
    fast = _clock(tmp_path / "c", {"step": [0.01]}, lines)
    assert fast.left(epochs=0, evals=0, steps=1) == "about 0:00:01 left"
    assert fast.left(epochs=0, evals=0, steps=0) == ""


def _snapshot(done: int, left: float | None = 300.0) -> Snapshot:
    return Snapshot("warm start (SFT)", "batch", done, 40, 10.0 * done, left, {"loss": "1.0"})


def test_a_stage_says_what_its_child_reports_at_most_every_30_seconds(tmp_path):
    lines: list[str] = []
    clock, now = _clock(tmp_path, {}, lines), FakeClock()
    watch = stages.StageWatch(
        clock, "warm start: epoch 1 of at most 1", lambda now_left: f"in all {now_left}", now=now
    )
    watch(None)  # no report yet
    now.tick(5)
    watch(_snapshot(1))  # too soon after the stage's first line
    assert lines == []
    now.tick(stages.SAY_EVERY)
    watch(_snapshot(2))
    assert len(lines) == 1 and lines[0].startswith(
        "rods experiment: warm start: epoch 1 of at most 1; warm start (SFT): 2 of 40 batches, "
        "7.9 s each, about 0:05:00 for the other 38 (loss 1.0); "
    )
    assert lines[0].endswith(" elapsed, in all 300.0")
    now.tick(stages.SAY_EVERY)
    watch(_snapshot(2))  # nothing new
    now.tick(1)
    watch(_snapshot(3))
    assert len(lines) == 2 and "3 of 40 batches" in lines[1]


def test_a_run_says_each_step_and_its_rollouts_between_steps(tmp_path):
    lines: list[str] = []
    clock, now = _clock(tmp_path, {}, lines), FakeClock()
    run = tmp_path / "runs" / "static-s0"
    run.mkdir(parents=True)
    watch = stages.StepWatch(clock, run, "runs: static seed 0 (run 1 of 1)", 2, 1, now=now)
    watch.say()
    assert lines[-1].endswith(" elapsed, time left not yet measured")
    assert lines[-1].startswith("rods experiment: runs: static seed 0 (run 1 of 1), step 0 of 2; ")
    now.tick(45)
    rollouts = Snapshot("rollouts", "episode", 4, 16, 40.0, 120.0, {})
    watch(rollouts)
    assert (
        "step 0 of 2; rollouts: 4 of 16 episodes, 10 s each, about 0:02:00 for the other 12"
        in (lines[-1])
    )
    now.tick(100)
    (run / "metrics.jsonl").write_text('{"step": 0}\n')
    watch(rollouts)
    assert "step 1 of 2; " in lines[-1] and lines[-1].endswith(" elapsed, about 0:02:25 left")


CHILD = """
import os, sys, time
from rods_agent.console.progress import Progress
bar = Progress(4, "warm start (SFT)", "batch", show=False)
bar.update(2, loss="0.5")
print("a child's own line")
time.sleep(float(sys.argv[-1]))
"""


def test_the_runner_prints_the_childs_progress_and_removes_its_file(tmp_path, monkeypatch):
    monkeypatch.setattr(stages, "RODS", (sys.executable, "-c", CHILD))
    monkeypatch.setattr(stages, "SAY_EVERY", 0.0)
    lines: list[str] = []
    clock = _clock(tmp_path, {}, lines)
    log = tmp_path / "epoch-1" / "log.txt"
    watch = stages.StageWatch(clock, "warm start: epoch 1 of at most 1")
    stages.run_child(["sft", "1.5"], log, 1, watch=watch, poll=0.05)
    said = [line for line in lines if "warm start (SFT): 2 of 4 batches" in line]
    assert len(said) == 1 and "(loss 0.5)" in said[0]
    assert "a child's own line" in log.read_text()
    assert list(log.parent.iterdir()) == [log]  # the progress file is gone


@pytest.mark.slow
def test_the_warm_start_reports_its_batches_quietly(tiny_model_dir, retail_tasks, tmp_path,
                                                    monkeypatch, capsys):  # fmt: skip
    """``rods sft`` under ``rods experiment`` (``log.progress: false``): nothing on stderr,
    the SFT batches in the progress file."""
    from rods_agent.engines.hf import TransformersEngine
    from rods_agent.training.config import load_config
    from rods_agent.training.warm_start import warm_start

    report = tmp_path / "sft.json"
    monkeypatch.setenv(PROGRESS_FILE, str(report))
    engine = TransformersEngine(tiny_model_dir)
    config = load_config(
        None, ["warm_start.measure=false", "log.progress=false", "warm_start.batch_size=1"]
    )
    warm_start(
        config, engine.model, engine.chat, retail_tasks[:2], generator=lambda: engine,
        device="cpu", on_fitted=lambda: None,
    )  # fmt: skip
    last = read_snapshot(report)
    assert last is not None and (last.what, last.done, last.total) == ("warm start (SFT)", 2, 2)
    assert "loss" in last.fields
    assert "warm start (SFT)" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_grpo_steps_rollouts_are_reported_quietly(tiny_model_dir, retail_tasks, tmp_path,
                                                    monkeypatch, capsys):  # fmt: skip
    """``rods train`` under ``rods experiment``: a step's episodes done, in the file."""
    from rods_agent.training.config import load_config
    from rods_agent.training.model_policy import ModelPolicy

    report = tmp_path / "train.json"
    monkeypatch.setenv(PROGRESS_FILE, str(report))
    config = load_config(
        None,
        ["rollout.tasks_per_step=2", "rollout.group_size=2", "rollout.max_turns=2",
         "rollout.max_new_tokens=6", "rollout.max_tokens=16000", "log.progress=false",
         f"model.path={tiny_model_dir}", f"out={tmp_path / 'run'}"],
    )  # fmt: skip
    policy = ModelPolicy(config, tmp_path / "run")
    try:
        policy.rollouts(retail_tasks[:2], step=0)
    finally:
        policy.close()
    last = read_snapshot(report)
    assert last is not None and (last.what, last.done, last.total) == ("rollouts", 4, 4)
    assert "rollouts" not in capsys.readouterr().err
