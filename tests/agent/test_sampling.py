"""sample_next: the engines' draw of the next token (one stream per row, one batch)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_draws_follow_the_sampling_distribution():
    from rods_agent.engines.sampling import sample_next

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -40.0]])
    streams = [torch.Generator().manual_seed(0)]
    counts = torch.zeros(5)
    for _ in range(20_000):
        token, logprob = sample_next(logits, 1.0, 1.0, streams)
        counts[token] += 1
        assert logprob.item() == pytest.approx(torch.log_softmax(logits, -1)[0, token].item())
    # within 4 standard deviations of each token's probability
    p = torch.softmax(logits, -1)[0]
    sd = (p * (1 - p) / 20_000).sqrt()
    assert ((counts / 20_000 - p).abs() <= 4 * sd + 1e-9).all()


def test_a_rows_draw_is_its_own_stream_s_and_stays_in_the_nucleus():
    from rods_agent.engines.sampling import nucleus_mask, sample_next

    logits = torch.randn(6, 300, generator=torch.Generator().manual_seed(1)) * 3
    batch, _ = sample_next(logits, 0.7, 0.9, [torch.Generator().manual_seed(s) for s in range(6)])
    for row in range(6):
        alone, _ = sample_next(
            logits[row : row + 1], 0.7, 0.9, [torch.Generator().manual_seed(row)]
        )
        assert alone.item() == batch[row].item()  # the other rows do not change a row's draw
    keep = nucleus_mask(logits / 0.7, 0.9)
    assert keep.gather(-1, batch[:, None]).all()
    # never a token without mass, even where only one token has any
    one = torch.full((2, 50), float("-inf"))
    one[:, 7] = 0.0
    tokens, logprobs = sample_next(
        one, 1.0, 1.0, [torch.Generator().manual_seed(s) for s in (3, 4)]
    )
    assert tokens.tolist() == [7, 7] and logprobs.tolist() == [0.0, 0.0]
