"""Confidence intervals of held-out scores over tasks and seeds.

An evaluation of a mode at a step is a matrix ``[seeds x tasks]`` of per-task scores (the
mean over a task's trials). Its mean has two sources of noise: which tasks were drawn and
which seeds trained; :func:`bootstrap_ci` resamples both (a two-way bootstrap: seeds with
replacement, tasks with replacement, the matrix mean of each draw), so an interval is
honest about both. :func:`paired_difference` does the same for the difference of two modes
on the same tasks and seed indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    """A mean with its 95% confidence interval.

    Attributes:
        mean: The mean over every seed and task.
        low: The 2.5% quantile of the bootstrap means.
        high: The 97.5% quantile.
        seeds: Seeds (rows) behind it.
        tasks: Tasks (columns) behind it.
    """

    mean: float
    low: float
    high: float
    seeds: int
    tasks: int

    def to_dict(self) -> dict[str, float | int]:
        """As a JSON-able dict."""
        return {
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "seeds": self.seeds,
            "tasks": self.tasks,
        }

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def _matrix(rows: Sequence[Sequence[float]]) -> np.ndarray:
    m = np.asarray(rows, dtype=float)
    if m.ndim != 2 or m.size == 0:
        raise ValueError("need a non-empty [seeds x tasks] matrix of scores")
    return m


def _draws(m: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    s, t = m.shape
    rows = rng.integers(0, s, size=(n, s))
    cols = rng.integers(0, t, size=(n, t))
    # mean of m[rows_i][:, cols_i] for each draw i, without building n sub-matrices
    return np.array([m[r][:, c].mean() for r, c in zip(rows, cols, strict=True)])


def bootstrap_ci(rows: Sequence[Sequence[float]], *, draws: int = 4000, seed: int = 0) -> Interval:
    """The mean of a ``[seeds x tasks]`` score matrix and its two-way bootstrap 95% interval.

    With one seed, only tasks are resampled (the interval then says nothing about seeds).
    """
    m = _matrix(rows)
    means = _draws(m, draws, np.random.default_rng(seed))
    low, high = np.quantile(means, [0.025, 0.975])
    return Interval(float(m.mean()), float(low), float(high), m.shape[0], m.shape[1])


def paired_difference(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    *,
    draws: int = 4000,
    seed: int = 0,
) -> Interval:
    """``mean(a) - mean(b)`` for two modes scored on the same tasks (columns) and as many
    seeds (rows, paired by index), with a two-way bootstrap 95% interval of the difference."""
    ma, mb = _matrix(a), _matrix(b)
    if ma.shape != mb.shape:
        raise ValueError(f"paired matrices differ in shape: {ma.shape} vs {mb.shape}")
    return bootstrap_ci(ma - mb, draws=draws, seed=seed)


def stratified_ci(
    groups: Sequence[Sequence[Sequence[float]]], *, draws: int = 4000, seed: int = 0
) -> Interval:
    """The unweighted mean of several strata's means (BFCL's overall: the mean of its four
    category accuracies) and its two-way bootstrap 95% interval: each draw resamples the
    seeds (rows, the same draw for every stratum: a seed is one trained model) and, within
    each stratum, its tasks.

    Args:
        groups: One ``[seeds x tasks]`` matrix per stratum, all with the same seeds.
    """
    ms = [_matrix(g) for g in groups]
    if not ms:
        raise ValueError("need at least one stratum")
    s = ms[0].shape[0]
    if any(m.shape[0] != s for m in ms):
        raise ValueError("every stratum needs the same seeds (rows)")
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, s, size=(draws, s))
    means = np.zeros(draws)
    for m in ms:
        cols = rng.integers(0, m.shape[1], size=(draws, m.shape[1]))
        means += np.array([m[r][:, c].mean() for r, c in zip(rows, cols, strict=True)])
    means /= len(ms)
    low, high = np.quantile(means, [0.025, 0.975])
    mean = float(np.mean([m.mean() for m in ms]))
    return Interval(mean, float(low), float(high), s, sum(m.shape[1] for m in ms))


# -- how many tasks and seeds an experiment needs --------------------------------------------
@dataclass(frozen=True)
class VarianceComponents:
    """Where the noise of a held-out difference comes from, estimated from one experiment.

    A paired difference ``d[s, t]`` (run seed ``s``, task ``t`` of test-seed family ``f``)
    is modelled as ``mu + seed[s] + family[f] + e[s, t]`` with independent effects: the
    training seed's luck, the family's true difference (some test seeds favour one model),
    and the rest (a variant's own effect, a seed-by-family interaction, the sampling of one
    episode).

    Attributes:
        seed: Variance of the seed effect (no more tasks removes it: only more run seeds).
        family: Variance of the family effect (only more test seeds remove it).
        residual: Variance of ``e`` (more of anything removes it).
        seeds: Run seeds in the data.
        families: Families in the data.
        tasks_per_family: Mean tasks per family in the data.
    """

    seed: float
    family: float
    residual: float
    seeds: int
    families: int
    tasks_per_family: float

    def half_width(self, seeds: int, families: int, tasks_per_family: float) -> float:
        """The approximate 95% half-width of the mean difference of a design with that many
        run seeds, families and tasks per family (normal approximation)."""
        var = (
            self.seed / seeds
            + self.family / families
            + self.residual / (seeds * families * tasks_per_family)
        )
        return 1.96 * float(np.sqrt(var))

    def families_for(self, half_width: float, seeds: int, tasks_per_family: float) -> int | None:
        """The fewest families (test seeds) whose design reaches ``half_width`` with that many
        run seeds and tasks per family; None when no number does (the seed variance alone
        is wider: only more run seeds help)."""
        room = (half_width / 1.96) ** 2 - self.seed / seeds
        if room <= 0:
            return None
        need = (self.family + self.residual / (seeds * tasks_per_family)) / room
        return max(1, int(np.ceil(need - 1e-9)))

    def to_dict(self) -> dict[str, float | int]:
        """As a JSON-able dict."""
        return asdict(self)


def variance_components(
    rows: Sequence[Sequence[float]], families: Sequence[str]
) -> VarianceComponents:
    """Moment estimates of :class:`VarianceComponents` from a ``[seeds x tasks]`` matrix of
    paired differences and each task's family (its test seed).

    The residual variance is that of the two-way additive fit's residuals (seed means and
    family means removed); the seed and family variances are the variances of the seed
    means and of the family means less the residual share each carries, floored at 0. With
    one seed, the seed effect cannot be told apart from the mean: it is reported as 0,
    and a design's half-width then leaves the training seed's luck out.
    """
    m = _matrix(rows)
    s, t = m.shape
    if len(families) != t:
        raise ValueError(f"{len(families)} family labels for {t} tasks")
    labels = sorted(set(families))
    index = np.array([labels.index(f) for f in families])
    counts = np.bincount(index, minlength=len(labels)).astype(float)
    seed_means = m.mean(axis=1)
    family_means = np.array([m[:, index == i].mean() for i in range(len(labels))])
    grand = m.mean()
    fitted = seed_means[:, None] + family_means[index][None, :] - grand
    df = s * t - s - len(labels) + 1
    residual = float(((m - fitted) ** 2).sum() / df) if df > 0 else 0.0
    seed = 0.0
    if s > 1:
        seed = max(0.0, float(seed_means.var(ddof=1)) - residual / t)
    family = 0.0
    if len(labels) > 1:
        # a family mean averages s x (its tasks) cells; the seed effect cancels within a seed
        noise = residual * float(np.mean(1.0 / (s * counts)))
        family = max(0.0, float(family_means.var(ddof=1)) - noise)
    return VarianceComponents(seed, family, residual, s, len(labels), float(counts.mean()))
