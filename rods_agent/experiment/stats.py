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
from dataclasses import dataclass

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
