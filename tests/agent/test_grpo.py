"""GRPO tensor functions: hand-computed values, TRL's formulas, and the accumulation invariant."""

from __future__ import annotations

import copy
import math

import pytest

torch = pytest.importorskip("torch")

from rods_agent.training.grpo import (  # noqa: E402  (after the torch skip)
    LossConfig,
    Sampling,
    TrainSequence,
    aggregate_loss,
    clipped_surrogate,
    group_advantages,
    grpo_step,
    k3_kl,
    mismatch_metrics,
    score_sequences,
    truncated_importance_weight,
)


# -- advantages -------------------------------------------------------------------------------
def test_group_advantages_by_hand():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5], [0.0, 0.25, 0.5, 1.0]])
    adv = group_advantages(rewards)
    std = math.sqrt(4 * 0.25 / 3)  # unbiased: squared deviations 0.25 each, n - 1 = 3
    a = 0.5 / (std + 1e-4)
    assert adv[0].tolist() == pytest.approx([a, -a, -a, a])
    assert adv[1].tolist() == [0.0] * 4  # no spread, no signal
    mean = 1.75 / 4
    dev = [r - mean for r in (0.0, 0.25, 0.5, 1.0)]
    std3 = math.sqrt(sum(d * d for d in dev) / 3)
    assert adv[2].tolist() == pytest.approx([d / (std3 + 1e-4) for d in dev])
    centred = group_advantages(rewards, scale_std=False)
    assert centred[0].tolist() == [0.5, -0.5, -0.5, 0.5]
    assert centred[2].tolist() == pytest.approx(dev)
    assert group_advantages(torch.tensor([[0.7]])).tolist() == [[0.0]]


def test_group_advantages_match_trl():
    from trl.trainer.utils import nanstd

    g = torch.Generator().manual_seed(0)
    rewards = torch.rand((5, 8), generator=g)
    rewards[1] = 0.3
    # TRL 1.16 GRPOTrainer, scale_rewards="group": (r - mean) / (nanstd + 1e-4).
    trl = (rewards - rewards.mean(1, keepdim=True)) / (nanstd(rewards, dim=1)[:, None] + 1e-4)
    assert torch.allclose(group_advantages(rewards), trl, atol=1e-6)


# -- per-token terms -------------------------------------------------------------------------
def test_clipped_surrogate_by_hand():
    old = torch.zeros(4)
    logp = torch.log(torch.tensor([1.5, 1.5, 0.5, 0.5]))
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loss, clipped = clipped_surrogate(logp, old, adv, clip_low=0.2, clip_high=0.28)
    # r=1.5, A=+1: min(1.5, 1.28) -> clipped; A=-1: min(-1.5, -1.28) = -1.5 -> unclipped.
    # r=0.5, A=+1: min(0.5, 0.8) = 0.5; A=-1: min(-0.5, -0.8) = -0.8 -> clipped.
    assert loss.tolist() == pytest.approx([-1.28, 1.5, -0.5, 0.8])
    assert clipped.tolist() == [True, False, False, True]


def test_clipped_surrogate_gradient_is_zero_where_clipped_and_matches_trl():
    g = torch.Generator().manual_seed(1)
    old = -torch.rand(3, 6, generator=g) * 3
    logp = (old + (torch.rand(3, 6, generator=g) - 0.5)).requires_grad_()
    adv = torch.tensor([[1.3], [-0.7], [0.0]])
    loss, clipped = clipped_surrogate(logp, old, adv, clip_low=0.2, clip_high=0.28)
    # TRL: coef_1 = exp(logp - old); coef_2 = clamp(coef_1, 1 - eps_low, 1 + eps_high);
    # per_token_loss = -min(coef_1 * A, coef_2 * A).
    c1 = torch.exp(logp - old)
    trl = -torch.min(c1 * adv, torch.clamp(c1, 0.8, 1.28) * adv)
    assert torch.allclose(loss, trl)
    loss.sum().backward()
    assert torch.all(logp.grad[clipped] == 0)
    free = ~clipped & (adv != 0).expand_as(clipped)
    assert torch.allclose(logp.grad[free], (-c1 * adv).detach().expand_as(c1)[free])


def test_k3_kl_by_hand():
    logp = torch.log(torch.tensor([0.5, 0.3]))
    ref = torch.log(torch.tensor([0.25, 0.3]))
    kl = k3_kl(logp, ref)
    assert kl[0].item() == pytest.approx(0.5 - math.log(0.5) - 1)  # exp(d) - d - 1, d=log .5
    assert kl[1].item() == pytest.approx(0.0, abs=1e-7)
    assert torch.all(k3_kl(torch.randn(100), torch.randn(100)) >= 0)


def test_truncated_importance_weight_by_hand():
    old = torch.tensor([-1.0, -2.0, -0.5])
    eng = torch.tensor([-2.0, -1.0, -0.5])
    w = truncated_importance_weight(old, eng, cap=2.0)
    assert w.tolist() == pytest.approx([2.0, math.exp(-1.0), 1.0])  # e^1 capped at 2
    assert truncated_importance_weight(old, eng, None).tolist() == [1.0, 1.0, 1.0]


def test_loss_aggregation_by_hand():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0], [5.0, 5.0, 5.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    assert aggregate_loss(loss, mask, "token-mean").item() == pytest.approx(10 / 4)
    # Per-sequence means 2 and 4; the empty third sequence does not count.
    assert aggregate_loss(loss, mask, "seq-mean-token-mean").item() == pytest.approx(3.0)
    # As one micro-batch of a bigger batch: the whole batch's normalizers.
    assert aggregate_loss(loss, mask, "token-mean", n_tokens=8).item() == pytest.approx(10 / 8)
    assert aggregate_loss(loss, mask, "seq-mean-token-mean", n_sequences=4).item() == 1.5
    with pytest.raises(ValueError, match="token-mean"):
        aggregate_loss(loss, mask, "sum")  # type: ignore[arg-type]


# -- with a model --------------------------------------------------------------------------
def _model(seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
    )  # fmt: skip
    return Qwen2ForCausalLM(config).float()


def _sequences(n: int, seed: int = 0) -> list[TrainSequence]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        length = int(torch.randint(8, 20, (1,), generator=g))
        ids = torch.randint(0, 50, (length,), generator=g)
        mask = torch.zeros(length, dtype=torch.long)
        mask[length // 2 :] = 1  # the "assistant" half carries loss
        mask[length // 2 + 2] = 0  # an observation token inside
        out.append(
            TrainSequence(
                token_ids=ids,
                loss_mask=mask,
                advantage=float(i % 3) - 1.0,
                engine_logp=-torch.rand(length, generator=g) * mask,
            )
        )
    return out


def _prepare(model, seqs, sampling, ref=None):
    for s, lp in zip(seqs, score_sequences(model, seqs, sampling, micro_batch_size=3), strict=True):
        s.old_logp = lp
    if ref is not None:
        for s, lp in zip(
            seqs, score_sequences(ref, seqs, sampling, micro_batch_size=3), strict=True
        ):
            s.ref_logp = lp
    return seqs


def test_scores_are_the_sampling_logprobs_of_a_plain_forward_pass():
    from rods_agent.engines.sampling import sampling_logprobs

    model = _model().eval()
    seqs = _sequences(3)
    sampling = Sampling(temperature=0.7, top_p=0.9)
    scored = score_sequences(model, seqs, sampling, micro_batch_size=2)
    for s, lp in zip(seqs, scored, strict=True):
        with torch.no_grad():
            logits = model(s.token_ids[None]).logits[0, :-1]
        want = sampling_logprobs(logits, s.token_ids[1:], temperature=0.7, top_p=0.9)
        m = s.loss_mask[1:].bool()
        assert torch.allclose(lp[1:][m], want[m], atol=1e-5)  # padding changes nothing
        assert torch.all(lp[~s.loss_mask.bool()] == 0)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_one_batch_of_8_equals_two_accumulated_micro_batches_of_4(agg):
    sampling = Sampling(temperature=0.9, top_p=0.95)
    base, ref = _model(0), _model(1)
    updated = []
    for micro in (8, 4, 3):
        model = copy.deepcopy(base)
        seqs = _prepare(model, _sequences(8), sampling, ref=ref)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        cfg = LossConfig(kl_coef=0.1, loss_agg=agg, micro_batch_size=micro, max_grad_norm=1e9)
        metrics = grpo_step(model, seqs, opt, cfg, sampling)
        updated.append((model, metrics))
    (m8, r8), (m4, r4), (m3, r3) = updated
    moved = 0.0
    for p8, p4, p3, p0 in zip(m8.parameters(), m4.parameters(), m3.parameters(), base.parameters(),
                              strict=True):  # fmt: skip
        assert torch.allclose(p8, p4, atol=1e-6) and torch.allclose(p8, p3, atol=1e-6)
        moved = max(moved, (p8 - p0).abs().max().item())
    assert moved > 1e-3  # the step did something
    for key in ("loss", "grad_norm", "kl", "ratio_mean", "tokens"):
        assert r8[key] == pytest.approx(r4[key], rel=1e-5) == r3[key]
    assert r8["ratio_mean"] == pytest.approx(1.0)  # old_logp is the learner before the step


def test_grpo_step_pushes_up_positive_advantages_and_clips_gradients():
    sampling = Sampling()
    model = _model(2)
    seqs = _prepare(model, _sequences(4, seed=3), sampling)
    for s in seqs:
        s.advantage = 1.0 if s is seqs[0] else -1.0
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    before = score_sequences(model, seqs, sampling, micro_batch_size=4)
    metrics = grpo_step(model, seqs, opt, LossConfig(max_grad_norm=0.5, tis_cap=None), sampling)
    after = score_sequences(model, seqs, sampling, micro_batch_size=4)
    gain = [
        (a - b)[s.loss_mask.bool()].sum().item()
        for a, b, s in zip(after, before, seqs, strict=True)
    ]
    assert gain[0] > 0 and all(x < 0 for x in gain[1:])
    assert metrics["grad_norm"] > 0.5  # the norm before clipping is reported
    step = math.sqrt(
        sum(((p.grad or torch.zeros(1)) ** 2).sum().item() for p in model.parameters())
    )
    assert step == 0.0  # gradients are cleared after the step


def test_the_importance_weight_scales_the_policy_gradient():
    sampling = Sampling()
    base = _model(4)
    deltas = {}
    for shift, weight in ((0.0, 1.0), (math.log(1.5), 1.5), (5.0, 2.0)):
        model = copy.deepcopy(base)
        seqs = _prepare(model, _sequences(2, seed=5), sampling)
        for s in seqs:  # the engine found each sampled token less likely than the learner does
            s.engine_logp = (s.old_logp - shift) * s.loss_mask
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        m = grpo_step(model, seqs, opt, LossConfig(tis_cap=2.0, max_grad_norm=1e9), sampling)
        assert m["tis_weight_mean"] == pytest.approx(weight, rel=1e-5)  # capped at 2
        assert mismatch_metrics(seqs)["mismatch_mean_abs"] == pytest.approx(shift, abs=1e-5)
        deltas[weight] = torch.cat(
            [
                (p - p0).flatten()
                for p, p0 in zip(model.parameters(), base.parameters(), strict=True)
            ]
        )
    assert torch.allclose(deltas[1.5], 1.5 * deltas[1.0], atol=1e-6)
    assert torch.allclose(deltas[2.0], 2.0 * deltas[1.0], atol=1e-6)


def test_a_shared_head_is_computed_once_and_changes_nothing(monkeypatch):
    import rods_agent.training.grpo as grpo

    monkeypatch.setattr(grpo, "MIN_SHARED_HEAD", 5)
    g = torch.Generator().manual_seed(7)
    heads = [torch.randint(0, 50, (9,), generator=g), torch.randint(0, 50, (7,), generator=g)]
    seqs = _sequences(6, seed=8)
    for i, s in enumerate(seqs):  # two domains: two system prompts
        s.token_ids = torch.cat([heads[i % 2], s.token_ids])
        s.loss_mask = torch.cat([torch.zeros(len(heads[i % 2]), dtype=torch.long), s.loss_mask])
        s.engine_logp = torch.cat([torch.zeros(len(heads[i % 2])), s.engine_logp])
    groups = grpo.head_groups([s.token_ids for s in seqs], [s.loss_mask for s in seqs], 5)
    assert sorted(m for _, m in groups) == [[0, 2, 4], [1, 3, 5]]
    assert all(length >= 7 for length, _ in groups)
    sampling = Sampling(temperature=0.8)
    base, results = _model(5), []
    calls = []
    for share in (True, False):
        model = copy.deepcopy(base)
        original = model.forward

        def counting(*args, _orig=original, share=share, **kw):
            calls.append((share, kw["input_ids"].shape, kw.get("past_key_values") is not None))
            return _orig(*args, **kw)

        model.forward = counting
        scored = score_sequences(model, seqs, sampling, micro_batch_size=2, share_heads=share)
        for s, lp in zip(seqs, scored, strict=True):
            s.old_logp = lp
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        cfg = LossConfig(micro_batch_size=2, max_grad_norm=1e9)
        metrics = grpo_step(model, seqs, opt, cfg, sampling, share_heads=share)
        results.append((scored, model, metrics))
    (s1, m1, r1), (s2, m2, r2) = results
    for a, b in zip(s1, s2, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    for p1, p2 in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.allclose(p1, p2, atol=1e-5)
    assert r1["loss"] == pytest.approx(r2["loss"], rel=1e-5)
    # With sharing, micro-batches run on the rows' own tokens only, after one pass per head.
    rest = [shape[1] for share, shape, past in calls if share and past]
    whole = [shape[1] for share, shape, past in calls if not share]
    assert max(rest) < max(whole)
    assert sum(1 for share, _, past in calls if share and not past) == 4  # 2 heads x 2 passes


# -- exact shortcuts of the update ------------------------------------------------------------
def _counting(model, calls):
    original = model.forward

    def counting(*args, _orig=original, **kw):
        calls.append(kw["input_ids"].shape[0])
        return _orig(*args, **kw)

    model.forward = counting
    return model


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_rows_with_zero_advantage_are_skipped_and_change_nothing(agg):
    """Without KL, a zero-advantage row's loss is 0 at every token: skipping its forward
    pass (but counting it in the normalizer) gives the same update as running it."""
    sampling = Sampling(temperature=0.9)
    base = _model(3)
    seqs = _sequences(6, seed=4)
    for i, s in enumerate(seqs):
        s.advantage = 0.0 if i % 2 == 0 else (1.0 if i % 4 == 1 else -1.0)
    results, calls = [], []
    for skip in (True, False):
        model = _counting(copy.deepcopy(base), calls)
        rows = _prepare(model, copy.deepcopy(seqs), sampling)
        if not skip:  # the same rows with a tiny advantage that the loss rounds to 0
            for s in rows:
                s.advantage = s.advantage or 1e-30
        calls.clear()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        cfg = LossConfig(loss_agg=agg, micro_batch_size=1, max_grad_norm=1e9)
        results.append((model, grpo_step(model, rows, opt, cfg, sampling), sum(calls)))
    (m1, r1, run1), (m2, r2, run2) = results
    for p1, p2 in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.allclose(p1, p2, atol=1e-6)
    moved = zip(m1.parameters(), base.parameters(), strict=True)
    assert any((p1 - p0).abs().max() > 1e-4 for p1, p0 in moved)
    assert r1["loss"] == pytest.approx(r2["loss"], rel=1e-5, abs=1e-8)
    assert r1["tokens"] == r2["tokens"] and r1["skipped"] == 3 and r2["skipped"] == 0
    assert run1 == 3 and run2 == 6  # rows through the model


def _snapshot(model, opt):
    """The weights and the optimizer's whole state, copied."""
    return (
        {n: p.detach().clone() for n, p in model.named_parameters()},
        copy.deepcopy(opt.state_dict()),
    )


def _identical(a, b) -> bool:
    """Whether two nested states (dicts, lists, tensors, numbers) are bit-identical."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("kl", [0.0, 0.1])
def test_a_tied_batch_takes_no_step_and_a_batch_with_signal_does(kl):
    """The update rule of every mode: no token with a non-zero advantage, no optimizer step
    (weights and AdamW's moments and step count bit-identical, with or without a KL term);
    one such token, a step."""
    sampling = Sampling()
    model, ref = _model(4), _model(9)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    cfg = LossConfig(kl_coef=kl)
    seqs = _sequences(4, seed=5)

    def rows(advantage):
        out = _prepare(model, copy.deepcopy(seqs), sampling, ref=ref if kl else None)
        for i, s in enumerate(out):
            s.advantage = advantage(i)
        return out

    first = grpo_step(model, rows(lambda i: float(i % 2) - 0.5), opt, cfg, sampling)
    assert first["optimizer_step"] == 1.0  # AdamW now has moments that would move weights
    before = _snapshot(model, opt)
    tied = grpo_step(model, rows(lambda i: 0.0), opt, cfg, sampling)
    assert tied["optimizer_step"] == 0.0 and tied["skipped"] == 4
    assert tied["tokens"] > 0 and tied["forward_tokens"] == 0.0
    assert _identical(_snapshot(model, opt), before)
    moved = grpo_step(model, rows(lambda i: 1.0 if i == 0 else 0.0), opt, cfg, sampling)
    assert moved["optimizer_step"] == 1.0
    after = _snapshot(model, opt)
    assert not _identical(after[0], before[0]) and not _identical(after[1], before[1])


@pytest.mark.parametrize("kl", [0.0, 0.1])
def test_fused_old_logprobs_train_exactly_like_a_separate_scoring_pass(kl):
    """One update per batch: old log-probabilities taken from the update's own forward
    pass give the update of a separate (eval-mode, no-grad) scoring pass."""
    sampling = Sampling(temperature=0.8, top_p=0.95)
    base, ref = _model(5), _model(6)
    seqs = _sequences(6, seed=6)
    for i, s in enumerate(seqs):
        s.advantage = 1.0 if i % 2 else -1.0
    results = []
    for fused in (True, False):
        model = copy.deepcopy(base)
        rows = copy.deepcopy(seqs)
        if not fused:
            _prepare(model, rows, sampling)
        if kl:
            refs = score_sequences(ref, rows, sampling, micro_batch_size=3)
            for s, lp in zip(rows, refs, strict=True):
                s.ref_logp = lp
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        cfg = LossConfig(kl_coef=kl, micro_batch_size=2, max_grad_norm=1e9)
        results.append((model, grpo_step(model, rows, opt, cfg, sampling), rows))
    (m1, r1, rows1), (m2, r2, rows2) = results
    for p1, p2 in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.allclose(p1, p2, atol=1e-6)
    for key in ("loss", "grad_norm", "ratio_mean", "tis_weight_mean", "clip_fraction"):
        assert r1[key] == pytest.approx(r2[key], rel=1e-5, abs=1e-7)
    assert r1["ratio_mean"] == pytest.approx(1.0)
    for a, b in zip(rows1, rows2, strict=True):  # filled in on the way, as scored
        assert torch.allclose(a.old_logp, b.old_logp, atol=1e-5)
