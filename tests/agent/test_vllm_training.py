"""ModelPolicy with the in-process vLLM generator: weights synced after each update.

Runs where vLLM is importable (``.venv-vllm``, made by ``bash scripts/setup.sh vllm``); from
the main environment ``test_weight_sync_suite_in_the_vllm_venv`` runs it there.
"""

from __future__ import annotations

import os

import pytest

from rods_agent.engines.vllm_engine import vllm_available
from tests.agent.vllm_venv import NOT_HERE, require_vllm_venv, run_in_vllm_venv

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

OPENING = [
    {"role": "system", "content": "You are a store agent."},
    {"role": "user", "content": "Hi, where is my order #W0000001?"},
]


def _learner_logprobs(model, prompt, completion, temperature, top_p):
    import torch

    from rods_agent.engines.sampling import sampling_logprobs

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1]
    lp = sampling_logprobs(logits, torch.tensor(completion), temperature=temperature, top_p=top_p)
    return lp.tolist()


def _vllm_policy(tiny_model_dir, tmp_path, *overrides):
    """A ModelPolicy of the tiny model sampling with in-process vLLM (skipped where vLLM is
    not importable: ``test_weight_sync_suite_in_the_vllm_venv`` runs it in .venv-vllm)."""
    if not vllm_available():
        pytest.skip(NOT_HERE)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))
    from rods_agent.training.config import load_config
    from rods_agent.training.model_policy import ModelPolicy

    config = load_config(None, [
        f"model.path={tiny_model_dir}", "model.engine=vllm", f"out={tmp_path}",
        "rollout.max_tokens=16000", *overrides,
    ])  # fmt: skip
    return ModelPolicy(config, tmp_path)


class TestWeightSync:
    def test_vllm_follows_the_learner_through_updates(self, tiny_model_dir, retail_tasks, tmp_path):
        import copy

        from rods_agent.engines import GenerationRequest, SamplingParams

        policy = _vllm_policy(
            tiny_model_dir, tmp_path, "rollout.tasks_per_step=2", "rollout.group_size=2",
            "rollout.max_turns=2", "rollout.max_new_tokens=6", "rollout.temperature=0.8",
            "rollout.top_p=0.9", "grpo.lr=0.01", "grpo.micro_batch_size=2",
        )  # fmt: skip
        try:
            batch = policy.rollouts(retail_tasks[:2], step=0)
            episodes = [r for g in batch.groups for r in g.episodes]
            assert all(r.termination != "error" and r.weights_version == 0 for r in episodes)
            for group in batch.groups:
                group.rewards = [1.0, 0.0]
            old = copy.deepcopy(policy.learner)
            metrics = policy.update(batch.groups, step=0)
            # vLLM (float32 on CPU) sampled what the learner would have: a tiny mismatch.
            assert metrics["mismatch_mean_abs"] < 1e-3
            assert policy.engine.weights_version == 1

            params = SamplingParams(max_tokens=8, temperature=0.8, top_p=0.9)
            [comp] = policy.engine.generate([GenerationRequest(OPENING, seed=3)], params)
            prompt = policy.engine.chat.prompt_ids(OPENING)
            new = _learner_logprobs(policy.learner, prompt, comp.token_ids, 0.8, 0.9)
            before = _learner_logprobs(old, prompt, comp.token_ids, 0.8, 0.9)
            assert comp.logprobs == pytest.approx(new, abs=1e-3)  # synced
            assert max(abs(a - b) for a, b in zip(comp.logprobs, before, strict=True)) > 1e-2

            again = policy.rollouts(retail_tasks[:2], step=1)
            assert all(r.weights_version == 1 for g in again.groups for r in g.episodes)
        finally:
            policy.close()

    def test_a_warm_start_that_measures_nothing_starts_no_engine(
        self, tiny_model_dir, retail_tasks, tmp_path
    ):
        """``rods sft`` with ``model.engine: vllm``: no vLLM engine (nor its KV cache) while
        it only tokenizes and fits; the engine started afterwards samples from the
        warm-started weights, with the template the transcripts were tokenized with."""
        import copy

        from rods_agent.engines import GenerationRequest, SamplingParams

        policy = _vllm_policy(
            tiny_model_dir, tmp_path, "warm_start.enabled=true", "warm_start.epochs=2",
            "warm_start.lr=3e-3", "warm_start.measure=false", "warm_start.batch_size=2",
            "warm_start.micro_batch_size=2", "warm_start.max_tokens=16000",
        )  # fmt: skip
        try:
            old = copy.deepcopy(policy.learner)
            policy.warm_start(retail_tasks[:2])
            assert not policy.generator_started
            prompt = policy.chat.prompt_ids(OPENING)
            assert policy.engine.chat.prompt_ids(OPENING) == prompt
            assert policy.engine.chat.end_of_turn_ids == policy.chat.end_of_turn_ids
            params = SamplingParams(max_tokens=8, temperature=0.8, top_p=0.9)
            [comp] = policy.engine.generate([GenerationRequest(OPENING, seed=3)], params)
            new = _learner_logprobs(policy.learner, prompt, comp.token_ids, 0.8, 0.9)
            before = _learner_logprobs(old, prompt, comp.token_ids, 0.8, 0.9)
            assert comp.logprobs == pytest.approx(new, abs=1e-3)  # warm-started weights
            assert max(abs(a - b) for a, b in zip(comp.logprobs, before, strict=True)) > 1e-2
        finally:
            policy.close()


def test_weight_sync_suite_in_the_vllm_venv(tmp_path):
    """Runs ``TestWeightSync`` in .venv-vllm; its test must have run and passed."""
    if vllm_available():
        pytest.skip("vLLM is importable in this environment: TestWeightSync ran directly")
    require_vllm_venv()
    outcomes = run_in_vllm_venv(__file__, "TestWeightSync", tmp_path, timeout=900)
    assert outcomes == {
        "test_vllm_follows_the_learner_through_updates": "passed",
        "test_a_warm_start_that_measures_nothing_starts_no_engine": "passed",
    }
