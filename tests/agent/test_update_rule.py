"""One update rule for every mode (issue 43), and mode envtuning's environments.

Every mode takes an optimizer step only when a kept token has a non-zero advantage: a batch
whose groups all tied leaves the weights, AdamW's state and the schedule bit-identical,
whether the mode keeps the tied groups (static, envtuning) or drops them (filter, rods,
rods-expand). Mode envtuning's training rollouts get Environment Tuning's actionable hints;
its evaluations, like every mode's, do not.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rods_agent.data import DataEngine  # noqa: E402
from rods_agent.training.config import TRAIN_MODES, load_config  # noqa: E402
from rods_agent.training.loop import update_on_kept  # noqa: E402
from rods_agent.training.model_policy import ModelPolicy  # noqa: E402

pytestmark = pytest.mark.slow

SMALL = [
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_turns=1",
    "rollout.max_new_tokens=6",
    "rollout.max_tokens=16000",
    "grpo.micro_batch_size=4",
    "grpo.lr=1e-2",
    "grpo.kl_coef=0.1",  # a KL term does not make a tied batch step either
    "log.progress=false",
]


def make(tiny_model_dir: Path, out: Path, mode: str) -> ModelPolicy:
    config = load_config(
        None, [*SMALL, f"model.path={tiny_model_dir}", f"out={out}", f"mode={mode}"]
    )
    return ModelPolicy(config, out)


def state(policy: ModelPolicy) -> tuple:
    """Weights, the optimizer's whole state and the schedule's, copied."""
    weights = {n: p.detach().clone() for n, p in policy.learner.named_parameters()}
    return weights, copy.deepcopy(policy.optimizer.state_dict()), policy.scheduler.state_dict()


def identical(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.fixture(scope="module")
def episodes(tiny_model_dir, retail_tasks, tmp_path_factory):
    """One step's groups of rollouts of the tiny model (their rewards are set by each test)."""
    policy = make(tiny_model_dir, tmp_path_factory.mktemp("rollouts"), "static")
    try:
        return policy.rollouts(retail_tasks[:2], step=0).groups
    finally:
        policy.close()


@pytest.mark.parametrize("mode", TRAIN_MODES)
def test_a_tied_step_changes_nothing_and_a_step_with_signal_moves_the_weights(
    mode, tiny_model_dir, retail_tasks, episodes, tmp_path
):
    policy = make(tiny_model_dir, tmp_path, mode)
    engine = DataEngine(policy.config.data, mode=mode, tasks=retail_tasks[:4])
    try:
        groups = copy.deepcopy(episodes)
        for g in groups:
            g.rewards = [1.0, 0.0]
        _, update = update_on_kept(engine, policy, groups, step=0)  # AdamW gets moments
        assert update["optimizer_steps"] == 1
        before = state(policy)
        for g in groups:
            g.rewards = [0.5, 0.5]
        kept, update = update_on_kept(engine, policy, groups, step=1)
        assert len(kept) == (2 if mode in ("static", "envtuning") else 0)
        assert update.get("optimizer_steps", 0) == 0
        assert identical(state(policy), before)
        assert policy.weights_version == 1
        groups[0].rewards = [0.0, 1.0]
        _, update = update_on_kept(engine, policy, groups, step=2)
        assert update["optimizer_steps"] == 1 and policy.weights_version == 2
        after = state(policy)
        assert not identical(after[0], before[0]) and not identical(after[1], before[1])
        assert after[2]["optimizer_steps"] == before[2]["optimizer_steps"] + 1
    finally:
        policy.close()


def test_envtuning_hints_the_training_rollouts_and_never_the_evaluation(
    tiny_model_dir, retail_tasks, tmp_path, monkeypatch
):
    import rods_agent.evaluation.evaluate
    import rods_env.env

    made: list[dict] = []
    real = rods_env.env.make_env

    def recording(domain, **kwargs):
        made.append(dict(kwargs))
        kwargs.pop("actionable_hints", None)  # whether the env has the keyword yet or not
        return real(domain, **kwargs)

    monkeypatch.setattr(rods_env.env, "make_env", recording)
    monkeypatch.setattr(rods_agent.evaluation.evaluate, "make_env", recording)
    tasks = retail_tasks[:1]
    for mode in ("envtuning", "static"):
        policy = make(tiny_model_dir, tmp_path / mode, mode)
        try:
            made.clear()
            policy.rollouts(tasks, step=0)
            assert made and all(
                k.get("actionable_hints") is (True if mode == "envtuning" else None) for k in made
            ), (mode, made)
            made.clear()
            policy.evaluate(tasks, step=0)
            assert made and not any("actionable_hints" in k for k in made)
        finally:
            policy.close()
