"""Warm start: oracle transcripts tokenized as rollouts are, a loss that falls, ``rods sft``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rods_agent.training.warm_start import oracle_transcripts, supervised_finetune  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_oracle_transcripts_are_rollouts_with_the_learner_template(
    tiny_engine, retail, retail_tasks
):
    airline = [t for t in _airline_train()][:1]
    tasks = [*retail_tasks[:2], *airline]  # two domains in one batch
    records = oracle_transcripts(tasks, tiny_engine.chat, max_tokens=40_000)
    assert [r.task_id for r in records] == [t.id for t in tasks]
    for r in records:
        assert r.success and r.progress == 1.0 and r.termination == "user_stop"
        assert r.token_check == "exact"  # the same tokens as rendering the whole conversation
        assert sum(r.assistant_mask) > 0 and r.step_spans and r.finish_reasons[-1] == "stop"
        eot = tiny_engine.chat.end_of_turn_ids
        assert all(r.token_ids[b - 1] in eot for _, b in r.step_spans)
    # A cut transcript ends at the cap, scored as a cut rollout.
    [cut] = oracle_transcripts(
        retail_tasks[:1], tiny_engine.chat, max_tokens=len(records[0].token_ids) - 50
    )
    assert cut.termination == "max_tokens" and len(cut.token_ids) <= len(records[0].token_ids) - 50


def _airline_train():
    from rods_env.registry import load_domain

    return load_domain("airline").seed_tasks("train")


@pytest.mark.slow
def test_fine_tuning_lowers_the_loss_of_the_transcripts(tiny_model_dir, retail_tasks):
    from transformers import AutoModelForCausalLM

    from rods_agent.engines.hf import TransformersEngine

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    engine = TransformersEngine(model, _tokenizer(tiny_model_dir))
    records = oracle_transcripts(retail_tasks[:2], engine.chat, max_tokens=40_000)
    losses = []
    result = supervised_finetune(
        model, records, epochs=4, lr=5e-3, batch_size=2, micro_batch_size=1,
        on_step=lambda step, loss: losses.append(loss),
    )  # fmt: skip
    assert result.steps == 4 == len(losses) and result.transcripts == 2
    assert result.tokens == sum(sum(r.assistant_mask) for r in records)
    assert losses[-1] < losses[0] * 0.8  # the oracle's words got likelier


def _tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@pytest.mark.slow
def test_rods_sft_command_saves_a_loadable_model_and_reports_progress(tiny_model_dir, tmp_path):
    out = tmp_path / "sft"
    cmd = [sys.executable, "-m", "rods_agent.cli", "sft", "--out", str(out),
           f"model.path={tiny_model_dir}", "env=[airline]", "warm_start.tasks=2",
           "warm_start.epochs=2", "warm_start.batch_size=2", "warm_start.lr=3e-3",
           "warm_start.max_tokens=16000", "rollout.max_turns=2", "rollout.max_new_tokens=8"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rods sft: 2 transcripts, 2 steps" in proc.stdout
    metrics = json.loads((out / "sft.json").read_text())
    assert {"progress_before", "progress_after", "loss_first", "loss_last"} <= set(metrics)
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(out / "model")
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert not torch.equal(saved.model.embed_tokens.weight, base.model.embed_tokens.weight)
    assert (out / "model" / "tokenizer_config.json").exists() and (out / "config.yaml").exists()
    bad = subprocess.run([*cmd[:6], "warm_start.lrr=1"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert bad.returncode == 2 and "warm_start.lrr: unknown key" in bad.stderr


def test_the_warm_start_never_trains_on_cut_off_transcripts(tiny_model_dir, retail_tasks, capsys):
    """A transcript cut by warm_start.max_tokens would teach the model to stop mid-task: it is
    left out, said on stderr and counted; when every one is cut, the run stops."""
    from rods_agent.engines.hf import TransformersEngine
    from rods_agent.training.config import load_config
    from rods_agent.training.warm_start import warm_start
    from rods_env.errors import ConfigError

    engine = TransformersEngine(tiny_model_dir)
    full = oracle_transcripts(retail_tasks, engine.chat)
    lengths = sorted(len(r.token_ids) for r in full)
    assert all(r.termination == "user_stop" for r in full)

    def run(max_tokens: int) -> dict[str, float]:
        config = load_config(
            None,
            [f"warm_start.max_tokens={max_tokens}", "warm_start.measure=false",
             "log.progress=false", "warm_start.batch_size=8"],
        )  # fmt: skip
        return warm_start(
            config, engine.model, engine.chat, retail_tasks, generator=lambda: engine,
            device="cpu", on_fitted=lambda: None,
        )  # fmt: skip

    cap = (lengths[0] + lengths[-1]) // 2  # some transcripts fit, the longest does not
    out = run(cap)
    assert (
        out["transcripts_cut"] >= 1
        and out["transcripts"] == len(retail_tasks) - out["transcripts_cut"]
    )
    assert out["oracle_progress"] == 1.0  # only whole transcripts were trained on
    assert "left out of the warm start" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"every oracle transcript cut at warm_start\.max_tokens"):
        run(lengths[0] // 2)
