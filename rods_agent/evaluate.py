"""Evaluation: a model on a task pool -- pass^k, mean progress, per-skill/depth/variant/domain.

The library entry point is :func:`evaluate`; ``rods eval`` and the trainer's periodic
evaluation both call it::

    from rods_agent.evaluate import evaluate
    summary = evaluate(engine, tasks, k=4, out=Path("results/NAME"))
    summary.pass_k[1], summary.mean_progress, summary.by_skill["cancel_order"].pass_1

Without ``out`` nothing is written. With ``out`` the run is resumable; these files are
written there (all through :mod:`rods_env.fileio`):

* ``episodes.jsonl`` -- one line per trial as soon as it ends: transcript, rewards,
  termination, timings;
* ``results.jsonl`` -- one line per task once all its trials are done;
* ``config.json`` -- the run's settings (written once the engine exists, so a model that
  fails to load leaves no folder behind);
* ``tasks.jsonl`` -- the tasks evaluated, with their gold calls (a task pool: the folder
  explains itself to ``rods view``, and ``--pool DIR/tasks.jsonl`` repeats the run);
* ``summary.json``, ``summary.md`` and ``pass_k.png`` -- pass^1..k, mean progress,
  breakdowns;
* a benchmark's own result files of the episodes, for its own tools (τ²-bench:
  ``tau2/<domain>.json``, its results format, which ``tau2 evaluate-trajs`` re-scores).

A rerun into the same folder skips the trials already done; trials that ended in an error
(a server that was down, a crashed engine) run again, and a line cut off by a kill is
dropped. A rerun with another model, pool or trial count is refused rather than mixed in.

pass^k is the chance that k independent trials of a task all succeed, estimated without
bias from n >= k trials with c successes as C(c, k) / C(n, k), averaged over tasks.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from math import comb
from pathlib import Path
from typing import Any, Literal

from rods_agent.engines.base import (
    Completion,
    Engine,
    GenerationRequest,
    SamplingParams,
    derive_seed,
)
from rods_agent.rollout import (
    EpisodeRecord,
    EpisodeSpec,
    RolloutConfig,
    env_prompt_kwargs,
    run_rollouts,
)
from rods_env.benchmark import BenchmarkDomain
from rods_env.env import make_env
from rods_env.errors import ConfigError
from rods_env.fileio import append_jsonl, atomic_write, read_jsonl, write_json, write_jsonl
from rods_env.gold import GOLD_CACHE, GoldError
from rods_env.registry import AnyDomain, load_any_domain
from rods_env.task import Task, dump_tasks, load_tasks
from rods_env.user import ScenarioUser, UserSimulator

log = logging.getLogger(__name__)

RESULTS = "results.jsonl"
EPISODES = "episodes.jsonl"
CONFIG = "config.json"
TASKS = "tasks.jsonl"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
PASS_K_PNG = "pass_k.png"

IDENTITY_KEYS: tuple[str, ...] = (
    "env", "pool", "split", "engine", "model", "trials", "max_turns", "user", "user_model",
    "user_temperature", "verdicts",
)  # fmt: skip
"""Settings that make two runs different: a rerun into the same folder must match them."""

IDENTITY_DEFAULTS: Mapping[str, Any] = {"verdicts": "official"}
"""What a folder written before a setting existed ran with (its ``config.json`` lacks it)."""

UserFactory = Callable[[], "UserSimulator | ScenarioUser"]
"""Builds the user simulator of one environment (one per live episode slot)."""

EngineFactory = Callable[[], Engine]
"""Builds an engine; :func:`evaluate` calls it only when some trial is left to run."""


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


# -- progress ----------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalProgress:
    """Where a running evaluation stands (reported after every generation batch).

    Attributes:
        tasks_done: Tasks whose trials have all ended (earlier runs' included).
        tasks: Tasks in the evaluation.
        trials_done: Trials ended in this run.
        trials: Trials this run has to run.
        turns: Completions generated in this run (agent turns, within live trials too).
        tokens: Completion tokens generated in this run.
        successes: Successful trials in this run.
        seconds: Wall time of this run so far.
    """

    tasks_done: int
    tasks: int
    trials_done: int
    trials: int
    turns: int
    tokens: int
    successes: int
    seconds: float


ProgressCallback = Callable[[EvalProgress], None]


class _Tracker:
    """Counts turns, tokens and finished trials, and reports them."""

    def __init__(self, report: ProgressCallback, tasks: int, tasks_done: int, trials: int):
        self.report = report
        self.tasks, self.tasks_done, self.trials = tasks, tasks_done, trials
        self.trials_done = self.turns = self.tokens = self.successes = 0
        self.t0 = time.perf_counter()

    def batch(self, completions: Sequence[Completion]) -> None:
        ok = [c for c in completions if c.finish_reason != "error"]
        self.turns += len(ok)
        self.tokens += sum(c.n_tokens for c in ok)
        self.emit()

    def trial(self, record: EpisodeRecord) -> None:
        self.trials_done += 1
        self.successes += int(record.success)
        self.emit()

    def task(self) -> None:
        self.tasks_done += 1
        self.emit()

    def emit(self) -> None:
        self.report(
            EvalProgress(
                tasks_done=self.tasks_done,
                tasks=self.tasks,
                trials_done=self.trials_done,
                trials=self.trials,
                turns=self.turns,
                tokens=self.tokens,
                successes=self.successes,
                seconds=time.perf_counter() - self.t0,
            )
        )


class _MeteredEngine:
    """An engine that reports each batch of completions to a tracker (same behaviour)."""

    def __init__(self, engine: Engine, tracker: _Tracker) -> None:
        self.engine = engine
        self.chat = engine.chat
        self.tracker = tracker

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        out = self.engine.generate(requests, params)
        self.tracker.batch(out)
        return out

    def end_episode(self, key: str) -> None:
        end = getattr(self.engine, "end_episode", None)
        if callable(end):
            end(key)

    def close(self) -> None:
        """The wrapped engine belongs to the caller: it is not closed here."""


def _quiet(progress: EvalProgress) -> None:
    """Report nothing."""


class _Bar:
    """A tqdm bar over trials whose postfix shows turns and tokens within live trials (hidden
    when stderr is not a terminal)."""

    def __init__(self, total: int) -> None:
        from tqdm.auto import tqdm

        from rods_agent.progress import is_terminal

        self.bar = tqdm(
            total=total,
            desc="trials",
            unit="trial",
            file=sys.stderr,
            disable=not is_terminal(sys.stderr),
        )

    def __call__(self, p: EvalProgress) -> None:
        bar = self.bar
        if bar.total != p.trials:
            bar.total = p.trials
        if p.trials_done > bar.n:
            bar.update(p.trials_done - bar.n)
        rate = f"{p.successes / p.trials_done:.2f}" if p.trials_done else "-"
        bar.set_postfix_str(
            f"tasks {p.tasks_done}/{p.tasks}, turns {p.turns}, tokens {p.tokens:,}, success {rate}"
        )

    def close(self) -> None:
        self.bar.close()


# -- the run folder ----------------------------------------------------------------------
@dataclass
class _Resumed:
    done: dict[str, TaskResult]
    trials: dict[str, list[EpisodeRecord]]


class RunFolder:
    """The files of a resumable evaluation in one folder (see the module docstring).

    Nothing is created until :meth:`write_config`, so a run that fails before its engine
    exists leaves no folder behind.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"--out {self.path} is a file; give a folder")

    def check_config(self, config: Mapping[str, Any]) -> None:
        """Refuse a folder that holds results of a different run.

        Raises:
            ConfigError: naming the settings that differ.
        """
        path = self.path / CONFIG
        if not path.exists():
            return
        try:
            prev = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path} is unreadable ({exc}); use another --out") from None
        diff = [
            k
            for k in IDENTITY_KEYS
            if k in config and prev.get(k, IDENTITY_DEFAULTS.get(k)) != config[k]
        ]
        if diff:
            shown = ", ".join(f"{k}={prev.get(k)!r} (now {config[k]!r})" for k in diff)
            raise ConfigError(
                f"{self.path} holds results of a different run ({shown}); "
                "use another --out or delete it"
            )

    def write_config(self, config: Mapping[str, Any], tasks: Sequence[Task] = ()) -> None:
        """Write ``config.json`` and ``tasks.jsonl`` (creating the folder)."""
        write_json(self.path / CONFIG, dict(config))
        dump_tasks(tasks, self.path / TASKS)

    def resume(self, tasks: Sequence[Task], trials: int) -> _Resumed:
        """The trials already done, with the files tidied to match.

        Episode lines cut off by a kill and trials that ended in an error are dropped (they
        run again); a task keeps its result line only while all its trials are there.
        Lines of tasks not in ``tasks`` are kept untouched.
        """
        if not self.path.exists():
            return _Resumed({}, {})
        by_id = {t.id: t for t in tasks}
        kept: dict[tuple[str, int], dict[str, Any]] = {}
        for row in read_jsonl(self.path / EPISODES):
            tid, trial = row.get("task_id"), row.get("trial")
            if not isinstance(tid, str) or not isinstance(trial, int):
                continue
            if tid in by_id and (trial >= trials or row.get("termination") == "error"):
                kept.pop((tid, trial), None)
                continue
            kept[(tid, trial)] = row  # a later line of the same trial replaces an earlier one
        per_task: dict[str, list[EpisodeRecord]] = defaultdict(list)
        for (tid, _), row in kept.items():
            if tid in by_id:
                per_task[tid].append(EpisodeRecord.from_dict(row))
        complete = {tid for tid, recs in per_task.items() if len(recs) == trials}
        results: dict[str, dict[str, Any]] = {}
        for row in read_jsonl(self.path / RESULTS):
            tid = row.get("task_id")
            if isinstance(tid, str) and (tid not in by_id or tid in complete):
                results.setdefault(tid, row)
        done: dict[str, TaskResult] = {}
        for tid in complete:
            stored = results.get(tid)
            result = (
                TaskResult.from_dict(stored)
                if stored is not None
                else TaskResult.from_records(by_id[tid], per_task[tid])
            )
            results[tid] = result.to_dict()
            done[tid] = result
        write_jsonl(self.path / EPISODES, kept.values())
        write_jsonl(self.path / RESULTS, results.values())
        partial = {tid: recs for tid, recs in per_task.items() if tid not in complete}
        return _Resumed(done, partial)

    def add_trial(self, record: EpisodeRecord) -> None:
        """Append a finished trial to ``episodes.jsonl``."""
        append_jsonl(self.path / EPISODES, [record.to_dict(tokens=False)])

    def add_result(self, result: TaskResult) -> None:
        """Append a finished task to ``results.jsonl``."""
        append_jsonl(self.path / RESULTS, [result.to_dict()])

    def write_benchmark_results(
        self,
        tasks: Sequence[Task],
        trials: int,
        families: Mapping[str, AnyDomain],
        run: Mapping[str, Any],
    ) -> tuple[str, ...]:
        """Let each benchmark write its own result files of this run's episodes
        (:meth:`~rods_env.benchmark.BenchmarkDomain.write_results`), from ``episodes.jsonl``
        (so a resumed run's are complete); the paths written, relative to the folder."""
        domain_of = {t.id: t.domain for t in tasks}
        rows: dict[tuple[str, int], dict[str, Any]] = {}
        for row in read_jsonl(self.path / EPISODES):
            tid, trial = row.get("task_id"), row.get("trial")
            if tid in domain_of and isinstance(trial, int) and trial < trials:
                rows[(str(tid), trial)] = row  # a later line of a trial replaces an earlier
        written: list[str] = []
        for name, family in families.items():
            if not isinstance(family, BenchmarkDomain):
                continue
            mine = [r for (tid, _), r in sorted(rows.items()) if domain_of[tid] == name]
            if mine:
                paths = family.write_results(mine, self.path, run)
                written += [str(Path(p).relative_to(self.path)) for p in paths]
        return tuple(written)

    def write_summary(self, summary: EvalSummary) -> None:
        """Write ``summary.json``, ``summary.md`` and ``pass_k.png``."""
        write_json(self.path / SUMMARY_JSON, summary.to_dict())
        atomic_write(self.path / SUMMARY_MD, summary.markdown())
        plot_pass_k(summary, self.path / PASS_K_PNG)


# -- pools -------------------------------------------------------------------------------
def load_pool(env: str, pool: str | Path = "seeds", split: str = "test") -> list[Task]:
    """The tasks of one domain or benchmark to evaluate.

    Args:
        env: Environment id, domain or benchmark name (``rods/Retail-v0``, ``retail``,
            ``bfcl``, ``rods/BFCL-MultiTurn-Base-v0``). A benchmark's id selects its subset.
        pool: ``"seeds"`` (the domain's frozen seed tasks, or the benchmark's own tasks) or,
            for a domain, a JSONL task file; tasks of other domains in the file are skipped,
            tasks without a split kept for any split.
        split: ``"train"``, ``"test"`` or ``"all"``.

    Raises:
        ConfigError: for an unknown split, a missing file, or no tasks left.
    """
    if split not in ("train", "test", "all"):
        raise ConfigError(f"unknown split '{split}'; splits: train, test, all")
    want = None if split == "all" else split
    family = load_any_domain(env)
    if isinstance(family, BenchmarkDomain):
        if str(pool) != "seeds":
            raise ConfigError(
                f"--pool {pool}: the tasks of {family.name} come from its own package; "
                "use --pool seeds (the default)"
            )
        family.require()
        found = family.seed_tasks(want)
        if not found:
            raise ConfigError(f"{family.name} has no tasks in split '{split}'")
        return found
    domain = family
    if str(pool) == "seeds":
        seeds = domain.seed_tasks(want)
        if not seeds:
            raise ConfigError(f"domain {domain.name} has no seed tasks in split '{split}'")
        return seeds
    path = Path(pool)
    if not path.is_file():
        raise ConfigError(f"--pool: no file '{pool}'; use 'seeds' or a JSONL file of tasks")
    tasks = load_tasks(path)
    other = sum(1 for t in tasks if t.domain != domain.name)
    tasks = [t for t in tasks if t.domain == domain.name]
    if want is not None:
        tasks = [t for t in tasks if t.split in (None, want)]
    if other:
        log.warning("skipping %d tasks of other domains in %s", other, pool)
    if not tasks:
        raise ConfigError(f"--pool {pool}: no tasks of domain {domain.name} in split '{split}'")
    return tasks


def check_gold(tasks: Sequence[Task]) -> dict[str, AnyDomain]:
    """Replay every rods task's gold calls (cached for the episodes), and have each
    benchmark domain check its own tasks; returns the domains the tasks come from.

    Raises:
        ConfigError: when some tasks' gold calls fail: no agent could pass those tasks, so
            their scores would mean nothing. The message names them.
    """
    families: dict[str, AnyDomain] = {}
    broken: list[str] = []
    for task in tasks:
        family = families.get(task.domain)
        if family is None:
            family = families[task.domain] = load_any_domain(task.domain)
        if isinstance(family, BenchmarkDomain):
            continue
        try:
            GOLD_CACHE.get(family, task)
        except GoldError as exc:
            broken.append(str(exc))
    for name, family in families.items():
        if isinstance(family, BenchmarkDomain):
            broken += family.check_tasks([t for t in tasks if t.domain == name])
    if broken:
        raise ConfigError(
            f"the gold calls of {len(broken)} of {len(tasks)} tasks fail, so no agent can "
            f"pass them; fix or drop them from the pool (first: {broken[0]})"
        )
    return families


USER_MODES: tuple[str, ...] = ("scripted", "llm", "solo")
"""Who plays the user: rods' scripted user (a benchmark's deterministic stand-in), a
model (:class:`rods_agent.user.LLMUser`), or nobody (a benchmark's solo mode)."""


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


# -- evaluate ----------------------------------------------------------------------------
def _settings(
    k: int, trials: int, rollout: RolloutConfig, user: str, user_model: str | None
) -> dict[str, Any]:
    s = rollout.sampling
    return {
        "user_model": user_model,
        "k": k,
        "trials": trials,
        "max_turns": rollout.max_turns,
        "max_episode_tokens": rollout.max_tokens,
        "max_tokens": s.max_tokens,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "seed": s.seed,
        "concurrency": rollout.batch_size,
        "tool_format": rollout.tool_format,
        "user": user,
        **({"prompt": rollout.prompt} if rollout.prompt != "full" else {}),
    }


def evaluate(
    engine: Engine | EngineFactory,
    tasks: Sequence[Task],
    *,
    k: int = 1,
    trials: int | None = None,
    rollout: RolloutConfig | None = None,
    user: Literal["scripted", "llm", "solo"] | UserFactory = "scripted",
    out: str | Path | None = None,
    progress: bool | ProgressCallback = False,
    meta: Mapping[str, Any] | None = None,
    seed: int | None = None,
    user_engine: Engine | EngineFactory | None = None,
    user_sampling: SamplingParams | None = None,
    user_model: str | None = None,
    verdicts: str | None = None,
) -> EvalSummary:
    """Evaluate a model on tasks: ``trials`` episodes per task, pass^1..k and breakdowns.

    Args:
        engine: The model, or a function that builds it. A function is called only when
            some trial is left to run (a rerun that finds every task done loads no model),
            and the engine it builds is closed at the end; an engine given as such is
            left open (it belongs to the caller).
        tasks: The tasks (of any installed domains and benchmarks; ids must be unique).
        k: pass^1..k is reported.
        trials: Trials per task, at least ``k`` (default ``k``).
        rollout: Sampling and limits (default :class:`RolloutConfig`). Its ``batch_size``
            is how many episodes run at once.
        user: ``"scripted"`` (the default deterministic user; a benchmark domain's
            stand-in), ``"llm"`` (the user is played by a model,
            :class:`rods_agent.user.LLMUser`, its replies batched across episodes),
            ``"solo"`` (no user: a benchmark domain's solo mode), or a function that builds
            a user simulator.
        out: A folder for resumable result files (see the module docstring); None writes
            nothing.
        progress: True shows a progress bar on stderr (turns and tokens within live
            trials); a function gets an :class:`EvalProgress` after every generation batch.
        meta: What describes the run (model, environment, pool ...): written into
            ``config.json`` and the summary. With ``out``, a rerun whose ``env``, ``pool``,
            ``split``, ``engine`` or ``model`` differ from the folder's is refused.
        seed: Seeds each trial's sampling with ``derive_seed(seed, task id, trial)``, so
            the same weights give the same trials (a trainer's periodic evaluation, repeated
            exactly on resume); None leaves sampling to the engine.
        user_engine: With ``user="llm"``: the model that plays the user (an engine, or a
            function that builds it when some trial is left to run); None: the evaluated
            engine plays it.
        user_sampling: With ``user="llm"``: the user's sampling (default: LLMUser's).
        user_model: The name of the user's model, recorded in ``config.json`` and the
            summary (default: the evaluated model's, when it plays the user).
        verdicts: On benchmarks that give several verdicts (BFCL: ``"official"``, its own,
            the default; ``"strict"``, the correct ones), the one that scores the trials;
            every verdict is reported either way (``summary.verdicts``).

    Returns:
        The summary; ``summary.results`` has one :class:`TaskResult` per task, and
        ``summary.headline`` each benchmark's own numbers.

    Raises:
        ConfigError: for bad arguments, tasks whose gold calls fail, a user simulator for a
            benchmark whose user turns are scripted, or an ``out`` folder holding another
            run.
    """
    tasks = list(tasks)
    if not tasks:
        raise ConfigError("no tasks to evaluate")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(f"task ids must be unique; '{dup}' appears more than once")
    trials = k if trials is None else trials
    if k < 1 or trials < k:
        raise ConfigError(f"need 1 <= k <= trials; got k={k}, trials={trials}")
    rollout = rollout or RolloutConfig()
    user_name = user if isinstance(user, str) else "custom"
    if user_name not in (*USER_MODES, "custom"):
        raise ConfigError(f"unknown user simulator '{user}'; use {', '.join(USER_MODES)}")
    families = check_gold(tasks)
    mode = "llm" if user_name == "custom" else user_name
    for family in families.values():
        if not isinstance(family, BenchmarkDomain) and mode == "solo":
            raise ConfigError(f"{family.name} has no solo mode: its tasks need a user")
        if isinstance(family, BenchmarkDomain) and mode not in family.user_modes:
            raise ConfigError(
                f"{family.name} takes the users {', '.join(family.user_modes)}, not '{mode}'"
                + (
                    " (the benchmark scripts every user turn)"
                    if family.user_modes == ("scripted",)
                    else ""
                )
            )
    judged = [f for f in families.values() if isinstance(f, BenchmarkDomain) and f.verdicts]
    if verdicts is not None:
        unable = [
            f.name
            for f in families.values()
            if not isinstance(f, BenchmarkDomain) or verdicts not in f.verdicts
        ]
        if unable:
            raise ConfigError(
                f"verdicts '{verdicts}': {', '.join(unable)} give only their own verdicts "
                "(BFCL and τ²-bench give official and strict ones)"
            )
    meta = dict(meta or {})
    if judged:
        meta.setdefault("verdicts", verdicts or judged[0].verdicts[0])
    if user_name == "llm" and user_model is None and user_engine is None:
        user_model = str(meta.get("model")) if meta.get("model") is not None else None
    meta.setdefault("user", user_name)
    if user_model is not None:
        meta.setdefault("user_model", user_model)
    config = {**meta, **_settings(k, trials, rollout, user_name, user_model)}
    folder = RunFolder(out) if out is not None else None
    resumed = _Resumed({}, {})
    if folder is not None:
        folder.check_config(config)
        resumed = folder.resume(tasks, trials)
        if resumed.done:
            log.info("resuming: %d of %d tasks already done", len(resumed.done), len(tasks))
    todo = [t for t in tasks if t.id not in resumed.done]
    specs: list[EpisodeSpec] = []
    for task in todo:
        have = {r.trial for r in resumed.trials.get(task.id, [])}
        specs += [
            EpisodeSpec(
                task,
                trial,
                sampling_seed=None if seed is None else derive_seed(seed, task.id, trial),
            )
            for trial in range(trials)
            if trial not in have
        ]

    results = dict(resumed.done)
    if specs:
        owned = not isinstance(engine, Engine)
        model: Engine = engine() if not isinstance(engine, Engine) else engine
        user_owned = user_engine is not None and not isinstance(user_engine, Engine)
        users: Engine | None = None
        bar: _Bar | None = None
        try:
            if user_name == "llm":
                users = (
                    model
                    if user_engine is None
                    else user_engine()
                    if not isinstance(user_engine, Engine)
                    else user_engine
                )
            if folder is not None:
                folder.write_config(config, tasks)
            report: ProgressCallback = _quiet
            if callable(progress):
                report = progress
            elif progress:
                bar = _Bar(len(specs))
                report = bar
            tracker = _Tracker(report, len(tasks), len(resumed.done), len(specs))
            results.update(
                _run(
                    model,
                    families,
                    todo,
                    specs,
                    resumed,
                    trials,
                    rollout,
                    user,
                    folder,
                    tracker,
                    users,
                    user_sampling,
                    verdicts,
                )
            )
        finally:
            if bar is not None:
                bar.close()
            if owned:
                model.close()
            if user_owned and users is not None:
                users.close()
    elif folder is not None:
        folder.write_config(config, tasks)
    ordered = [results[t.id] for t in tasks]
    summary = EvalSummary.from_results(
        ordered, k, meta, headline_scores(ordered, families), verdict_scores(ordered, families)
    )
    if folder is not None:
        files = folder.write_benchmark_results(tasks, trials, families, config)
        summary = replace(summary, benchmark_files=files)
        folder.write_summary(summary)
    return summary


def _run(
    engine: Engine,
    families: Mapping[str, AnyDomain],
    todo: Sequence[Task],
    specs: Sequence[EpisodeSpec],
    resumed: _Resumed,
    trials: int,
    rollout: RolloutConfig,
    user: Literal["scripted", "llm", "solo"] | UserFactory,
    folder: RunFolder | None,
    tracker: _Tracker,
    user_engine: Engine | None = None,
    user_sampling: SamplingParams | None = None,
    verdicts: str | None = None,
) -> dict[str, TaskResult]:
    """Run ``specs`` domain by domain (benchmark by benchmark); write each trial and each
    finished task at once."""
    by_id = {t.id: t for t in todo}
    groups: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for tid, recs in resumed.trials.items():
        groups[tid].extend(recs)
    finished: dict[str, TaskResult] = {}
    metered = _MeteredEngine(engine, tracker)
    batcher = None
    if user == "llm":
        from rods_agent.user import SCENARIO_MAX_TOKENS, LLMUser, UserBatcher

        # the users' replies are batched across episodes; their tokens are not the agent's.
        # rods' users cap their own replies; a benchmark's scenario users need more room
        users_sampling = user_sampling or LLMUser(engine).sampling
        batch_sampling = replace(
            users_sampling, max_tokens=max(users_sampling.max_tokens, SCENARIO_MAX_TOKENS)
        )
        batcher = UserBatcher(user_engine or engine, batch_sampling)

    def on_record(record: EpisodeRecord) -> None:
        if folder is not None:
            folder.add_trial(record)
        tracker.trial(record)
        group = groups[record.task_id]
        group.append(record)
        if len(group) < trials:
            return
        result = TaskResult.from_records(by_id[record.task_id], group)
        if folder is not None:
            folder.add_result(result)
        finished[result.task_id] = result
        del groups[record.task_id]
        tracker.task()

    def user_for_env() -> Any:
        if user in ("scripted", "solo"):
            return None
        if user == "llm":
            from rods_agent.user import LLMUser

            assert batcher is not None
            return LLMUser(batcher.engine, sampling=users_sampling, batcher=batcher)
        assert callable(user)
        return user()

    t_start = time.perf_counter()
    for name in families:
        mine = [s for s in specs if s.task.domain == name]
        if not mine:
            continue

        def make(name: str = name) -> Any:
            kwargs: dict[str, Any] = {
                "tasks": (),
                "split": None,
                "max_steps": rollout.max_turns,
                **env_prompt_kwargs(name, rollout.prompt),
            }
            if user == "solo":
                kwargs["solo"] = True
            else:
                kwargs["user"] = user_for_env()
            if verdicts is not None:
                kwargs["verdicts"] = verdicts
            return make_env(name, **kwargs)  # a benchmark's require() runs there

        run_rollouts(metered, make, mine, rollout, on_record=on_record, users=batcher)
    log.debug("evaluated %d tasks in %.1fs", len(finished), time.perf_counter() - t_start)
    return finished
