"""rods' τ²-bench reward agrees with τ²-bench's own evaluator, verdict for verdict.

Every train and test task of the three domains (telecom in both modes), each in the
variants of :mod:`tests.environments.tau2.agreement` (gold, gold without what it must say,
said with commas and capitals, silent, a write missing, an argument changed, another task's
write added, bare tool calls, cut half way): rods' reward from the episode and from a
replay of its trajectory equals the reward ``tau2.evaluator.evaluator.evaluate_simulation``
gives the same messages, and so does each check of the task's reward basis.

τ²-bench's evaluator reloads its databases for every trajectory (1.5 s each on airline), so
its verdicts are computed once per session, in two worker processes.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.environments.tau2.agreement import Case, build_cases, score_with_tau2

MODES = [
    ("tau2-airline", False),
    ("tau2-retail", False),
    ("tau2-telecom", False),
    ("tau2-telecom", True),
]


@pytest.fixture(scope="session")
def cases() -> dict[tuple[str, bool], list[Case]]:
    built = {mode: build_cases(mode[0], solo=mode[1]) for mode in MODES}
    started = time.perf_counter()
    score_with_tau2([c for group in built.values() for c in group])
    print(
        f"\nτ²-bench's evaluator: {sum(map(len, built.values()))} trajectories in "
        f"{time.perf_counter() - started:.0f} s"
    )
    return built


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES, ids=lambda m: f"{m[0]}{'-solo' if m[1] else ''}")
def test_rewards_agree_with_tau2s_evaluator(cases, mode):
    group = cases[mode]
    wrong = [
        (c.task_id, c.variant, c.tau2["reward"], c.ours["reward"], c.replayed["reward"])
        for c in group
        if not (c.tau2["reward"] == c.ours["reward"] == c.replayed["reward"])
    ]
    assert not wrong, wrong[:5]
    checks = [
        (c.task_id, c.variant, c.tau2["breakdown"], c.ours["breakdown"])
        for c in group
        if c.tau2["breakdown"] != c.ours["breakdown"]
    ]
    assert not checks, checks[:5]
    # the test can fail: every domain has cases of both verdicts, in several variants
    outcomes = Counter((c.variant, c.ours["reward"]) for c in group)
    assert {r for _, r in outcomes} == {0.0, 1.0}, outcomes
    assert outcomes[("gold", 1.0)] == len({c.task_id for c in group})  # every gold passes
    assert sum(n for (v, r), n in outcomes.items() if v != "gold" and r == 0.0) > len(group) // 4


@pytest.mark.slow
def test_every_check_agrees_in_the_basis_or_not(cases):
    """With ``every_check``, rods runs the checks τ²-bench runs outside a task's basis too
    (the database on telecom, the actions on airline): each agrees, check for check."""
    compared = Counter()
    for case in (c for group in cases.values() for c in group):
        if case.termination not in ("agent_stop", "user_stop"):
            continue
        theirs, ours = case.tau2, case.replayed
        for name in ("db_match", "env_assertions", "actions", "communicate"):
            assert ours[name] == theirs[name], (case.task_id, case.variant, name)
            compared[name] += 1
        # the checks outside the basis change nothing: the reward is the basis's
        assert ours["reward"] == case.ours["reward"]
    outside = sum(
        1
        for group in cases.values()
        for c in group
        if c.replayed["db_match"] is not None and "DB" not in c.replayed["reward_basis"]
    )
    assert outside > 100 and min(compared.values()) > 1000, (outside, compared)


@pytest.mark.slow
def test_every_variant_is_covered(cases):
    variants = Counter(c.variant for group in cases.values() for c in group)
    assert set(variants) == {
        "gold",
        "silent",
        "no_communicate",
        "commas",
        "missing_write",
        "wrong_argument",
        "extra_write",
        "bare_actions",
        "cut",
    }
    # τ²-bench's loose checks, confirmed on its own evaluator: commas and capitals still
    # communicate, and a call with no arguments matches any gold action of its name
    passed = Counter((c.variant, c.ours["reward"]) for group in cases.values() for c in group)
    assert passed[("commas", 1.0)] > 0
    bare_passes = [
        c
        for c in cases[("tau2-telecom", True)]
        if c.variant == "bare_actions" and "ACTION" in c.ours["breakdown"]
    ]
    assert any(c.ours["breakdown"]["ACTION"] == 1.0 for c in bare_passes)
