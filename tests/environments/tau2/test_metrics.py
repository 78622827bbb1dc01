"""pass^k and success as τ²-bench computes them: rods' functions against τ²-bench's own."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from environments.tau2.package import tau2_module
from environments.tau2.scoring import is_successful
from rods_agent.evaluation.evaluate import pass_hat_k


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 16).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_hat_k_is_tau2s(args):
    n, c, k = args
    metrics = tau2_module("tau2.metrics.agent_metrics")
    assert pass_hat_k(n, c, k) == metrics.pass_hat_k(n, c, k)


@given(st.floats(-2, 3, allow_nan=False))
def test_success_is_tau2s(reward):
    metrics = tau2_module("tau2.metrics.agent_metrics")
    assert is_successful(reward) == metrics.is_successful(reward)
