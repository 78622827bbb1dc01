"""Training on the real families' templates: the warm start and a few GRPO steps with a tiny
model of each (hidden 64, 2 layers, the real tokenizer and chat template).

What issue 16 found broken: with Qwen3's template every oracle transcript and every rollout
ended in ``error`` after its first observation, so nothing was trained, silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rods_agent.training.config import load_config
from rods_env.registry import load_domain
from tests.agent.conftest import FAMILY_CASES, FamilyModels, case_id


def small_config(model: Path, out: Path, thinking: bool | None, *extra: str):
    overrides = [
        f"model.path={model}",
        f"out={out}",
        "env=[retail]",
        "model.device=cpu",
        "model.dtype=float32",
        "rollout.tasks_per_step=1",
        "rollout.group_size=2",
        "rollout.max_turns=2",
        "rollout.max_new_tokens=8",
        "rollout.thinking_tokens=8",
        "rollout.max_tokens=12000",
        "warm_start.enabled=true",
        "warm_start.tasks=1",
        "warm_start.select=shortest",
        "warm_start.max_tokens=12000",
        "warm_start.measure=false",
        "warm_start.batch_size=1",
        "warm_start.micro_batch_size=1",
        "grpo.micro_batch_size=1",
        "log.progress=false",
        "log.tensorboard=false",
        *extra,
    ]
    if thinking is not None:
        overrides.append(f"rollout.thinking={str(thinking).lower()}")
    return load_config(None, overrides)


def shortest_tasks(n: int):
    tasks = load_domain("retail").seed_tasks("train")
    return sorted(tasks, key=lambda t: (sum(len(turn.calls) for turn in t.turns), t.id))[:n]


@pytest.mark.parametrize("case", FAMILY_CASES, ids=case_id)
def test_warm_start_and_a_grpo_update_train_on_each_familys_template(
    family_models: FamilyModels, case: tuple[str, bool | None], tmp_path: Path
) -> None:
    import torch

    from rods_agent.training.model_policy import ModelPolicy
    from rods_agent.training.policy import Group

    family, thinking = case
    config = small_config(family_models.model(family), tmp_path, thinking)
    policy = ModelPolicy(config, tmp_path)
    try:
        tasks = shortest_tasks(3)
        ws = policy.warm_start(tasks)
        assert ws["oracle_progress"] == 1.0 and ws["transcripts_cut"] == 0
        assert ws["transcripts"] == 1 and ws["tokens"] > 0 and ws["steps"] == 1

        batch = policy.rollouts(tasks[:1], step=0)
        episodes = batch.groups[0].episodes
        assert [e.termination for e in episodes] != ["error"] * 2
        assert all(e.termination != "error" and not e.errors for e in episodes), [
            (e.termination, e.errors) for e in episodes
        ]
        assert all(e.token_check != "mismatch" for e in episodes)
        assert all(sum(e.assistant_mask) > 0 for e in episodes)
        if policy.engine.chat.thinks:  # the per-turn cap has room for the reasoning
            assert policy.rollout_config(1).sampling.max_tokens == 16
        else:
            assert policy.rollout_config(1).sampling.max_tokens == 8

        # an update on a group with a reward difference trains on every episode's tokens
        before = [p.detach().clone() for p in policy.learner.parameters()]
        metrics = policy.update([Group(tasks[0], episodes, [0.0, 1.0])], step=0)
        assert metrics["tokens"] == sum(sum(e.assistant_mask) for e in episodes)
        moved = sum(
            not torch.equal(a, b) for a, b in zip(before, policy.learner.parameters(), strict=True)
        )
        assert moved > 0
    finally:
        policy.close()


def test_rods_train_runs_on_a_tiny_qwen3_built_from_the_config(
    family_models: FamilyModels, tmp_path: Path
) -> None:
    """``model.path: null, model.tiny_family: qwen3``: the configuration the GPU check uses,
    end to end through ``rods train`` (warm start, then two steps)."""
    from rods_agent.training.loop import train

    family_models.model("qwen3")  # the tokenizer asset is there (skip or fail otherwise)
    config = small_config(
        Path("unused"), tmp_path / "run", False, "steps=2", "mode=static", "model.path=null",
        "model.tiny_family=qwen3", "model.tiny_hidden_size=64", "log.checkpoint_every=0",
    )  # fmt: skip
    out = train(config)
    warm = json.loads((out / "warm_start.json").read_text())
    assert warm["oracle_progress"] == 1.0 and warm["tokens"] > 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1]
    assert all(x["update"]["tokens"] > 0 for x in lines)
    tokenizer = json.loads((out / "tiny-model" / "tokenizer_config.json").read_text())
    assert "enable_thinking" in tokenizer["chat_template"]  # Qwen3's own template
