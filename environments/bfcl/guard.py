"""The contamination guard of resampled BFCL variants: nothing of the test half may come back.

Every variant :class:`~environments.bfcl.resample.BFCLResampler` makes is held against the
400 test tasks of the paper's split (:mod:`environments.bfcl.split`):

1. **calls and state**: its whole gold call sequence (names and arguments) together with
   its initial state equal to a test task's;
2. **calls**: its whole gold call sequence equal to a test task's (from any state);
3. **questions**: a user message whose nearest test question (Jaccard similarity of word
   3-gram sets, normalised as :mod:`environments.bfcl.world.contamination` does) is at or
   above :data:`NEAR_DUPLICATE`.

The train and test halves come from the same BFCL pool, written by the same people from the
same templates, so train seeds themselves sit at some similarity to the test questions;
:func:`report` measures the distribution (for seeds and variants alike) and docs/bfcl.md
gives it. The threshold is the bfcl-api world's (0.5): BFCL's own paraphrase pairs across
categories score above it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from statistics import mean
from typing import Any

from environments.bfcl.tasks import BFCLTask, load_tasks
from environments.bfcl.world.contamination import (
    NEAR_DUPLICATE,
    calls_key,
    nearest_question,
    normalize,
    shingles,
)

__all__ = ["NEAR_DUPLICATE", "TestIndex", "nearest", "report", "test_index", "violations"]


@dataclass(frozen=True)
class TestIndex:
    """What the guard compares against: the test half's questions, calls and states.

    Attributes:
        questions: ``(task id, 3-gram set)`` of every user message of a test task.
        grams: 3-gram to the questions holding it.
        calls: Canonical whole-task call sequence to a test task's id.
        calls_and_state: ``(call sequence, initial configuration)`` to a test task's id.
    """

    questions: tuple[tuple[str, frozenset[tuple[str, ...]]], ...]
    grams: Mapping[tuple[str, ...], tuple[int, ...]]
    calls: Mapping[str, str]
    calls_and_state: Mapping[tuple[str, str], str]

    def nearest(self, text: str) -> tuple[float, str | None]:
        """The highest similarity of ``text`` to a test question, and that task's id."""
        mine = shingles(normalize(text))
        if not mine:
            return 0.0, None
        return nearest_question(mine, self.grams, self.questions)


def _calls(task: BFCLTask) -> str:
    return calls_key(c for turn in task.gold for c in turn)


@cache
def test_index() -> TestIndex:
    """The index of the 400 test tasks (built once per process)."""
    questions: list[tuple[str, frozenset[tuple[str, ...]]]] = []
    calls: dict[str, str] = {}
    both: dict[tuple[str, str], str] = {}
    for task in load_tasks(None, "test"):
        for turn in task.turns:
            for message in turn:
                grams = shingles(normalize(str(message.get("content") or "")))
                if grams:
                    questions.append((task.id, grams))
        key = _calls(task)
        calls.setdefault(key, task.id)
        both.setdefault((key, task.config_key), task.id)
    index: dict[tuple[str, ...], list[int]] = {}
    for i, (_, grams) in enumerate(questions):
        for gram in grams:
            index.setdefault(gram, []).append(i)
    return TestIndex(
        questions=tuple(questions),
        grams={g: tuple(v) for g, v in index.items()},
        calls=calls,
        calls_and_state=both,
    )


def nearest(task: BFCLTask) -> list[tuple[float, str | None]]:
    """Per user message of ``task``, its nearest test question's similarity and task id."""
    index = test_index()
    return [
        index.nearest(str(m.get("content") or ""))
        for turn in task.turns
        for m in turn
        if m.get("content")
    ]


def violations(task: BFCLTask, threshold: float = NEAR_DUPLICATE) -> list[str]:
    """What ``task`` shares with a test task (empty: nothing), one line each."""
    index = test_index()
    found = []
    key = _calls(task)
    hit = index.calls_and_state.get((key, task.config_key))
    if hit is not None:
        found.append(f"its gold calls and initial state are those of {hit}")
    elif key in index.calls:
        found.append(f"its gold call sequence is that of {index.calls[key]}")
    for sim, where in nearest(task):
        if sim >= threshold:
            found.append(f"a question is a near duplicate ({sim:.2f}) of one of {where}")
            break
    return found


def report(tasks: Sequence[BFCLTask]) -> dict[str, Any]:
    """The guard's numbers over ``tasks``: per user message the nearest test question's
    similarity (max, 99th and 90th percentile, median, mean; how many at or above the
    threshold) and how many tasks the guard rejects."""
    sims = sorted(s for task in tasks for s, _ in nearest(task))

    def q(p: float) -> float:
        return sims[int(p * (len(sims) - 1))] if sims else 0.0

    return {
        "tasks": len(tasks),
        "messages": len(sims),
        "nearest_max": max(sims, default=0.0),
        "nearest_p99": q(0.99),
        "nearest_p90": q(0.90),
        "nearest_median": q(0.5),
        "nearest_mean": mean(sims) if sims else 0.0,
        "at_or_above_threshold": sum(s >= NEAR_DUPLICATE for s in sims),
        "tasks_rejected": sum(1 for t in tasks if violations(t)),
    }
