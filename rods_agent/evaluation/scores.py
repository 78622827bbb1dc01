"""An evaluation's numbers: pass^k (unbiased), per-task results, breakdowns by skill,
depth, variant and domain, a benchmark's own headline and verdicts side by side, and
the pass^k plot.
"""

from __future__ import annotations

import io
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from math import comb
from pathlib import Path
from typing import Any

from rods_agent.rollouts.batch import EpisodeRecord
from rods_env.benchmark import BenchmarkDomain
from rods_env.errors import ConfigError
from rods_env.fileio import atomic_write
from rods_env.registry import AnyDomain
from rods_env.task import Task


# -- pass^k ------------------------------------------------------------------------------
def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k for one task: C(c, k) / C(n, k).

    Args:
        n: Trials of the task.
        c: Successful trials.
        k: Trials that must all succeed.

    Raises:
        ConfigError: when ``k`` is not in 1..n or ``c`` not in 0..n.
    """
    if not 1 <= k <= n:
        raise ConfigError(f"pass^k needs 1 <= k <= n trials; got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ConfigError(f"successes must be in 0..{n}, got {c}")
    return comb(c, k) / comb(n, k)


# -- the paper's numbers ---------------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceRow:
    """One row of a paper's results table.

    Attributes:
        label: What the row is, as the paper names it.
        arm: The rods mode that reproduces it (``static``, ``envtuning``, ``rods``), or
            None for the model before training.
        scores: The benchmark's own numbers as fractions (label to value, in the
            benchmark's column order); None where the row gives none.
    """

    label: str
    arm: str | None
    scores: Mapping[str, float | None]


@dataclass(frozen=True)
class ReferenceTable:
    """A paper's results on a benchmark, for summaries to print beside a run's own.

    Attributes:
        benchmark: The benchmark domain's name (``bfcl-paper``).
        title: Its id's title (``BFCL-Paper``), which summaries key their numbers by.
        model: The model the paper trained.
        source: Where the numbers come from.
        note: What is known of them (printed under the table).
        rows: The rows, base model first.
    """

    benchmark: str
    title: str
    model: str
    source: str
    note: str
    rows: tuple[ReferenceRow, ...]

    @property
    def columns(self) -> list[str]:
        """The columns any row fills, in the rows' order."""
        return list(dict.fromkeys(k for row in self.rows for k in row.scores))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "benchmark": self.benchmark,
            "model": self.model,
            "source": self.source,
            "note": self.note,
            "rows": [{"label": r.label, "arm": r.arm, "scores": dict(r.scores)} for r in self.rows],
        }

    def markdown_rows(self, columns: Sequence[str] | None = None) -> list[str]:
        """Its rows as Markdown table rows (``| paper: label (model) | values |``, in
        percent), under ``columns`` (default :attr:`columns`)."""
        shown = list(columns) if columns is not None else self.columns
        return [
            f"| paper: {r.label} ({self.model}) | "
            + " | ".join(_quoted(r.scores.get(c)) for c in shown)
            + " |"
            for r in self.rows
        ]


def _quoted(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


PAPER_RESULTS: Mapping[str, ReferenceTable] = {
    "bfcl-paper": ReferenceTable(
        benchmark="bfcl-paper",
        title="BFCL-Paper",
        model="Qwen3-4B-Instruct-2507",
        source="RODS (arXiv 2606.19047), as quoted in issue 40",
        note=(
            "The paper's rows are quoted from the task brief (issue 40), not confirmed by any "
            "RODS text rods could read (docs/paper.md: only the abstract was readable); '-' "
            "is a number not quoted. Its test half is Environment Tuning's unpublished one, "
            "rods' is environments/bfcl/paper_split.json: the same size and categories, not "
            "the same tasks."
        ),
        rows=(
            ReferenceRow("base model", None, {"overall": 0.2213}),
            ReferenceRow("fixed-data GRPO", "static", {"overall": 0.5000}),
            ReferenceRow("environment augmentation", "envtuning", {"overall": 0.5050}),
            ReferenceRow(
                "RODS",
                "rods",
                {
                    "overall": 0.5600,
                    "base": 0.68,
                    "miss_func": 0.59,
                    "miss_param": 0.44,
                    "long_context": 0.53,
                },
            ),
        ),
    )
}
"""The paper's results table per benchmark domain name: the one place rods keeps them
(``rods eval`` and ``rods experiment`` summaries print them beside their own numbers)."""


def paper_results(name: str) -> ReferenceTable | None:
    """The paper's table for a benchmark, by its domain name or title (None: no table)."""
    for table in PAPER_RESULTS.values():
        if name in (table.benchmark, table.title):
            return table
    return None


# -- results -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskResult:
    """The trials of one task.

    Attributes:
        task_id: The task.
        domain: Its domain.
        skill: The skill that generated it.
        variant: ``base`` or an augmented variant.
        depth: Depth of its signature (None when the task has no signature).
        signature: Canonical key of its signature.
        success: Strict success of each trial, in trial order.
        progress: Final progress of each trial.
        termination: How each trial ended (``user_stop``, ``max_turns``, ``error``, ...).
        n_steps: Agent steps of each trial.
        errors: Trials that met an engine or environment error.
        completion_tokens: Tokens generated over all trials.
        gen_seconds: Generation wall time the trials waited for.
        env_seconds: Time in the environments and user simulators.
        verdicts: On a benchmark that gives several verdicts (BFCL's official and strict
            ones), each verdict's success of each trial, in trial order; ``success`` is the
            one the run was scored by.
        verdict_differences: Where those verdicts part: per trial and turn, ``{"trial",
            "turn", "quirks", "why", <each verdict>: passed}``.
    """

    task_id: str
    domain: str
    skill: str
    variant: str
    depth: int | None
    signature: str | None
    success: tuple[bool, ...]
    progress: tuple[float, ...]
    termination: tuple[str, ...]
    n_steps: tuple[int, ...]
    errors: int = 0
    completion_tokens: int = 0
    gen_seconds: float = 0.0
    env_seconds: float = 0.0
    verdicts: Mapping[str, tuple[bool, ...]] = field(default_factory=dict)
    verdict_differences: tuple[Mapping[str, Any], ...] = ()

    @property
    def n(self) -> int:
        """Number of trials."""
        return len(self.success)

    @property
    def successes(self) -> int:
        """Number of successful trials."""
        return sum(self.success)

    @property
    def mean_progress(self) -> float:
        """Mean final progress over the trials."""
        return sum(self.progress) / self.n if self.n else 0.0

    @classmethod
    def from_records(cls, task: Task, records: Sequence[EpisodeRecord]) -> TaskResult:
        """The result of ``task`` from its trials' records (any order)."""
        records = sorted(records, key=lambda r: r.trial)
        sig = task.signature
        given = [r.verdicts for r in records]
        names = [k for k in given[0] or {} if k != "differences"] if all(given) else []
        return cls(
            task_id=task.id,
            domain=task.domain,
            skill=task.skill,
            variant=task.variant,
            depth=sig.depth if sig is not None else None,
            signature=sig.key if sig is not None else None,
            success=tuple(r.success for r in records),
            progress=tuple(r.progress for r in records),
            termination=tuple(r.termination for r in records),
            n_steps=tuple(r.n_steps for r in records),
            errors=sum(1 for r in records if r.errors),
            completion_tokens=sum(r.completion_tokens for r in records),
            gen_seconds=sum(r.gen_seconds for r in records),
            env_seconds=sum(r.env_seconds for r in records),
            verdicts={n: tuple(bool(v[n]["success"]) for v in given if v) for n in names},
            verdict_differences=tuple(
                {"trial": r.trial, **d}
                for r in records
                for d in (r.verdicts or {}).get("differences", ())
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (a ``results.jsonl`` line), with ``n``, ``successes`` and
        ``mean_progress`` spelled out."""
        data = asdict(self)
        data.update(n=self.n, successes=self.successes, mean_progress=self.mean_progress)
        for name in ("success", "progress", "termination", "n_steps"):
            data[name] = list(data[name])
        data["verdicts"] = {k: list(v) for k, v in self.verdicts.items()}
        data["verdict_differences"] = [dict(d) for d in self.verdict_differences]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskResult:
        """Inverse of :meth:`to_dict`."""
        return cls(
            task_id=str(data["task_id"]),
            domain=str(data["domain"]),
            skill=str(data["skill"]),
            variant=str(data["variant"]),
            depth=data.get("depth"),
            signature=data.get("signature"),
            success=tuple(bool(s) for s in data["success"]),
            progress=tuple(float(p) for p in data["progress"]),
            termination=tuple(str(t) for t in data["termination"]),
            n_steps=tuple(int(s) for s in data["n_steps"]),
            errors=int(data.get("errors", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            gen_seconds=float(data.get("gen_seconds", 0.0)),
            env_seconds=float(data.get("env_seconds", 0.0)),
            verdicts={
                str(k): tuple(bool(s) for s in v) for k, v in (data.get("verdicts") or {}).items()
            },
            verdict_differences=tuple(dict(d) for d in data.get("verdict_differences") or ()),
        )


def pass_k_curve(results: Iterable[TaskResult], k_max: int) -> dict[int, float]:
    """pass^1..k_max averaged over the tasks with at least k trials."""
    rows = list(results)
    curve = {}
    for k in range(1, k_max + 1):
        vals = [pass_hat_k(r.n, r.successes, k) for r in rows if r.n >= k]
        curve[k] = sum(vals) / len(vals) if vals else 0.0
    return curve


@dataclass(frozen=True)
class GroupScore:
    """Scores of a group of tasks (one skill, domain, depth or variant).

    Attributes:
        tasks: Tasks in the group.
        pass_1: Mean success rate (pass^1) over its tasks.
        progress: Mean progress over its tasks.
    """

    tasks: int
    pass_1: float
    progress: float

    def to_dict(self) -> dict[str, float]:
        """``{"tasks", "pass^1", "progress"}``."""
        return {"tasks": self.tasks, "pass^1": self.pass_1, "progress": self.progress}


def _group(
    results: Sequence[TaskResult], key: Callable[[TaskResult], object]
) -> dict[str, GroupScore]:
    groups: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        groups[str(key(r))].append(r)
    out = {}
    for name in sorted(groups, key=lambda s: (len(s), s)):
        rows = groups[name]
        out[name] = GroupScore(
            tasks=len(rows),
            pass_1=sum(r.successes / r.n for r in rows) / len(rows),
            progress=sum(r.mean_progress for r in rows) / len(rows),
        )
    return out


@dataclass(frozen=True)
class EvalSummary:
    """What an evaluation measured.

    Attributes:
        results: One result per task, in the order of the tasks given.
        k: pass^1..k is reported.
        pass_k: pass^i for i in 1..k.
        mean_progress: Mean over tasks of the mean progress of their trials.
        success: Share of all trials that succeeded.
        by_domain: Scores per domain.
        by_skill: Scores per skill.
        by_depth: Scores per signature depth.
        by_variant: Scores per variant.
        terminations: How many trials ended each way.
        errored_trials: Trials that ended in an engine or environment error.
        completion_tokens: Tokens generated.
        gen_seconds: Generation time summed over trials.
        env_seconds: Environment and user-simulator time summed over trials.
        meta: What the caller said about the run (model, environment, pool ...).
        headline: Per benchmark evaluated (by its title), the numbers its own leaderboard
            reports (:meth:`rods_env.benchmark.BenchmarkDomain.scores`; e.g. BFCL's accuracy
            per category and overall), label to value; None where it would print N/A.
        benchmark_files: The benchmarks' own result files written beside
            ``episodes.jsonl`` (paths relative to the run folder; e.g. ``tau2/airline.json``
            for τ²-bench's tools), when the run had a folder.
        verdicts: Per benchmark that gives several verdicts (by its title), each verdict's
            numbers: ``pass^1`` and the benchmark's own (:func:`verdict_scores`).
        verdict_differences: The trials and turns where those verdicts part, and why
            (``{"task_id", "trial", "turn", "quirks", "why", <each verdict>: passed}``).
    """

    results: tuple[TaskResult, ...]
    k: int
    pass_k: dict[int, float]
    mean_progress: float
    success: float
    by_domain: dict[str, GroupScore]
    by_skill: dict[str, GroupScore]
    by_depth: dict[str, GroupScore]
    by_variant: dict[str, GroupScore]
    terminations: dict[str, int]
    errored_trials: int
    completion_tokens: int
    gen_seconds: float
    env_seconds: float
    meta: Mapping[str, Any] = field(default_factory=dict)
    headline: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    benchmark_files: tuple[str, ...] = ()
    verdicts: Mapping[str, Mapping[str, Mapping[str, float | None]]] = field(default_factory=dict)
    verdict_differences: tuple[Mapping[str, Any], ...] = ()

    @property
    def tasks(self) -> int:
        """Number of tasks."""
        return len(self.results)

    @property
    def trials(self) -> int:
        """Number of trials over all tasks."""
        return sum(r.n for r in self.results)

    @classmethod
    def from_results(
        cls,
        results: Sequence[TaskResult],
        k: int,
        meta: Mapping[str, Any] | None = None,
        headline: Mapping[str, Mapping[str, float | None]] | None = None,
        verdicts: Mapping[str, Mapping[str, Mapping[str, float | None]]] | None = None,
    ) -> EvalSummary:
        """Summarize per-task results (pass^1..k, means, breakdowns, counts).

        Args:
            results: One result per task.
            k: Report pass^1..k.
            meta: What describes the run.
            headline: The benchmarks' own numbers (see :func:`headline_scores`).
            verdicts: Each verdict's numbers (see :func:`verdict_scores`).
        """
        results = tuple(results)
        terminations: Counter[str] = Counter()
        for r in results:
            terminations.update(r.termination)
        trials = sum(r.n for r in results)
        return cls(
            results=results,
            k=k,
            pass_k=pass_k_curve(results, k),
            mean_progress=sum(r.mean_progress for r in results) / len(results) if results else 0.0,
            success=sum(r.successes for r in results) / trials if trials else 0.0,
            by_domain=_group(results, lambda r: r.domain),
            by_skill=_group(results, lambda r: r.skill),
            by_depth=_group(results, lambda r: r.depth),
            by_variant=_group(results, lambda r: r.variant),
            terminations=dict(sorted(terminations.items())),
            errored_trials=terminations.get("error", 0),
            completion_tokens=sum(r.completion_tokens for r in results),
            gen_seconds=sum(r.gen_seconds for r in results),
            env_seconds=sum(r.env_seconds for r in results),
            meta=dict(meta or {}),
            headline={name: dict(v) for name, v in (headline or {}).items()},
            verdicts={t: {n: dict(v) for n, v in by.items()} for t, by in (verdicts or {}).items()},
            verdict_differences=tuple(
                {"task_id": r.task_id, **d} for r in results for d in r.verdict_differences
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (``summary.json``), without the per-task results."""
        return {
            **dict(self.meta),
            "tasks": self.tasks,
            "trials": self.trials,
            "pass_k": {str(i): v for i, v in self.pass_k.items()},
            "mean_progress": self.mean_progress,
            "success": self.success,
            "by_domain": {n: g.to_dict() for n, g in self.by_domain.items()},
            "by_skill": {n: g.to_dict() for n, g in self.by_skill.items()},
            "by_depth": {n: g.to_dict() for n, g in self.by_depth.items()},
            "by_variant": {n: g.to_dict() for n, g in self.by_variant.items()},
            "terminations": dict(self.terminations),
            "errored_trials": self.errored_trials,
            "completion_tokens": self.completion_tokens,
            "gen_seconds": self.gen_seconds,
            "env_seconds": self.env_seconds,
            "headline": {n: dict(v) for n, v in self.headline.items()},
            **self._paper_dict(),
            "benchmark_files": list(self.benchmark_files),
            "verdicts": {t: {n: dict(v) for n, v in by.items()} for t, by in self.verdicts.items()},
            "verdict_differences": [dict(d) for d in self.verdict_differences],
        }

    def line(self) -> str:
        """One line: tasks, pass^1..k and mean progress, then any benchmark's own numbers."""
        pk = ", ".join(f"pass^{k}={v:.3f}" for k, v in self.pass_k.items())
        text = f"{self.tasks} tasks: {pk}, mean progress {self.mean_progress:.3f}"
        for name, scores in self.headline.items():
            shown = ", ".join(f"{label} {_percent(v)}" for label, v in scores.items())
            text += f"; {name} (its own numbers, %): {shown}"
        for name, by in self.verdicts.items():
            for verdict, scores in list(by.items())[1:]:  # the first is the headline's
                shown = ", ".join(f"{label} {_percent(v)}" for label, v in scores.items())
                text += f"; {name} with {verdict} verdicts (%): {shown}"
        if self.verdicts:
            tasks = len({d["task_id"] for d in self.verdict_differences})
            text += f"; the verdicts differ on {tasks} task{'s' * (tasks != 1)}"
            text += " (summary.md says where and why)" if tasks else ""
        return text

    def markdown(self) -> str:
        """The summary as Markdown tables (``summary.md``)."""
        meta = self.meta
        lines = [f"# Evaluation of `{meta.get('model', '?')}` on {meta.get('env', '?')}", ""]
        lines.append(
            f"Pool: {meta.get('pool', '?')} (split {meta.get('split', '?')}) -- "
            f"{self.tasks} tasks, {self.trials} trials; engine {meta.get('engine', '?')}."
        )
        user = meta.get("user")
        if user is not None:
            lines += ["", user_line(str(user), meta.get("user_model"))]
        lines += ["", "| k | pass^k |", "|---|---|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in self.pass_k.items()]
        lines += ["", f"Mean progress: {self.mean_progress:.3f}", ""]
        for name, scores in self.headline.items():
            lines += [
                f"## {name}: the benchmark's own numbers",
                "",
                "In percent, as its leaderboard reports them (N/A: not computed on a partial "
                "run, as the benchmark does).",
                "",
            ]
            if paper_results(name) is not None:
                lines += [*self.paper_table(name), ""]
                continue
            lines += [
                "| " + " | ".join(scores) + " |",
                "|" + "---|" * len(scores),
                "| " + " | ".join(_percent(v) for v in scores.values()) + " |",
                "",
            ]
        lines += self._verdict_lines()
        if self.benchmark_files:
            files = ", ".join(f"`{f}`" for f in self.benchmark_files)
            lines += [
                f"The benchmarks' own result files of these episodes: {files} (their own "
                "tools can score them; see docs/evaluation.md).",
                "",
            ]
        for groups, title in (
            (self.by_domain, "domain"),
            (self.by_skill, "skill"),
            (self.by_depth, "signature depth"),
            (self.by_variant, "variant"),
        ):
            lines += [
                f"## By {title}",
                "",
                f"| {title} | tasks | pass^1 | progress |",
                "|---|---|---|---|",
            ]
            for name, g in groups.items():
                lines.append(f"| {name} | {g.tasks} | {g.pass_1:.3f} | {g.progress:.3f} |")
            lines.append("")
        lines += ["## Terminations", "", "| termination | trials |", "|---|---|"]
        lines += [f"| {t} | {c} |" for t, c in self.terminations.items()]
        lines += [
            "",
            f"Trials that ended in an engine or environment error: {self.errored_trials}. "
            f"{self.completion_tokens:,} tokens generated; generation time "
            f"{self.gen_seconds:.1f} s (summed per trial), environment time "
            f"{self.env_seconds:.1f} s.",
            "",
        ]
        return "\n".join(lines)

    def paper_table(self, name: str) -> list[str]:
        """Markdown: this evaluation's numbers on benchmark ``name`` (a headline title) in
        a row above the paper's rows (:data:`PAPER_RESULTS`), with the paper's note; empty
        when the benchmark has no paper table or was not scored."""
        table, scores = paper_results(name), self.headline.get(name)
        if table is None or scores is None:
            return []
        model = self.meta.get("model", "?")
        return [
            "| model | " + " | ".join(scores) + " |",
            "|---|" + "---|" * len(scores),
            f"| this evaluation (`{model}`, {self.tasks} tasks) | "
            + " | ".join(_percent(v) for v in scores.values())
            + " |",
            *table.markdown_rows(list(scores)),
            "",
            table.note,
        ]

    def _paper_dict(self) -> dict[str, Any]:
        """``{"paper": {title: table}}`` for the scored benchmarks with a paper table."""
        found = {n: paper_results(n) for n in self.headline}
        return (
            {"paper": {n: t.to_dict() for n, t in found.items() if t}}
            if any(found.values())
            else {}
        )

    def _verdict_lines(self) -> list[str]:
        """Markdown: each verdict's numbers, then where they part and why."""
        lines: list[str] = []
        for name, by in self.verdicts.items():
            labels = list(next(iter(by.values()), {}))
            lines += [
                f"## {name}: its official verdicts and the strict ones",
                "",
                "The official verdicts are the benchmark checker's own, its quirks included "
                "(the leaderboard's numbers); the strict verdicts are the correct ones. "
                f"This run was scored by the {self.meta.get('verdicts', 'official')} ones. "
                "In percent:",
                "",
                "| verdicts | " + " | ".join(labels) + " |",
                "|---|" + "---|" * len(labels),
            ]
            lines += [
                f"| {verdict} | " + " | ".join(_percent(v) for v in scores.values()) + " |"
                for verdict, scores in by.items()
            ]
            lines.append("")
        if self.verdicts:
            if not self.verdict_differences:
                return [*lines, "The verdicts agree on every trial.", ""]
            names = [n for n in next(iter(self.verdicts.values()))]
            lines += [
                "Where they differ:",
                "",
                "| task | trial | turn | " + " | ".join(names) + " | why |",
                "|---|---|---|" + "---|" * len(names) + "---|",
            ]
            for d in self.verdict_differences:
                passed = " | ".join("pass" if d.get(n) else "fail" for n in names)
                lines.append(
                    f"| {d['task_id']} | {d.get('trial', 0)} | {d.get('turn')} | {passed} | "
                    f"{d.get('why', '')} |"
                )
            lines.append("")
        return lines


def _percent(value: float | None) -> str:
    return "N/A" if value is None else f"{100 * value:.2f}"


def headline_scores(
    results: Iterable[TaskResult], families: Mapping[str, AnyDomain]
) -> dict[str, dict[str, float | None]]:
    """The numbers each benchmark's own leaderboard reports, from per-task successes (its
    own verdicts' where it gives several, whichever scored the run).

    Args:
        results: Per-task results.
        families: AnyDomain name to its domain or benchmark (domains report nothing here).
    """
    rows = list(results)
    out: dict[str, dict[str, float | None]] = {}
    for name, family in families.items():
        if isinstance(family, BenchmarkDomain):
            own = family.verdicts[0] if family.verdicts else ""
            mine = {r.task_id: r.verdicts.get(own, r.success) for r in rows if r.domain == name}
            scores = family.scores(mine) if mine else {}
            if scores:
                out[family.title] = dict(scores)
    return out


def verdict_scores(
    results: Iterable[TaskResult], families: Mapping[str, AnyDomain]
) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per benchmark that gives several verdicts (by its title), each verdict's numbers:
    pass^1 (the mean success rate) and the benchmark's own (:meth:`~rods_env.benchmark.
    BenchmarkDomain.scores`), from the trials' verdicts.

    Args:
        results: Per-task results.
        families: AnyDomain name to its domain or benchmark.
    """
    rows = list(results)
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for name, family in families.items():
        if not isinstance(family, BenchmarkDomain) or not family.verdicts:
            continue
        mine = [r for r in rows if r.domain == name and r.verdicts]
        if not mine:
            continue
        by: dict[str, dict[str, float | None]] = {}
        for verdict in family.verdicts:
            successes = {r.task_id: r.verdicts.get(verdict, ()) for r in mine}
            rates = [sum(s) / len(s) for s in successes.values() if s]
            by[verdict] = {
                "pass^1": sum(rates) / len(rates) if rates else None,
                **family.scores(successes),
            }
        out[family.title] = by
    return out


def plot_pass_k(summary: EvalSummary, path: str | Path) -> Path:
    """Save a PNG of pass^k against k (atomically, like every file rods writes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = list(summary.pass_k)
    vals = [summary.pass_k[k] for k in ks]
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
    ax.plot(ks, vals, marker="o")
    ax.set_xlabel("k")
    ax.set_ylabel("pass^k")
    ax.set_ylim(0, 1.08)
    for k, v in zip(ks, vals, strict=True):
        ax.annotate(
            f"{v:.2f}", (k, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8
        )
    ax.set_xticks(ks)
    ax.grid(alpha=0.3)
    ax.set_title(
        f"{summary.meta.get('model', '?')} on {summary.meta.get('env', '?')} "
        f"({summary.tasks} tasks)",
        fontsize=9,
    )
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def user_line(user: str, user_model: Any = None) -> str:
    """One line naming who played the user, for summaries: a benchmark's score depends on
    its user model, so runs compare only with the same one."""
    if user == "solo":
        return "User: none (solo mode: the task is the first observation)."
    if user == "llm":
        return (
            f"User: played by the model `{user_model or '?'}`. A different user model gives a "
            "different score: compare runs with the same user model only."
        )
    if user == "scripted":
        return (
            "User: rods' scripted user (on a benchmark domain, a deterministic stand-in for "
            "its user model where it has one: not the benchmark's own score)."
        )
    return f"User: {user}."
