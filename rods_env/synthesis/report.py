"""Summaries of a synthesis run: acceptance, rejections by reason, structure, coverage."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rods_env.synthesis.pipeline import Outcome
from rods_env.synthesis.text import token_pattern
from rods_env.task import Task

TOP_SIGNATURES = 15
"""Signature lines shown in the text summary (the JSON summary has all)."""


def entities(task: Task) -> Iterator[tuple[str, str]]:
    """``(argument name, value)`` of every string argument of the task's gold calls."""

    def walk(value: Any, name: str) -> Iterator[tuple[str, str]]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield from walk(v, str(k))
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from walk(v, name)
        elif isinstance(value, str) and value:
            yield name, value

    for call in task.gold_calls:
        yield from walk(call.arguments, call.name)


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def skeleton(task: Task, turn: int) -> str:
    """The request of turn ``turn`` with every fact value replaced by ``<its label>`` and every
    other number by ``#``: requests that differ only in their entities share a skeleton."""
    text = task.turns[turn].request
    facts = sorted(task.user.facts.items(), key=lambda kv: -len(kv[1]))
    for label, value in facts:
        if value and value in text:
            text = token_pattern(value).sub(f"<{label}>", text)
    return _NUMBER.sub("#", text)


def skeletons(tasks: Iterable[Task]) -> set[str]:
    """Distinct request skeletons (see :func:`skeleton`) of ``tasks``."""
    return {skeleton(t, i) for t in tasks for i in range(len(t.turns))}


class SynthesisReport:
    """Collects outcomes of a run and summarises them.

    Args:
        seeds: The seed tasks of the run (for the before/after comparisons).
    """

    def __init__(self, seeds: Iterable[Task] = ()) -> None:
        self.started = time.perf_counter()
        self.finished: float | None = None
        self.seeds: list[Task] = list(seeds)
        self.accepted: list[Task] = []
        self.accepted_by_kind: Counter[str] = Counter()
        self.rejected: Counter[str] = Counter()
        self.rejected_by_kind: dict[str, Counter[str]] = {}
        self.examples: dict[str, str] = {}

    def add(self, outcome: Outcome) -> None:
        """Count one outcome."""
        if outcome.accepted:
            self.accepted.append(outcome.task)
            self.accepted_by_kind[outcome.task.provenance.augment or "base"] += 1
        else:
            kind = outcome.augment or "base"
            self.rejected[outcome.reason] += 1
            self.rejected_by_kind.setdefault(kind, Counter())[outcome.reason] += 1
            self.examples.setdefault(outcome.reason, outcome.detail[:300])

    def finish(self) -> None:
        """Stop the clock."""
        self.finished = time.perf_counter()

    @classmethod
    def resumed(
        cls, summary: Mapping[str, Any], seeds: Iterable[Task], accepted: Iterable[Task]
    ) -> SynthesisReport:
        """A report that goes on counting from an earlier run's JSON summary (``rods synth
        --resume``): its counts and time, and the tasks it accepted."""
        report = cls(seeds)
        report.accepted = list(accepted)
        report.accepted_by_kind = Counter(summary.get("accepted_by_kind", {}))
        report.rejected = Counter(summary.get("rejected", {}))
        report.rejected_by_kind = {
            k: Counter(v) for k, v in summary.get("rejected_by_kind", {}).items()
        }
        report.examples = dict(summary.get("rejection_examples", {}))
        report.started -= float(summary.get("seconds", 0.0))
        return report

    @property
    def candidates(self) -> int:
        """Candidates built (accepted + rejected)."""
        return len(self.accepted) + sum(self.rejected.values())

    @property
    def seconds(self) -> float:
        """Wall time of the run so far."""
        return (self.finished or time.perf_counter()) - self.started

    def coverage(self) -> dict[str, dict[str, int]]:
        """Per argument name: distinct values in the seeds, in the output, and new ones."""
        seeds: dict[str, set[str]] = {}
        out: dict[str, set[str]] = {}
        for task in self.seeds:
            for name, value in entities(task):
                seeds.setdefault(name, set()).add(value)
        for task in self.accepted:
            for name, value in entities(task):
                out.setdefault(name, set()).add(value)
        return {
            name: {
                "seeds": len(seeds.get(name, ())),
                "output": len(out.get(name, ())),
                "new": len(out.get(name, set()) - seeds.get(name, set())),
            }
            for name in sorted(set(seeds) | set(out))
        }

    def signatures(self) -> dict[str, dict[str, int]]:
        """Signature key -> number of seeds and of output tasks with it."""
        seeds = Counter(t.signature.key for t in self.seeds if t.signature is not None)
        out = Counter(t.signature.key for t in self.accepted if t.signature is not None)
        keys = sorted(set(seeds) | set(out), key=lambda k: (-(seeds[k] + out[k]), k))
        return {k: {"seeds": seeds[k], "output": out[k]} for k in keys}

    def difficulty(self) -> dict[str, dict[str, float]]:
        """Mean of each difficulty knob (:attr:`rods_env.task.Signature.knobs`) of the seeds
        and of the output."""

        def means(tasks: list[Task]) -> dict[str, float]:
            knobs = [t.signature.knobs for t in tasks if t.signature is not None]
            if not knobs:
                return {}
            return {k: round(sum(x[k] for x in knobs) / len(knobs), 3) for k in knobs[0]}

        return {"seeds": means(self.seeds), "output": means(self.accepted)}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary."""
        n = self.candidates
        secs = self.seconds
        steps = Counter(t.provenance.step for t in self.accepted if t.provenance.step)
        return {
            "seeds": len(self.seeds),
            "candidates": n,
            "accepted": len(self.accepted),
            "acceptance_rate": round(len(self.accepted) / n, 4) if n else 0.0,
            "accepted_by_kind": dict(sorted(self.accepted_by_kind.items())),
            "accepted_by_step": dict(sorted(steps.items())),
            "difficulty": self.difficulty(),
            "rejected": dict(self.rejected.most_common()),
            "rejected_by_kind": {
                k: dict(v.most_common()) for k, v in sorted(self.rejected_by_kind.items())
            },
            "rejection_examples": dict(sorted(self.examples.items())),
            "seconds": round(secs, 3),
            "candidates_per_second": round(n / secs, 1) if secs > 0 else None,
            "signatures": self.signatures(),
            "signature_count": {
                "seeds": len({t.signature.key for t in self.seeds if t.signature}),
                "output": len({t.signature.key for t in self.accepted if t.signature}),
            },
            "distinct_skeletons": {
                "seeds": len(skeletons(self.seeds)),
                "output": len(skeletons(self.accepted)),
            },
            "entity_coverage": self.coverage(),
        }

    def format(self) -> str:
        """A human-readable summary."""
        return format_summary(self.to_dict())


def format_summary(d: Mapping[str, Any]) -> str:
    """The human-readable form of a summary (:meth:`SynthesisReport.to_dict`, or the JSON
    summary ``rods synth`` writes)."""
    lines = [
        f"seeds: {d['seeds']}   candidates: {d['candidates']}   accepted: {d['accepted']} "
        f"({100 * d['acceptance_rate']:.1f}%)   {d['seconds']:.2f} s "
        f"({d['candidates_per_second'] or 0:.0f} candidates/s)",
    ]
    if d["accepted_by_kind"]:
        kinds = ", ".join(f"{k} {v}" for k, v in d["accepted_by_kind"].items())
        lines.append(f"accepted by kind: {kinds}")
    if d.get("accepted_by_step"):
        steps = ", ".join(f"{k} {v}" for k, v in d["accepted_by_step"].items())
        lines.append(f"accepted by expansion step: {steps}")
    difficulty = d.get("difficulty", {})
    if difficulty.get("output"):
        knobs = ", ".join(
            f"{k} {difficulty['seeds'].get(k, 0):.2f} -> {v:.2f}"
            for k, v in difficulty["output"].items()
        )
        lines.append(f"difficulty (mean, seeds -> output): {knobs}")
    if d["rejected"]:
        lines.append("rejected by reason:")
        for reason, count in d["rejected"].items():
            example = d["rejection_examples"].get(reason, "")
            lines.append(f"  {reason:<22} {count:>6}   e.g. {example[:90]}")
    sigs = d["signatures"]
    lines.append(
        f"signatures: {d['signature_count']['seeds']} in seeds, "
        f"{d['signature_count']['output']} in output; request skeletons: "
        f"{d['distinct_skeletons']['seeds']} in seeds, {d['distinct_skeletons']['output']} "
        "in output"
    )
    lines.append(f"  {'seeds':>6} {'output':>6}  signature")
    for key, c in list(sigs.items())[:TOP_SIGNATURES]:
        lines.append(f"  {c['seeds']:>6} {c['output']:>6}  {key[:110]}")
    if len(sigs) > TOP_SIGNATURES:
        lines.append(f"  ... {len(sigs) - TOP_SIGNATURES} more in the JSON summary")
    cov = d["entity_coverage"]
    if cov:
        lines.append("entity coverage (distinct values: seeds / output / new):")
        for name, c in cov.items():
            lines.append(f"  {name:<32} {c['seeds']:>6} {c['output']:>6} {c['new']:>6}")
    return "\n".join(lines)
