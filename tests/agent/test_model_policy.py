"""ModelPolicy on the tiny model: seeded rollouts, a GRPO update, checkpoints, LoRA, warm start."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rods_agent.training.config import load_config  # noqa: E402
from rods_agent.training.model_policy import ModelPolicy  # noqa: E402
from rods_agent.training.policy import Policy  # noqa: E402
from rods_env.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.slow

SMALL = [
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_turns=2",
    "rollout.max_new_tokens=6",
    "rollout.max_tokens=16000",
    "rollout.temperature=1.0",
    "grpo.micro_batch_size=2",
    "grpo.lr=1e-3",
    "log.eval_k=1",
]


def make(tiny_model_dir: Path, out: Path, *extra: str) -> ModelPolicy:
    config = load_config(None, [*SMALL, f"model.path={tiny_model_dir}", f"out={out}", *extra])
    return ModelPolicy(config, out)


def _comparable(batch):
    return [[r.comparable() for r in g.episodes] for g in batch.groups]


def _params(policy):
    return {n: p.detach().clone() for n, p in policy.learner.named_parameters() if p.requires_grad}


def test_rollouts_are_seeded_groups_and_an_update_moves_the_weights(
    tiny_model_dir, retail_tasks, tmp_path
):
    policy = make(tiny_model_dir, tmp_path / "a")
    assert isinstance(policy, Policy)
    tasks = retail_tasks[:2]
    batch = policy.rollouts(tasks, step=0)
    assert [g.task.id for g in batch.groups] == [t.id for t in tasks]
    assert all(len(g.episodes) == 2 == len(g.rewards) for g in batch.groups)
    episodes = [r for g in batch.groups for r in g.episodes]
    assert len({r.sampling_seed for r in episodes}) == 4
    assert all(r.weights_version == 0 and r.termination != "error" for r in episodes)
    assert batch.tokens == sum(r.completion_tokens for r in episodes) > 0
    assert set(batch.seconds) >= {"generate", "env"}
    # The same seed, step and task give the same episodes in another policy object.
    twin = make(tiny_model_dir, tmp_path / "b")
    assert _comparable(twin.rollouts(tasks, step=0)) == _comparable(batch)
    assert _comparable(policy.rollouts(tasks, step=1)) != _comparable(batch)

    for group in batch.groups:  # give each group reward variance, as the data engine would keep
        group.rewards = [1.0, 0.0]
    before = _params(policy)
    metrics = policy.update(batch.groups, step=0)
    # The generator shares the learner's weights: no mismatch, ratio 1 before the step.
    assert metrics["mismatch_mean_abs"] < 1e-4 and metrics["ratio_mean"] == pytest.approx(1.0)
    assert metrics["weights_version"] == 1 and metrics["grad_norm"] > 0
    after = _params(policy)
    assert any(not torch.equal(before[n], after[n]) for n in before)
    assert all(
        r.weights_version == 1 for g in policy.rollouts(tasks, step=1).groups for r in g.episodes
    )


def test_save_and_load_resume_exactly(tiny_model_dir, retail_tasks, tmp_path):
    tasks = retail_tasks[:2]
    a = make(tiny_model_dir, tmp_path / "a", "grpo.scheduler=cosine", "steps=4")
    batch = a.rollouts(tasks, step=0)
    for group in batch.groups:
        group.rewards = [0.0, 1.0]
    a.update(batch.groups, step=0)
    a.save(tmp_path / "ckpt")

    b = make(tiny_model_dir, tmp_path / "b", "grpo.scheduler=cosine", "steps=4")
    b.load(tmp_path / "ckpt")
    assert b.weights_version == 1
    assert _params(a).keys() == _params(b).keys()
    assert all(
        torch.equal(x, y) for x, y in zip(_params(a).values(), _params(b).values(), strict=True)
    )
    next_a, next_b = a.rollouts(tasks, step=1), b.rollouts(tasks, step=1)
    assert _comparable(next_a) == _comparable(next_b)
    for ga, gb in zip(next_a.groups, next_b.groups, strict=True):
        ga.rewards = gb.rewards = [1.0, 0.0]
    ma, mb = a.update(next_a.groups, step=1), b.update(next_b.groups, step=1)
    assert ma == mb  # no wall-clock value in the update's metrics
    assert all(
        torch.equal(x, y) for x, y in zip(_params(a).values(), _params(b).values(), strict=True)
    )
    with pytest.raises(ConfigError, match="checkpoint"):
        b.load(tmp_path / "nothing-here")


def test_lora_trains_adapters_only_and_kl_to_the_reference_grows(
    tiny_model_dir, retail_tasks, tmp_path
):
    pytest.importorskip("peft")
    policy = make(tiny_model_dir, tmp_path / "lora", "model.lora_rank=4", "grpo.kl_coef=0.1",
                  "grpo.epochs=2", "grpo.lr=0.05")  # fmt: skip
    trainable = _params(policy)
    assert trainable and all("lora_" in n for n in trainable)
    batch = policy.rollouts(retail_tasks[:2], step=0)
    for group in batch.groups:
        group.rewards = [1.0, 0.0]
    metrics = policy.update(batch.groups, step=0)
    assert metrics["kl"] > 0  # the second epoch starts away from the reference (LoRA off)
    moved = _params(policy)
    assert any(not torch.equal(trainable[n], moved[n]) for n in trainable)
    state = policy.generator_state()  # merged weights under the plain model's names
    assert not any("lora_" in k or "base_layer" in k for k in state)
    plain = policy.learner.get_base_model()
    with policy.learner.disable_adapter():
        q = plain.model.layers[0].self_attn.q_proj.base_layer.weight
        assert not torch.allclose(state["model.layers.0.self_attn.q_proj.weight"], q)


def test_a_lora_run_exports_the_merged_model(tiny_model_dir, retail_tasks, tmp_path):
    """``rods export`` of a LoRA run: the base model with the checkpoint's adapters merged
    in, the weights the generator samples, under the plain model's names."""
    pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    from rods_agent.training.config import config_yaml
    from rods_agent.training.export import export_model

    run = tmp_path / "run"
    policy = make(tiny_model_dir, run, "model.lora_rank=4", "grpo.lr=0.05")
    batch = policy.rollouts(retail_tasks[:2], step=0)
    for group in batch.groups:
        group.rewards = [1.0, 0.0]
    policy.update(batch.groups, step=0)
    checkpoint = run / "checkpoints" / "step-000001"
    policy.save(checkpoint / "policy")
    (checkpoint / "loop.json").write_text("{}")
    (run / "config.yaml").write_text(config_yaml(policy.config))
    out, steps = export_model(run, tmp_path / "exported")
    assert steps == 1
    exported = AutoModelForCausalLM.from_pretrained(out).state_dict()  # tied weights too
    merged = policy.generator_state()
    assert not any("lora_" in k for k in exported)
    for name, value in merged.items():
        assert torch.allclose(exported[name].float(), value.float(), atol=1e-6), name
    base = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir).named_parameters())
    assert any(not torch.equal(base[k], exported[k]) for k in base)  # the adapters moved it

    # The adapters go onto their own base only: a moved copy of it exports the same model,
    # a fine-tune of it (same names and shapes, other bytes) is refused, by export and resume.
    moved = tmp_path / "moved-base"
    shutil.copytree(tiny_model_dir, moved)
    again, _ = export_model(run, tmp_path / "again", base=moved)
    assert AutoModelForCausalLM.from_pretrained(again).state_dict().keys() == exported.keys()
    for name, value in AutoModelForCausalLM.from_pretrained(again).state_dict().items():
        assert torch.equal(value, exported[name]), name
    other = tmp_path / "other-base"
    shutil.copytree(tiny_model_dir, other)
    tuned = AutoModelForCausalLM.from_pretrained(other)
    with torch.no_grad():
        for p in tuned.parameters():
            p.add_(0.01)
    tuned.save_pretrained(other)
    with pytest.raises(ConfigError, match=r"LoRA adapters trained on .* holds other weights"):
        export_model(run, tmp_path / "wrong", base=other)
    assert not (tmp_path / "wrong").exists()
    elsewhere = make(other, tmp_path / "resumed", "model.lora_rank=4", "grpo.lr=0.05")
    with pytest.raises(ConfigError, match="holds other weights"):
        elsewhere.load(checkpoint / "policy")


def test_kl_to_a_frozen_copy_of_the_starting_model(tiny_model_dir, retail_tasks, tmp_path):
    policy = make(tiny_model_dir, tmp_path / "kl", "grpo.kl_coef=0.1", "grpo.epochs=2",
                  "grpo.lr=0.05")  # fmt: skip
    start = _params(policy)
    batch = policy.rollouts(retail_tasks[:2], step=0)
    for group in batch.groups:
        group.rewards = [1.0, 0.0]
    first = policy.update(batch.groups, step=0)
    assert first["kl"] > 0  # the second epoch starts away from the reference
    reference = dict(policy.reference.named_parameters())
    assert all(not p.requires_grad for p in reference.values())
    assert all(torch.equal(reference[n], start[n]) for n in start)  # the reference stayed put
    assert any(not torch.equal(start[n], p) for n, p in _params(policy).items())
    off = make(tiny_model_dir, tmp_path / "nokl", "grpo.epochs=2", "grpo.lr=0.05")
    assert off.reference is None and off.update(batch.groups, step=0)["kl"] == 0.0


def test_warm_start_fits_oracle_transcripts_and_reports_progress(
    tiny_model_dir, retail_tasks, tmp_path
):
    policy = make(tiny_model_dir, tmp_path / "ws", "warm_start.enabled=true", "warm_start.epochs=3",
                  "warm_start.lr=3e-3", "warm_start.batch_size=2", "warm_start.micro_batch_size=2",
                  "warm_start.max_tokens=16000")  # fmt: skip
    out = policy.warm_start(retail_tasks[:2])
    assert out["transcripts"] == 2 and out["steps"] == 3 and out["oracle_progress"] == 1.0
    assert out["loss_last"] < out["loss_first"]
    assert 0.0 <= out["progress_before"] <= 1.0 and 0.0 <= out["progress_after"] <= 1.0


def test_the_warm_start_checks_its_memory_on_its_real_transcripts(
    tiny_model_dir, retail_tasks, tmp_path, caplog
):
    """The run's estimate before it starts leaves the warm start out (warm_start.max_tokens
    is a cap, not a length); the warm start warns, before it fits, from a micro-batch of
    its longest real transcripts."""
    from rods_agent.engines.memory import GB
    from rods_agent.training.warm_start import oracle_transcripts

    # rollout.max_tokens: a GRPO micro-batch shorter than the transcripts
    ws = ["warm_start.enabled=true", "warm_start.epochs=1", "warm_start.measure=false",
          "warm_start.batch_size=2", "warm_start.micro_batch_size=2",
          "rollout.max_tokens=512"]  # fmt: skip
    short = make(tiny_model_dir, tmp_path / "a", *ws, "warm_start.max_tokens=16000")
    long = make(tiny_model_dir, tmp_path / "b", *ws, "warm_start.max_tokens=64000")
    assert short.memory.update == long.memory.update > 0
    records = oracle_transcripts(retail_tasks[:2], short.chat, prompt=short.config.rollout.prompt)
    longest = max(len(r.token_ids) for r in records)
    assert longest > 100
    rates = short._rates
    assert rates is not None
    sft = short.warm_start_memory(records)
    assert sft.update == rates.update_bytes(
        rows=2, tokens=longest, scored=max(sum(r.assistant_mask) for r in records)
    )
    assert sft.held == short.memory.held
    # a budget the run fits but the warm start's activations do not
    budget = (short.memory.total + sft.total) / 2 / GB
    assert short.memory.total < sft.total
    with caplog.at_level("WARNING"):
        policy = make(tiny_model_dir, tmp_path / "c", *ws, f"model.memory_budget_gb={budget}")
    assert "memory:" not in caplog.text
    with caplog.at_level("WARNING"):
        policy.warm_start(retail_tasks[:2])
    assert f"the warm start may hold {sft.total / GB:.1f} GB" in caplog.text
    assert f"2 transcripts of its longest, {longest} tokens" in caplog.text


def test_a_warm_start_that_measures_nothing_starts_no_generator(
    tiny_model_dir, retail_tasks, tmp_path
):
    """``rods sft`` only tokenizes transcripts and fits: the generator (vLLM's engine and its
    KV cache, with ``model.engine: vllm``) starts on first use, with the template the policy
    tokenized with."""
    policy = make(tiny_model_dir, tmp_path / "ws", "warm_start.enabled=true", "warm_start.epochs=1",
                  "warm_start.measure=false", "warm_start.batch_size=2",
                  "warm_start.micro_batch_size=2", "warm_start.max_tokens=16000")  # fmt: skip
    out = policy.warm_start(retail_tasks[:2])
    assert out["transcripts"] == 2 and "progress_before" not in out
    assert not policy.generator_started
    opening = [
        {"role": "system", "content": "You are a store agent."},
        {"role": "user", "content": "Where is my order #W0000001?"},
    ]
    chat = policy.chat
    assert policy.engine.chat.prompt_ids(opening) == chat.prompt_ids(opening)
    assert policy.engine.chat.end_of_turn_ids == chat.end_of_turn_ids
    assert policy.generator_started
    policy.close()
    assert not policy.generator_started


def test_a_missing_vllm_stops_the_policy_before_anything_runs(
    tiny_model_dir, tmp_path, monkeypatch
):
    """The generator starts late, so vLLM's absence is checked up front: a run must not
    warm-start for an hour and then fail at its first rollout."""
    from rods_agent.engines import vllm_engine
    from rods_env.errors import RodsError

    monkeypatch.setattr(vllm_engine, "vllm_available", lambda: False)
    with pytest.raises(RodsError, match=r"needs vllm .*setup\.sh vllm"):
        make(tiny_model_dir, tmp_path / "v", "model.engine=vllm")
    assert not (tmp_path / "v").exists() or not any((tmp_path / "v").iterdir())


def test_evaluate_and_bad_settings(tiny_model_dir, retail_tasks, tmp_path):
    policy = make(tiny_model_dir, tmp_path / "ev")
    summary = policy.evaluate(retail_tasks[:2], step=3)
    assert summary["tasks"] == 2 and set(summary["pass_k"]) == {"1"}
    assert summary["step"] == 3 and 0.0 <= summary["mean_progress"] <= 1.0
    with pytest.raises(ConfigError, match="temperature"):
        make(tiny_model_dir, tmp_path / "t0", "rollout.temperature=0")
    with pytest.raises(ConfigError, match="no model folder"):
        make(tmp_path / "missing", tmp_path / "m")
