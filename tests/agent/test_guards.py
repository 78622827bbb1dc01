"""Loud failure: termination counts and loss tokens in every metrics line, and runs that
cannot learn stop at once with a one-line error naming the cause (each triggered the
cheapest way)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rods_agent.rollouts.batch import TERMINATIONS, EpisodeRecord
from rods_agent.training.config import load_config
from rods_agent.training.guards import StepGuard
from rods_agent.training.loop import train
from rods_agent.training.policy import Group, RolloutBatch
from rods_env.errors import ConfigError, TrainingError
from rods_env.fileio import read_jsonl

MODEL_RUN = [
    "policy=model", "mode=static", "env=[retail]", "model.threads=1",
    "rollout.tasks_per_step=1", "rollout.group_size=2", "rollout.max_turns=2",
    "rollout.max_new_tokens=4", "rollout.max_tokens=12000", "grpo.micro_batch_size=2",
    "log.progress=false", "log.tensorboard=false", "log.checkpoint_every=0",
]  # fmt: skip


def _config(tmp_path: Path, model: Path, *extra: str):
    return load_config(None, [*MODEL_RUN, f"model.path={model}", f"out={tmp_path / 'run'}", *extra])


def test_a_simulated_run_logs_terminations_and_no_loss_tokens(tmp_path):
    config = load_config(
        None, ["policy=simulated", "steps=2", "rollout.tasks_per_step=3", "rollout.group_size=4",
               "log.progress=false", "log.tensorboard=false", f"out={tmp_path}"],
    )  # fmt: skip
    rows = read_jsonl(train(config) / "metrics.jsonl")
    for row in rows:
        assert set(TERMINATIONS) <= set(row["terminations"])
        assert row["terminations"]["simulated"] == 12 and sum(row["terminations"].values()) == 12
        assert row["loss_tokens"] == 0  # a simulated learner trains no token, and is not stopped


@pytest.mark.slow
def test_a_model_run_logs_how_episodes_ended_and_the_tokens_trained(
    tiny_model_dir, tmp_path, monkeypatch
):
    from rods_agent.training.model_policy import ModelPolicy

    monkeypatch.setattr(ModelPolicy, "reward", lambda self, record: float(record.trial % 2))
    rows = read_jsonl(train(_config(tmp_path, tiny_model_dir, "steps=1")) / "metrics.jsonl")
    [row] = rows
    assert sum(row["terminations"].values()) == 2 and row["terminations"]["error"] == 0
    assert row["loss_tokens"] == row["update"]["loss_tokens"] > 0


def test_an_opening_longer_than_the_cap_is_one_line_and_writes_nothing(tiny_model_dir, tmp_path):
    config = _config(tmp_path, tiny_model_dir, "steps=1", "rollout.max_tokens=500")
    with pytest.raises(ConfigError) as caught:
        train(config)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("rollout.max_tokens=500 is below the retail opening prompt (")
    assert "raise rollout.max_tokens to at least" in message
    assert not (tmp_path / "run" / "config.yaml").exists()
    # The warm start's cap is checked too.
    config = _config(tmp_path, tiny_model_dir, "steps=1", "warm_start.enabled=true",
                     "warm_start.max_tokens=600")  # fmt: skip
    with pytest.raises(ConfigError, match=r"^warm_start\.max_tokens=600 is below"):
        train(config)


@pytest.mark.slow
def test_a_step_whose_episodes_all_end_in_error_stops_the_run(broken_template_model, tmp_path):
    with pytest.raises(TrainingError) as caught:
        train(_config(tmp_path, broken_template_model, "steps=3"))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("step 0: every episode (2) ended in error")
    assert "Conversation roles must alternate" in message
    [row] = read_jsonl(tmp_path / "run" / "metrics.jsonl")  # the failing step is recorded
    assert row["terminations"]["error"] == 2 and row["loss_tokens"] == 0


@pytest.mark.slow
def test_steps_with_variance_that_train_no_token_stop_the_run(
    tiny_model_dir, tmp_path, monkeypatch
):
    from rods_agent.training.model_policy import ModelPolicy

    # Reward variance in every group (the random model solves nothing), and completions cut
    # at one token, which grpo.mask_truncated drops from the loss: nothing is ever trained.
    monkeypatch.setattr(ModelPolicy, "reward", lambda self, record: float(record.trial % 2))
    config = _config(tmp_path, tiny_model_dir, "steps=5", "rollout.max_new_tokens=1",
                     "grpo.mask_truncated=true", "grpo.max_untrained_steps=2")  # fmt: skip
    with pytest.raises(TrainingError) as caught:
        train(config)
    message = str(caught.value)
    assert message.startswith("no token trained for 2 steps in a row although groups had reward")
    assert "grpo.mask_truncated" in message and "rollout.max_new_tokens" in message
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1]
    assert all(r["loss_tokens"] == 0 and r["effective_group_ratio"] > 0 for r in rows)


def _row(step: int, *, loss_tokens: int, ratio: float) -> dict:
    return {"step": step, "loss_tokens": loss_tokens, "effective_group_ratio": ratio,
            "update": {"dropped_overlong": 4.0}}  # fmt: skip


def test_the_untrained_count_ignores_steps_without_signal_and_survives_a_resume():
    empty = RolloutBatch([])
    guard = StepGuard(3, trains_tokens=True)
    # Untrained with signal, nothing to learn, untrained again: two, not reset by the quiet step.
    guard.replay([_row(0, loss_tokens=0, ratio=0.5), _row(1, loss_tokens=0, ratio=0.0),
                  _row(2, loss_tokens=0, ratio=0.5)])  # fmt: skip
    assert guard.untrained == 2
    with pytest.raises(TrainingError, match="no token trained for 3 steps"):
        guard.check(_row(3, loss_tokens=0, ratio=0.25), empty)
    trained = StepGuard(3, trains_tokens=True)
    trained.replay([_row(0, loss_tokens=0, ratio=0.5), _row(1, loss_tokens=0, ratio=0.5)])
    trained.check(_row(2, loss_tokens=10, ratio=0.5), empty)  # a trained step resets the count
    assert trained.untrained == 0
    never = StepGuard(0, trains_tokens=True)
    for step in range(10):
        never.check(_row(step, loss_tokens=0, ratio=1.0), empty)


def test_one_episode_that_did_not_fail_is_enough(retail_tasks):
    ok = EpisodeRecord("a", termination="max_turns")
    failed = EpisodeRecord("a", trial=1, termination="error", errors=["boom"])
    guard = StepGuard(0, trains_tokens=True)
    guard.check({"step": 0}, RolloutBatch([Group(retail_tasks[0], [ok, failed], [0.0, 0.0])]))
    with pytest.raises(TrainingError, match=r"^step 0: every episode \(1\) ended in error.*boom$"):
        guard.check({"step": 0}, RolloutBatch([Group(retail_tasks[0], [failed], [0.0])]))


CPUS = {  # the flags lines of /proc/cpuinfo seen on this project's machines (shortened)
    "avx2": "flags\t\t: fpu sse2 avx fma avx2 bmi2 sha_ni vaes",  # AMD EPYC, 2026-12-07
    "avx512_bf16": "flags\t\t: avx2 avx512f avx512bw avx512_bf16 avx512_vnni",  # EPYC Zen 5
    "amx": "flags\t\t: avx2 avx512f avx512_fp16 amx_bf16 amx_tile amx_int8",  # Xeon
    "near miss": "flags\t\t: avx2 avx512f avx512_bf16x amx_bf16_",  # no such flag
    "arm": "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 bf16",  # no x86 flags line
}


@pytest.mark.parametrize(
    ("cpu", "native", "fast", "slow"),
    [
        ("avx2", False, "float32", True),
        ("avx512_bf16", True, "bfloat16", False),
        ("amx", True, "bfloat16", False),
        ("near miss", False, "float32", True),
        ("arm", None, "float32", False),
        (None, None, "float32", False),  # no /proc/cpuinfo (macOS)
    ],
)
def test_bf16_is_taken_only_where_the_cpu_computes_it(
    tmp_path, monkeypatch, cpu, native, fast, slow
):
    """``model.dtype=fast`` is bfloat16 on a GPU and on a CPU with native bf16 matmul, and
    float32 elsewhere; an explicit bfloat16 on a CPU known to lack it is named with the fix
    (a one-line notice: the run is ~50x slower, not wrong)."""
    from rods_agent.training import learner

    cpuinfo = tmp_path / "cpuinfo"
    if cpu is not None:
        cpuinfo.write_text(f"processor\t: 0\nmodel name\t: test\n{CPUS[cpu]}\n")
    monkeypatch.setattr(learner, "CPUINFO", cpuinfo)
    assert learner.cpu_bf16_native() is native
    assert learner.resolve_dtype("fast", "cpu") == fast
    assert learner.resolve_dtype("fast", "cuda:0") == "bfloat16"
    assert learner.resolve_dtype("auto", "cpu") == "float32"  # auto keeps its meaning
    assert learner.resolve_dtype("bfloat16", "cpu") == "bfloat16"  # as asked, even if slow
    why = learner.slow_low_precision("bfloat16", "cpu")
    assert (why is not None) is slow
    if why:
        assert "amx_bf16" in why and "model.dtype=fast" in why and "\n" not in why
    assert learner.slow_low_precision("float32", "cpu") is None
    assert learner.slow_low_precision("bfloat16", "cuda") is None
